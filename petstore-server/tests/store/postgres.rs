//! The inventory in PostgreSQL (`--postgres`): replicas on one database,
//! against a private PostgreSQL that each test starts, stops, kills and
//! restarts itself (`common/postgres.rs`).

use crate::common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use common::postgres::{Postgres, SCHEMA_VERSION};
use common::{assert_error, wait_until, Server, KEY};
use serde_json::{json, Value};

const JSON: Option<&str> = Some("application/json");

/// The longest a create may take before its answer while PostgreSQL is
/// down or restarting. The server bounds a create at 6 s; this bound only
/// cuts off a create that waits until PostgreSQL is back (PostgreSQL stays
/// down longer than this, or for good), never a slow machine's 503.
const CREATE_BOUND: Duration = Duration::from_secs(30);

/// POSTs a pet on a connection of its own and waits up to twice
/// [`CREATE_BOUND`] for the answer (the harness's ordinary requests give
/// up after 10 s, which is not hang-sized against the server's 6 s).
fn create_bounded(server: &Server, body: &[u8]) -> common::Response {
    let mut conn = common::Conn::open(server.addr);
    let request = format!(
        "POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    );
    let mut bytes = request.into_bytes();
    bytes.extend_from_slice(body);
    conn.send(&bytes).unwrap();
    conn.try_read_response(2 * CREATE_BOUND)
        .unwrap_or_else(|e| panic!("no answer to a create within {:?}: {e}", 2 * CREATE_BOUND))
}

fn replica(pg: &Postgres) -> Server {
    Server::builder().postgres(&pg.url()).start()
}

/// POSTs a pet; the status and the body.
fn create(server: &Server, name: &str) -> (u16, Vec<u8>) {
    let body = json!({"name": name, "categoryId": 7, "status": "pending"}).to_string();
    let resp = server.post("/v1/pets", Some(KEY), JSON, body.as_bytes());
    (resp.status, resp.body)
}

/// The rows of the pets table.
fn pet_rows(pg: &Postgres) -> u64 {
    pg.psql("SELECT count(*) FROM petstore_pets")
        .parse()
        .unwrap()
}

/// Every id a replica lists, following its `Link` headers.
fn all_ids(server: &Server) -> Vec<u64> {
    let mut path = "/v1/pets?limit=100".to_owned();
    let mut seen = Vec::new();
    for _ in 0..1000 {
        let (ids, link) = server.list_ids(&path);
        seen.extend(ids);
        let Some(link) = link else { return seen };
        path = common::next_path(&link);
    }
    panic!("more than 1000 pages");
}

#[test]
fn two_replicas_serve_one_inventory() {
    let pg = Postgres::start();
    let replicas = [replica(&pg), replica(&pg)];
    let acknowledged = Mutex::new(BTreeMap::new());
    // 16 creators, each alternating between the replicas (8 on each at any
    // time); every 201 reads back byte-identical from the other replica at
    // once.
    thread::scope(|s| {
        for r in 0..2 {
            for t in 0..8 {
                let (acknowledged, replicas) = (&acknowledged, &replicas);
                s.spawn(move || {
                    for i in 0..12 {
                        // Each client alternates between the replicas.
                        let (here, other) = (&replicas[(r + i) % 2], &replicas[(r + i + 1) % 2]);
                        let (status, body) = create(here, &format!("r{r} t{t} #{i}"));
                        assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
                        let pet: Value = serde_json::from_slice(&body).unwrap();
                        let id = pet["id"].as_u64().unwrap();
                        let there = other.get(&format!("/v1/pets/{id}"), Some(KEY));
                        assert_eq!(there.status, 200, "pet {id} on the other replica");
                        assert_eq!(there.body, body, "pet {id} differs on the other replica");
                        acknowledged.lock().unwrap().insert(id, body);
                    }
                });
            }
        }
    });
    let acknowledged = acknowledged.into_inner().unwrap();
    let n = acknowledged.len() as u64;
    assert_eq!(n, 2 * 8 * 12);
    assert_eq!(
        acknowledged.keys().copied().collect::<Vec<_>>(),
        (1..=n).collect::<Vec<_>>(),
        "ids are exactly 1..N"
    );
    // Paging on either replica visits every pet once.
    for server in &replicas {
        assert_eq!(all_ids(server), (1..=n).collect::<Vec<_>>());
    }
    // The table holds the bytes that were served.
    let stored = pg.psql(&format!("SELECT json FROM petstore_pets WHERE id = {n}"));
    assert_eq!(stored.as_bytes(), &acknowledged[&n][..]);

    // A pet created on one replica comes into the other's list on its
    // own (a notification wakes its tail at once; the poll backs it up),
    // in both directions. The bound only cuts off a tail that never
    // catches up. The 100 ms of docs/contract.md is a latency figure for
    // benchmarks to measure on a quiet machine, not something a test's
    // verdict may depend on; the lags are printed, not judged.
    let mut lags = Vec::new();
    for round in 0..5 {
        let (here, there) = (&replicas[round % 2], &replicas[1 - round % 2]);
        let (status, body) = create(here, "fresh");
        assert_eq!(status, 201);
        let created = Instant::now();
        let id = serde_json::from_slice::<Value>(&body).unwrap()["id"]
            .as_u64()
            .unwrap();
        let path = format!("/v1/pets?after={}", id - 1);
        let listed = wait_until(Duration::from_secs(10), || {
            there.list_ids(&path).0.contains(&id)
        });
        assert!(
            listed,
            "pet {id} was not listed on the other replica within 10 s"
        );
        lags.push(created.elapsed());
    }
    println!("lags from a create on one replica to the other's list: {lags:?}");

    let metrics = replicas[0].get("/metrics", None).text();
    for want in [
        "petstore_postgres_up 1",
        "petstore_postgres_batch_size_count",
        "petstore_postgres_commit_duration_seconds_bucket",
        "petstore_postgres_copy_behind",
        "petstore_postgres_errors_total{op=\"commit\"} 0",
    ] {
        assert!(metrics.contains(want), "{want} in:\n{metrics}");
    }
}

#[test]
fn the_table_holds_the_contracts_rules() {
    let pg = Postgres::start();
    let server = replica(&pg);
    // 100 characters of two bytes each: valid for the core and the table.
    let long = "é".repeat(100);
    let pet = server.create_pet(&json!({"name": long, "categoryId": 9223372036854775807u64}));
    assert_eq!(pet["id"], 1);
    assert_eq!(
        pg.psql("SELECT char_length(name), category_id, status FROM petstore_pets"),
        "100|9223372036854775807|available"
    );
    // What the API refuses, the table refuses too; the same row with
    // valid values goes in (so each refusal is the rule's).
    let row = |name: &str, category: &str, status: &str| {
        format!(
            "INSERT INTO petstore_pets VALUES (2, {name}, {category}, {status}, \
             '{{\"id\":2,\"name\":\"x\",\"categoryId\":1,\"status\":\"sold\"}}')"
        )
    };
    let too_long = format!("'{}'", "é".repeat(101));
    for (name, category, status) in [
        (too_long.as_str(), "1", "'sold'"),
        ("''", "1", "'sold'"),
        // The characters the contract refuses (schema version 2), each as
        // the core sees it: a control character, a bidi control, a
        // noncharacter, and names of only blank characters.
        (r"E'bad\x01'", "1", "'sold'"),
        (r"E'a\u202eb'", "1", "'sold'"),
        (r"E'a\uFFFF'", "1", "'sold'"),
        (r"E'a\U0010FFFE'", "1", "'sold'"),
        ("'   '", "1", "'sold'"),
        (r"E'\u200b\u2060\ufeff'", "1", "'sold'"),
        (r"E'\u3000\u00a0'", "1", "'sold'"),
        ("'x'", "0", "'sold'"),
        ("'x'", "1", "'lost'"),
    ] {
        let sql = row(name, category, status);
        assert!(pg.try_psql(&sql).is_err(), "the table took {sql}");
    }
    // Names the contract takes, the table takes (one row each).
    for (id, name) in [(3, r"E' x\u200b'"), (4, "'é€😀'"), (5, r"E'\u00e9\u3000x'")] {
        pg.psql(&format!(
            "INSERT INTO petstore_pets VALUES ({id}, {name}, 1, 'sold', '{{\"id\":{id},\"name\":\"x\"}}')"
        ));
    }
    pg.psql(&row("'x'", "1", "'sold'"));
}

#[test]
fn a_database_at_a_newer_schema_version_is_refused() {
    let pg = Postgres::start();
    pg.psql(
        "CREATE TABLE petstore_schema (only_row boolean PRIMARY KEY DEFAULT true, version integer NOT NULL);
         INSERT INTO petstore_schema (version) VALUES (99);",
    );
    let failure = Server::builder()
        .postgres(&pg.url())
        .expect_startup_failure();
    assert!(!failure.status.success());
    assert!(
        failure.stderr.contains("version 99")
            && failure.stderr.contains(&format!("up to {SCHEMA_VERSION}")),
        "{}",
        failure.stderr
    );
    // Nothing was created or changed.
    assert_eq!(
        pg.psql("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'petstore_%'"),
        "1"
    );
}

#[test]
fn an_unreachable_postgres_refuses_the_start_without_the_password() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://petstore:s3cret@127.0.0.1:{port}/shop?connect_timeout=1");
    let failure = Server::builder().postgres(&url).expect_startup_failure();
    assert!(
        failure.stderr.contains(&format!(
            "cannot connect to PostgreSQL at 127.0.0.1:{port}/shop"
        )),
        "{}",
        failure.stderr
    );
    assert!(!failure.stderr.contains("s3cret"), "{}", failure.stderr);
}

