//! The feed of events (beta) on two replicas of one private PostgreSQL:
//! every replica gives every change the same id, in commit order, with
//! writes on both, and takes a cursor beyond its copy for another's; a long poll on one replica wakes at a commit on the
//! other; a client that lists on one replica and follows from its
//! `Events-Cursor` while another writes misses nothing; a batch of steps
//! gives each step's order event, then its pet's; a database of schema
//! version 5 is migrated and its feed starts empty, one of version 6 keeps
//! its feed; a replica that starts later serves every kept event, whatever
//! the order of their times.

use crate::common;

use std::collections::BTreeMap;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use common::events::{apply_pet_events, follow, list_with_cursor};
use common::orders::*;
use common::postgres::Postgres;
use common::{wait_until, Server};

/// Only cuts off what never happens, never a slow machine.
const BOUND: Duration = Duration::from_secs(30);

fn replica(pg: &Postgres) -> Server {
    Server::builder().keys(keys()).postgres(&pg.url()).start()
}

/// Every event `server`'s feed holds after `after`.
fn feed(server: &Server, after: u64) -> Vec<Value> {
    follow(server, FOLLOWER, after)
}

/// The table's newest event id.
fn newest(pg: &Postgres) -> u64 {
    pg.psql("SELECT last_id FROM petstore_event_counter")
        .parse()
        .unwrap()
}

