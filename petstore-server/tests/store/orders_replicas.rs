//! Orders (beta) on two replicas of one private PostgreSQL: every row of
//! the contract with each write on the other replica, the doors, kept
//! keys, one winner of sixteen clients, a replica that reads another's
//! order by id at once, a hold that lapses once whichever replica notices, a complete
//! past its hold refused even before, a race of place, cancel, complete
//! and expiry, PostgreSQL down, a database of schema version 4
//! migrated, and a batch of steps that reaches the orders by key however
//! few there were when its plans were cached.

use crate::common;

use std::thread;
use std::time::Duration;

use common::orders::*;
use common::postgres::Postgres;
use common::{assert_error, wait_until, Server};

/// Only cuts off what never happens, never a slow machine.
const BOUND: Duration = Duration::from_secs(30);

fn replica(pg: &Postgres) -> Server {
    Server::builder().keys(keys()).postgres(&pg.url()).start()
}

fn two_replicas(pg: &Postgres) -> (Server, Server) {
    (replica(pg), replica(pg))
}

/// The change counter: one more per change of a pet or an order.
fn changes(pg: &Postgres) -> u64 {
    pg.psql("SELECT last_change FROM petstore_changes")
        .parse()
        .unwrap()
}

/// Every order in the table as `(id, status, pet's status)`.
fn table(pg: &Postgres) -> Vec<(u64, String, String)> {
    pg.psql(
        "SELECT o.id, o.status, p.status FROM petstore_orders o \
         JOIN petstore_pets p ON p.id = o.pet_id ORDER BY o.id",
    )
    .lines()
    .map(|line| {
        let parts: Vec<&str> = line.split('|').collect();
        (
            parts[0].parse().unwrap(),
            parts[1].to_owned(),
            parts[2].to_owned(),
        )
    })
    .collect()
}

/// Moves order `id`'s hold (and its placing, so the two stay in order)
/// an hour into the past: lapsed by PostgreSQL's clock.
fn lapse(pg: &Postgres, id: u64) {
    pg.psql(&format!(
        "UPDATE petstore_orders SET placed_at = placed_at - interval '1 hour', \
         expires_at = expires_at - interval '1 hour' WHERE id = {id}"
    ));
}

fn order_status(server: &Server, id: u64) -> String {
    let resp = call(server, "GET", &format!("/v1/store/orders/{id}"), BOSS, None);
    if resp.status != 200 {
        return format!("{} {}", resp.status, resp.text());
    }
    resp.json()["status"].as_str().unwrap().to_owned()
}

#[test]
fn every_row_with_each_write_on_the_other_replica() {
    let pg = Postgres::start();
    let (a, b) = two_replicas(&pg);
    every_row(&[&a, &b]);
}

#[test]
fn the_pet_transitions_are_doors_to_orders_across_replicas() {
    let pg = Postgres::start();
    let (a, b) = two_replicas(&pg);
    doors(&[&a, &b]);
    // The table agrees: an order per door that made one.
    let orders = table(&pg);
    assert_eq!(orders.len(), 2, "{orders:?}");
    assert_eq!(orders[0].1, "cancelled");
    assert_eq!(
        (orders[1].1.as_str(), orders[1].2.as_str()),
        ("completed", "sold")
    );
}

#[test]
fn an_idempotency_key_kept_by_one_replica_replays_on_the_other() {
    let pg = Postgres::start();
    let (a, b) = two_replicas(&pg);
    idempotency_replays(&[&a, &b]);
}

#[test]
fn sixteen_clients_on_two_replicas_ordering_one_pet_get_one_201() {
    let pg = Postgres::start();
    let (a, b) = two_replicas(&pg);
    sixteen_clients_one_pet(&[&a, &b]);
    assert_eq!(table(&pg).len(), 1);
}