#[test]
fn postgres_and_data_cannot_be_combined() {
    for other in [&["--in-memory"][..], &["--data", "/nonexistent"][..]] {
        let mut builder = Server::builder().postgres("postgres://127.0.0.1:1/x");
        for arg in other {
            builder = builder.arg(*arg);
        }
        let failure = builder.expect_startup_failure();
        assert!(
            failure.stderr.contains("cannot be used with"),
            "{}",
            failure.stderr
        );
    }
}

#[test]
fn postgres_down_means_creates_503_reads_go_on_and_it_recovers() {
    let pg = Postgres::start();
    let server = replica(&pg);
    for i in 0..3 {
        assert_eq!(create(&server, &format!("before {i}")).0, 201);
    }
    assert_eq!(server.get("/healthz", None).status, 200);

    for stop in ["fast", "kill"] {
        if stop == "kill" {
            pg.kill9();
        } else {
            pg.stop(stop);
        }
        // PostgreSQL stays down until after this create is answered: one
        // that waited for it to come back would never be.
        let started = Instant::now();
        let resp = create_bounded(&server, br#"{"name":"lost","categoryId":1}"#);
        assert!(
            started.elapsed() < CREATE_BOUND,
            "{stop}: a create waited {:?}",
            started.elapsed()
        );
        let message = assert_error(&resp, 503, "unavailable");
        assert!(!message.contains("127.0.0.1"), "{message}");
        // Reads go on from the copy.
        let held = server.list_ids("/v1/pets").0.len();
        assert!(held >= 3, "{stop}: {held} pets listed");
        assert_eq!(server.get("/v1/pets/1", Some(KEY)).status, 200);
        // An id above the copy: the catch-up fails, so the replica cannot
        // say the pet does not exist (another replica may have made it):
        // 503, never a 404, which would deny an acknowledged pet.
        let above = server.get("/v1/pets/1000", Some(KEY));
        assert_error(&above, 503, "unavailable");
        assert!(
            above.text().contains("cannot be looked up"),
            "{stop}: {}",
            above.describe()
        );
        let health = server.get("/healthz", None);
        assert_eq!(health.status, 503, "{stop}");
        assert_eq!(health.json()["status"], "degraded");
        assert!(
            health.json()["reason"]
                .as_str()
                .unwrap()
                .contains("PostgreSQL"),
            "{}",
            health.text()
        );

        let metrics = server.get("/metrics", None).text();
        for want in ["petstore_postgres_up 0", "petstore_storage_writable 0"] {
            assert!(metrics.contains(want), "{stop}: {want} in:\n{metrics}");
        }
        assert!(
            !metrics.contains("petstore_postgres_errors_total{op=\"commit\"} 0"),
            "{stop}: the failed commit is counted:\n{metrics}"
        );

        pg.start_again();
        // The server notices without a restart.
        assert!(
            wait_until(Duration::from_secs(30), || server
                .get("/healthz", None)
                .status
                == 200),
            "{stop}: /healthz never came back"
        );
        let (status, body) = create(&server, &format!("after {stop}"));
        assert_eq!(status, 201, "{stop}: {}", String::from_utf8_lossy(&body));
    }
    // The harness reads stderr on a thread of its own: a line written
    // before the last answer may reach the test after it. Wait (a bound
    // that only cuts off a line that never comes), then count.
    wait_until(Duration::from_secs(30), || {
        let log = server.stderr_text();
        log.matches("PostgreSQL failed").count() >= 2
            && log.matches("PostgreSQL answers again").count() >= 2
    });
    let log = server.stderr_text();
    assert_eq!(
        log.matches("PostgreSQL failed").count(),
        2,
        "logged once per outage:\n{log}"
    );
    assert_eq!(log.matches("PostgreSQL answers again").count(), 2, "{log}");
    let count = pet_rows(&pg);
    let max: u64 = pg
        .psql("SELECT max(id) FROM petstore_pets")
        .parse()
        .unwrap();
    assert_eq!(count, max, "no gap in the ids");
}

/// Creates from `writers` threads on each server until `stop`; every 201's
/// body, and the longest any request took.
fn write_until(
    servers: &[&Server],
    writers: usize,
    stop: &AtomicBool,
    acknowledged: &Mutex<BTreeMap<u64, Vec<u8>>>,
) -> Duration {
    let slowest = Mutex::new(Duration::ZERO);
    thread::scope(|s| {
        for (r, server) in servers.iter().enumerate() {
            for t in 0..writers {
                let slowest = &slowest;
                s.spawn(move || {
                    for i in 0..100_000 {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        let started = Instant::now();
                        let Ok(mut conn) = common::Conn::try_open(server.addr) else {
                            // A killed replica: its writers stop.
                            return;
                        };
                        let body =
                            json!({"name": format!("w{r}.{t}.{i}"), "categoryId": 3}).to_string();
                        let request = format!(
                            "POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\
                             Content-Type: application/json\r\nContent-Length: {}\r\n\
                             Connection: close\r\n\r\n{body}",
                            body.len()
                        );
                        if conn.send(request.as_bytes()).is_err() {
                            return;
                        }
                        // Longer than CREATE_BOUND: a create that hangs is
                        // counted as the slowest, not taken for a killed
                        // replica's.
                        let read = conn.try_read_response(2 * CREATE_BOUND);
                        let took = started.elapsed();
                        let mut slow = slowest.lock().unwrap();
                        *slow = (*slow).max(took);
                        drop(slow);
                        let Ok(resp) = read else {
                            return;
                        };
                        match resp.status {
                            201 => {
                                let id = resp.json()["id"].as_u64().unwrap();
                                let previous = acknowledged.lock().unwrap().insert(id, resp.body);
                                assert!(previous.is_none(), "id {id} given twice");
                            }
                            503 => thread::sleep(Duration::from_millis(10)),
                            other => panic!("unexpected {other}: {}", resp.describe()),
                        }
                    }
                });
            }
        }
    });
    slowest.into_inner().unwrap()
}

/// Every acknowledged pet is in the table with the bytes served, and the
/// ids are 1..N.
fn assert_all_committed(pg: &Postgres, acknowledged: &BTreeMap<u64, Vec<u8>>) {
    let rows = pg.psql("SELECT id || ' ' || json FROM petstore_pets ORDER BY id");
    let table: BTreeMap<u64, &str> = rows
        .lines()
        .map(|l| {
            let (id, json) = l.split_once(' ').unwrap();
            (id.parse().unwrap(), json)
        })
        .collect();
    let n = table.len() as u64;
    assert_eq!(
        table.keys().copied().collect::<Vec<_>>(),
        (1..=n).collect::<Vec<_>>(),
        "ids 1..N"
    );
    for (id, body) in acknowledged {
        assert_eq!(
            table.get(id).map(|j| j.as_bytes()),
            Some(&body[..]),
            "acknowledged pet {id} is not in the table as served"
        );
    }
}

#[test]
fn no_201_without_a_commit_when_postgres_stops_during_creates() {
    let pg = Postgres::start();
    let a = replica(&pg);
    let b = replica(&pg);
    let acknowledged = Mutex::new(BTreeMap::new());
    for mode in ["immediate", "fast"] {
        let stop = AtomicBool::new(false);
        let slowest = thread::scope(|s| {
            let writers = s.spawn(|| write_until(&[&a, &b], 4, &stop, &acknowledged));
            let before = acknowledged.lock().unwrap().len();
            assert!(
                wait_until(Duration::from_secs(30), || acknowledged
                    .lock()
                    .unwrap()
                    .len()
                    > before + 50),
                "{mode}: no creates before the stop"
            );
            pg.stop(mode);
            thread::sleep(Duration::from_millis(300));
            pg.start_again();
            let after = acknowledged.lock().unwrap().len();
            let recovered = wait_until(Duration::from_secs(60), || {
                acknowledged.lock().unwrap().len() > after + 50
            });
            stop.store(true, Ordering::Relaxed);
            let slowest = writers.join().unwrap();
            assert!(recovered, "{mode}: creates never worked again");
            slowest
        });
        assert!(slowest < CREATE_BOUND, "{mode}: a request took {slowest:?}");
    }
    let acknowledged = acknowledged.into_inner().unwrap();
    assert_all_committed(&pg, &acknowledged);
    // Both copies caught up with everything, acknowledged or not.
    let n = pet_rows(&pg);
    for server in [&a, &b] {
        assert!(wait_until(Duration::from_secs(30), || server
            .list_ids(&format!("/v1/pets?after={}", n - 1))
            .0
            == [n]));
    }
}

#[test]
fn a_killed_replica_loses_no_acknowledged_pet() {
    let pg = Postgres::start();
    let a = replica(&pg);
    let b = replica(&pg);
    let acknowledged = Mutex::new(BTreeMap::new());
    let stop = AtomicBool::new(false);
    thread::scope(|s| {
        let writers = s.spawn(|| write_until(&[&a, &b], 4, &stop, &acknowledged));
        assert!(wait_until(Duration::from_secs(30), || acknowledged
            .lock()
            .unwrap()
            .len()
            > 100));
        a.signal("KILL");
        assert!(wait_until(Duration::from_secs(30), || {
            common::Conn::try_open(a.addr).is_err()
        }));
        let after = acknowledged.lock().unwrap().len();
        assert!(wait_until(Duration::from_secs(30), || acknowledged
            .lock()
            .unwrap()
            .len()
            > after + 50));
        stop.store(true, Ordering::Relaxed);
        writers.join().unwrap();
    });
    let acknowledged = acknowledged.into_inner().unwrap();
    assert_all_committed(&pg, &acknowledged);
    let n = pet_rows(&pg);
    // Every acknowledged pet is on the surviving replica, byte for byte.
    for (id, body) in &acknowledged {
        let got = b.get(&format!("/v1/pets/{id}"), Some(KEY));
        assert_eq!(&got.body, body, "pet {id} on the surviving replica");
    }
    // The restarted replica serves the same pets.
    let restarted = replica(&pg);
    assert_eq!(all_ids(&restarted), (1..=n).collect::<Vec<_>>());
    assert_eq!(
        restarted.get("/v1/pets?limit=100&after=50", Some(KEY)).body,
        b.get("/v1/pets?limit=100&after=50", Some(KEY)).body
    );
}

#[test]
fn creates_refused_while_the_counter_is_locked_are_never_stored_afterwards() {
    // With the counter row locked by another session for longer than a
    // create may wait, the creates answer 503; they must not be committed
    // once the lock ends, although their statements are already in
    // PostgreSQL, waiting. PostgreSQL's own lock and statement timeouts
    // roll them back first. The lock is held until the test ends it,
    // however long the creates take.
    let pg = Postgres::start();
    let server = replica(&pg);
    assert_eq!(create(&server, "before").0, 201);
    let locker = {
        let mut psql = pg.psql_command(
            "BEGIN; SELECT last_id FROM petstore_counter FOR UPDATE; SELECT pg_sleep(600); COMMIT;",
        );
        thread::spawn(move || psql.output())
    };
    assert!(
        wait_until(Duration::from_secs(30), || {
            pg
            .psql("SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(600)%' AND state = 'active' AND pid <> pg_backend_pid()")
            == "1"
        }),
        "the lock was never taken"
    );
    for i in 0..4 {
        let (status, body) = create(&server, &format!("during {i}"));
        assert_eq!(status, 503, "{}", String::from_utf8_lossy(&body));
    }
    // The lock ends when the test says so (its session is ended, which
    // rolls its transaction back), not after a time the creates had to
    // fit in.
    pg.psql(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE query LIKE '%pg_sleep(600)%' AND pid <> pg_backend_pid()",
    );
    let _ = locker.join().expect("the locking session");
    // The lock is over: none of the refused creates was stored.
    assert_eq!(pet_rows(&pg), 1);
    assert!(
        wait_until(Duration::from_secs(30), || create(&server, "after").0
            == 201),
        "creates never came back"
    );
    assert_eq!(pet_rows(&pg), 2);
}

#[test]
fn a_counter_behind_the_table_is_named_once_and_ends_when_fixed() {
    // A row inserted by hand at an id the counter has not given: each
    // failed transaction rolls the counter back, so every create meets
    // the same row and answers 503 for good. The cause must be named,
    // logged once and in /healthz, and fixing the counter ends it. (A
    // row further ahead leaves a gap the copy cannot cross: the degraded
    // state of the test below.)
    let pg = Postgres::start();
    let server = replica(&pg);
    assert_eq!(create(&server, "first").0, 201);
    pg.psql(
        r#"INSERT INTO petstore_pets (id, name, category_id, status, json)
           VALUES (2, 'Rogue', 1, 'available',
                   '{"id":2,"name":"Rogue","categoryId":1,"status":"available"}')"#,
    );
    for _ in 0..3 {
        assert_eq!(create(&server, "refused").0, 503);
    }
    let health = server.get("/healthz", None);
    assert_eq!(health.status, 503);
    let reason = health.json()["reason"].as_str().unwrap().to_owned();
    assert!(
        reason.contains("counter and the table disagree"),
        "{reason}"
    );
    let log = server.stderr_once_logged("the counter and the table disagree");
    assert_eq!(
        log.matches("the counter and the table disagree").count(),
        1,
        "{log}"
    );
    // A read that succeeds changes nothing: creates still cannot succeed.
    assert_eq!(server.get("/v1/pets", Some(KEY)).status, 200);
    assert_eq!(server.get("/healthz", None).status, 503);
    // The operator's fix, as the message says.
    pg.psql("UPDATE petstore_counter SET last_id = (SELECT max(id) FROM petstore_pets)");
    let (status, body) = create(&server, "after the fix");
    assert_eq!(status, 201);
    let pet: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(pet["id"], 3);
    assert_eq!(server.get("/healthz", None).status, 200);
    server.stderr_once_logged("PostgreSQL stores creates again");
}

#[test]
fn a_committed_row_the_copy_cannot_apply_is_one_persistent_degraded_state() {
    // A row written by hand with a name the contract refuses (a control
    // character; the table's CHECKs let it through) must not leave
    // creates answering 201 for pets the replica then denies with 404,
    // nor /healthz flapping with the log at every poll: one degraded
    // state, logged once, creates 503, reads go on, until the row is
    // fixed.
    let pg = Postgres::start();
    let server = replica(&pg);
    assert_eq!(create(&server, "before").0, 201);
    // The table's CHECK refuses such a name since schema version 2: the
    // row comes from a database without it (or written around it).
    pg.write_a_row_the_copy_refuses();
    // The tail notices (notification or its 40 ms poll).
    assert!(
        wait_until(Duration::from_secs(30), || server
            .get("/healthz", None)
            .status
            == 503),
        "{}",
        server.stderr_text()
    );
    let reason = server.get("/healthz", None).json()["reason"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        reason.contains("id 2") && reason.contains("invalid name"),
        "{reason}"
    );
    for _ in 0..3 {
        assert_eq!(create(&server, "refused").0, 503);
        // Persistent: the polls in between change nothing.
        assert_eq!(server.get("/healthz", None).status, 503);
    }
    assert_eq!(pet_rows(&pg), 2, "a refused create was stored");
    assert_eq!(server.get("/v1/pets/1", Some(KEY)).status, 200);
    let log = server.stderr_once_logged("cannot apply a committed row");
    assert_eq!(
        log.matches("cannot apply a committed row").count(),
        1,
        "{log}"
    );
    assert!(!log.contains("answers again"), "{log}");
    // Fixed in PostgreSQL: back to normal.
    pg.psql(
        r#"UPDATE petstore_pets SET name = 'fixed',
           json = '{"id":2,"name":"fixed","categoryId":1,"status":"available"}' WHERE id = 2"#,
    );
    assert!(wait_until(Duration::from_secs(30), || server
        .get("/healthz", None)
        .status
        == 200));
    let (status, body) = create(&server, "after the fix");
    assert_eq!(status, 201);
    let pet: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(pet["id"], 3);
    assert_eq!(server.get("/v1/pets/2", Some(KEY)).json()["name"], "fixed");
}

#[test]
fn a_row_written_above_the_counter_is_named_as_a_gap_until_deleted() {
    // A row 3 ids ahead of the counter:
    // ids 2 and 3 never exist, so no replica's copy can take id 4. The
    // degraded state names the gap and what to do; deleting the row ends
    // it, and ids go on from 2.
    let pg = Postgres::start();
    let server = replica(&pg);
    assert_eq!(create(&server, "first").0, 201);
    pg.psql(
        r#"INSERT INTO petstore_pets (id, name, category_id, status, json)
           VALUES (4, 'Rogue', 1, 'available',
                   '{"id":4,"name":"Rogue","categoryId":1,"status":"available"}')"#,
    );
    assert!(wait_until(Duration::from_secs(30), || server
        .get("/healthz", None)
        .status
        == 503));
    let reason = server.get("/healthz", None).json()["reason"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        reason.contains("skip from 1 to 4") && reason.contains("delete that row"),
        "{reason}"
    );
    assert_eq!(create(&server, "refused").0, 503);
    pg.psql("DELETE FROM petstore_pets WHERE id = 4");
    assert!(wait_until(Duration::from_secs(30), || server
        .get("/healthz", None)
        .status
        == 200));
    let (status, body) = create(&server, "after the delete");
    assert_eq!(status, 201);
    assert_eq!(serde_json::from_slice::<Value>(&body).unwrap()["id"], 2);
}
