//! Transitions (reserve, release, sell) on two replicas of one private
//! PostgreSQL: PostgreSQL decides, so concurrent transitions of a pet
//! from both replicas have exactly one winner; every copy shows every
//! change (the answering one at once); a killed replica loses no
//! acknowledged transition.

use crate::common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::Duration;

use common::postgres::Postgres;
use common::{wait_until, Server, KEY};
use serde_json::json;

/// Only cuts off a copy that never catches up, never a slow machine.
const CATCH_UP_BOUND: Duration = Duration::from_secs(30);

fn replica(pg: &Postgres) -> Server {
    Server::builder().postgres(&pg.url()).start()
}

/// `POST /v1/pets/{id}/{action}` with no body.
fn transition(server: &Server, id: u64, action: &str) -> common::Response {
    let auth = format!("Bearer {KEY}");
    server.request(
        "POST",
        &format!("/v1/pets/{id}/{action}"),
        &[("Authorization", auth.as_str())],
        None,
    )
}

/// Creates `n` available pets on `server`; their ids.
fn create_pets(server: &Server, n: usize) -> Vec<u64> {
    (0..n)
        .map(|i| {
            server.create_pet(&json!({"name": format!("pet {i}"), "categoryId": 2}))["id"]
                .as_u64()
                .unwrap()
        })
        .collect()
}

/// Every pet's status as a replica lists it, following its `Link`s.
fn listed_statuses(server: &Server) -> BTreeMap<u64, String> {
    let mut path = "/v1/pets?limit=100".to_owned();
    let mut seen = BTreeMap::new();
    for _ in 0..1000 {
        let resp = server.get(&path, Some(KEY));
        assert_eq!(resp.status, 200, "{}", resp.describe());
        for pet in resp.json().as_array().unwrap() {
            let id = pet["id"].as_u64().unwrap();
            seen.insert(id, pet["status"].as_str().unwrap().to_owned());
        }
        let Some(link) = resp.header("link").map(str::to_owned) else {
            return seen;
        };
        path = common::next_path(&link);
    }
    panic!("more than 1000 pages");
}

/// Every pet's status in PostgreSQL.
fn table_statuses(pg: &Postgres) -> BTreeMap<u64, String> {
    pg.psql("SELECT id || ' ' || status FROM petstore_pets ORDER BY id")
        .lines()
        .map(|l| {
            let (id, status) = l.split_once(' ').unwrap();
            (id.parse().unwrap(), status.to_owned())
        })
        .collect()
}

/// Waits until both replicas list exactly PostgreSQL's statuses.
fn assert_copies_match_the_table(pg: &Postgres, replicas: &[&Server]) {
    let table = table_statuses(pg);
    for (i, server) in replicas.iter().enumerate() {
        let caught_up = wait_until(CATCH_UP_BOUND, || listed_statuses(server) == table);
        assert!(
            caught_up,
            "replica {i} never showed the table's statuses: it lists {:?}, the table holds {table:?}",
            listed_statuses(server)
        );
    }
}

/// Every row's stored JSON is the core's encoding of its columns: the
/// status at its end moved with the column.
fn assert_json_follows_status(pg: &Postgres) {
    let bad = pg.psql(
        "SELECT id FROM petstore_pets \
         WHERE json <> '{\"id\":' || id || ',\"name\":' || to_json(name)::text || \
               ',\"categoryId\":' || category_id || ',\"status\":\"' || status || '\"}'",
    );
    assert_eq!(bad, "", "rows whose JSON does not follow their status");
}

