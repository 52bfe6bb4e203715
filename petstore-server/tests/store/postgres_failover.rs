//! PostgreSQL failover under a replica: a private primary with a
//! synchronous standby, the replica given both hosts with
//! `target_session_attrs=read-write`, the primary killed with SIGKILL
//! during creates and the standby promoted. Nothing acknowledged is
//! lost, creates come back without a restart, the log names the server
//! actually connected to (never the password), and a replica restarted
//! with the same connection string starts. Without
//! `target_session_attrs=read-write`, a string naming the standby first
//! leaves a replica on it, unable to start.

use crate::common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use common::postgres::Postgres;
use common::{wait_until, Server, KEY};
use serde_json::{json, Value};

const JSON: Option<&str> = Some("application/json");

/// In the connection string, never to be logged. The private servers
/// trust every local connection, so it is never asked for.
const PASSWORD: &str = "failover-s3cret";

/// Bounds only a wait that would otherwise hang (creates that never
/// come back); never a verdict on speed.
const HANG: Duration = Duration::from_secs(90);

/// The creates answered 201, in `/metrics`.
const CREATED: &str = r#"petstore_requests_total{route="/v1/pets",method="POST",status="201"}"#;

/// Creates from `writers` threads until `stop`; every 201's id and body.
fn create_until(server: &Server, writers: usize, stop: &AtomicBool) -> BTreeMap<u64, Value> {
    let acknowledged = Mutex::new(BTreeMap::new());
    thread::scope(|s| {
        for w in 0..writers {
            let acknowledged = &acknowledged;
            s.spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let body = json!({"name": format!("w{w}-{n}"), "categoryId": 3}).to_string();
                    let resp = server.post("/v1/pets", Some(KEY), JSON, body.as_bytes());
                    match resp.status {
                        201 => {
                            let pet = resp.json();
                            let id = pet["id"].as_u64().unwrap();
                            acknowledged.lock().unwrap().insert(id, pet);
                        }
                        // PostgreSQL down, or a commit whose outcome is
                        // unknown: a 503 promises nothing either way.
                        503 => thread::sleep(Duration::from_millis(20)),
                        other => panic!("a create answered {other}: {}", resp.describe()),
                    }
                }
            });
        }
    });
    acknowledged.into_inner().unwrap()
}

