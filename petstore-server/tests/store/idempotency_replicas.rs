//! `Idempotency-Key` on two replicas of one private PostgreSQL: a key
//! kept by one replica is found by the other (replay, 422, scoping), a
//! storm of one keyed create or transition from both replicas writes
//! once, a replica killed before its answer leaves the key to the other,
//! expired keys are free again and pruned, and a database of schema
//! version 3 is migrated.

use crate::common;

use std::io::Write as _;
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::Duration;

use common::postgres::Postgres;
use common::{wait_until, Response, Server, HASHED_KEY, KEY};

/// Only cuts off what never happens, never a slow machine.
const BOUND: Duration = Duration::from_secs(30);

fn replica(pg: &Postgres) -> Server {
    Server::builder().postgres(&pg.url()).start()
}

/// `POST path` with the API key `api_key`, `Idempotency-Key: key` and
/// `body` (JSON) when given.
fn keyed(server: &Server, api_key: &str, key: &str, path: &str, body: Option<&str>) -> Response {
    let auth = format!("Bearer {api_key}");
    let mut headers = vec![("Authorization", auth.as_str()), ("Idempotency-Key", key)];
    if body.is_some() {
        headers.push(("Content-Type", "application/json"));
    }
    server.request("POST", path, &headers, body.map(str::as_bytes))
}

fn create(server: &Server, key: &str, body: &str) -> Response {
    keyed(server, KEY, key, "/v1/pets", Some(body))
}

fn count(pg: &Postgres, sql: &str) -> u64 {
    pg.psql(sql).parse().unwrap()
}

fn pets(pg: &Postgres) -> u64 {
    count(pg, "SELECT count(*) FROM petstore_pets")
}

/// The answer's status, body and `Location`: what a replay must repeat.
fn kept(resp: &Response) -> (u16, Vec<u8>, Option<String>) {
    (
        resp.status,
        resp.body.clone(),
        resp.header("location").map(str::to_owned),
    )
}

fn assert_replay_of(replay: &Response, first: &Response) {
    assert_eq!(kept(replay), kept(first), "{}", replay.describe());
    assert_eq!(
        replay.header("idempotent-replayed"),
        Some("true"),
        "{}",
        replay.describe()
    );
    assert_eq!(first.header("idempotent-replayed"), None);
}

const REX: &str = r#"{"name":"Rex","categoryId":1}"#;

