//! Two replicas reading the same keys file give the same answers to the
//! same key: a 403 for a scope the key lacks, a 401 for an expired key,
//! and, after both reload a file that takes a scope away, the same 403
//! again (docs/operating.md, "Rotating a key", for replicas).

use crate::common;

use std::time::Duration;

use common::postgres::Postgres;
use common::{sha256_hex, wait_until, Response, Server, TempDir};
use serde_json::{json, Value};

const READER: &str = "replica-key-reader";
const LAPSED: &str = "replica-key-lapsed";
const ALL: &str = "replica-key-all";

fn keys(reader_scopes: &[&str]) -> Value {
    json!({"keys": [
        {"name": "reader", "sha256": sha256_hex(READER), "plan": "pro", "scopes": reader_scopes},
        {"name": "lapsed", "sha256": sha256_hex(LAPSED), "plan": "pro",
         "expiresAt": "2020-01-01T00:00:00Z"},
        {"name": "all", "sha256": sha256_hex(ALL), "plan": "pro"},
    ]})
}

/// A request (its method and key) and the status and code it must get.
type Case<'a> = (&'a str, &'a str, (u16, Option<&'a str>));

fn call(server: &Server, method: &str, key: &str) -> Response {
    let auth = format!("Bearer {key}");
    let mut headers = vec![("Authorization", auth.as_str())];
    let body: Option<&[u8]> = (method == "POST").then_some(br#"{"name":"Rex","categoryId":1}"#);
    if body.is_some() {
        headers.push(("Content-Type", "application/json"));
    }
    server.request(method, "/v1/pets", &headers, body)
}

/// What must be the same on both replicas: status, code, challenge.
fn verdict(resp: &Response) -> (u16, Option<String>, Option<String>) {
    let code = (resp.status >= 400).then(|| resp.json()["code"].as_str().unwrap().to_owned());
    (
        resp.status,
        code,
        resp.header("www-authenticate").map(str::to_owned),
    )
}

#[test]
fn two_replicas_with_one_keys_file_answer_a_key_alike() {
    let pg = Postgres::start();
    let dir = TempDir::new();
    let path = dir.join("keys.json");
    std::fs::write(&path, keys(&["pets:read"]).to_string()).unwrap();
    let replicas = [0, 1].map(|_| {
        Server::builder()
            .postgres(&pg.url())
            .keys_path(&path)
            .start()
    });
    let cases = [
        ("POST", READER, (403, Some("insufficient_scope"))),
        ("GET", READER, (200, None)),
        ("GET", LAPSED, (401, Some("unauthorized"))),
        ("POST", ALL, (201, None)),
    ];
    let check = |cases: &[Case<'_>]| {
        for (method, key, (status, code)) in cases {
            let [a, b] = [&replicas[0], &replicas[1]].map(|r| verdict(&call(r, method, key)));
            assert_eq!(a, b, "{method} with {key}: the replicas differ");
            assert_eq!(
                (a.0, a.1.as_deref()),
                (*status, *code),
                "{method} with {key}"
            );
        }
    };
    check(&cases);
    assert_eq!(
        verdict(&call(&replicas[0], "POST", READER)).2.as_deref(),
        Some(r#"Bearer realm="petstore", error="insufficient_scope", scope="pets:write""#)
    );
    assert_eq!(
        verdict(&call(&replicas[1], "GET", LAPSED)).2.as_deref(),
        Some(
            r#"Bearer realm="petstore", error="invalid_token", error_description="the key expired""#
        )
    );

    // The file edited once, each replica told (SIGHUP): the reader loses
    // pets:read on both.
    let tmp = dir.join("keys.json.tmp");
    std::fs::write(&tmp, keys(&["orders"]).to_string()).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    for replica in &replicas {
        replica.signal("HUP");
        assert!(
            wait_until(Duration::from_secs(30), || replica
                .stderr_text()
                .contains("SIGHUP: reloaded keys file")),
            "{}",
            replica.stderr_text()
        );
    }
    check(&[
        ("GET", READER, (403, Some("insufficient_scope"))),
        ("GET", ALL, (200, None)),
    ]);
}
