//! Error responses: 404, 405, 408, 413, 415, 501, the order of the checks,
//! and the exact shape of every error body.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{assert_error, assert_has_ratelimit_headers, assert_names, Server, FREE_KEY, KEY};
use serde_json::json;

const PET: &[u8] = br#"{"name":"Rex","categoryId":1}"#;

fn auth() -> String {
    format!("Bearer {KEY}")
}

#[test]
fn unknown_routes_are_404_not_found_before_any_key_check() {
    let server = Server::start(&[]);
    let paths = [
        "/",
        "/nope",
        "/v1",
        "/v1/",
        "/v2/pets",
        "/pets",
        "/V1/pets",
        "/v1/Pets",
        "/v1/pets/1/photos",
        "/v1/store",
        "/v1/store/orders/1/refund",
        "/v1/store/orders/",
        "/v1/openapi.yaml",
        "/healthz/x",
        "//v1/pets",
        "/v1//pets",
    ];
    for path in paths {
        for key in [None, Some(KEY), Some("wrong-key")] {
            let resp = server.get(path, key);
            assert_error(&resp, 404, "not_found");
            assert!(
                resp.header("www-authenticate").is_none(),
                "GET {path} with {key:?}: 404 comes before the key check: {}",
                resp.describe()
            );
        }
    }
    let resp = server.post("/v1/nope", None, Some("application/json"), PET);
    assert_error(&resp, 404, "not_found");
}

#[test]
fn missing_pet_is_404_not_found() {
    let server = Server::start(&[]);
    let resp = server.get("/v1/pets/42", Some(KEY));
    let msg = assert_error(&resp, 404, "not_found");
    assert!(!msg.is_empty());
    assert_has_ratelimit_headers(&resp);
}

fn allow_set(resp: &common::Response) -> BTreeSet<String> {
    resp.single("allow")
        .split(',')
        .map(|m| m.trim().to_ascii_uppercase())
        .filter(|m| !m.is_empty())
        .collect()
}

#[test]
fn other_methods_on_known_paths_are_405_with_allow() {
    let server = Server::start(&[]);
    let cases: &[(&str, &str, &[&str])] = &[
        ("DELETE", "/v1/pets", &["GET", "HEAD", "POST"]),
        ("PUT", "/v1/pets", &["GET", "HEAD", "POST"]),
        ("PATCH", "/v1/pets", &["GET", "HEAD", "POST"]),
        ("OPTIONS", "/v1/pets", &["GET", "HEAD", "POST"]),
        ("POST", "/v1/pets/1", &["GET", "HEAD"]),
        ("PUT", "/v1/pets/1", &["GET", "HEAD"]),
        ("DELETE", "/v1/pets/1", &["GET", "HEAD"]),
        ("DELETE", "/v1/store/orders", &["GET", "HEAD", "POST"]),
        ("POST", "/v1/store/orders/1", &["GET", "HEAD"]),
        ("GET", "/v1/store/orders/1/complete", &["POST"]),
        ("POST", "/healthz", &["GET", "HEAD"]),
        ("DELETE", "/v1/openapi.json", &["GET", "HEAD"]),
    ];
    for (method, path, allowed) in cases {
        for key in [None, Some(KEY)] {
            let auth = key.map(|k| format!("Bearer {k}"));
            let mut headers = Vec::new();
            if let Some(a) = &auth {
                headers.push(("Authorization", a.as_str()));
            }
            let resp = server.request(method, path, &headers, None);
            assert_error(&resp, 405, "method_not_allowed");
            let want: BTreeSet<String> = allowed.iter().map(|m| (*m).to_owned()).collect();
            assert_eq!(
                allow_set(&resp),
                want,
                "{method} {path}: Allow (CORS is off, so no OPTIONS): {}",
                resp.describe()
            );
        }
    }
}