#[test]
fn each_row_of_the_contract_holds_across_replicas() {
    let pg = Postgres::start();
    let replicas = [replica(&pg), replica(&pg)];

    // Kept by one replica, replayed by the other: nothing created again.
    let first = create(&replicas[0], "k-create", REX);
    assert_eq!(first.status, 201, "{}", first.describe());
    let replay = create(&replicas[1], "k-create", REX);
    assert_replay_of(&replay, &first);
    // The quoted spelling is the same key.
    assert_replay_of(&create(&replicas[1], "\"k-create\"", REX), &first);
    assert_eq!(pets(&pg), 1);

    // One byte of body differs: 422 on either replica, decided before
    // the body is read (an invalid body too).
    for (server, body) in [
        (&replicas[1], r#"{"name":"Rex","categoryId":2}"#),
        (&replicas[0], r#"{"name":"Rex","categoryId":1} "#),
        (&replicas[1], r#"{"name":""}"#),
    ] {
        common::assert_error(
            &create(server, "k-create", body),
            422,
            "idempotency_key_reused",
        );
    }
    assert_eq!(pets(&pg), 1);

    // Another API key's keys are its own: the same key makes a pet.
    let other = keyed(&replicas[1], HASHED_KEY, "k-create", "/v1/pets", Some(REX));
    assert_eq!(other.status, 201, "{}", other.describe());
    assert_ne!(other.json()["id"], first.json()["id"]);
    assert_replay_of(
        &keyed(&replicas[0], HASHED_KEY, "k-create", "/v1/pets", Some(REX)),
        &other,
    );
    assert_eq!(pets(&pg), 2);

    // Refused before the store: nothing kept, the same key then works.
    common::assert_error(
        &create(&replicas[0], "k-fixed", r#"{"name":""}"#),
        400,
        "invalid_body",
    );
    let fixed = create(&replicas[1], "k-fixed", REX);
    assert_eq!(fixed.status, 201, "{}", fixed.describe());

    // A transition, replayed by the other replica: one change.
    let id = first.json()["id"].as_u64().unwrap();
    let reserve = format!("/v1/pets/{id}/reserve");
    let reserved = keyed(&replicas[0], KEY, "k-reserve", &reserve, None);
    assert_eq!(reserved.status, 200, "{}", reserved.describe());
    assert_replay_of(
        &keyed(&replicas[1], KEY, "k-reserve", &reserve, None),
        &reserved,
    );
    assert_eq!(pg.psql("SELECT last_change FROM petstore_changes"), "1");

    // A conflict is kept: replayed as the same 409 after the pet moved
    // on (released, so the transition would now be allowed).
    let conflict = keyed(&replicas[1], KEY, "k-conflict", &reserve, None);
    common::assert_error(&conflict, 409, "status_conflict");
    let release = format!("/v1/pets/{id}/release");
    let released = keyed(&replicas[0], KEY, "k-release", &release, None);
    assert_eq!(released.status, 200, "{}", released.describe());
    assert_replay_of(
        &keyed(&replicas[0], KEY, "k-conflict", &reserve, None),
        &conflict,
    );
    assert_eq!(pg.psql("SELECT last_change FROM petstore_changes"), "2");

    // No such pet keeps nothing.
    let missing = keyed(&replicas[1], KEY, "k-missing", "/v1/pets/999/sell", None);
    common::assert_error(&missing, 404, "not_found");
    assert_eq!(
        count(
            &pg,
            "SELECT count(*) FROM petstore_idempotency WHERE key = 'k-missing'"
        ),
        0
    );

    // Each kept answer is one row, scoped by the key's name.
    assert_eq!(
        pg.psql(
            "SELECT scope || ' ' || key || ' ' || answer FROM petstore_idempotency \
             ORDER BY scope, key"
        ),
        "hashed k-create 201\nmain k-conflict 409\nmain k-create 201\nmain k-fixed 201\n\
         main k-release 200\nmain k-reserve 200"
    );
}

/// Sends `send` from `clients` threads at once, half to each replica,
/// each retrying on 409 `idempotency_key_in_use` (the first is still
/// running) as a client would; every final answer.
fn storm(
    replicas: &[Server; 2],
    clients: usize,
    send: impl Fn(&Server) -> Response + Sync,
) -> Vec<Response> {
    let barrier = Barrier::new(clients);
    let answers = Mutex::new(Vec::new());
    thread::scope(|s| {
        for c in 0..clients {
            let (barrier, answers, send, server) = (&barrier, &answers, &send, &replicas[c % 2]);
            s.spawn(move || {
                barrier.wait();
                for _ in 0..10_000 {
                    let resp = send(server);
                    let in_use =
                        resp.status == 409 && resp.json()["code"] == "idempotency_key_in_use";
                    if !in_use {
                        answers.lock().unwrap().push(resp);
                        return;
                    }
                    thread::sleep(Duration::from_millis(5));
                }
                panic!("the key stayed in use through 10,000 tries");
            });
        }
    });
    answers.into_inner().unwrap()
}

#[test]
fn a_storm_of_one_keyed_create_on_both_replicas_makes_one_pet() {
    let pg = Postgres::start();
    let replicas = [replica(&pg), replica(&pg)];
    for round in 0..3 {
        let key = format!("storm-{round}");
        let answers = storm(&replicas, 32, |server| create(server, &key, REX));
        let first = answers
            .iter()
            .find(|r| r.header("idempotent-replayed").is_none())
            .unwrap_or_else(|| panic!("no first answer in round {round}"));
        assert_eq!(first.status, 201, "{}", first.describe());
        for resp in &answers {
            assert_eq!(
                kept(resp),
                kept(first),
                "round {round}: {}",
                resp.describe()
            );
        }
        let firsts = answers
            .iter()
            .filter(|r| r.header("idempotent-replayed").is_none())
            .count();
        assert_eq!(firsts, 1, "round {round}: one answer made the pet");
        assert_eq!(pets(&pg), round + 1, "round {round}");
    }
    // Ids kept no gap: a losing create took none.
    assert_eq!(pg.psql("SELECT last_id FROM petstore_counter"), "3");
    assert_eq!(
        pg.psql("SELECT string_agg(id::text, ',' ORDER BY id) FROM petstore_pets"),
        "1,2,3"
    );
}

#[test]
fn a_storm_of_one_keyed_transition_on_both_replicas_changes_once() {
    let pg = Postgres::start();
    let replicas = [replica(&pg), replica(&pg)];
    let id = replicas[0].create_pet(&serde_json::json!({"name": "Rex", "categoryId": 1}))["id"]
        .as_u64()
        .unwrap();
    for (round, action) in ["reserve", "release", "sell"].iter().enumerate() {
        let path = format!("/v1/pets/{id}/{action}");
        let key = format!("tx-{action}");
        let answers = storm(&replicas, 16, |server| {
            keyed(server, KEY, &key, &path, None)
        });
        let first = answers
            .iter()
            .find(|r| r.header("idempotent-replayed").is_none())
            .unwrap();
        assert_eq!(first.status, 200, "{action}: {}", first.describe());
        for resp in &answers {
            assert_eq!(kept(resp), kept(first), "{action}: {}", resp.describe());
        }
        assert_eq!(
            pg.psql("SELECT last_change FROM petstore_changes"),
            (round + 1).to_string(),
            "{action}: one change"
        );
    }
}

#[test]
fn a_replica_killed_before_its_answer_leaves_the_kept_pet_to_the_retry() {
    // The create's transaction waits for a lock this test holds; the
    // replica is killed while it waits, then the lock is let go: its
    // transaction, already sent whole (BEGIN, the statement, COMMIT in
    // one round trip), commits after the replica is gone. A pet stored,
    // no answer given: the retry, on the other replica or on the killed
    // one restarted, must get that pet, not make a second.
    let pg = Postgres::start();
    let mut doomed = replica(&pg);
    let survivor = replica(&pg);
    let mut lock = pg.psql_session();
    let mut sql = lock.stdin.take().unwrap();
    writeln!(sql, "BEGIN; SELECT 1 FROM petstore_counter FOR UPDATE;").unwrap();
    assert!(
        wait_until(BOUND, || pg
            .psql("SELECT count(*) FROM pg_locks WHERE NOT granted")
            == "0"
            && pg.psql(
                "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction'"
            ) == "1"),
        "the lock was never taken"
    );
    let mut conn = doomed.connect();
    let request = format!(
        "POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\
         Idempotency-Key: k-killed\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{REX}",
        REX.len()
    );
    conn.send(request.as_bytes()).unwrap();
    // The keyed create waits for the counter's lock. The replica's
    // transaction gives up on a lock after 2 s (lock_timeout); the steps
    // from here to the COMMIT below take milliseconds.
    assert!(
        wait_until(BOUND, || pg.psql(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE wait_event_type = 'Lock' AND query LIKE '%petstore_create_keyed%'"
        ) == "1"),
        "the keyed create never waited for the lock"
    );
    doomed.signal("KILL");
    doomed.wait_exit(BOUND);
    writeln!(sql, "COMMIT;").unwrap();
    drop(sql);
    assert!(lock.wait().unwrap().success());
    assert!(
        wait_until(BOUND, || count(
            &pg,
            "SELECT count(*) FROM petstore_idempotency"
        ) == 1),
        "the killed replica's create never committed"
    );
    assert_eq!(pets(&pg), 1);

    let retried = create(&survivor, "k-killed", REX);
    assert_eq!(retried.status, 201, "{}", retried.describe());
    assert_eq!(retried.header("idempotent-replayed"), Some("true"));
    assert_eq!(retried.json()["id"], 1);
    assert_eq!(retried.header("location"), Some("/v1/pets/1"));
    let restarted = replica(&pg);
    assert_eq!(kept(&create(&restarted, "k-killed", REX)), kept(&retried));
    assert_eq!(pets(&pg), 1);
}

#[test]
fn an_expired_key_is_free_again_and_pruned() {
    // Retention counts from the first request's `created_at`, the
    // server's wall clock. The rows are aged in the table instead of
    // waiting a day: PostgreSQL's side of the clock moves, the same for
    // the lookup, the claim and the prune task.
    let pg = Postgres::start();
    let replicas = [replica(&pg), replica(&pg)];
    let first = create(&replicas[0], "k-old", REX);
    assert_eq!(first.status, 201, "{}", first.describe());
    let other_body = r#"{"name":"Max","categoryId":1}"#;
    common::assert_error(
        &create(&replicas[1], "k-old", other_body),
        422,
        "idempotency_key_reused",
    );
    // Just inside the 24 hours: still kept.
    pg.psql("UPDATE petstore_idempotency SET created_at = now() - interval '23 hours 59 minutes'");
    common::assert_error(
        &create(&replicas[1], "k-old", other_body),
        422,
        "idempotency_key_reused",
    );
    // Past them: the key is free; a new request takes it over.
    pg.psql("UPDATE petstore_idempotency SET created_at = now() - interval '24 hours 1 minute'");
    let again = create(&replicas[1], "k-old", other_body);
    assert_eq!(again.status, 201, "{}", again.describe());
    assert_eq!(again.json()["id"], 2);
    assert_eq!(
        pg.psql("SELECT pet_id || ' ' || name FROM petstore_idempotency WHERE key = 'k-old'"),
        "2 Max"
    );

    // Expired rows are pruned, in statements of at most 1000 rows: the
    // prune task's pass at start (then every minute) deletes them all.
    pg.psql(
        "INSERT INTO petstore_idempotency (scope, key, fingerprint, created_at, answer, pet_id, status, transition)
         SELECT 'main', 'expired-' || g, decode(repeat('00', 32), 'hex'), now() - interval '25 hours',
                409, 1, 'sold', 'sell'
         FROM generate_series(1, 2500) AS g",
    );
    assert_eq!(
        count(&pg, "SELECT count(*) FROM petstore_idempotency"),
        2501
    );
    let pruner = replica(&pg);
    assert!(
        wait_until(BOUND, || count(
            &pg,
            "SELECT count(*) FROM petstore_idempotency"
        ) == 1),
        "expired rows left: {}",
        pg.psql("SELECT count(*) FROM petstore_idempotency")
    );
    assert!(wait_until(BOUND, || pruner
        .metric("petstore_postgres_idempotency_pruned_total")
        == 2500));
    assert!(wait_until(BOUND, || pruner
        .metric("petstore_postgres_idempotency_keys")
        == 1));
    // The live key is kept, and still replays.
    assert_replay_of(&create(&pruner, "k-old", other_body), &again);
}

#[test]
fn a_database_of_schema_version_3_is_migrated_and_keeps_keys() {
    // Version 3 is version 4 without the table and its functions: a
    // database of that release, with pets in it.
    let pg = Postgres::start();
    let old = replica(&pg);
    old.create_pet(&serde_json::json!({"name": "Old", "categoryId": 1}));
    drop(old);
    pg.downgrade_to(3);
    let replicas = [replica(&pg), replica(&pg)];
    pg.assert_migrated_once(&[&replicas[0], &replicas[1]], 3);
    let first = create(&replicas[0], "k-new", REX);
    assert_eq!(first.status, 201, "{}", first.describe());
    assert_eq!(first.json()["id"], 2);
    assert_replay_of(&create(&replicas[1], "k-new", REX), &first);
    assert_eq!(pets(&pg), 2);
}

#[test]
fn while_postgres_is_down_a_keyed_post_is_503_and_keeps_nothing() {
    let pg = Postgres::start();
    let server = replica(&pg);
    // A keyed create before the outage: the connections it used are the
    // ones that break.
    assert_eq!(create(&server, "k-before", REX).status, 201);
    pg.stop("fast");
    common::assert_error(&create(&server, "k-down", REX), 503, "unavailable");
    common::assert_error(
        &keyed(&server, KEY, "k-down-tx", "/v1/pets/1/sell", None),
        503,
        "unavailable",
    );
    pg.start_again();
    // The client retries with the same key, as after any 503; once
    // PostgreSQL answers, the create is made once and then replayed.
    let mut answer = None;
    assert!(
        wait_until(BOUND, || {
            let resp = create(&server, "k-down", REX);
            let done = resp.status != 503;
            answer = Some(resp);
            done
        }),
        "keyed creates still 503 after PostgreSQL came back"
    );
    let made = answer.unwrap();
    assert_eq!(made.status, 201, "{}", made.describe());
    assert_eq!(made.header("idempotent-replayed"), None);
    assert_replay_of(&create(&server, "k-down", REX), &made);
    assert_eq!(pets(&pg), 2);
    let sold = keyed(&server, KEY, "k-down-tx", "/v1/pets/1/sell", None);
    assert_eq!(sold.status, 200, "{}", sold.describe());
}

#[test]
fn in_a_batch_with_a_lost_key_the_won_ones_take_the_next_ids() {
    // The create function itself, given a batch whose first key is kept
    // already (a replica's batch meeting another's key): the other two
    // take the next two ids, in order, and their rows name those ids.
    let pg = Postgres::start();
    let server = replica(&pg);
    assert_eq!(create(&server, "k-1", REX).status, 201);
    let tail = |name: &str| format!(r#","name":"{name}","categoryId":1,"status":"sold"}}"#);
    let out = pg.psql(&format!(
        "SELECT item || ' ' || coalesce(new_id::text, '-') || ' ' || coalesce(kept_pet::text, '-')
         FROM petstore_create_keyed(
             ARRAY['main', 'main', 'main'], ARRAY['k-1', 'k-2', 'k-3'],
             ARRAY[decode(repeat('07', 32), 'hex'), decode(repeat('08', 32), 'hex'),
                   decode(repeat('09', 32), 'hex')],
             ARRAY[now(), now(), now()], ARRAY['a', 'b', 'c'], ARRAY[1, 1, 1]::int8[],
             ARRAY['sold', 'sold', 'sold'], ARRAY['{}', '{}', '{}'], 86400)",
        tail("a"),
        tail("b"),
        tail("c"),
    ));
    assert_eq!(out, "1 - 1\n2 2 -\n3 3 -");
    assert_eq!(
        pg.psql(
            "SELECT string_agg(key || ' ' || pet_id, ',' ORDER BY key) FROM petstore_idempotency"
        ),
        "k-1 1,k-2 2,k-3 3"
    );
    assert_eq!(pg.psql("SELECT last_id FROM petstore_counter"), "3");
    assert_eq!(
        pg.psql("SELECT string_agg(id || ' ' || name, ',' ORDER BY id) FROM petstore_pets"),
        "1 Rex,2 b,3 c"
    );
    assert!(wait_until(BOUND, || server
        .get("/v1/pets/3", Some(KEY))
        .status
        == 200));
    assert_eq!(server.get("/v1/pets/3", Some(KEY)).json()["name"], "c");
    assert_eq!(
        pg.psql("SELECT json FROM petstore_pets WHERE id = 3"),
        r#"{"id":3,"name":"c","categoryId":1,"status":"sold"}"#
    );
}
