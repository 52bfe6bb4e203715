//! Hostile clients from other addresses (127.0.0.2) must not keep the
//! server from others (127.0.0.1): clients that never read their
//! responses, a reconnecting slowloris, idle keep-alive connections. The
//! hostile side binds its source address with tokio's `TcpSocket` (std
//! cannot bind before connecting) and then talks through std sockets.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{connect_from, wait_until, Conn, Server};

const HOSTILE: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

const HEALTH: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";

/// `GET /healthz` on a new connection from 127.0.0.1: its status and how
/// long the answer took.
fn timed_health(server: &Server) -> (u16, Duration) {
    let started = Instant::now();
    let mut conn = server.connect();
    conn.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let status = conn
        .try_read_response(Duration::from_secs(10))
        .map_or(0, |r| r.status);
    (status, started.elapsed())
}

/// A connection from `source` that is served: accepted, counted, and
/// answered one `/healthz`.
fn served_from(source: Ipv4Addr, server: &Server, receive_buffer: Option<u32>) -> Option<Conn> {
    let mut conn = connect_from(source, server.addr, receive_buffer).ok()?;
    conn.send(HEALTH).ok()?;
    let response = conn.try_read_response(Duration::from_secs(2)).ok()?;
    (response.status == 200).then_some(conn)
}

#[test]
fn clients_that_never_read_are_closed_after_the_write_timeout_and_capped_per_address() {
    let cap = 4;
    let write_timeout = Duration::from_secs(2);
    // The header timeout is far longer than the test: it is not what
    // closes the stuck connections.
    let server = Server::start(&[
        "--max-connections",
        "16",
        "--max-connections-per-address",
        &cap.to_string(),
        "--write-timeout",
        &write_timeout.as_secs().to_string(),
        "--header-timeout",
        "120",
    ]);
    // The OpenAPI document is about 64 KiB: 200 of them pipelined are far
    // more than the kernel buffers of a client that reads nothing.
    let pipeline = b"GET /v1/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n".repeat(200);
    let mut stuck = Vec::new();
    // Taken before the first stuck connection sends: its write timer
    // cannot start earlier, however slowly the others are opened (a
    // busy machine once took long enough between the first and the last
    // that the first was closed before an instant taken after the loop).
    let stalled_since = Instant::now();
    for i in 0..cap {
        let mut conn = served_from(HOSTILE, &server, Some(4096))
            .unwrap_or_else(|| panic!("hostile connection {i} within the cap was not served"));
        conn.send(&pipeline).unwrap();
        stuck.push(conn);
    }

    // Over the cap: closed at once, nothing answered.
    for _ in 0..3 {
        let started = Instant::now();
        let mut over = connect_from(HOSTILE, server.addr, None).unwrap();
        let _ = over.send(HEALTH);
        assert!(
            over.closed_within(Duration::from_secs(1)),
            "a connection over the per-address cap was kept open"
        );
        assert!(over.buffered().is_empty(), "it was answered");
        assert!(started.elapsed() < write_timeout, "not closed at once");
    }
    // Counted in /metrics.
    let metrics = server.get("/metrics", None).text();
    assert!(
        metrics
            .lines()
            .any(|l| l == "petstore_connections_refused_total 3"),
        "{metrics}"
    );
    // Others are served at once meanwhile.
    for _ in 0..5 {
        let (status, took) = timed_health(&server);
        assert_eq!(status, 200);
        assert!(took < Duration::from_secs(1), "/healthz took {took:?}");
    }

    // Once the stuck connections are closed, 127.0.0.2 is under its cap
    // again: the first connection from it that is served tells when.
    let freed = wait_until(write_timeout + Duration::from_secs(10), || {
        served_from(HOSTILE, &server, None).is_some()
    });
    let waited = stalled_since.elapsed();
    assert!(freed, "the stuck connections were never closed");
    assert!(
        waited >= write_timeout,
        "closed after {waited:?}, before the write timeout"
    );
    // Each stuck connection ends (EOF or reset) after far less than the
    // 200 responses it asked for.
    let all = 200 * server.get("/v1/openapi.json", None).body.len();
    for mut conn in stuck {
        assert!(conn.closed_within(Duration::from_secs(10)), "still open");
        assert!(conn.buffered().len() < all / 2, "it was sent everything");
    }
}

#[test]
fn a_reconnecting_slowloris_from_one_address_does_not_delay_others() {
    // 16 slots; the default cap per address is an eighth of them, 2.
    let server = Server::start(&["--max-connections", "16", "--header-timeout", "5"]);
    let addr = server.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let connects = Arc::new(AtomicUsize::new(0));
    // 24 attackers, more than all the slots, each sending a header line
    // every 200 ms and reconnecting as soon as it is closed.
    let attackers: Vec<_> = (0..24)
        .map(|_| {
            let (stop, connects) = (stop.clone(), connects.clone());
            thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(30);
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    let Ok(mut conn) = connect_from(HOSTILE, addr, None) else {
                        thread::sleep(Duration::from_millis(50));
                        continue;
                    };
                    connects.fetch_add(1, Ordering::Relaxed);
                    let _ = conn.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n");
                    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                        if conn.send(b"X-Slow: a\r\n").is_err()
                            || conn.closed_within(Duration::from_millis(200))
                        {
                            break;
                        }
                    }
                }
            })
        })
        .collect();
    // Let every attacker connect at least once before measuring.
    assert!(wait_until(Duration::from_secs(10), || {
        connects.load(Ordering::Relaxed) >= 24
    }));
    let mut slowest = Duration::ZERO;
    for _ in 0..10 {
        let (status, took) = timed_health(&server);
        assert_eq!(status, 200);
        slowest = slowest.max(took);
        thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    for attacker in attackers {
        attacker.join().unwrap();
    }
    assert!(
        slowest < Duration::from_secs(1),
        "a client from another address waited {slowest:?}"
    );
}

#[test]
fn an_idle_keep_alive_connection_is_closed_after_the_header_timeout() {
    let server = Server::start(&["--header-timeout", "2"]);
    let mut conn = server.connect();
    conn.send(HEALTH).unwrap();
    assert_eq!(conn.read_response().status, 200);
    let idle_since = Instant::now();
    assert!(
        conn.closed_within(Duration::from_secs(8)),
        "an idle keep-alive connection stayed open"
    );
    let idle = idle_since.elapsed();
    assert!(
        idle >= Duration::from_millis(1900) && idle < Duration::from_secs(6),
        "closed after {idle:?} idle; the header timeout is 2 s"
    );
}
