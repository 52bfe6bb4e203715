//! Stopping without losing a request (`--shutdown-delay`): on SIGTERM the
//! server first drains (`/healthz` 503 `draining`, every response closes
//! its connection, new connections still served), then closes its
//! listener, finishes what is in flight and exits 0.

use crate::common;

use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{wait_until, Conn, Server, KEY};

fn get(path: &str, key: Option<&str>) -> Vec<u8> {
    let auth = key.map_or(String::new(), |k| format!("Authorization: Bearer {k}\r\n"));
    format!("GET {path} HTTP/1.1\r\nHost: x\r\n{auth}\r\n").into_bytes()
}

fn closes(resp: &common::Response) -> bool {
    resp.header("connection")
        .is_some_and(|v| v.eq_ignore_ascii_case("close"))
}

#[test]
fn sigterm_drains_for_the_shutdown_delay_then_a_second_signal_stops_it() {
    // A long delay, which the second signal cuts short: the steps below
    // need not race it.
    let mut server = Server::start(&["--shutdown-delay", "60"]);
    let mut kept = server.connect();
    kept.send(&get("/healthz", None)).unwrap();
    let before = kept.read_response();
    assert_eq!(before.status, 200);
    assert!(!closes(&before), "{}", before.describe());

    server.signal("TERM");
    assert!(
        wait_until(Duration::from_secs(15), || server
            .stderr_text()
            .contains("draining for 60 s")),
        "{}",
        server.stderr_text()
    );
    // A keep-alive connection opened before the signal is still served,
    // and its response closes it.
    kept.send(&get("/v1/pets", Some(KEY))).unwrap();
    let resp = kept.read_response();
    assert_eq!(resp.status, 200, "{}", resp.describe());
    assert!(closes(&resp), "{}", resp.describe());
    assert!(kept.closed_within(Duration::from_secs(10)));
    // New connections are still accepted and served: the health check
    // says draining, a create is stored; each closes its connection.
    let health = server.get("/healthz", None);
    assert_eq!(health.status, 503, "{}", health.describe());
    assert_eq!(health.json()["status"], "draining");
    assert!(closes(&health), "{}", health.describe());
    let created = server.post(
        "/v1/pets",
        Some(KEY),
        Some("application/json"),
        br#"{"name":"Late","categoryId":1}"#,
    );
    assert_eq!(created.status, 201, "{}", created.describe());
    assert!(closes(&created), "{}", created.describe());
    assert!(server.try_exit().is_none(), "stopped before its delay");

    // A second signal ends the drain at once.
    let second = Instant::now();
    server.signal("TERM");
    let status = server.wait_exit(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{}", server.stderr_text());
    assert!(
        second.elapsed() < Duration::from_secs(30),
        "the second signal did not end the 60 s drain"
    );
    assert!(server.stderr_text().contains("SIGTERM received again"));
    match Conn::try_open(server.addr) {
        Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e}"),
        Ok(_) => panic!("a connection was accepted after exit"),
    }
}

/// What the load's clients saw.
#[derive(Default)]
struct Seen {
    answered: AtomicU64,
    /// Responses that closed their connection.
    closing: AtomicU64,
    /// A request whose connection closed (or reset) before its response,
    /// or with a response cut short.
    lost: AtomicU64,
}

#[test]
fn a_load_that_heeds_the_health_check_loses_no_request_across_a_drain() {
    // Clients that behave as a load balancer does (HAProxy with `inter
    // 100ms fall 2`): keep-alive connections, a new one when a response
    // closes its own, and no new request once the health check failed
    // twice. The drain lasts longer than that takes, so every request
    // they send is answered, and no connection is closed under one.
    // The delay is far longer than the test (it must outlast the balancer
    // however slow the machine); a second signal ends it once the
    // balancer has taken the replica out and its clients have stopped.
    let mut server = Server::builder()
        .arg("--shutdown-delay")
        .arg("600")
        .keys(
            serde_json::json!({"keys": [{"name": "load", "key": KEY, "plan": "enterprise",
            "perMinute": 100_000_000, "perDay": 100_000_000}]}),
        )
        .start();
    let addr = server.addr;
    let out = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Seen::default());
    let checker = {
        let (out, seen) = (out.clone(), seen.clone());
        thread::spawn(move || {
            let mut failed = 0;
            // Bounded: the test's own hang guard.
            let deadline = Instant::now() + Duration::from_secs(120);
            // Out after two failed checks, and not before the clients have
            // had six requests answered in the drain (responses that
            // closed their connections, as only the drain's do): the race
            // between the drain and the load is made, not hoped for, on
            // a machine that gives the clients no CPU for a while.
            while (failed < 2 || seen.closing.load(Ordering::SeqCst) < 6)
                && Instant::now() < deadline
            {
                let ok = Conn::try_open(addr).ok().and_then(|mut c| {
                    c.send(&get("/healthz", None)).ok()?;
                    c.try_read_response(Duration::from_secs(10)).ok()
                });
                match ok {
                    Some(r) if r.status == 200 => failed = 0,
                    _ => failed += 1,
                }
                thread::sleep(Duration::from_millis(100));
            }
            out.store(true, Ordering::SeqCst);
        })
    };
    let clients: Vec<_> = (0..6)
        .map(|_| {
            let (out, seen) = (out.clone(), seen.clone());
            thread::spawn(move || {
                let mut conn: Option<Conn> = None;
                for _ in 0..1_000_000 {
                    if out.load(Ordering::SeqCst) {
                        break;
                    }
                    let c = match conn.as_mut() {
                        Some(c) => c,
                        None => conn.insert(Conn::open(addr)),
                    };
                    let answer = c
                        .send(&get("/v1/pets?limit=5", Some(KEY)))
                        .and_then(|()| c.try_read_response(Duration::from_secs(30)));
                    match answer {
                        Ok(resp) => {
                            assert_eq!(resp.status, 200, "{}", resp.describe());
                            seen.answered.fetch_add(1, Ordering::Relaxed);
                            if closes(&resp) {
                                seen.closing.fetch_add(1, Ordering::Relaxed);
                                conn = None;
                            }
                        }
                        Err(_) => {
                            seen.lost.fetch_add(1, Ordering::Relaxed);
                            conn = None;
                        }
                    }
                }
            })
        })
        .collect();
    // Some load first, then the signal in the middle of it.
    assert!(wait_until(Duration::from_secs(60), || seen
        .answered
        .load(Ordering::Relaxed)
        > 500));
    let before = seen.answered.load(Ordering::Relaxed);
    server.signal("TERM");
    checker.join().unwrap();
    for client in clients {
        client.join().unwrap();
    }
    // The balancer took the replica out and its clients stopped while it
    // still drained; a second signal ends the drain now.
    assert!(server.try_exit().is_none(), "stopped before its delay");
    server.signal("TERM");
    let status = server.wait_exit(Duration::from_secs(60));
    assert_eq!(status.code(), Some(0), "{}", server.stderr_text());
    let (answered, closing, lost) = (
        seen.answered.load(Ordering::Relaxed),
        seen.closing.load(Ordering::Relaxed),
        seen.lost.load(Ordering::Relaxed),
    );
    assert_eq!(lost, 0, "{lost} requests lost ({answered} answered)");
    // The drain served requests, each closing its connection.
    assert!(answered > before, "{answered} answered, {before} before");
    assert!(closing > 0, "no response closed its connection");
}
