//! `Idempotency-Key` on every POST, on one node (docs/contract.md,
//! "Idempotency keys"; docs/http.md): every row of its contract, in
//! memory and on the journal, over real TCP. The key in flight and
//! expiry are tested where they can be held and timed without a wait
//! (`src/http/tests.rs`, the core's `tests/core_api/idempotency.rs`).

use crate::common;

use common::{
    assert_error, assert_has_ratelimit_headers, x_ratelimit, Response, Server, TempDir, FREE_KEY,
    HASHED_KEY, KEY,
};
use serde_json::{json, Value};

const REX: &str = r#"{"name":"Rex","categoryId":1}"#;

/// A server in memory, or on the journal in `dir`.
fn servers(dir: &TempDir) -> [(&'static str, Server); 2] {
    [
        ("in memory", Server::start(&[])),
        ("journal", Server::builder().data(dir).start()),
    ]
}

/// `POST path` with `api_key`, JSON, `body` and these idempotency keys
/// (one header each).
fn post(server: &Server, api_key: &str, path: &str, keys: &[&str], body: &str) -> Response {
    let auth = format!("Bearer {api_key}");
    let mut headers = vec![
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
    ];
    headers.extend(keys.iter().map(|k| ("Idempotency-Key", *k)));
    server.request("POST", path, &headers, Some(body.as_bytes()))
}

/// A keyed create with the main key.
fn create(server: &Server, key: &str, body: &str) -> Response {
    post(server, KEY, "/v1/pets", &[key], body)
}

fn count(server: &Server) -> usize {
    server.list_ids("/v1/pets?limit=100").0.len()
}

/// Asserts a first answer: not marked replayed, with rate-limit headers.
fn assert_first(resp: &Response, status: u16) {
    assert_eq!(resp.status, status, "{}", resp.describe());
    assert!(
        resp.header("idempotent-replayed").is_none(),
        "{}",
        resp.describe()
    );
    assert_has_ratelimit_headers(resp);
}

/// Asserts that `again` gives `first`'s answer again: status, body and
/// `Location`, marked replayed, with its own rate-limit headers.
fn assert_replayed(first: &Response, again: &Response) {
    assert_eq!(again.status, first.status, "{}", again.describe());
    assert_eq!(again.body, first.body, "{}", again.describe());
    assert_eq!(again.header("location"), first.header("location"));
    assert_eq!(again.single("idempotent-replayed"), "true");
    assert_has_ratelimit_headers(again);
}

#[test]
fn a_retried_create_gets_the_kept_answer_and_creates_nothing() {
    let dir = TempDir::new();
    for (backend, server) in servers(&dir) {
        let first = create(&server, "order-17", REX);
        assert_first(&first, 201);
        assert_eq!(first.single("location"), "/v1/pets/1", "{backend}");
        let again = create(&server, "order-17", REX);
        assert_replayed(&first, &again);
        // The draft's sf-string spelling is the same key.
        let quoted = create(&server, "\"order-17\"", REX);
        assert_replayed(&first, &quoted);
        assert_eq!(count(&server), 1, "{backend}: one pet");
        assert_eq!(
            server.metric("petstore_idempotency_keys_kept"),
            1,
            "{backend}"
        );
    }
}

#[test]
fn a_replay_is_charged_and_carries_the_current_rate_limit_headers() {
    // The free plan: 3 a minute.
    let server = Server::start(&[]);
    let first = post(&server, FREE_KEY, "/v1/pets", &["k"], REX);
    assert_first(&first, 201);
    let again = post(&server, FREE_KEY, "/v1/pets", &["k"], REX);
    assert_replayed(&first, &again);
    let (_, left_first, _) = x_ratelimit(&first);
    let (_, left_again, _) = x_ratelimit(&again);
    assert_eq!(left_again + 1, left_first, "a replay takes a token");
    post(&server, FREE_KEY, "/v1/pets", &["k"], REX);
    // Out of tokens: 429, and the 429 is not what the key keeps.
    let limited = post(&server, FREE_KEY, "/v1/pets", &["k"], REX);
    assert_error(&limited, 429, "rate_limited");
    assert_eq!(count(&server), 1);
}

#[test]
fn another_request_with_a_key_is_422_decided_before_its_body_is_validated() {
    let dir = TempDir::new();
    for (backend, server) in servers(&dir) {
        assert_first(&create(&server, "k", REX), 201);
        // One byte differs.
        let rey = create(&server, "k", r#"{"name":"Rey","categoryId":1}"#);
        assert_error(&rey, 422, "idempotency_key_reused");
        assert!(rey.header("idempotent-replayed").is_none());
        assert_has_ratelimit_headers(&rey);
        // A body that is not valid: 422 all the same, not 400.
        assert_error(&create(&server, "k", "{"), 422, "idempotency_key_reused");
        // Another path.
        let reserve = post(&server, KEY, "/v1/pets/1/reserve", &["k"], "");
        assert_error(&reserve, 422, "idempotency_key_reused");
        assert_eq!(count(&server), 1, "{backend}");
        assert_eq!(
            server.get("/v1/pets/1", Some(KEY)).json()["status"],
            "available"
        );
    }
}

#[test]
fn a_value_that_is_not_a_key_is_400_naming_the_fault_and_changes_nothing() {
    let server = Server::start(&[]);
    let too_long = "k".repeat(256);
    let cases: [(&[&str], &str); 7] = [
        (&[""], "empty"),
        (&["\"\""], "empty"),
        (&[&too_long], "longer than 255"),
        (&["a b"], "not visible ASCII"),
        (&["\"abc"], "does not close"),
        (&[r#""a\b""#], "backslash"),
        (&["a", "a"], "more than once"),
    ];
    for (keys, fault) in cases {
        for path in ["/v1/pets", "/v1/pets/1/reserve"] {
            let resp = post(&server, KEY, path, keys, REX);
            let message = assert_error(&resp, 400, "invalid_idempotency_key");
            assert!(message.contains(fault), "{keys:?}: {message}");
            assert!(message.contains("Idempotency-Key"), "{message}");
            assert!(
                !message.contains(&too_long[..64]),
                "quotes no value: {message}"
            );
        }
    }
    // Not ASCII: bytes hyper hands over as they are.
    let request = format!(
        "POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\
         Content-Type: application/json\r\nIdempotency-Key: caf\u{e9}\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{REX}",
        REX.len()
    );
    assert_error(
        &server.raw(request.as_bytes()),
        400,
        "invalid_idempotency_key",
    );
    // 255 characters is a key.
    assert_first(&create(&server, &"k".repeat(255), REX), 201);
    assert_eq!(count(&server), 1);
}

#[test]
fn two_api_keys_may_use_one_idempotency_key_without_meeting() {
    let dir = TempDir::new();
    for (backend, server) in servers(&dir) {
        let main = post(&server, KEY, "/v1/pets", &["shared"], REX);
        let other = post(&server, HASHED_KEY, "/v1/pets", &["shared"], REX);
        assert_first(&main, 201);
        assert_first(&other, 201);
        assert_ne!(main.json()["id"], other.json()["id"], "{backend}");
        // Each API key's retry finds its own answer.
        assert_replayed(&main, &post(&server, KEY, "/v1/pets", &["shared"], REX));
        assert_replayed(
            &other,
            &post(&server, HASHED_KEY, "/v1/pets", &["shared"], REX),
        );
        assert_eq!(count(&server), 2, "{backend}");
    }
}

#[test]
fn refusals_before_the_store_keep_nothing_so_the_key_can_be_used_again() {
    let dir = TempDir::new();
    for (backend, server) in servers(&dir) {
        // 400 on the body, then the fixed body with the same key.
        assert_error(
            &create(&server, "fix", r#"{"name":""}"#),
            400,
            "invalid_body",
        );
        assert_first(&create(&server, "fix", REX), 201);
        // 401: no API key, then with one.
        let anonymous = server.request(
            "POST",
            "/v1/pets",
            &[
                ("Content-Type", "application/json"),
                ("Idempotency-Key", "auth"),
            ],
            Some(REX.as_bytes()),
        );
        assert_error(&anonymous, 401, "unauthorized");
        assert_first(&create(&server, "auth", REX), 201);
        // 404: the pet does not exist yet; once it does, the same request
        // with the same key runs.
        let next = count(&server) + 1;
        let reserve = format!("/v1/pets/{next}/reserve");
        assert_error(
            &post(&server, KEY, &reserve, &["later"], ""),
            404,
            "not_found",
        );
        server.create_pet(&serde_json::from_str(REX).unwrap());
        let resp = post(&server, KEY, &reserve, &["later"], "");
        assert_first(&resp, 200);
        assert_eq!(resp.json()["status"], "pending", "{backend}");
        assert_eq!(
            server.metric("petstore_idempotency_keys_kept"),
            3,
            "{backend}"
        );
    }
}

#[test]
fn a_keyed_transition_is_kept_and_a_retry_changes_nothing() {
    let dir = TempDir::new();
    for (backend, server) in servers(&dir) {
        let id = server.create_pet(&serde_json::from_str(REX).unwrap())["id"].clone();
        let reserve = format!("/v1/pets/{id}/reserve");
        let first = post(&server, KEY, &reserve, &["t"], "");
        assert_first(&first, 200);
        assert_eq!(first.json()["status"], "pending");
        // Released since: a retry of the reserve gets its kept answer and
        // does not reserve the pet again.
        let release = post(&server, KEY, &format!("/v1/pets/{id}/release"), &[], "");
        assert_eq!(release.status, 200, "{}", release.describe());
        let again = post(&server, KEY, &reserve, &["t"], "");
        assert_replayed(&first, &again);
        let now = server.get(&format!("/v1/pets/{id}"), Some(KEY)).json();
        assert_eq!(now["status"], "available", "{backend}");
        // `{}` is another body than none: another request.
        let other = post(&server, KEY, &reserve, &["t"], "{}");
        assert_error(&other, 422, "idempotency_key_reused");
    }
}

#[test]
fn a_kept_conflict_replays_as_409_after_the_pet_changed() {
    let dir = TempDir::new();
    for (backend, server) in servers(&dir) {
        let pet = json!({"name": "Rex", "categoryId": 1, "status": "pending"});
        let id = server.create_pet(&pet)["id"].clone();
        let reserve = format!("/v1/pets/{id}/reserve");
        let first = post(&server, KEY, &reserve, &["c"], "");
        let message = assert_error(&first, 409, "status_conflict");
        assert!(first.header("idempotent-replayed").is_none());
        // Now available, so a reserve would succeed: the kept 409 is
        // given all the same, and nothing changes.
        let release = post(&server, KEY, &format!("/v1/pets/{id}/release"), &[], "");
        assert_eq!(release.status, 200, "{}", release.describe());
        let again = post(&server, KEY, &reserve, &["c"], "");
        assert_eq!(assert_error(&again, 409, "status_conflict"), message);
        assert_replayed(&first, &again);
        let now: Value = server.get(&format!("/v1/pets/{id}"), Some(KEY)).json();
        assert_eq!(now["status"], "available", "{backend}");
    }
}