#[test]
fn an_order_placed_on_one_replica_shows_on_the_other_and_on_a_new_one() {
    let pg = Postgres::start();
    let (a, b) = two_replicas(&pg);
    let rex = pet(&a, "available");
    let order = placed(
        &place(&a, SHOP, &format!(r#"{{"petId":{rex}}}"#)),
        rex,
        "shop",
    );
    let path = format!("/v1/store/orders/{}", order["id"]);
    // Readable by id on the other replica at once: an order beyond its
    // copy's is caught up before a 404.
    let got = call(&b, "GET", &path, SHOP, None);
    assert_eq!(got.status, 200, "{}", got.describe());
    assert_eq!(got.json(), order);
    // Another key's is still 404.
    assert_error(&call(&b, "GET", &path, OTHER, None), 404, "not_found");
    assert_error(
        &call(&b, "GET", "/v1/store/orders/9", SHOP, None),
        404,
        "not_found",
    );
    // Its lists show it once the tail ran (a bound that only catches a
    // tail that never comes).
    assert!(wait_until(BOUND, || pet_status(&b, rex) == "pending"));
    let listed = call(&b, "GET", "/v1/store/orders", SHOP, None).json();
    assert_eq!(listed, serde_json::json!([order]));
    // Completed on b: a's tail brings the change.
    let done = call(&b, "POST", &format!("{path}/complete"), SHOP, None);
    assert_eq!(done.status, 200, "{}", done.describe());
    assert!(wait_until(BOUND, || order_status(&a, 1) == "completed"));
    assert_eq!(pet_status(&a, rex), "sold");
    // A replica started now loads the orders with the pets.
    let c = replica(&pg);
    let listed = call(&c, "GET", "/v1/store/orders", SHOP, None).json();
    assert_eq!(listed, serde_json::json!([done.json()]));
    // Ids go on from the table's, whichever replica places.
    let tom = pet(&c, "available");
    let next = placed(
        &place(&c, OTHER, &format!(r#"{{"petId":{tom}}}"#)),
        tom,
        "other",
    );
    assert_eq!(next["id"], 2);
}

#[test]
fn a_lapsed_hold_expires_exactly_once_and_every_replica_shows_it() {
    let pg = Postgres::start();
    let (a, b) = two_replicas(&pg);
    let rex = pet(&a, "available");
    let order = placed(
        &place(&a, SHOP, &format!(r#"{{"petId":{rex}}}"#)),
        rex,
        "shop",
    );
    let id = order["id"].as_u64().unwrap();
    let before = changes(&pg);
    lapse(&pg, id);
    // Both replicas ask PostgreSQL; whichever asks first expires it.
    for server in [&a, &b] {
        assert!(
            wait_until(BOUND, || order_status(server, id) == "expired"),
            "the hold never lapsed: {}",
            order_status(server, id)
        );
        assert!(wait_until(BOUND, || pet_status(server, rex) == "available"));
    }
    // Exactly once: one change, the expiry, whoever noticed it.
    assert_eq!(changes(&pg), before + 1);
    assert_eq!(table(&pg), [(id, "expired".into(), "available".into())]);
    // A complete now is 409 naming `expired`; the pet can be ordered again.
    let late = call(
        &b,
        "POST",
        &format!("/v1/store/orders/{id}/complete"),
        SHOP,
        None,
    );
    let message = assert_error(&late, 409, "status_conflict");
    assert!(message.contains("expired"), "{message}");
    let again = place(&b, OTHER, &format!(r#"{{"petId":{rex}}}"#));
    assert_eq!(again.status, 201, "{}", again.describe());
}

#[test]
fn a_complete_past_the_hold_is_refused_even_before_any_replica_expires_it() {
    // The step and the lapse in one transaction, so that no replica's
    // expiry can come between: PostgreSQL's step lapses the hold itself.
    let pg = Postgres::start();
    let a = replica(&pg);
    let rex = pet(&a, "available");
    placed(
        &place(&a, SHOP, &format!(r#"{{"petId":{rex}}}"#)),
        rex,
        "shop",
    );
    let out = pg.psql(
        "BEGIN;
         UPDATE petstore_orders SET placed_at = placed_at - interval '1 hour',
             expires_at = expires_at - interval '1 hour' WHERE id = 1;
         SELECT outcome || ' ' || order_status FROM petstore_steps(
             ARRAY['complete'], ARRAY[1::int8], ARRAY['shop'], ARRAY[false], ARRAY[0],
             ARRAY[NULL::text], ARRAY[NULL::text], ARRAY[NULL::bytea],
             ARRAY[NULL::timestamptz], 86400);
         COMMIT;",
    );
    assert!(out.contains("order_conflict expired"), "{out}");
    assert_eq!(table(&pg), [(1, "expired".into(), "available".into())]);
    assert!(wait_until(BOUND, || order_status(&a, 1) == "expired"));
}

#[test]
fn place_cancel_complete_and_expiry_racing_on_each_order_leave_one_winner() {
    const N: u64 = 24;
    let pg = Postgres::start();
    let (a, b) = two_replicas(&pg);
    let pets: Vec<u64> = (0..N).map(|_| pet(&a, "available")).collect();
    for &id in &pets {
        let resp = place(&b, SHOP, &format!(r#"{{"petId":{id}}}"#));
        assert_eq!(resp.status, 201, "{}", resp.describe());
    }
    // Every hold lapses while a cancel (on a) and a complete (on b) of
    // every order race each other and both replicas' expiry.
    let answers: Vec<(u64, u16, u16)> = thread::scope(|s| {
        let lapsing = s.spawn(|| {
            // The change counter first, as every writer of orders takes
            // it: rows updated in another order than the steps' would
            // deadlock with them.
            pg.psql(
                "BEGIN; SELECT 1 FROM petstore_changes FOR UPDATE; \
                 UPDATE petstore_orders SET placed_at = placed_at - interval '1 hour', \
                 expires_at = expires_at - interval '1 hour'; COMMIT;",
            )
        });
        let racers: Vec<_> = (1..=N)
            .map(|id| {
                let (a, b) = (&a, &b);
                s.spawn(move || {
                    let cancel = format!("/v1/store/orders/{id}/cancel");
                    let complete = format!("/v1/store/orders/{id}/complete");
                    let (c, d) = thread::scope(|s| {
                        let c = s.spawn(|| call(a, "POST", &cancel, SHOP, None).status);
                        let d = s.spawn(|| call(b, "POST", &complete, SHOP, None).status);
                        (c.join().unwrap(), d.join().unwrap())
                    });
                    (id, c, d)
                })
            })
            .collect();
        lapsing.join().unwrap();
        racers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    // Any order not closed by a step lapses now.
    assert!(
        wait_until(BOUND, || table(&pg).iter().all(|(_, s, _)| s != "placed")),
        "{:?}",
        table(&pg)
    );
    let table = table(&pg);
    for (id, cancel, complete) in answers {
        let (_, status, pet) = &table[id as usize - 1];
        assert!(
            [200, 409].contains(&cancel) && [200, 409].contains(&complete),
            "order {id}: {cancel} {complete}"
        );
        // One winner: the step that answered 200 is the order's end, and
        // an expiry leaves both 409.
        let expected = match (cancel, complete) {
            (200, 409) => ("cancelled", "available"),
            (409, 200) => ("completed", "sold"),
            (409, 409) => ("expired", "available"),
            other => panic!("order {id}: two winners {other:?}"),
        };
        assert_eq!((status.as_str(), pet.as_str()), expected, "order {id}");
    }
    // Both copies agree with the table once their tails ran.
    for server in [&a, &b] {
        let listed = || {
            call(server, "GET", "/v1/store/orders?limit=100", BOSS, None)
                .json()
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o["status"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        let want: Vec<String> = table.iter().map(|(_, s, _)| s.clone()).collect();
        assert!(wait_until(BOUND, || listed() == want), "{:?}", listed());
    }
}

#[test]
fn while_postgres_is_down_order_steps_answer_503_and_change_nothing() {
    let pg = Postgres::start();
    let a = replica(&pg);
    let rex = pet(&a, "available");
    let tom = pet(&a, "available");
    placed(
        &place(&a, SHOP, &format!(r#"{{"petId":{tom}}}"#)),
        tom,
        "shop",
    );
    pg.stop("fast");
    assert_error(
        &place(&a, SHOP, &format!(r#"{{"petId":{rex}}}"#)),
        503,
        "unavailable",
    );
    assert_error(
        &call(&a, "POST", "/v1/store/orders/1/cancel", SHOP, None),
        503,
        "unavailable",
    );
    // Reads go on from the copy.
    assert_eq!(order_status(&a, 1), "placed");
    pg.start_again();
    assert!(wait_until(BOUND, || a.get("/healthz", None).status == 200));
    assert_eq!(table(&pg), [(1, "placed".into(), "pending".into())]);
    let cancelled = call(&a, "POST", "/v1/store/orders/1/cancel", SHOP, None);
    assert_eq!(cancelled.status, 200, "{}", cancelled.describe());
}

#[test]
fn a_database_of_schema_version_4_is_migrated_and_takes_orders() {
    let pg = Postgres::start();
    let old = replica(&pg);
    let rex = pet(&old, "available");
    let kept = call_with(
        &old,
        "POST",
        &format!("/v1/pets/{rex}/reserve"),
        SHOP,
        None,
        &[("Idempotency-Key", "k-old")],
    );
    assert_eq!(kept.status, 200, "{}", kept.describe());
    drop(old);
    // As version 4 left it: the pet reserved without an order.
    pg.downgrade_to(4);
    pg.psql("UPDATE petstore_pets SET status = 'pending' WHERE id = 1");
    let (a, b) = two_replicas(&pg);
    pg.assert_migrated_once(&[&a, &b], 4);
    // The key kept by version 4 still replays.
    let replay = call_with(
        &b,
        "POST",
        &format!("/v1/pets/{rex}/reserve"),
        SHOP,
        None,
        &[("Idempotency-Key", "k-old")],
    );
    assert_eq!(replay.status, 200, "{}", replay.describe());
    assert_eq!(replay.single("idempotent-replayed"), "true");
    // A pet pending without an order is released as the transition alone,
    // and then ordered.
    let released = call(&a, "POST", &format!("/v1/pets/{rex}/release"), SHOP, None);
    assert_eq!(released.json()["status"], "available");
    placed(
        &place(&b, SHOP, &format!(r#"{{"petId":{rex}}}"#)),
        rex,
        "shop",
    );
}

#[test]
fn the_set_based_batch_decides_as_the_loop_does() {
    // One batch of every kind of step on distinct pets, decided twice in
    // PostgreSQL, each time rolled back: unkeyed (the set-based path)
    // and with its first step keyed (the loop). Both must answer every
    // step alike and leave the same pets and orders.
    let pg = Postgres::start();
    let a = replica(&pg);
    let free: Vec<u64> = (0..4).map(|_| pet(&a, "available")).collect();
    let pending = pet(&a, "pending");
    let held: Vec<u64> = (0..4).map(|_| pet(&a, "available")).collect();
    for (i, id) in held.iter().enumerate() {
        let key = if i < 3 { SHOP } else { OTHER };
        placed(
            &place(&a, key, &format!(r#"{{"petId":{id}}}"#)),
            *id,
            if i < 3 { "shop" } else { "other" },
        );
    }
    let sold = pet(&a, "sold");
    // (kind, target): order ids 1 to 4 hold `held`, the fourth another key's.
    let steps: [(&str, u64); 12] = [
        ("place", free[0]),
        ("reserve", free[1]),
        ("sell", free[2]),
        ("release", pending),
        ("complete", 1),
        ("cancel", 2),
        ("release", held[2]),
        ("sell", held[3]),
        ("cancel", 4),
        ("place", sold),
        ("reserve", 999_999),
        ("complete", 999_999),
    ];
    let array = |f: &dyn Fn(usize, &(&str, u64)) -> String| {
        steps
            .iter()
            .enumerate()
            .map(|(i, s)| f(i, s))
            .collect::<Vec<_>>()
            .join(",")
    };
    let kinds = array(&|_, (k, _)| format!("'{k}'"));
    let targets = array(&|_, (_, t)| t.to_string());
    let run = |keyed: bool| {
        let key = |i: usize, text: &str, null: &str| {
            if keyed && i == 0 {
                text.to_owned()
            } else {
                null.to_owned()
            }
        };
        let scopes = array(&|i, _| key(i, "'shop'", "NULL"));
        let keys = array(&|i, _| key(i, "'k'", "NULL"));
        let fps = array(&|i, _| {
            key(
                i,
                &format!("'\\x{}'::bytea", "00".repeat(32)),
                "NULL::bytea",
            )
        });
        let ats = array(&|i, _| key(i, "now()", "NULL::timestamptz"));
        let actors = array(&|_, _| "'shop'".to_owned());
        let all = array(&|_, _| "false".to_owned());
        let holds = array(&|_, _| "900".to_owned());
        pg.psql(&format!(
            "BEGIN;
             SELECT item, outcome, change, order_id, order_pet, order_status, order_by,
                    pet_name, pet_category, pet_status, lapsed
             FROM petstore_steps(ARRAY[{kinds}], ARRAY[{targets}]::int8[], ARRAY[{actors}],
                  ARRAY[{all}], ARRAY[{holds}], ARRAY[{scopes}]::text[], ARRAY[{keys}]::text[],
                  ARRAY[{fps}], ARRAY[{ats}]::timestamptz[], 86400) ORDER BY item;
             SELECT string_agg(id || ':' || status, ' ' ORDER BY id) FROM petstore_pets;
             SELECT string_agg(id || ':' || pet_id || ':' || status, ' ' ORDER BY id)
                 FROM petstore_orders;
             SELECT last_change FROM petstore_changes;
             ROLLBACK;"
        ))
    };
    let set_based = run(false);
    let looped = run(true);
    assert_eq!(set_based, looped);
    // And the answers are the contract's.
    let outcomes: Vec<&str> = set_based
        .lines()
        .filter_map(|line| line.split('|').nth(1))
        .take(steps.len())
        .collect();
    assert_eq!(
        outcomes,
        [
            "order",
            "pet",
            "pet",
            "pet",
            "order",
            "order",
            "pet",
            "held",
            "order_missing",
            "pet_conflict",
            "pet_missing",
            "order_missing"
        ],
        "{set_based}"
    );
}

#[test]
fn a_batch_of_steps_reaches_the_orders_by_key_however_few_there_were_when_planned() {
    let pg = Postgres::start();
    let pets: Vec<u64> = {
        let a = replica(&pg);
        (0..3).map(|_| pet(&a, "available")).collect()
    };
    // One session, as a pool's connection: its plans are cached over the
    // first calls, on an orders table of a few rows; then the table grows
    // (no ANALYZE comes between) and one more batch runs. Every plan is
    // sent back as a notice.
    let mut script = String::from(
        "LOAD 'auto_explain';\nSET auto_explain.log_min_duration = 0;\n\
         SET auto_explain.log_nested_statements = on;\nSET auto_explain.log_level = notice;\n",
    );
    let batch = Postgres::steps_sql(&["reserve"; 3], &pets)
        + "\n"
        + &Postgres::steps_sql(&["release"; 3], &pets)
        + "\n";
    for _ in 0..6 {
        script += &batch;
    }
    script += "INSERT INTO petstore_orders (id, pet_id, status, placed_by, placed_at, \
               expires_at, closed_at, last_change) SELECT 1000 + g, 1, 'cancelled', 'shop', \
               now(), now(), now(), 1 FROM generate_series(1, 20000) g;\n\
               UPDATE petstore_order_counter SET last_id = 21000;\n\\warn grown\n";
    script += &batch;
    let out = pg.psql_script(&script);
    let notices = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{notices}");
    let (_, last) = notices
        .split_once("grown")
        .unwrap_or_else(|| panic!("no mark in:\n{notices}"));
    // The order a release closes is found by its key, as is each step's
    // pet's placed order; nothing scans or hashes a table whole.
    assert!(last.contains("petstore_steps_state"), "{last}");
    assert!(
        last.contains("Index Scan using petstore_orders_pkey"),
        "{last}"
    );
    for whole in ["Seq Scan on petstore_orders", "Hash", "Merge"] {
        assert!(
            !last.contains(whole),
            "{whole} in the last batch's plans:\n{last}"
        );
    }
}