#[test]
fn bodies_that_are_not_json_are_415() {
    let server = Server::start(&[]);
    let refused: &[Option<&str>] = &[
        Some("text/plain"),
        Some("application/xml"),
        Some("text/json"),
        Some("application/jsonx"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        Some("application/json; charset=latin1"),
        Some("application/json; charset=utf-16"),
        None,
    ];
    for ct in refused {
        let resp = server.post("/v1/pets", Some(KEY), *ct, PET);
        assert_error(&resp, 415, "unsupported_media_type");
        assert_has_ratelimit_headers(&resp);
    }
    let (ids, _) = server.list_ids("/v1/pets");
    assert!(ids.is_empty(), "a 415 stores nothing: {ids:?}");

    for ct in [
        "application/json",
        "application/json; charset=utf-8",
        "application/json;charset=UTF-8",
        "Application/JSON",
    ] {
        let resp = server.post("/v1/pets", Some(KEY), Some(ct), PET);
        assert_eq!(resp.status, 201, "Content-Type {ct}: {}", resp.describe());
    }
}

#[test]
fn declared_content_length_over_64_kib_is_413_before_the_body_is_sent() {
    let server = Server::start(&[]);
    for len in [65_537u64, 10_000_000, 1 << 40] {
        let mut conn = server.connect();
        let head = format!(
            "POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Type: application/json\r\nContent-Length: {len}\r\n\r\n",
            auth()
        );
        conn.send(head.as_bytes()).unwrap();
        // No body is sent: the server must answer from the header alone.
        let resp = conn
            .try_read_response(Duration::from_secs(8))
            .unwrap_or_else(|e| panic!("Content-Length {len}: no answer before the body: {e}"));
        assert_error(&resp, 413, "payload_too_large");
        assert_has_ratelimit_headers(&resp);
    }
    // Exactly 64 KiB is allowed.
    let mut body = PET.to_vec();
    body.resize(65_536, b' ');
    let resp = server.post("/v1/pets", Some(KEY), Some("application/json"), &body);
    assert_eq!(resp.status, 201, "a 65,536-byte body: {}", resp.describe());
    // One byte more is not, even when actually sent.
    body.push(b' ');
    let resp = server.post("/v1/pets", Some(KEY), Some("application/json"), &body);
    assert_error(&resp, 413, "payload_too_large");
    let (ids, _) = server.list_ids("/v1/pets");
    assert_eq!(ids, vec![1]);
}

#[test]
fn chunked_body_over_64_kib_is_413() {
    let server = Server::start(&[]);
    // A small chunked body is fine.
    let mut conn = server.connect();
    let head = format!(
        "POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        auth()
    );
    let mut req = head.clone().into_bytes();
    req.extend_from_slice(b"5\r\n{\"nam\r\n");
    let rest = &PET[5..];
    req.extend_from_slice(format!("{:x}\r\n", rest.len()).as_bytes());
    req.extend_from_slice(rest);
    req.extend_from_slice(b"\r\n0\r\n\r\n");
    conn.send(&req).unwrap();
    let resp = conn.read_response();
    assert_eq!(resp.status, 201, "chunked body: {}", resp.describe());

    // 64 KiB + 1 in one chunk, without the terminating chunk at first: a
    // server that counts as it reads answers now; one that waits for the
    // end answers after it.
    let mut conn = server.connect();
    let mut req = head.into_bytes();
    let mut payload = PET.to_vec();
    payload.resize(65_537, b' ');
    req.extend_from_slice(format!("{:x}\r\n", payload.len()).as_bytes());
    req.extend_from_slice(&payload);
    conn.send(&req).unwrap();
    let resp = match conn.try_read_response(Duration::from_secs(2)) {
        Ok(resp) => resp,
        Err(_) => {
            let _ = conn.send(b"\r\n0\r\n\r\n");
            conn.read_response()
        }
    };
    assert_error(&resp, 413, "payload_too_large");
    assert_has_ratelimit_headers(&resp);
    let (ids, _) = server.list_ids("/v1/pets");
    assert_eq!(ids, vec![1], "the oversized body stored nothing");
}

#[test]
fn body_that_does_not_arrive_in_time_is_408() {
    let server = Server::start(&["--body-timeout", "1"]);
    for partial in [&b""[..], &b"{\"name\":\"R"[..]] {
        let mut conn = server.connect();
        let head = format!(
            "POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            auth(),
            PET.len()
        );
        conn.send(head.as_bytes()).unwrap();
        conn.send(partial).unwrap();
        let resp = conn
            .try_read_response(Duration::from_secs(8))
            .unwrap_or_else(|e| panic!("no 408 after a 1 s body timeout: {e}"));
        let message = assert_error(&resp, 408, "request_timeout");
        // The timeout that expired, as configured.
        assert!(message.contains("within 1 s"), "{message}");
        assert_has_ratelimit_headers(&resp);
    }
    // A complete body is still accepted.
    let resp = server.post("/v1/pets", Some(KEY), Some("application/json"), PET);
    assert_eq!(resp.status, 201, "{}", resp.describe());
    assert_eq!(
        resp.json()["id"],
        1,
        "the timed-out requests stored nothing"
    );
}

#[test]
fn store_orders_answer_after_authentication() {
    let server = Server::start(&[]);
    let resp = server.get("/v1/store/orders", None);
    assert_error(&resp, 401, "unauthorized");
    let resp = server.get("/v1/store/orders", Some("wrong-key"));
    assert_error(&resp, 401, "unauthorized");
    let resp = server.get("/v1/store/orders", Some(KEY));
    assert_eq!(resp.status, 200, "{}", resp.describe());
    assert_eq!(resp.json(), serde_json::json!([]));
    assert_has_ratelimit_headers(&resp);
    let resp = server.get("/v1/store/orders?status=open", Some(KEY));
    let msg = assert_error(&resp, 400, "invalid_query");
    assert_names(&msg, "status", "GET /v1/store/orders?status=open");
}

#[test]
fn a_body_on_get_is_400_invalid_body() {
    let server = Server::start(&[]);
    let auth = auth();
    for path in ["/v1/pets", "/v1/pets/1"] {
        let resp = server.request(
            "GET",
            path,
            &[
                ("Authorization", auth.as_str()),
                ("Content-Type", "application/json"),
            ],
            Some(b"{}"),
        );
        assert_error(&resp, 400, "invalid_body");
    }
}

#[test]
fn checks_run_in_the_documented_order() {
    let server = Server::start(&[]);
    let json = Some("application/json");
    // key before query, path and body
    assert_error(&server.get("/v1/pets?limit=0", None), 401, "unauthorized");
    assert_error(&server.get("/v1/pets/abc", None), 401, "unauthorized");
    assert_error(
        &server.post("/v1/pets", Some("wrong"), Some("text/plain"), b"x"),
        401,
        "unauthorized",
    );
    // query before body
    let resp = server.post("/v1/pets?x=1", Some(KEY), json, b"not json");
    let msg = assert_error(&resp, 400, "invalid_query");
    assert_names(&msg, "x", "query before body");
    // query before path
    let resp = server.get("/v1/pets/abc?x=1", Some(KEY));
    assert_error(&resp, 400, "invalid_query");
    // 415 before 400 invalid_body
    let resp = server.post("/v1/pets", Some(KEY), Some("text/plain"), b"not json");
    assert_error(&resp, 415, "unsupported_media_type");
    // rate limit before query: the free key allows 3 per minute
    for _ in 0..3 {
        assert_eq!(server.get("/v1/pets", Some(FREE_KEY)).status, 200);
    }
    let resp = server.get("/v1/pets?limit=0", Some(FREE_KEY));
    assert_error(&resp, 429, "rate_limited");
    let resp = server.post("/v1/pets", Some(FREE_KEY), json, b"[]");
    assert_error(&resp, 429, "rate_limited");
    assert!(server.list_ids("/v1/pets").0.is_empty());
}

#[test]
fn error_bodies_have_exactly_code_message_status() {
    // assert_error checks the shape; this covers one of each class in one
    // place, with the raw bytes, so an extra field cannot hide.
    let server = Server::start(&[]);
    let responses = [
        (server.get("/nope", None), 404),
        (server.get("/v1/pets", None), 401),
        (server.get("/v1/pets?limit=0", Some(KEY)), 400),
        (server.request("DELETE", "/v1/pets", &[], None), 405),
        (
            server.post("/v1/pets", Some(KEY), Some("text/plain"), PET),
            415,
        ),
        (server.get("/v1/store/orders/1", Some(KEY)), 404),
    ];
    for (resp, status) in responses {
        assert_eq!(resp.status, status, "{}", resp.describe());
        let v = resp.json();
        let obj = v.as_object().unwrap();
        assert_eq!(obj.len(), 3, "{}", resp.describe());
        assert_eq!(v["status"], json!(status));
        assert!(v["code"].is_string() && v["message"].is_string());
    }
}

#[test]
fn keep_alive_and_pipelined_requests_are_answered_in_order() {
    let server = Server::start(&[]);
    let mut conn = server.connect();
    let auth = auth();
    let post = format!(
        "POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        PET.len()
    );
    let mut bytes = post.into_bytes();
    bytes.extend_from_slice(PET);
    conn.send(&bytes).unwrap();
    let resp = conn.read_response();
    assert_eq!(resp.status, 201, "{}", resp.describe());
    // Three pipelined requests in one write, the last closing.
    let pipelined = format!(
        "GET /v1/pets/1 HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n\r\n\
         GET /v1/pets/2 HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n\r\n\
         GET /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nConnection: close\r\n\r\n"
    );
    conn.send(pipelined.as_bytes()).unwrap();
    let first = conn.read_response();
    assert_eq!(first.status, 200);
    assert_eq!(first.json()["id"], 1);
    assert_error(&conn.read_response(), 404, "not_found");
    let list = conn.read_response();
    assert_eq!(list.status, 200);
    assert_eq!(list.json().as_array().unwrap().len(), 1);
    assert!(
        conn.closed_within(Duration::from_secs(5)),
        "closed after Connection: close"
    );
}

/// docs/contract.md, "Errors": a message quotes what the client sent at most 64
/// characters long, then `…`. `sent` is what the client sent as the
/// message shows it (decoded); the message must hold its first 64
/// characters, then `…`, and nothing more of it.
fn assert_quotes_64_characters(msg: &str, sent: &str, context: &str) {
    let kept: String = sent.chars().take(64).collect();
    let one_more: String = sent.chars().take(65).collect();
    assert!(
        msg.contains(&format!("{kept}…")),
        "{context}: message does not quote the first 64 characters then `…`: {msg:?}"
    );
    assert!(
        !msg.contains(&one_more),
        "{context}: message quotes more than 64 characters: {msg:?}"
    );
    // The rest of each message is a sentence of its own: well under 200
    // characters besides the quote.
    assert!(
        msg.chars().count() < 64 + 200,
        "{context}: message of {} characters",
        msg.chars().count()
    );
}

#[test]
fn messages_quote_client_input_at_most_64_characters() {
    let server = Server::start(&[]);
    server.create_pet(&json!({"name": "Rex", "categoryId": 1}));

    // A 60 KB field name in the body (2-byte characters: the cut counts
    // characters, not bytes).
    let field = "é".repeat(30_000);
    let body = format!(r#"{{"{field}":1,"name":"a","categoryId":1}}"#);
    assert!(body.len() < 64 * 1024);
    let resp = server.post(
        "/v1/pets",
        Some(KEY),
        Some("application/json"),
        body.as_bytes(),
    );
    let msg = assert_error(&resp, 400, "invalid_body");
    assert_quotes_64_characters(&msg, &field, "60 KB field name");

    // A 5,000-digit pet id.
    let digits = "7".repeat(5_000);
    let resp = server.get(&format!("/v1/pets/{digits}"), Some(KEY));
    let msg = assert_error(&resp, 400, "invalid_path");
    assert_quotes_64_characters(&msg, &digits, "5,000-digit path");

    // Long query values, percent-encoded 4-byte characters among them.
    let dog = "🐕".repeat(500);
    let dog_escaped = "%F0%9F%90%95".repeat(500);
    for (query, sent) in [
        (format!("limit={digits}"), digits.clone()),
        (format!("after={digits}"), digits.clone()),
        (format!("status={dog_escaped}"), dog.clone()),
        (format!("{dog_escaped}=1"), dog.clone()),
    ] {
        let resp = server.get(&format!("/v1/pets?{query}"), Some(KEY));
        let msg = assert_error(&resp, 400, "invalid_query");
        assert_quotes_64_characters(&msg, &sent, &format!("query {}", &query[..20]));
    }
    let resp = server.get(&format!("/v1/pets/1?{digits}=1"), Some(KEY));
    let msg = assert_error(&resp, 400, "invalid_query");
    assert_quotes_64_characters(&msg, &digits, "unknown parameter of getPet");

    // A long path that is no route.
    let path = format!("/x{}", "y".repeat(5_000));
    let resp = server.get(&path, Some(KEY));
    let msg = assert_error(&resp, 404, "not_found");
    assert_quotes_64_characters(&msg, &path, "unknown route");

    // A long Content-Type.
    let media = format!("text/{}", "p".repeat(5_000));
    let resp = server.post("/v1/pets", Some(KEY), Some(&media), b"{}");
    let msg = assert_error(&resp, 415, "unsupported_media_type");
    assert_quotes_64_characters(&msg, &media, "Content-Type");

    // Input of exactly 64 characters is quoted whole, without `…`.
    let exact = "8".repeat(64);
    let resp = server.get(&format!("/v1/pets/{exact}"), Some(KEY));
    let msg = assert_error(&resp, 400, "invalid_path");
    assert!(msg.contains(&format!("\"{exact}\"")), "{msg:?}");
    assert!(!msg.contains('…'), "{msg:?}");

    let (ids, _) = server.list_ids("/v1/pets");
    assert_eq!(ids, vec![1], "the refused requests created nothing");
}