#[test]
fn each_step_of_a_race_across_replicas_has_exactly_one_winner() {
    let pg = Postgres::start();
    let replicas = [replica(&pg), replica(&pg)];
    let pets = create_pets(&replicas[0], 3);
    // Every client fires the same transition of the same pet at once,
    // half of them at each replica; the expected number of 200s.
    let steps: [(&str, usize); 7] = [
        ("reserve", 1),
        ("release", 1),
        ("reserve", 1),
        ("reserve", 0),
        ("sell", 1),
        ("sell", 0),
        ("release", 0),
    ];
    const CLIENTS: usize = 12;
    for &id in &pets {
        for (step, &(action, winners)) in steps.iter().enumerate() {
            let barrier = Barrier::new(CLIENTS);
            let answers = Mutex::new(Vec::new());
            thread::scope(|s| {
                for c in 0..CLIENTS {
                    let (barrier, answers, server) = (&barrier, &answers, &replicas[c % 2]);
                    s.spawn(move || {
                        barrier.wait();
                        let resp = transition(server, id, action);
                        answers.lock().unwrap().push(resp);
                    });
                }
            });
            let answers = answers.into_inner().unwrap();
            let won: Vec<_> = answers.iter().filter(|r| r.status == 200).collect();
            assert_eq!(
                won.len(),
                winners,
                "pet {id}, step {step} ({action}): {:?}",
                answers.iter().map(|r| r.describe()).collect::<Vec<_>>()
            );
            for resp in &answers {
                if resp.status != 200 {
                    let message = common::assert_error(resp, 409, "status_conflict");
                    assert!(message.starts_with(&format!("pet {id} is ")), "{message}");
                }
            }
        }
        // Both replicas show the winners' history's end: sold.
        for server in &replicas {
            assert!(wait_until(CATCH_UP_BOUND, || server
                .get(&format!("/v1/pets/{id}"), Some(KEY))
                .json()["status"]
                == "sold"));
        }
    }
    assert_eq!(
        pg.psql("SELECT last_change FROM petstore_changes"),
        (pets.len() * 4).to_string(),
        "one change per winner"
    );
    assert_json_follows_status(&pg);
}

#[test]
fn many_clients_on_both_replicas_leave_the_winners_history() {
    // Clients on both replicas try reserve, release and sell on the same
    // few pets, as fast as they can. Whatever the interleaving, each
    // pet's 200s must be a path the contract allows (available, pending
    // after each reserve, available after each release, sold once), its
    // status everywhere the end of that path, and PostgreSQL's change
    // count the number of 200s: a transition answered 200 twice for one
    // step, or one a copy missed, fails one of them.
    let pg = Postgres::start();
    let replicas = [replica(&pg), replica(&pg)];
    let pets = create_pets(&replicas[1], 4);
    let wins: Mutex<BTreeMap<u64, [usize; 3]>> = Mutex::new(BTreeMap::new());
    let conflicts = AtomicUsize::new(0);
    const ACTIONS: [&str; 3] = ["reserve", "release", "sell"];
    thread::scope(|s| {
        for c in 0..16usize {
            let (wins, conflicts, pets) = (&wins, &conflicts, &pets);
            let server = &replicas[c % 2];
            s.spawn(move || {
                // A fixed pseudo-random walk per client (xorshift), so
                // that pets and actions do not fall into step.
                let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ (c as u64 + 1);
                for i in 0..60usize {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let id = pets[(state % pets.len() as u64) as usize];
                    // Reserves and releases, then sells now and then near
                    // the end: pets change hands for a while, and some
                    // are sold while others still race.
                    let action = if i >= 50 && (state >> 8).is_multiple_of(4) {
                        2
                    } else {
                        ((state >> 16) % 2) as usize
                    };
                    let resp = transition(server, id, ACTIONS[action]);
                    match resp.status {
                        200 => {
                            let pet = resp.json();
                            assert_eq!(pet["id"], id);
                            let want = ["pending", "available", "sold"][action];
                            assert_eq!(pet["status"], want, "{}", resp.describe());
                            wins.lock().unwrap().entry(id).or_default()[action] += 1;
                        }
                        409 => {
                            conflicts.fetch_add(1, Ordering::Relaxed);
                        }
                        other => panic!("unexpected {other}: {}", resp.describe()),
                    }
                }
            });
        }
    });
    let wins = wins.into_inner().unwrap();
    let table = table_statuses(&pg);
    let mut total = 0;
    for &id in &pets {
        let [reserves, releases, sells] = wins.get(&id).copied().unwrap_or_default();
        total += reserves + releases + sells;
        assert!(sells <= 1, "pet {id} sold {sells} times");
        assert!(
            reserves == releases || reserves == releases + 1,
            "pet {id}: {reserves} reserves won, {releases} releases"
        );
        let end = match (sells, reserves - releases) {
            (1, _) => "sold",
            (_, 1) => "pending",
            _ => "available",
        };
        assert_eq!(table[&id], end, "pet {id}: {reserves}/{releases}/{sells}");
    }
    println!(
        "{total} transitions won, {} refused",
        conflicts.load(Ordering::Relaxed)
    );
    // The race ran: pets changed hands several times each.
    assert!(total > 4 * pets.len(), "only {total} transitions won");
    assert_eq!(
        pg.psql("SELECT last_change FROM petstore_changes"),
        total.to_string(),
        "one change per 200"
    );
    assert_copies_match_the_table(&pg, &[&replicas[0], &replicas[1]]);
    assert_json_follows_status(&pg);
}

