//! When a replica looks an `Idempotency-Key` up in PostgreSQL: a keyed
//! POST with a valid body makes no lookup (its write's claim finds what
//! the key holds), one with an invalid body does (so that a kept key's
//! 422 or replay still wins over the 400), and a keyed write refused
//! because the read copy cannot apply a row does too (so that a kept
//! answer is still given). Seen through
//! `petstore_postgres_idempotency_lookup_duration_seconds`, whose count
//! is the lookups' batches: one a request here, as they are sent one at
//! a time.

use crate::common;

use std::time::Duration;

use common::postgres::Postgres;
use common::{wait_until, Response, Server, KEY};

/// Only cuts off what never happens, never a slow machine.
const BOUND: Duration = Duration::from_secs(30);

const LOOKUPS: &str = "petstore_postgres_idempotency_lookup_duration_seconds_count";

const REX: &str = r#"{"name":"Rex","categoryId":1}"#;

/// `POST path` with `Idempotency-Key: key` and `body` (JSON) when given.
fn keyed(server: &Server, key: &str, path: &str, body: Option<&str>) -> Response {
    let auth = format!("Bearer {KEY}");
    let mut headers = vec![("Authorization", auth.as_str()), ("Idempotency-Key", key)];
    if body.is_some() {
        headers.push(("Content-Type", "application/json"));
    }
    server.request("POST", path, &headers, body.map(str::as_bytes))
}

fn create(server: &Server, key: &str, body: &str) -> Response {
    keyed(server, key, "/v1/pets", Some(body))
}

/// `replay` is `first` given again: status, body, `Location`, marked.
fn assert_replay_of(replay: &Response, first: &Response) {
    assert_eq!(
        (replay.status, replay.text(), replay.header("location")),
        (first.status, first.text(), first.header("location")),
        "{}",
        replay.describe()
    );
    assert_eq!(
        replay.header("idempotent-replayed"),
        Some("true"),
        "{}",
        replay.describe()
    );
}

#[test]
fn a_valid_keyed_post_makes_no_lookup_and_an_invalid_one_does() {
    let pg = Postgres::start();
    let server = Server::builder().postgres(&pg.url()).start();

    // New keys, a replay, a reuse with another valid body, a transition
    // and its kept conflict, a missing pet: every verdict, no lookup.
    let first = create(&server, "k-1", REX);
    assert_eq!(first.status, 201, "{}", first.describe());
    assert_replay_of(&create(&server, "k-1", REX), &first);
    common::assert_error(
        &create(&server, "k-1", r#"{"name":"Max","categoryId":1}"#),
        422,
        "idempotency_key_reused",
    );
    let id = first.json()["id"].as_u64().unwrap();
    let sell = format!("/v1/pets/{id}/sell");
    let sold = keyed(&server, "k-sell", &sell, Some("{}"));
    assert_eq!(sold.status, 200, "{}", sold.describe());
    let conflict = keyed(&server, "k-again", &sell, None);
    common::assert_error(&conflict, 409, "status_conflict");
    assert_replay_of(&keyed(&server, "k-again", &sell, None), &conflict);
    common::assert_error(
        &keyed(&server, "k-missing", "/v1/pets/999/sell", None),
        404,
        "not_found",
    );
    assert_eq!(server.metric(LOOKUPS), 0, "valid bodies were looked up");

    // An invalid body asks: a kept key's verdict wins over the 400 ...
    common::assert_error(
        &create(&server, "k-1", r#"{"name":""}"#),
        422,
        "idempotency_key_reused",
    );
    assert_eq!(server.metric(LOOKUPS), 1);
    common::assert_error(
        &keyed(&server, "k-sell", &sell, Some("[]")),
        422,
        "idempotency_key_reused",
    );
    assert_eq!(server.metric(LOOKUPS), 2);
    // ... and a new key's is 400, keeping nothing.
    common::assert_error(
        &create(&server, "k-new", r#"{"name":""}"#),
        400,
        "invalid_body",
    );
    assert_eq!(server.metric(LOOKUPS), 3);
    assert_eq!(
        pg.psql("SELECT count(*) FROM petstore_idempotency WHERE key = 'k-new'"),
        "0"
    );
}

#[test]
fn while_the_copy_cannot_apply_a_row_a_kept_key_is_still_answered() {
    let pg = Postgres::start();
    let server = Server::builder().postgres(&pg.url()).start();
    let first = create(&server, "k-1", REX);
    assert_eq!(first.status, 201, "{}", first.describe());
    let sell = "/v1/pets/1/sell";
    let sold = keyed(&server, "k-sell", sell, None);
    assert_eq!(sold.status, 200, "{}", sold.describe());

    // A row the copy refuses (a control character in its name, written
    // around the table's CHECK): the replica refuses every write.
    pg.write_a_row_the_copy_refuses();
    assert!(
        wait_until(BOUND, || server.get("/healthz", None).status == 503),
        "{}",
        server.stderr_text()
    );

    // What the keys keep is still given: a replay, a 422 ...
    assert_replay_of(&create(&server, "k-1", REX), &first);
    common::assert_error(
        &create(&server, "k-1", r#"{"name":"Max","categoryId":1}"#),
        422,
        "idempotency_key_reused",
    );
    assert_replay_of(&keyed(&server, "k-sell", sell, None), &sold);
    // ... while a new key is 503 and keeps nothing.
    common::assert_error(&create(&server, "k-new", REX), 503, "unavailable");
    assert_eq!(
        pg.psql("SELECT count(*) FROM petstore_idempotency WHERE key = 'k-new'"),
        "0"
    );
}