#[test]
fn two_replicas_give_every_change_the_same_id_in_commit_order() {
    let pg = Postgres::start();
    let (a, b) = (replica(&pg), replica(&pg));
    let mut orders = Vec::new();
    for i in 0..6 {
        let (here, there) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let id = pet(here, "available");
        let order = placed(
            &place(there, SHOP, &format!(r#"{{"petId":{id}}}"#)),
            id,
            "shop",
        );
        orders.push((order["id"].as_u64().unwrap(), i));
    }
    for (id, i) in orders {
        let step = if i % 3 == 0 { "cancel" } else { "complete" };
        let server = if i % 2 == 0 { &a } else { &b };
        let resp = call(
            server,
            "POST",
            &format!("/v1/store/orders/{id}/{step}"),
            SHOP,
            None,
        );
        assert_eq!(resp.status, 200, "{}", resp.describe());
    }
    // 6 creates, 6 places and 6 closes, each place and close two events.
    let total = newest(&pg);
    assert_eq!(total, 30);
    assert!(wait_until(BOUND, || feed(&a, 0).len() as u64 == total
        && feed(&b, 0).len() as u64 == total));
    let (on_a, on_b) = (feed(&a, 0), feed(&b, 0));
    assert_eq!(on_a, on_b, "the same events, ids and data on both");
    let ids: Vec<u64> = on_a
        .iter()
        .map(|e| e["id"].as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(ids, (1..=total).collect::<Vec<_>>());
    // In commit order: a pet's creation before its order, each step's
    // order event next to its pet's.
    let kinds: Vec<&str> = on_a.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        &kinds[..4],
        [
            "pet.created",
            "order.placed",
            "pet.status_changed",
            "pet.created"
        ]
    );
    assert_eq!(kinds.iter().filter(|k| **k == "order.cancelled").count(), 2);
    assert_eq!(kinds.iter().filter(|k| **k == "order.completed").count(), 4);
    for pair in on_a.windows(2) {
        if pair[0]["type"].as_str().unwrap().starts_with("order.") {
            assert_eq!(pair[1]["type"], "pet.status_changed", "{pair:?}");
            assert_eq!(pair[1]["data"]["id"], pair[0]["data"]["petId"], "{pair:?}");
        }
    }
    // The lists say where the feed stands.
    let list = call(&b, "GET", "/v1/pets", FOLLOWER, None);
    assert_eq!(list.header_u64("events-cursor"), total);
    // A cursor beyond a replica's copy is taken for another replica's, a
    // moment ahead: an empty page after it, not 410 (one node's answer).
    let ahead = call(&b, "GET", "/v1/events?after=1000", FOLLOWER, None);
    assert_eq!(ahead.status, 200, "{}", ahead.describe());
    assert_eq!(ahead.text(), "[]");
    assert_eq!(
        ahead.single("link"),
        r#"</v1/events?limit=100&after=1000>; rel="next""#
    );
}

#[test]
fn a_long_poll_on_one_replica_wakes_at_a_commit_on_the_other() {
    let pg = Postgres::start();
    let (a, b) = (replica(&pg), replica(&pg));
    pet(&a, "available");
    assert!(wait_until(BOUND, || feed(&b, 0).len() == 1));
    let (resp, took) = thread::scope(|scope| {
        let waiting = scope.spawn(|| {
            let started = Instant::now();
            let resp = call(&b, "GET", "/v1/events?after=1&wait=20", FOLLOWER, None);
            (resp, started.elapsed())
        });
        assert!(wait_until(BOUND, || b.metric("petstore_event_waiters") == 1));
        pet(&a, "sold");
        waiting.join().unwrap()
    });
    assert_eq!(resp.status, 200, "{}", resp.describe());
    let events = resp.json();
    assert_eq!(events[0]["id"], "2", "{events}");
    assert_eq!(events[0]["data"]["status"], "sold");
    // Woken by the commit, not by its 20 s (a bound on a hang only).
    assert!(took < Duration::from_secs(20), "{took:?}");
}

#[test]
fn a_client_that_lists_on_one_replica_and_follows_misses_nothing() {
    let pg = Postgres::start();
    let (a, b) = (replica(&pg), replica(&pg));
    for _ in 0..15 {
        pet(&a, "available");
    }
    let (mut state, cursor) = thread::scope(|scope| {
        // Another client writes on the other replica all the while.
        let writer = scope.spawn(|| {
            for i in 1..=15u64 {
                pet(&a, "available");
                let resp = call(&a, "POST", &format!("/v1/pets/{i}/sell"), SHOP, None);
                assert_eq!(resp.status, 200, "{}", resp.describe());
            }
        });
        let listed = list_with_cursor(&b, FOLLOWER, "/v1/pets?limit=4");
        writer.join().unwrap();
        listed
    });
    let total = newest(&pg);
    let last = |events: Vec<Value>| {
        events
            .last()
            .and_then(|e| e["id"].as_str()?.parse::<u64>().ok())
    };
    assert!(wait_until(BOUND, || last(feed(&b, cursor)) == Some(total)));
    apply_pet_events(&mut state, &feed(&b, cursor));
    let truth: BTreeMap<u64, String> = pg
        .psql("SELECT id, status FROM petstore_pets ORDER BY id")
        .lines()
        .map(|line| {
            let (id, status) = line.split_once('|').unwrap();
            (id.parse().unwrap(), status.to_owned())
        })
        .collect();
    assert_eq!(truth.len(), 30);
    assert_eq!(state, truth);
}

/// One batch of steps, as a replica's committer sends it.
fn steps(pg: &Postgres, kinds: &[&str], targets: &[u64]) {
    pg.psql(&Postgres::steps_sql(kinds, targets));
}

/// The events table after event `after`: `id type subject status change`.
fn events_table(pg: &Postgres, after: u64) -> Vec<String> {
    pg.psql(&format!(
        "SELECT id || ' ' || type || ' ' || subject || ' ' || status || ' ' || change \
         FROM petstore_events WHERE id > {after} ORDER BY id"
    ))
    .lines()
    .map(str::to_owned)
    .collect()
}

#[test]
fn a_batch_of_steps_gives_each_steps_order_event_then_its_pets() {
    let pg = Postgres::start();
    let a = replica(&pg);
    let pets: Vec<u64> = (0..3).map(|_| pet(&a, "available")).collect();
    let before = newest(&pg);
    // One batch: three holds placed (the usual batch, decided set-based).
    steps(&pg, &["reserve", "reserve", "reserve"], &pets);
    assert_eq!(
        events_table(&pg, before),
        [
            "4 order.placed 1 placed 1",
            "5 pet.status_changed 1 pending 1",
            "6 order.placed 2 placed 2",
            "7 pet.status_changed 2 pending 2",
            "8 order.placed 3 placed 3",
            "9 pet.status_changed 3 pending 3",
        ]
    );
    // Another: a release, a sale of a held pet, a complete by the order.
    steps(
        &pg,
        &["release", "sell", "complete"],
        &[pets[0], pets[1], 3],
    );
    assert_eq!(
        events_table(&pg, 9),
        [
            "10 order.cancelled 1 cancelled 4",
            "11 pet.status_changed 1 available 4",
            "12 order.completed 2 completed 5",
            "13 pet.status_changed 2 sold 5",
            "14 order.completed 3 completed 6",
            "15 pet.status_changed 3 sold 6",
        ]
    );
    // A walk-in sale (no hold): its order is placed and completed at once.
    steps(&pg, &["sell"], &[pets[0]]);
    assert_eq!(
        events_table(&pg, 15),
        [
            "16 order.completed 4 completed 7",
            "17 pet.status_changed 1 sold 7"
        ]
    );
    // The replica's feed serves them as the table holds them.
    assert!(wait_until(BOUND, || feed(&a, 0).len() == 17));
    let served: Vec<String> = feed(&a, before)
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["id"].as_str().unwrap(),
                e["type"].as_str().unwrap()
            )
        })
        .collect();
    let table: Vec<String> = events_table(&pg, before)
        .iter()
        .map(|line| line.split(' ').take(2).collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(served, table);
}