#[test]
fn a_promoted_synchronous_standby_holds_every_acknowledged_pet_and_creates_come_back() {
    let primary = Postgres::start();
    let standby = Postgres::standby_of(&primary);
    primary.require_synchronous_standby();
    let (p1, p2) = (primary.port, standby.port);
    let url = format!(
        "postgresql://postgres:{PASSWORD}@127.0.0.1:{p1},127.0.0.1:{p2}/postgres\
         ?target_session_attrs=read-write&connect_timeout=2"
    );
    let server = Server::builder().postgres(&url).start();
    let log = server.stderr_once_logged("pet(s) loaded");
    assert!(
        log.contains(&format!(
            "PostgreSQL: connected to 127.0.0.1:{p1}/postgres (of 127.0.0.1:{p1},127.0.0.1:{p2}/postgres)"
        )),
        "the log names the primary and both hosts:\n{log}"
    );
    assert!(
        log.contains(&format!(
            "inventory: PostgreSQL 127.0.0.1:{p1}/postgres, 0 pet(s)"
        )),
        "{log}"
    );

    // Why `target_session_attrs=read-write`: without it a replica whose
    // string names the standby first settles there, and refuses to start
    // (the schema check at start writes); with it, the standby is passed
    // over for the primary.
    let standby_first =
        format!("host=127.0.0.1,127.0.0.1 port={p2},{p1} user=postgres dbname=postgres");
    let failure = Server::builder()
        .postgres(&standby_first)
        .expect_startup_failure();
    assert!(
        failure.stderr.contains("read-only transaction"),
        "{}",
        failure.stderr
    );
    let passed_over = Server::builder()
        .postgres(&format!("{standby_first} target_session_attrs=read-write"))
        .start();
    let log = passed_over.stderr_once_logged("pet(s) loaded");
    assert!(
        log.contains(&format!("PostgreSQL: connected to 127.0.0.1:{p1}/postgres")),
        "{log}"
    );
    drop(passed_over);

    // Creates from four clients while the primary is killed and the
    // standby promoted; the clients stop once a create after the
    // promotion was acknowledged.
    let stop = AtomicBool::new(false);
    let promoted = AtomicBool::new(false);
    let acknowledged = thread::scope(|s| {
        let writers = s.spawn(|| create_until(&server, 4, &stop));
        // Some pets first, acknowledged on the primary.
        let before = wait_until(HANG, || server.metric(CREATED) >= 40);
        let killed = Instant::now();
        primary.kill9();
        standby.promote();
        let promotion = Instant::now();
        promoted.store(true, Ordering::Relaxed);
        // Creates come back without a restart: one by this thread,
        // after the promotion, answered 201.
        let back = wait_until(HANG, || {
            let body = json!({"name": "after promotion", "categoryId": 4}).to_string();
            server
                .post("/v1/pets", Some(KEY), JSON, body.as_bytes())
                .status
                == 201
        });
        // Printed, not judged: the window depends on the machine.
        eprintln!(
            "failover: creates answered 201 again {} ms after the kill, {} ms after the promotion",
            killed.elapsed().as_millis(),
            promotion.elapsed().as_millis()
        );
        stop.store(true, Ordering::Relaxed);
        let acknowledged = writers.join().unwrap();
        assert!(before, "fewer than 40 creates before the kill");
        assert!(back, "no create succeeded within {HANG:?} of the promotion");
        acknowledged
    });
    assert!(promoted.load(Ordering::Relaxed));
    assert!(!acknowledged.is_empty());

    // Every 201 is in the promoted database, exactly as answered.
    let rows = standby.psql("SELECT id, json FROM petstore_pets ORDER BY id");
    let stored: BTreeMap<u64, Value> = rows
        .lines()
        .map(|line| {
            let (id, json) = line.split_once('|').unwrap();
            (id.parse().unwrap(), serde_json::from_str(json).unwrap())
        })
        .collect();
    for (id, pet) in &acknowledged {
        assert_eq!(
            stored.get(id),
            Some(pet),
            "pet {id} was answered 201 and is not in the promoted database as answered"
        );
    }

    // The log names the server that failed and the one connected to now,
    // and never the password.
    let log = server.stderr_once_logged(&format!("PostgreSQL answers again at 127.0.0.1:{p2}"));
    for want in [
        format!("PostgreSQL failed at 127.0.0.1:{p1}/postgres"),
        format!(
            "PostgreSQL: connected to 127.0.0.1:{p2}/postgres (of 127.0.0.1:{p1},127.0.0.1:{p2}/postgres); \
             the connections before were to 127.0.0.1:{p1}/postgres"
        ),
    ] {
        assert!(log.contains(&want), "{want:?} not in the log:\n{log}");
    }
    assert!(
        !log.contains(PASSWORD),
        "the password is in the log:\n{log}"
    );

    // A replica restarted with the same connection string starts (the
    // first host refuses, the second is the primary now) and holds every
    // pet.
    let restarted = Server::builder().postgres(&url).start();
    let log = restarted.stderr_once_logged("pet(s) loaded");
    assert!(
        log.contains(&format!("PostgreSQL: connected to 127.0.0.1:{p2}/postgres")),
        "{log}"
    );
    assert!(!log.contains(PASSWORD), "{log}");
    for id in acknowledged.keys() {
        let resp = restarted.get(&format!("/v1/pets/{id}"), Some(KEY));
        assert_eq!(resp.status, 200, "pet {id}: {}", resp.describe());
    }
    let body = json!({"name": "on the restarted replica", "categoryId": 5}).to_string();
    let resp = restarted.post("/v1/pets", Some(KEY), JSON, body.as_bytes());
    assert_eq!(resp.status, 201, "{}", resp.describe());
}

#[test]
fn a_start_that_reaches_no_host_names_every_host_and_never_the_password() {
    let ports: Vec<u16> = (0..2)
        .map(|_| {
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
        })
        .collect();
    let (a, b) = (ports[0], ports[1]);
    let url = format!(
        "host=127.0.0.1,127.0.0.1 port={a},{b} user=petstore password={PASSWORD} dbname=shop \
         target_session_attrs=read-write connect_timeout=1"
    );
    let failure = Server::builder().postgres(&url).expect_startup_failure();
    assert!(
        failure.stderr.contains(&format!(
            "cannot connect to PostgreSQL at 127.0.0.1:{a},127.0.0.1:{b}/shop (each host in turn"
        )),
        "{}",
        failure.stderr
    );
    assert!(!failure.stderr.contains(PASSWORD), "{}", failure.stderr);
}
