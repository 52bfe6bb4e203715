//! Keys that can do only their job (docs/contract.md, "Keys and plans"):
//! scopes and their 403, expiry and its 401, a reload that takes a scope
//! away, and a key rotated with `keygen --rotate`: over HTTP/1.1 and
//! HTTP/2 against the real binary.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::transport::{build, connect, runtime, Transport};
use common::{
    assert_error, assert_has_ratelimit_headers, now_unix, sha256_hex, wait_until, Response, Server,
    CHALLENGE_INVALID,
};
use petstore_core::Timestamp;
use petstore_server::keys::format_rfc3339;
use serde_json::{json, Value};

const READER: &str = "scope-key-reader";
const WRITER: &str = "scope-key-writer";
const SELLER: &str = "scope-key-seller";
const ALL: &str = "scope-key-all";
const PET: &[u8] = br#"{"name":"Rex","categoryId":1}"#;

/// Requests a day of each entry: its day window is the binding one (the
/// minute's is far larger), so the headers count its tokens; one comes
/// back every half hour, so a count seen a moment apart is off by at
/// most one, on any machine.
const PER_DAY: u64 = 50;

/// Whether `resp` shows the entry's bucket after `charged` requests:
/// between every token taken and one come back.
fn charged(resp: &Response, charged: u64) -> bool {
    let remaining = resp.header_u64("x-ratelimit-remaining");
    (PER_DAY - charged..=PER_DAY - charged + 1).contains(&remaining)
}

fn entry(name: &str, key: &str, scopes: Option<&[&str]>) -> Value {
    let mut entry = json!({"name": name, "sha256": sha256_hex(key), "plan": "enterprise",
                           "perMinute": 100_000, "perDay": PER_DAY});
    if let Some(scopes) = scopes {
        entry["scopes"] = json!(scopes);
    }
    entry
}

fn scoped_keys() -> Value {
    json!({"keys": [
        entry("reader", READER, Some(&["pets:read"])),
        entry("writer", WRITER, Some(&["pets:write"])),
        entry("seller", SELLER, Some(&["orders", "pets:read"])),
        entry("all", ALL, None),
    ]})
}

/// One request over `transport`, on a connection of its own.
fn call(
    server: &Server,
    transport: Transport,
    (method, path): (&str, &str),
    key: &str,
) -> Response {
    let auth = format!("Bearer {key}");
    let mut headers = vec![("authorization", auth.as_str())];
    let body: &[u8] = if method == "POST" && path == "/v1/pets" {
        headers.push(("content-type", "application/json"));
        PET
    } else {
        b""
    };
    runtime().block_on(async {
        let mut sender = connect(transport, server.addr, None).await;
        sender
            .send(build(method, server.addr, transport, path, &headers, body))
            .await
    })
}