#[test]
fn every_replica_shows_a_change_the_answering_one_at_once() {
    let pg = Postgres::start();
    let replicas = [replica(&pg), replica(&pg)];
    let pets = create_pets(&replicas[0], 6);
    for (round, &id) in pets.iter().enumerate() {
        let (here, there) = (&replicas[round % 2], &replicas[1 - round % 2]);
        let action = if round % 3 == 2 { "sell" } else { "reserve" };
        let want = if action == "sell" { "sold" } else { "pending" };
        let resp = transition(here, id, action);
        assert_eq!(resp.status, 200, "{}", resp.describe());
        // Read-your-writes on the replica that answered: its very next
        // list, filtered by either status, already agrees.
        let page = |server: &Server, status: &str| {
            server
                .list_ids(&format!("/v1/pets?status={status}&limit=100"))
                .0
        };
        assert!(page(here, want).contains(&id), "pet {id} not {want} here");
        assert!(!page(here, "available").contains(&id));
        assert_eq!(
            here.get(&format!("/v1/pets/{id}"), Some(KEY)).body,
            resp.body,
            "the get answers the 200's pet"
        );
        // The other replica within the catch-up bound (the bound only
        // cuts off a copy that never catches up).
        assert!(
            wait_until(CATCH_UP_BOUND, || page(there, want).contains(&id)
                && !page(there, "available").contains(&id)),
            "pet {id} never {want} on the other replica"
        );
        assert_eq!(
            there.get(&format!("/v1/pets/{id}"), Some(KEY)).body,
            resp.body
        );
    }
    // Sold pets come in id order on every replica.
    for server in &replicas {
        let sold = server.list_ids("/v1/pets?status=sold&limit=100").0;
        assert_eq!(sold, vec![pets[2], pets[5]]);
    }
    // A pet the answering replica's copy does not hold yet (created on
    // the other a moment ago): PostgreSQL decides, and the answering
    // copy shows it before the 200.
    for round in 0..10 {
        let (maker, seller) = (&replicas[round % 2], &replicas[1 - round % 2]);
        let id = create_pets(maker, 1)[0];
        let resp = transition(seller, id, "sell");
        assert_eq!(resp.status, 200, "{}", resp.describe());
        let got = seller.get(&format!("/v1/pets/{id}"), Some(KEY));
        assert_eq!(got.json()["status"], "sold", "{}", got.describe());
    }
    // Unknown pets are 404 on both, decided by PostgreSQL too.
    for server in &replicas {
        common::assert_error(&transition(server, 9_999, "sell"), 404, "not_found");
    }
    let metrics = replicas[0].get("/metrics", None).text();
    for want in [
        "petstore_postgres_transition_batch_size_count",
        "petstore_postgres_transition_duration_seconds_bucket",
        "petstore_postgres_copy_changes_behind",
        "petstore_postgres_errors_total{op=\"transition\"} 0",
    ] {
        assert!(metrics.contains(want), "{want} in:\n{metrics}");
    }
    assert_copies_match_the_table(&pg, &[&replicas[0], &replicas[1]]);
    assert_json_follows_status(&pg);
}

#[test]
fn no_change_is_missed_while_creates_and_transitions_commit_on_both_replicas() {
    // Creates and transitions commit from both replicas at once, while
    // each copy tails both; a change applied out of order or skipped
    // (numbers taken in one order and committed in another, a change to
    // a pet the copy had not loaded yet) leaves a copy differing from the
    // table once everything has stopped.
    let pg = Postgres::start();
    let replicas = [replica(&pg), replica(&pg)];
    let seed = create_pets(&replicas[0], 20);
    let won = AtomicUsize::new(0);
    thread::scope(|s| {
        for (r, server) in replicas.iter().enumerate() {
            // A creator: new pets keep arriving on both replicas.
            s.spawn(move || {
                for i in 0..60 {
                    server.create_pet(&json!({"name": format!("new {r}.{i}"), "categoryId": 1}));
                }
            });
            // Transitions on the seed pets and on the newest pet in
            // PostgreSQL, which this replica's copy may not hold yet.
            for t in 0..3usize {
                let (seed, pg, won) = (&seed, &pg, &won);
                s.spawn(move || {
                    for i in 0..80usize {
                        let id = if i % 3 == 0 {
                            pg.psql("SELECT max(id) FROM petstore_pets")
                                .parse()
                                .unwrap()
                        } else {
                            seed[(t * 7 + i) % seed.len()]
                        };
                        // Pets change hands, and the last rounds sell.
                        let action = match i {
                            70.. => "sell",
                            _ => ["reserve", "release"][(t + i / 2) % 2],
                        };
                        let resp = transition(server, id, action);
                        match resp.status {
                            200 => {
                                won.fetch_add(1, Ordering::Relaxed);
                            }
                            409 => {}
                            _ => panic!("{}", resp.describe()),
                        }
                    }
                });
            }
        }
    });
    let won = won.into_inner();
    println!("{won} transitions won");
    assert!(won > 100, "only {won} transitions won");
    assert_copies_match_the_table(&pg, &[&replicas[0], &replicas[1]]);
    // A replica started now loads the same.
    let fresh = replica(&pg);
    assert_eq!(listed_statuses(&fresh), table_statuses(&pg));
}

