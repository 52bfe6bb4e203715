//! The beta transitions, `reservePet`, `releasePet` and `sellPet`, on one
//! node: every row of the contract (docs/contract.md, "Transitions
//! (beta)"; docs/http.md), in memory and on the journal, over real TCP.

use crate::common;

use std::collections::BTreeSet;
use std::thread;

use common::{
    assert_error, assert_has_ratelimit_headers, assert_names, wait_until, x_ratelimit, Response,
    Server, TempDir, CHALLENGE, CHALLENGE_INVALID, FREE_KEY, IO_TIMEOUT, KEY,
};
use serde_json::{json, Value};

const JSON: &str = "application/json";

/// `POST /v1/pets/{id}/{action}` with the main key and no body at all
/// (no `Content-Length`, no `Transfer-Encoding`).
fn act(server: &Server, id: u64, action: &str) -> Response {
    act_with(server, &format!("/v1/pets/{id}/{action}"), &[], None)
}

/// A transition request with the main key, these headers and this body.
fn act_with(
    server: &Server,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Response {
    let auth = format!("Bearer {KEY}");
    let mut all = vec![("Authorization", auth.as_str())];
    all.extend_from_slice(headers);
    server.request("POST", path, &all, body)
}

/// Creates a pet named `name` in `status`; returns its id.
fn pet(server: &Server, name: &str, status: &str) -> u64 {
    let pet = server.create_pet(&json!({"name": name, "categoryId": 3, "status": status}));
    pet["id"].as_u64().unwrap()
}

/// The pet as `GET /v1/pets/{id}` returns it.
fn get(server: &Server, id: u64) -> Value {
    let resp = server.get(&format!("/v1/pets/{id}"), Some(KEY));
    assert_eq!(resp.status, 200, "GET pet {id}: {}", resp.describe());
    resp.json()
}

/// Asserts a 200 of a transition: the pet as it now is, JSON, the
/// rate-limit headers and nothing after them; the next get agrees.
fn assert_changed(server: &Server, resp: &Response, id: u64, name: &str, status: &str) {
    assert_eq!(resp.status, 200, "{}", resp.describe());
    let want = json!({"id": id, "name": name, "categoryId": 3, "status": status});
    assert_eq!(resp.json(), want, "{}", resp.describe());
    assert_eq!(resp.single("content-type"), JSON);
    assert_has_ratelimit_headers(resp);
    for absent in ["location", "link", "deprecation", "sunset"] {
        assert!(
            resp.header(absent).is_none(),
            "{absent}: {}",
            resp.describe()
        );
    }
    assert_eq!(get(server, id), want, "read your writes");
}

/// A server in memory, or on the journal in `dir`.
fn servers(dir: &TempDir) -> [(&'static str, Server); 2] {
    [
        ("in memory", Server::start(&[])),
        ("journal", Server::builder().data(dir).start()),
    ]
}

#[test]
fn each_transition_moves_its_statuses_and_refuses_the_others_with_409() {
    let dir = TempDir::new();
    for (backend, server) in servers(&dir) {
        let rex = pet(&server, "Rex", "available");
        let tom = pet(&server, "Tom", "available");
        let kit = pet(&server, "Kit", "pending");

        // reserve: available → pending.
        let resp = act(&server, rex, "reserve");
        assert_changed(&server, &resp, rex, "Rex", "pending");
        // The same twice: the second is refused, naming both sides.
        let msg = assert_error(&act(&server, rex, "reserve"), 409, "status_conflict");
        assert_eq!(
            msg,
            format!("pet {rex} is pending; reserve needs available"),
            "{backend}"
        );
        // release: pending → available.
        let resp = act(&server, rex, "release");
        assert_changed(&server, &resp, rex, "Rex", "available");
        let msg = assert_error(&act(&server, rex, "release"), 409, "status_conflict");
        assert_eq!(
            msg,
            format!("pet {rex} is available; release needs pending"),
            "{backend}"
        );
        // sell: available → sold, and pending → sold.
        let resp = act(&server, tom, "sell");
        assert_changed(&server, &resp, tom, "Tom", "sold");
        let resp = act(&server, kit, "sell");
        assert_changed(&server, &resp, kit, "Kit", "sold");
        // Sold is final: every transition of a sold pet is refused.
        for (action, needs) in [
            ("sell", "available or pending"),
            ("reserve", "available"),
            ("release", "pending"),
        ] {
            let resp = act(&server, tom, action);
            let msg = assert_error(&resp, 409, "status_conflict");
            assert_eq!(
                msg,
                format!("pet {tom} is sold; {action} needs {needs}"),
                "{backend}"
            );
            assert_has_ratelimit_headers(&resp);
        }
        assert_eq!(get(&server, tom)["status"], "sold", "{backend}");

        // An unknown pet, with the id the contract's 404 names.
        for id in [kit + 1, 9_223_372_036_854_775_807] {
            for action in ["reserve", "release", "sell"] {
                let resp = act(&server, id, action);
                let msg = assert_error(&resp, 404, "not_found");
                assert_eq!(msg, format!("no pet with id {id}"), "{backend}");
                assert_has_ratelimit_headers(&resp);
            }
        }
        // Nothing else changed, and no pet was made.
        let (ids, _) = server.list_ids("/v1/pets");
        assert_eq!(ids, vec![rex, tom, kit], "{backend}");
    }
}

#[test]
fn bad_ids_are_400_invalid_path_and_other_paths_no_route() {
    let server = Server::start(&[]);
    let id = pet(&server, "Rex", "available");
    for action in ["reserve", "release", "sell"] {
        for bad in [
            "0",
            "01",
            "00",
            "%301",
            "-1",
            "+1",
            "abc",
            "1.5",
            "9223372036854775808",
            "18446744073709551616",
            "99999999999999999999999",
        ] {
            let path = format!("/v1/pets/{bad}/{action}");
            let resp = act_with(&server, &path, &[], None);
            let msg = assert_error(&resp, 400, "invalid_path");
            assert_names(&msg, "petId", &path);
            assert_has_ratelimit_headers(&resp);
        }
        // Not a transition at all: no route, before any key check.
        for path in [
            format!("/v1/pets//{action}"),
            format!("/v1/pets/{id}/{action}/"),
            format!("/v1/pets/{id}/{action}/x"),
            format!("/v1/pets/{id}/{}", action.to_uppercase()),
        ] {
            let resp = server.request("POST", &path, &[], None);
            assert_error(&resp, 404, "not_found");
            assert!(resp.header("www-authenticate").is_none(), "{path}");
        }
    }
    for path in ["/v1/pets/1/buy", "/v1/pets/1/reserved", "/v1/pets/1/"] {
        assert_error(&act_with(&server, path, &[], None), 404, "not_found");
    }
    // A percent-escaped digit is the same URL as the digit itself.
    let resp = act_with(&server, "/v1/pets/%31/reserve", &[], None);
    assert_changed(&server, &resp, id, "Rex", "pending");
    // A query is refused: the transitions define none.
    let resp = act_with(&server, "/v1/pets/1/release?force=1", &[], None);
    let msg = assert_error(&resp, 400, "invalid_query");
    assert_names(&msg, "force", "a query on a transition");
    assert_eq!(get(&server, id)["status"], "pending", "refused: unchanged");
}

/// What a request says of its body: a name for it, its headers, and the
/// body itself (`None`: no body at all).
type Request = (
    &'static str,
    &'static [(&'static str, &'static str)],
    Option<&'static [u8]>,
);

#[test]
fn the_body_is_none_empty_or_exactly_the_empty_object() {
    let dir = TempDir::new();
    for (backend, server) in servers(&dir) {
        // Each accepted form moves a pet of its own.
        let accepted: [Request; 7] = [
            ("no body", &[], None),
            (
                "no body, a form type",
                &[("Content-Type", "text/plain")],
                None,
            ),
            ("Content-Length: 0", &[], Some(b"")),
            (
                "Content-Length: 0, a form type",
                &[("Content-Type", "application/x-www-form-urlencoded")],
                Some(b""),
            ),
            ("{}", &[("Content-Type", JSON)], Some(b"{}")),
            (
                "{} with a charset",
                &[("Content-Type", "application/json; charset=utf-8")],
                Some(b"{}"),
            ),
            ("an empty body, JSON", &[("Content-Type", JSON)], Some(b"")),
        ];
        for (what, headers, body) in accepted {
            let id = pet(&server, what, "available");
            let resp = act_with(&server, &format!("/v1/pets/{id}/sell"), headers, body);
            assert_changed(&server, &resp, id, what, "sold");
        }
        // A chunked `{}` is a body like any other.
        let id = pet(&server, "chunked", "available");
        let resp = chunked(&server, id, Some(JSON), b"{}");
        assert_changed(&server, &resp, id, "chunked", "sold");

        // Anything else is 400 invalid_body, and changes nothing.
        let id = pet(&server, "Rex", "available");
        let path = format!("/v1/pets/{id}/sell");
        for body in [
            &b"{ }"[..],
            b"{}\n",
            b" {}",
            b"{}{}",
            b"null",
            b"[]",
            b"\"\"",
            b"{",
            br#"{"status":"sold"}"#,
            br#"{"customer":"Ann"}"#,
            b"\xff\xfe",
        ] {
            let resp = act_with(&server, &path, &[("Content-Type", JSON)], Some(body));
            let msg = assert_error(&resp, 400, "invalid_body");
            assert!(msg.contains("{}"), "{backend}: {msg}");
            assert_has_ratelimit_headers(&resp);
        }
        assert_eq!(get(&server, id)["status"], "available", "{backend}");
    }
}

/// `POST /v1/pets/{id}/sell` with a chunked `body` of one chunk (none
/// when empty), with `Content-Type` when given.
fn chunked(server: &Server, id: u64, content_type: Option<&str>, body: &[u8]) -> Response {
    let mut request = format!(
        "POST /v1/pets/{id}/sell HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n"
    );
    if let Some(ct) = content_type {
        request.push_str(&format!("Content-Type: {ct}\r\n"));
    }
    request.push_str("\r\n");
    let mut bytes = request.into_bytes();
    if !body.is_empty() {
        bytes.extend_from_slice(format!("{:x}\r\n", body.len()).as_bytes());
        bytes.extend_from_slice(body);
        bytes.extend_from_slice(b"\r\n");
    }
    bytes.extend_from_slice(b"0\r\n\r\n");
    server.raw(&bytes)
}

#[test]
fn a_body_needs_a_json_content_type_and_fits_the_cap() {
    let server = Server::start(&[]);
    let id = pet(&server, "Rex", "available");
    let path = format!("/v1/pets/{id}/reserve");
    for headers in [
        &[][..],
        &[("Content-Type", "text/plain")],
        &[("Content-Type", "application/json; charset=latin1")],
        &[("Content-Type", "application/jsonx")],
    ] {
        let resp = act_with(&server, &path, headers, Some(b"{}"));
        assert_error(&resp, 415, "unsupported_media_type");
        assert_has_ratelimit_headers(&resp);
    }
    // Chunked says a body is there, even one that turns out empty.
    assert_error(
        &chunked(&server, id, None, b"{}"),
        415,
        "unsupported_media_type",
    );
    assert_error(
        &chunked(&server, id, None, b""),
        415,
        "unsupported_media_type",
    );
    // A declared length over the cap: 413 from the head alone, though a
    // transition's body is at most two bytes.
    let mut conn = server.connect();
    conn.send(
        format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\
             Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n"
        )
        .as_bytes(),
    )
    .unwrap();
    assert_error(&conn.read_response(), 413, "payload_too_large");
    // A body under the cap but not `{}`: read, then refused.
    let big = vec![b' '; 60 * 1024];
    let resp = act_with(&server, &path, &[("Content-Type", JSON)], Some(&big));
    assert_error(&resp, 400, "invalid_body");
    assert_eq!(get(&server, id)["status"], "available");
}

#[test]
fn a_transition_needs_a_key_and_is_charged_like_any_request() {
    let server = Server::start(&[]);
    let id = pet(&server, "Rex", "available");
    let path = format!("/v1/pets/{id}/sell");
    // No key, a bad key: 401 with the challenge; nothing changes.
    let resp = server.request("POST", &path, &[], None);
    assert_error(&resp, 401, "unauthorized");
    assert_eq!(resp.single("www-authenticate"), CHALLENGE);
    assert_has_ratelimit_headers(&resp);
    let resp = server.request("POST", &path, &[("Authorization", "Bearer nope")], None);
    assert_error(&resp, 401, "unauthorized");
    assert_eq!(resp.single("www-authenticate"), CHALLENGE_INVALID);
    assert_eq!(get(&server, id)["status"], "available");

    // The free plan's 3 a minute: each transition takes a token, whatever
    // its answer, from the bucket every other operation takes from.
    let free = |action: &str| {
        let auth = format!("Bearer {FREE_KEY}");
        server.request(
            "POST",
            &format!("/v1/pets/{id}/{action}"),
            &[("Authorization", &auth)],
            None,
        )
    };
    let first = free("reserve");
    assert_eq!(first.status, 200, "{}", first.describe());
    let (limit, remaining, _) = x_ratelimit(&first);
    assert_eq!((limit, remaining), (3, 2));
    let second = free("reserve");
    assert_error(&second, 409, "status_conflict");
    assert_eq!(x_ratelimit(&second).1, 1, "a 409 is charged");
    let third = server.get("/v1/pets", Some(FREE_KEY));
    assert_eq!(third.status, 200);
    assert_eq!(x_ratelimit(&third).1, 0, "one bucket for every operation");
    let refused = free("release");
    assert_error(&refused, 429, "rate_limited");
    assert!(
        refused.header("retry-after").is_some(),
        "{}",
        refused.describe()
    );
    assert_eq!(
        get(&server, id)["status"],
        "pending",
        "the 429 changed nothing"
    );
}

#[test]
fn other_methods_are_405_with_allow_post() {
    let server = Server::start(&[]);
    let id = pet(&server, "Rex", "available");
    for action in ["reserve", "release", "sell"] {
        let path = format!("/v1/pets/{id}/{action}");
        for method in ["GET", "PUT", "PATCH", "DELETE", "OPTIONS"] {
            let auth = format!("Bearer {KEY}");
            let resp = server.request(method, &path, &[("Authorization", &auth)], None);
            assert_error(&resp, 405, "method_not_allowed");
            assert_eq!(resp.single("allow"), "POST", "{method} {path}");
        }
        // HEAD is GET without its body, and there is no GET here.
        let head = head_of(&server, &path);
        assert!(head.starts_with("HTTP/1.1 405 "), "HEAD {path}: {head}");
        assert!(head.contains("\r\nallow: post\r\n"), "HEAD {path}: {head}");
    }
    assert_eq!(get(&server, id)["status"], "available");
}

/// The head of the answer to `HEAD path` (with the main key), as lower
/// case text but its status line: read to the connection's close, since
/// a HEAD answer's `Content-Length` announces a body that is not sent.
fn head_of(server: &Server, path: &str) -> String {
    let mut conn = server.connect();
    let request = format!(
        "HEAD {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nConnection: close\r\n\r\n"
    );
    conn.send(request.as_bytes()).unwrap();
    let mut bytes = Vec::new();
    // The server closes after its answer; the read timeout only cuts off
    // a hang.
    let _ = std::io::Read::read_to_end(&mut conn.stream, &mut bytes);
    let text = String::from_utf8_lossy(&bytes).into_owned();
    match text.split_once("\r\n") {
        Some((status, rest)) => format!("{status}\r\n{}", rest.to_ascii_lowercase()),
        None => text,
    }
}

#[test]
fn cors_preflight_and_answers_on_the_transition_paths() {
    let app = "https://app.example.com";
    let server = Server::start(&["--cors-origin", app]);
    let id = pet(&server, "Rex", "available");
    let path = format!("/v1/pets/{id}/sell");
    let resp = server.request(
        "OPTIONS",
        &path,
        &[
            ("Origin", app),
            ("Access-Control-Request-Method", "POST"),
            (
                "Access-Control-Request-Headers",
                "authorization, content-type",
            ),
        ],
        None,
    );
    assert_eq!(resp.status, 204, "{}", resp.describe());
    assert_eq!(resp.single("allow"), "POST, OPTIONS");
    assert_eq!(resp.single("access-control-allow-origin"), app);
    assert_eq!(resp.single("access-control-allow-methods"), "POST, OPTIONS");
    assert!(resp.header("www-authenticate").is_none(), "no key needed");
    // A method the path does not take lists OPTIONS with CORS on.
    let resp = server.request("GET", &path, &[("Origin", app)], None);
    assert_error(&resp, 405, "method_not_allowed");
    assert_eq!(resp.single("allow"), "POST, OPTIONS");
    // The answer itself, after its body was read, carries the origin.
    let resp = act_with(
        &server,
        &path,
        &[("Origin", app), ("Content-Type", JSON)],
        Some(b"{}"),
    );
    assert_changed(&server, &resp, id, "Rex", "sold");
    assert_eq!(resp.single("access-control-allow-origin"), app);
    let resp = act_with(&server, &path, &[("Origin", app)], None);
    assert_error(&resp, 409, "status_conflict");
    assert_eq!(resp.single("access-control-allow-origin"), app);
}

#[test]
fn lists_and_status_pages_show_every_change_at_once() {
    let dir = TempDir::new();
    for (backend, server) in servers(&dir) {
        let ids: Vec<u64> = (0..30)
            .map(|i| pet(&server, &format!("p{i}"), "available"))
            .collect();
        // Every third reserved, every fifth sold (some of them reserved
        // first), in an order that is not the ids'.
        let mut want = std::collections::BTreeMap::new();
        for &id in ids.iter().rev() {
            want.insert(id, "available");
            if id % 3 == 0 {
                assert_eq!(act(&server, id, "reserve").status, 200);
                want.insert(id, "pending");
            }
            if id % 5 == 0 {
                assert_eq!(act(&server, id, "sell").status, 200);
                want.insert(id, "sold");
            }
        }
        let all = walk(&server, "/v1/pets?limit=7");
        let statuses: Vec<(u64, String)> = all
            .iter()
            .map(|p| {
                (
                    p["id"].as_u64().unwrap(),
                    p["status"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        let expected: Vec<(u64, String)> =
            want.iter().map(|(id, s)| (*id, (*s).to_owned())).collect();
        assert_eq!(statuses, expected, "{backend}");
        for status in ["available", "pending", "sold"] {
            let page_ids: Vec<u64> = walk(&server, &format!("/v1/pets?status={status}&limit=4"))
                .iter()
                .map(|p| p["id"].as_u64().unwrap())
                .collect();
            let wanted: Vec<u64> = want
                .iter()
                .filter(|(_, s)| **s == status)
                .map(|(id, _)| *id)
                .collect();
            assert_eq!(page_ids, wanted, "{backend}: status={status}, in id order");
        }
        // A first page read before a change is not served after it.
        let (first, _) = server.list_ids("/v1/pets?status=available&limit=3");
        assert_eq!(act(&server, first[0], "sell").status, 200);
        let (again, _) = server.list_ids("/v1/pets?status=available&limit=3");
        assert!(
            !again.contains(&first[0]),
            "{backend}: {first:?} then {again:?}"
        );
        let (sold, _) = server.list_ids("/v1/pets?status=sold&limit=100");
        assert!(sold.contains(&first[0]), "{backend}");
    }
}

/// Every pet of a walk through the pages from `path`, following `Link`.
fn walk(server: &Server, path: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut next = Some(path.to_owned());
    while let Some(path) = next.take() {
        let resp = server.get(&path, Some(KEY));
        assert_eq!(resp.status, 200, "{path}: {}", resp.describe());
        out.extend(resp.json().as_array().unwrap().iter().cloned());
        // `</v1/pets?...>; rel="next"`: the default base address is
        // the path itself.
        next = resp.header("link").map(|link| {
            let url = link.trim_start_matches('<').split('>').next().unwrap();
            url.to_owned()
        });
    }
    out
}

#[test]
fn paging_while_transitions_run_misses_and_repeats_only_changed_pets() {
    let server = Server::start(&[]);
    let ids: Vec<u64> = (0..200)
        .map(|i| pet(&server, &format!("p{i}"), "available"))
        .collect();
    let changed = std::sync::Mutex::new(BTreeSet::new());
    let done = std::sync::atomic::AtomicBool::new(false);
    thread::scope(|s| {
        s.spawn(|| {
            // Reserve, release and sell pets from the top down while the
            // walks below run.
            for &id in ids.iter().rev() {
                changed.lock().unwrap().insert(id);
                let action = ["reserve", "sell", "release"][(id % 3) as usize];
                let resp = act(&server, id, action);
                assert!(
                    resp.status == 200 || resp.status == 409,
                    "{}",
                    resp.describe()
                );
            }
            done.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        let mut walks = 0;
        while !done.load(std::sync::atomic::Ordering::SeqCst) || walks < 3 {
            walks += 1;
            for path in ["/v1/pets?limit=9", "/v1/pets?status=available&limit=9"] {
                let pets = walk(&server, path);
                if path.contains("status=available") {
                    assert!(pets.iter().all(|p| p["status"] == "available"), "{pets:?}");
                }
                let seen: Vec<u64> = pets.iter().map(|p| p["id"].as_u64().unwrap()).collect();
                // In id order, each at most once.
                assert!(seen.windows(2).all(|w| w[0] < w[1]), "{path}: {seen:?}");
                // Missed only if its status changed during the walk (a
                // change may be under way when it is marked).
                let changed = changed.lock().unwrap().clone();
                let seen: BTreeSet<u64> = seen.into_iter().collect();
                for id in &ids {
                    if !seen.contains(id) && path == "/v1/pets?limit=9" {
                        panic!("{path}: pet {id} missed");
                    }
                    if !seen.contains(id) && !changed.contains(id) {
                        panic!("{path}: unchanged pet {id} missed");
                    }
                }
            }
        }
    });
}

#[test]
fn transitions_are_counted_per_route_in_metrics_and_the_access_log() {
    let server = Server::start(&["--access-log"]);
    let id = pet(&server, "Rex", "available");
    assert_eq!(act(&server, id, "reserve").status, 200);
    assert_eq!(act(&server, id, "reserve").status, 409);
    assert_eq!(act(&server, id, "release").status, 200);
    assert_eq!(act(&server, id, "sell").status, 200);
    let text = server.get("/metrics", None).text();
    for (route, status, n) in [
        ("reserve", 200, 1),
        ("reserve", 409, 1),
        ("release", 200, 1),
        ("sell", 200, 1),
    ] {
        let line = format!(
            r#"petstore_requests_total{{route="/v1/pets/{{petId}}/{route}",method="POST",status="{status}"}} {n}"#
        );
        assert!(text.lines().any(|l| l == line), "no {line} in:\n{text}");
    }
    for route in ["reserve", "release", "sell"] {
        let line = format!(r#""method":"POST","route":"/v1/pets/{{petId}}/{route}","status":"#);
        assert!(
            wait_until(IO_TIMEOUT, || server.stderr_text().contains(&line)),
            "no access-log line with {line}:\n{}",
            server.stderr_text()
        );
    }
}

#[test]
fn of_concurrent_transitions_of_one_pet_exactly_one_wins() {
    let dir = TempDir::new();
    for (backend, server) in servers(&dir) {
        let ids: Vec<u64> = (0..8)
            .map(|i| pet(&server, &format!("p{i}"), "available"))
            .collect();
        // Sixteen clerks sell every pet at once: one sale each.
        let wins = std::sync::Mutex::new(Vec::new());
        thread::scope(|s| {
            for _ in 0..16 {
                s.spawn(|| {
                    let mut conn = server.connect();
                    for &id in &ids {
                        let request = format!(
                            "POST /v1/pets/{id}/sell HTTP/1.1\r\nHost: x\r\n\
                             Authorization: Bearer {KEY}\r\n\r\n"
                        );
                        conn.send(request.as_bytes()).unwrap();
                        let resp = conn.read_response();
                        match resp.status {
                            200 => wins.lock().unwrap().push(id),
                            409 => {
                                let msg = assert_error(&resp, 409, "status_conflict");
                                assert_eq!(
                                    msg,
                                    format!("pet {id} is sold; sell needs available or pending")
                                );
                            }
                            _ => panic!("{backend}: {}", resp.describe()),
                        }
                    }
                });
            }
        });
        let mut wins = wins.into_inner().unwrap();
        wins.sort_unstable();
        assert_eq!(wins, ids, "{backend}: one sale of each pet");
        for id in ids {
            assert_eq!(get(&server, id)["status"], "sold", "{backend}");
        }
    }
}

#[test]
fn acknowledged_transitions_survive_a_restart_of_the_journal() {
    let dir = TempDir::new();
    let (rex, tom, kit);
    {
        let server = Server::builder().data(&dir).start();
        rex = pet(&server, "Rex", "available");
        tom = pet(&server, "Tom", "available");
        kit = pet(&server, "Kit", "available");
        assert_eq!(act(&server, rex, "reserve").status, 200);
        assert_eq!(act(&server, tom, "sell").status, 200);
        assert_eq!(act(&server, kit, "reserve").status, 200);
        assert_eq!(act(&server, kit, "release").status, 200);
    }
    let server = Server::builder().data(&dir).start();
    assert_eq!(get(&server, rex)["status"], "pending");
    assert_eq!(get(&server, tom)["status"], "sold");
    assert_eq!(get(&server, kit)["status"], "available");
    let (sold, _) = server.list_ids("/v1/pets?status=sold");
    assert_eq!(sold, vec![tom]);
    assert_error(&act(&server, tom, "release"), 409, "status_conflict");
}

#[test]
fn checks_run_in_the_documented_order() {
    let server = Server::start(&[]);
    let id = pet(&server, "Rex", "available");
    let plain = [("Content-Type", "text/plain")];
    // Key before query, query before path.
    let resp = server.request("POST", "/v1/pets/abc/sell?x=1", &plain, Some(b"x"));
    assert_error(&resp, 401, "unauthorized");
    let resp = act_with(&server, "/v1/pets/abc/sell?x=1", &plain, Some(b"x"));
    assert_error(&resp, 400, "invalid_query");
    // Path before the body's type.
    let resp = act_with(&server, "/v1/pets/abc/sell", &plain, Some(b"x"));
    assert_error(&resp, 400, "invalid_path");
    // The body, then the pet: 415 and 400 before 404 or 409.
    let missing = format!("/v1/pets/{}/sell", id + 1);
    assert_error(
        &act_with(&server, &missing, &plain, Some(b"{}")),
        415,
        "unsupported_media_type",
    );
    let json = [("Content-Type", JSON)];
    let resp = act_with(&server, &missing, &json, Some(b"[]"));
    assert_error(&resp, 400, "invalid_body");
    assert_eq!(act(&server, id, "sell").status, 200);
    let resp = act_with(&server, &format!("/v1/pets/{id}/sell"), &json, Some(b"[]"));
    assert_error(&resp, 400, "invalid_body");
    assert_error(&act(&server, id + 1, "sell"), 404, "not_found");
    assert_error(&act(&server, id, "sell"), 409, "status_conflict");
}