/// A 403 that names `scope`, in its body and its challenge, with the
/// rate-limit headers of the key's bucket.
fn assert_forbidden(resp: &Response, scope: &str) {
    let message = assert_error(resp, 403, "insufficient_scope");
    assert!(message.contains(scope), "{message}");
    assert_eq!(
        resp.single("www-authenticate"),
        format!(r#"Bearer realm="petstore", error="insufficient_scope", scope="{scope}""#)
    );
    assert_has_ratelimit_headers(resp);
}

#[test]
fn each_key_does_its_job_and_gets_403_naming_the_scope_for_the_rest() {
    let server = Server::builder().keys(scoped_keys()).start();
    for transport in [Transport::Http1, Transport::H2c] {
        // The key that can do everything (no `scopes`) makes a pet.
        let created = call(&server, transport, ("POST", "/v1/pets"), ALL);
        assert_eq!(created.status, 201, "{}", created.describe());
        let id = created.json()["id"].as_u64().unwrap();
        let reserve = format!("/v1/pets/{id}/reserve");

        assert_eq!(
            call(&server, transport, ("GET", "/v1/pets"), READER).status,
            200
        );
        assert_forbidden(
            &call(&server, transport, ("POST", "/v1/pets"), READER),
            "pets:write",
        );
        assert_forbidden(
            &call(&server, transport, ("POST", &reserve), READER),
            "orders",
        );
        assert_forbidden(
            &call(&server, transport, ("GET", "/v1/store/orders"), READER),
            "orders",
        );

        assert_eq!(
            call(&server, transport, ("POST", "/v1/pets"), WRITER).status,
            201
        );
        assert_forbidden(
            &call(&server, transport, ("GET", "/v1/pets"), WRITER),
            "pets:read",
        );
        assert_forbidden(
            &call(
                &server,
                transport,
                ("GET", &format!("/v1/pets/{id}")),
                WRITER,
            ),
            "pets:read",
        );

        let reserved = call(&server, transport, ("POST", &reserve), SELLER);
        assert_eq!(reserved.status, 200, "{}", reserved.describe());
        assert_forbidden(
            &call(&server, transport, ("POST", "/v1/pets"), SELLER),
            "pets:write",
        );

        // Decided before the operation's own checks: a bad query of a
        // key without the scope is its 403, not a 400.
        assert_forbidden(
            &call(&server, transport, ("GET", "/v1/pets?limit=0"), WRITER),
            "pets:read",
        );
    }
}

#[test]
fn a_403_is_charged_like_any_request() {
    let server = Server::builder().keys(scoped_keys()).start();
    let mut n = 0;
    for transport in [Transport::Http1, Transport::H2c] {
        for (method, status) in [("POST", 403), ("POST", 403), ("GET", 200)] {
            let resp = call(&server, transport, (method, "/v1/pets"), READER);
            n += 1;
            assert_eq!(resp.status, status, "{}", resp.describe());
            assert!(charged(&resp, n), "request {n}: {}", resp.describe());
        }
    }
}

#[test]
fn an_expired_key_is_401_saying_so_and_a_key_crosses_its_expiry_while_the_server_runs() {
    let at = |secs: u64| format_rfc3339(Timestamp::from_unix_secs(secs));
    let now = now_unix();
    let mut keys = scoped_keys();
    let entries = keys["keys"].as_array_mut().unwrap();
    entries.push(
        json!({"name": "lapsed", "key": "scope-key-lapsed", "plan": "pro",
                        "expiresAt": at(now - 60)}),
    );
    entries.push(
        json!({"name": "soon", "key": "scope-key-soon", "plan": "pro",
                        "expiresAt": at(now + 2)}),
    );
    entries.push(
        json!({"name": "later", "key": "scope-key-later", "plan": "pro",
                        "expiresAt": at(now + 30 * 86_400)}),
    );
    let server = Server::builder().keys(keys).start();
    let expired_challenge = format!(r#"{CHALLENGE_INVALID}, error_description="the key expired""#);
    for transport in [Transport::Http1, Transport::H2c] {
        let lapsed = call(&server, transport, ("GET", "/v1/pets"), "scope-key-lapsed");
        let message = assert_error(&lapsed, 401, "unauthorized");
        assert!(message.contains("expired"), "{message}");
        assert_eq!(lapsed.single("www-authenticate"), expired_challenge);
        // Charged as a request without a key: the per-address bucket.
        assert_has_ratelimit_headers(&lapsed);
        let later = call(&server, transport, ("GET", "/v1/pets"), "scope-key-later");
        assert_eq!(later.status, 200, "{}", later.describe());
    }
    // Two seconds from the start: no reload, only the clock moves.
    // Bounded only to catch a hang.
    assert!(
        wait_until(Duration::from_secs(60), || {
            call(
                &server,
                Transport::Http1,
                ("GET", "/v1/pets"),
                "scope-key-soon",
            )
            .status
                == 401
        }),
        "the key never expired"
    );
    let soon = call(
        &server,
        Transport::H2c,
        ("GET", "/v1/pets"),
        "scope-key-soon",
    );
    assert_eq!(soon.single("www-authenticate"), expired_challenge);

    let metrics = server.get("/metrics", None).text();
    let left = |name: &str| {
        metrics
            .lines()
            .find_map(|l| {
                l.strip_prefix(&format!(
                    "petstore_key_expires_in_seconds{{key=\"{name}\"}} "
                ))
            })
            .map(|v| v.parse::<i64>().unwrap())
    };
    assert!(left("lapsed").is_some_and(|s| s <= -60), "{metrics}");
    assert!(left("later").is_some_and(|s| s > 29 * 86_400), "{metrics}");
    assert_eq!(
        left("reader"),
        None,
        "an entry without an expiry has no series"
    );
}

/// Rewrites the keys file and sends SIGHUP; returns once the server
/// logged its `reloads`-th successful reload.
fn reload(server: &Server, keys: &Value, reloads: usize) {
    server.write_keys(keys);
    server.signal("HUP");
    assert!(
        wait_until(Duration::from_secs(30), || server
            .stderr_text()
            .matches("SIGHUP: reloaded keys file")
            .count()
            >= reloads),
        "{}",
        server.stderr_text()
    );
}

#[test]
fn a_reload_that_takes_a_scope_away_holds_from_the_next_request() {
    let mut keys = scoped_keys();
    let server = Server::builder().keys(keys.clone()).start();
    assert_eq!(
        call(&server, Transport::Http1, ("POST", "/v1/pets"), ALL).status,
        201
    );
    keys["keys"][3]["scopes"] = json!(["pets:read"]);
    reload(&server, &keys, 1);
    for transport in [Transport::Http1, Transport::H2c] {
        assert_forbidden(
            &call(&server, transport, ("POST", "/v1/pets"), ALL),
            "pets:write",
        );
        assert_eq!(
            call(&server, transport, ("GET", "/v1/pets"), ALL).status,
            200
        );
    }
}

/// `keygen --rotate NAME --keys FILE`: the new key it printed.
fn rotate(server: &Server, name: &str) -> String {
    let out = Command::new(common::BIN)
        .args(["keygen", "--rotate", name, "--keys"])
        .arg(server.keys_path())
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "keygen --rotate failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("key: "))
        .expect("the new key")
        .to_owned()
}

#[test]
fn a_rotated_key_works_beside_the_old_one_with_one_bucket_and_outlives_it() {
    const OLD: &str = "scope-key-rotated-old";
    let mut partner = entry("partner", OLD, Some(&["pets:read"]));
    let keys = json!({"keys": [partner.clone(), entry("all", ALL, None)]});
    let server = Server::builder().keys(keys).start();
    let new = rotate(&server, "partner");
    assert_ne!(new, OLD);
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(server.keys_path()).unwrap()).unwrap();
    assert_eq!(
        file["keys"][0]["sha256"],
        json!([sha256_hex(OLD), sha256_hex(&new)]),
        "the entry holds both digests, never the key"
    );
    assert!(!std::fs::read_to_string(server.keys_path())
        .unwrap()
        .contains(&new));
    server.signal("HUP");
    assert!(wait_until(Duration::from_secs(30), || server
        .stderr_text()
        .contains("SIGHUP: reloaded keys file")));

    // Both keys are the one entry: one bucket, counted down by either
    // (a bucket of its own would show the new key's first request as the
    // first of a day).
    let mut n = 0;
    for (i, key) in [OLD, new.as_str(), OLD, new.as_str()]
        .into_iter()
        .enumerate()
    {
        let transport = if i % 2 == 0 {
            Transport::Http1
        } else {
            Transport::H2c
        };
        let resp = call(&server, transport, ("GET", "/v1/pets"), key);
        n += 1;
        assert_eq!(resp.status, 200, "{}", resp.describe());
        assert!(
            charged(&resp, n),
            "one bucket for both keys: {}",
            resp.describe()
        );
        // The entry's scopes hold for both.
        let refused = call(&server, transport, ("POST", "/v1/pets"), key);
        n += 1;
        assert_forbidden(&refused, "pets:write");
        assert!(charged(&refused, n), "{}", refused.describe());
    }

    // The old key removed: it is refused from the next request on, and
    // the new one goes on with the same bucket (not refilled).
    partner["sha256"] = json!(sha256_hex(&new));
    let keys = json!({"keys": [partner, entry("all", ALL, None)]});
    reload(&server, &keys, 2);
    assert_error(
        &call(&server, Transport::Http1, ("GET", "/v1/pets"), OLD),
        401,
        "unauthorized",
    );
    let after = call(&server, Transport::H2c, ("GET", "/v1/pets"), &new);
    assert_eq!(after.status, 200);
    assert!(
        charged(&after, n + 1),
        "the bucket carried over the removal of the old secret: {}",
        after.describe()
    );
}

#[test]
fn keygen_rotate_refuses_a_third_secret_and_an_unknown_entry_leaving_the_file_as_it_was() {
    let keys = json!({"keys": [
        {"name": "partner", "sha256": [sha256_hex("a"), sha256_hex("b")], "plan": "pro"},
    ]});
    let server = Server::builder().keys(keys).start();
    let before = std::fs::read_to_string(server.keys_path()).unwrap();
    for (name, says) in [
        ("partner", "already holds 2 secrets"),
        ("nobody", "no entry is named"),
    ] {
        let out = Command::new(common::BIN)
            .args(["keygen", "--rotate", name, "--keys"])
            .arg(server.keys_path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{stderr}");
        assert!(out.stdout.is_empty(), "no key printed");
        assert_eq!(std::fs::read_to_string(server.keys_path()).unwrap(), before);
    }
}