#[test]
fn a_killed_replica_loses_no_acknowledged_transition() {
    // Each client owns its pets and takes each through reserve then sell,
    // on both replicas, while one replica is killed with SIGKILL. Every
    // acknowledged reserve must be in PostgreSQL (pending, or sold once
    // sold), every acknowledged sell sold; nothing is half there (the
    // stored JSON follows the status, each pet's order its status); a
    // restarted replica and the survivor show the table.
    let pg = Postgres::start();
    let a = replica(&pg);
    let b = replica(&pg);
    const CLIENTS: usize = 8;
    const PER_CLIENT: usize = 60;
    let pets = create_pets(&b, CLIENTS * PER_CLIENT);
    let acknowledged: Mutex<BTreeMap<u64, &str>> = Mutex::new(BTreeMap::new());
    let done = AtomicUsize::new(0);
    thread::scope(|s| {
        for c in 0..CLIENTS {
            let (acknowledged, done, pets) = (&acknowledged, &done, &pets);
            let servers = [&a, &b];
            s.spawn(move || {
                for i in 0..PER_CLIENT {
                    let id = pets[c * PER_CLIENT + i];
                    for (step, action) in ["reserve", "sell"].into_iter().enumerate() {
                        // Alternate replicas; after the kill, connections
                        // to the killed one fail and go to the survivor.
                        let server = servers[(c + i + step) % 2];
                        let Some(resp) = try_transition(server, id, action)
                            .or_else(|| try_transition(servers[1], id, action))
                        else {
                            continue;
                        };
                        match resp.status {
                            200 => {
                                acknowledged.lock().unwrap().insert(id, action);
                            }
                            // Refused: this client's earlier step was not
                            // acknowledged (a killed replica's), or its
                            // outcome was unknown (503).
                            409 | 503 => {}
                            other => panic!("unexpected {other}: {}", resp.describe()),
                        }
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        assert!(wait_until(CATCH_UP_BOUND, || done.load(Ordering::Relaxed)
            > CLIENTS * PER_CLIENT / 4));
        a.signal("KILL");
    });
    let acknowledged = acknowledged.into_inner().unwrap();
    assert!(acknowledged.len() > CLIENTS * PER_CLIENT / 2);
    let table = table_statuses(&pg);
    for (id, action) in &acknowledged {
        let allowed: &[&str] = match *action {
            "reserve" => &["pending", "sold"],
            _ => &["sold"],
        };
        assert!(
            allowed.contains(&table[id].as_str()),
            "pet {id}: {action} acknowledged, the table says {}",
            table[id]
        );
    }
    assert_json_follows_status(&pg);
    assert_orders_follow_pets(&pg);
    let restarted = replica(&pg);
    assert_copies_match_the_table(&pg, &[&b, &restarted]);
}

/// Every pet's order agrees with its status, as the doors left them: a
/// pending pet has exactly its one placed order, a sold one a completed
/// order, an available one no open order (the pets here are all created
/// available, so every pending or sold one came through a door).
fn assert_orders_follow_pets(pg: &Postgres) {
    let wrong = pg.psql(
        "SELECT p.id, p.status, string_agg(o.status, ',') FROM petstore_pets p \
         LEFT JOIN petstore_orders o ON o.pet_id = p.id GROUP BY p.id, p.status \
         HAVING (p.status = 'pending') <> (count(*) FILTER (WHERE o.status = 'placed') = 1) \
             OR (p.status = 'sold') <> (count(*) FILTER (WHERE o.status = 'completed') = 1) \
             OR count(*) FILTER (WHERE o.status = 'placed') > 1",
    );
    assert_eq!(wrong, "", "pets whose orders disagree (id|status|orders)");
}

/// A transition, or `None` when the replica cannot be reached or its
/// connection broke before an answer (a killed replica).
fn try_transition(server: &Server, id: u64, action: &str) -> Option<common::Response> {
    let mut conn = common::Conn::try_open(server.addr).ok()?;
    let request = format!(
        "POST /v1/pets/{id}/{action} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\
         Connection: close\r\n\r\n"
    );
    conn.send(request.as_bytes()).ok()?;
    conn.try_read_response(Duration::from_secs(60)).ok()
}

#[test]
fn a_database_of_the_previous_schema_is_migrated_and_its_pets_change_hands() {
    // Version 2 is without the orders (version 5), the kept idempotency
    // keys (version 4), the change counter, the rows' change numbers and
    // the function (version 3): a database made by that release, with
    // pets in it.
    let pg = Postgres::start();
    let old = replica(&pg);
    let pets = create_pets(&old, 5);
    drop(old);
    pg.downgrade_to(2);
    let replicas = [replica(&pg), replica(&pg)];
    pg.assert_migrated_once(&[&replicas[0], &replicas[1]], 2);
    assert_eq!(listed_statuses(&replicas[1]).len(), pets.len());
    let resp = transition(&replicas[1], pets[0], "sell");
    assert_eq!(resp.status, 200, "{}", resp.describe());
    common::assert_error(
        &transition(&replicas[0], pets[0], "sell"),
        409,
        "status_conflict",
    );
    assert_copies_match_the_table(&pg, &[&replicas[0], &replicas[1]]);
    assert_json_follows_status(&pg);
}

#[test]
fn while_postgres_is_down_transitions_answer_503_never_a_guess_from_the_copy() {
    // The copy still holds the pet and says it is available; only
    // PostgreSQL may decide, and it cannot be asked.
    let pg = Postgres::start();
    let server = replica(&pg);
    let id = create_pets(&server, 1)[0];
    pg.stop("fast");
    for action in ["reserve", "sell", "release"] {
        let resp = try_transition(&server, id, action).expect("an answer");
        common::assert_error(&resp, 503, "unavailable");
    }
    common::assert_error(
        &try_transition(&server, 9_999, "sell").expect("an answer"),
        503,
        "unavailable",
    );
    assert_eq!(
        server.get(&format!("/v1/pets/{id}"), Some(KEY)).json()["status"],
        "available"
    );
    pg.start_again();
    assert!(
        wait_until(CATCH_UP_BOUND, || server.get("/healthz", None).status
            == 200),
        "PostgreSQL's return was never noticed"
    );
    // Nothing refused was changed; the next transition is decided.
    assert_eq!(table_statuses(&pg)[&id], "available");
    let resp = transition(&server, id, "reserve");
    assert_eq!(resp.status, 200, "{}", resp.describe());
    assert_eq!(resp.json()["status"], "pending");
}

#[test]
fn changes_to_pets_beyond_a_page_of_new_pets_are_applied_once_the_pets_are_in() {
    // More new pets at once than the tail takes in one page (written
    // straight into PostgreSQL, as another replica's batches would be),
    // and changes to the last of them, all in one commit: the tail meets
    // each change before it holds the pet, and must neither pass it nor
    // stall.
    let pg = Postgres::start();
    let server = replica(&pg);
    const N: u64 = 25_000;
    pg.psql(&format!(
        "BEGIN;
         INSERT INTO petstore_pets (id, name, category_id, status, json)
             SELECT g, 'bulk ' || g, 1, 'available',
                    '{{\"id\":' || g || ',\"name\":\"bulk ' || g || '\",\"categoryId\":1,\"status\":\"available\"}}'
             FROM generate_series(1, {N}) AS g;
         UPDATE petstore_counter SET last_id = {N};
         SELECT count(*) FROM petstore_transition(
             ARRAY[{a}, {b}, 3]::int8[], ARRAY['sold', 'pending', 'sold'],
             ARRAY['available,pending', 'available', 'available,pending']);
         COMMIT;",
        a = N,
        b = N - 1,
    ));
    let sold = || server.list_ids("/v1/pets?status=sold&limit=100").0;
    assert!(
        wait_until(CATCH_UP_BOUND, || sold() == [3, N]),
        "the copy lists {:?} as sold",
        sold()
    );
    assert_eq!(
        server.list_ids("/v1/pets?status=pending&limit=100").0,
        [N - 1]
    );
    assert_eq!(server.get("/healthz", None).status, 200);
    assert_copies_match_the_table(&pg, &[&server]);
}