#[test]
fn a_database_of_schema_version_6_is_migrated_and_keeps_its_feed() {
    let pg = Postgres::start();
    {
        let a = replica(&pg);
        pet(&a, "available");
    }
    pg.downgrade_to(6);
    let a = replica(&pg);
    pg.assert_migrated_once(&[&a], 6);
    assert!(wait_until(BOUND, || feed(&a, 0).len() == 1));
    let reserved = call(&a, "POST", "/v1/pets/1/reserve", SHOP, None);
    assert_eq!(reserved.status, 200, "{}", reserved.describe());
    assert_eq!(
        events_table(&pg, 0),
        [
            "1 pet.created 1 available 0",
            "2 order.placed 1 placed 1",
            "3 pet.status_changed 1 pending 1"
        ]
    );
}

/// The indexes of the pets and the events: every one a query of the
/// server reads (`docs/replicas.md`, "PostgreSQL's schema"), and no
/// other, since each costs every status change an index entry.
fn pets_and_events_indexes(pg: &Postgres) -> String {
    pg.psql(
        "SELECT string_agg(indexname, ' ' ORDER BY indexname) FROM pg_indexes \
         WHERE tablename IN ('petstore_pets', 'petstore_events')",
    )
}

#[test]
fn a_database_of_schema_version_7_loses_the_indexes_nothing_reads_and_keeps_its_data() {
    const READ: &str = "petstore_events_pkey petstore_pets_changed petstore_pets_pkey";
    let pg = Postgres::start();
    {
        let a = replica(&pg);
        pet(&a, "available");
        pet(&a, "available");
        let reserved = call(&a, "POST", "/v1/pets/1/reserve", SHOP, None);
        assert_eq!(reserved.status, 200, "{}", reserved.describe());
    }
    // A new database is made without them.
    assert_eq!(pets_and_events_indexes(&pg), READ);
    pg.downgrade_to(7);
    assert!(pets_and_events_indexes(&pg).contains("petstore_pets_pending"));
    let a = replica(&pg);
    pg.assert_migrated_once(&[&a], 7);
    assert_eq!(pets_and_events_indexes(&pg), READ);
    // The pets, the order and the feed as they were, and the next step
    // after them.
    let released = call(&a, "POST", "/v1/pets/1/release", SHOP, None);
    assert_eq!(released.status, 200, "{}", released.describe());
    let reserved = call(&a, "POST", "/v1/pets/2/reserve", SHOP, None);
    assert_eq!(reserved.status, 200, "{}", reserved.describe());
    assert_eq!(
        events_table(&pg, 0),
        [
            "1 pet.created 1 available 0",
            "2 pet.created 2 available 0",
            "3 order.placed 1 placed 1",
            "4 pet.status_changed 1 pending 1",
            "5 order.cancelled 1 cancelled 2",
            "6 pet.status_changed 1 available 2",
            "7 order.placed 2 placed 3",
            "8 pet.status_changed 2 pending 3"
        ]
    );
}

#[test]
fn a_database_of_schema_version_5_is_migrated_and_its_feed_starts_empty() {
    let pg = Postgres::start();
    {
        let a = replica(&pg);
        pet(&a, "available");
    }
    pg.downgrade_to(5);
    let a = replica(&pg);
    assert!(feed(&a, 0).is_empty());
    assert_eq!(
        call(&a, "GET", "/v1/pets", FOLLOWER, None).header_u64("events-cursor"),
        0
    );
    pet(&a, "sold");
    assert!(wait_until(BOUND, || feed(&a, 0).len() == 1));
    let events = feed(&a, 0);
    assert_eq!(
        (events[0]["id"].as_str(), events[0]["data"]["id"].as_u64()),
        (Some("1"), Some(2))
    );
}

#[test]
fn a_replica_that_starts_later_serves_every_kept_event_whatever_their_times() {
    let pg = Postgres::start();
    let a = replica(&pg);
    let id = pet(&a, "available");
    let sold = call(&a, "POST", &format!("/v1/pets/{id}/sell"), SHOP, None);
    assert_eq!(sold.status, 200, "{}", sold.describe());
    pet(&a, "available");
    // An order's event is dated by its whole-second time, so it can be
    // dated before the pets' events around it; here plainly so.
    pg.psql("UPDATE petstore_events SET at = at - interval '1 minute' WHERE type LIKE 'order.%'");
    let b = replica(&pg);
    let ids = |events: Vec<Value>| -> Vec<String> {
        events
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(wait_until(BOUND, || ids(feed(&b, 0)) == ["1", "2", "3", "4"]));
    assert_eq!(ids(feed(&a, 0)), ids(feed(&b, 0)));
}
