//! A rolling restart of two replicas behind HAProxy loses no request
//! (docs/replicas.md, "Rolling restart"): each replica in turn gets
//! SIGTERM, drains for its `--shutdown-delay` while HAProxy's health check
//! takes it out, exits 0, and starts again on its port, while 24
//! keep-alive clients list and create through HAProxy.
//!
//! Needs HAProxy (Debian `haproxy`; `.ci/run` installs it), PostgreSQL's
//! server binaries and `redis-server`: it fails, naming what to install,
//! without them.

use crate::common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::haproxy::Haproxy;
use common::postgres::Postgres;
use common::redis::RedisServer;
use common::{free_port, proxy_v1, wait_until, Conn, Server};
use serde_json::json;

const KEY: &str = "rolling-restart-key";

/// HAProxy's health check: every 300 ms, out after 2 failures, back after
/// 2 successes; the replicas drain for 3 s, well beyond the 0.6 s it takes
/// to notice.
const HAPROXY_CFG: &str = "\
global
    maxconn 1024
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    timeout http-request 10s
    retries 2
    retry-on conn-failure
    option redispatch
frontend petstore
    bind 127.0.0.1:@FRONT@
    default_backend replicas
backend replicas
    balance roundrobin
    option httpchk
    http-check send meth GET uri /healthz ver HTTP/1.1 hdr Host petstore
    http-check expect status 200
    default-server check inter 300ms fall 2 rise 2 send-proxy-v2
    server r1 127.0.0.1:@R1@
    server r2 127.0.0.1:@R2@
";

fn start_haproxy(front: u16, r1: u16, r2: u16) -> Haproxy {
    let config = HAPROXY_CFG
        .replace("@FRONT@", &front.to_string())
        .replace("@R1@", &r1.to_string())
        .replace("@R2@", &r2.to_string());
    Haproxy::start(Haproxy::dir(), &config)
}

fn replica(port: u16, postgres: &Postgres, redis: &RedisServer) -> Server {
    Server::builder()
        .addr(&format!("127.0.0.1:{port}"))
        .keys(
            json!({"keys": [{"name": "load", "key": KEY, "plan": "enterprise",
            "perMinute": 100_000_000, "perDay": 100_000_000}]}),
        )
        .postgres(&postgres.url())
        .arg("--redis")
        .arg(redis.url())
        .arg("--proxy-protocol")
        .arg("--shutdown-delay")
        .arg("3")
        .start()
}

/// Whether HAProxy sends to both replicas: 20 lists in a row through it
/// reach each replica (its `petstore_requests_total` grows).
fn both_in_service(front: SocketAddr, replicas: &[&Server]) -> bool {
    let before: Vec<u64> = replicas.iter().map(|r| requests(r)).collect();
    for _ in 0..20 {
        let Ok(mut c) = Conn::try_open(front) else {
            return false;
        };
        if c.send(&list()).is_err() || c.try_read_response(Duration::from_secs(5)).is_err() {
            return false;
        }
    }
    replicas.iter().zip(&before).all(|(r, b)| requests(r) > *b)
}

/// The replica's list requests so far, from its `/metrics` (asked with
/// a PROXY header, as every connection to it must start).
fn requests(server: &Server) -> u64 {
    let mut c = Conn::open(server.addr);
    c.send(proxy_v1("127.0.0.1").as_bytes()).unwrap();
    c.send(b"GET /metrics HTTP/1.1\r\nHost: petstore\r\n\r\n")
        .unwrap();
    let text = c.read_response().text();
    text.lines()
        .filter(|l| l.starts_with("petstore_requests_total{route=\"/v1/pets\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

fn list() -> Vec<u8> {
    format!(
        "GET /v1/pets?limit=3 HTTP/1.1\r\nHost: petstore\r\nAuthorization: Bearer {KEY}\r\n\r\n"
    )
    .into_bytes()
}

fn create(n: u64) -> Vec<u8> {
    let body = format!(r#"{{"name":"Roll {n}","categoryId":1}}"#);
    format!(
        "POST /v1/pets HTTP/1.1\r\nHost: petstore\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[test]
fn a_rolling_restart_behind_haproxy_loses_no_request() {
    let postgres = Postgres::start();
    let redis = RedisServer::start();
    let (p1, p2, front) = (free_port(), free_port(), free_port());
    let ports = [p1, p2];
    let mut replicas = ports.map(|port| replica(port, &postgres, &redis));
    let _haproxy = start_haproxy(front, p1, p2);
    let front = SocketAddr::from(([127, 0, 0, 1], front));
    assert!(
        wait_until(Duration::from_secs(30), || both_in_service(
            front,
            &[&replicas[0], &replicas[1]]
        )),
        "HAProxy did not send to both replicas"
    );

    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let created = Arc::new(Mutex::new(Vec::<u64>::new()));
    let clients: Vec<_> = (0..24u64)
        .map(|client| {
            let (stop, answered, failures, created) = (
                stop.clone(),
                answered.clone(),
                failures.clone(),
                created.clone(),
            );
            thread::spawn(move || {
                let mut conn: Option<Conn> = None;
                // Bounded in count; the main thread ends it long before.
                for i in 0..200_000u64 {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let c = match conn.as_mut() {
                        Some(c) => c,
                        None => match Conn::try_open(front) {
                            Ok(c) => conn.insert(c),
                            Err(e) => {
                                failures.lock().unwrap().push(format!("connect: {e}"));
                                thread::sleep(Duration::from_millis(50));
                                continue;
                            }
                        },
                    };
                    // One create in five, the rest lists.
                    let post = (i + client) % 5 == 0;
                    let request = if post {
                        create(client * 1_000_000 + i)
                    } else {
                        list()
                    };
                    let answer = c
                        .send(&request)
                        .and_then(|()| c.try_read_response(Duration::from_secs(30)));
                    match answer {
                        Ok(resp) if resp.status == if post { 201 } else { 200 } => {
                            if post {
                                created
                                    .lock()
                                    .unwrap()
                                    .push(resp.json()["id"].as_u64().unwrap());
                            }
                            answered.fetch_add(1, Ordering::Relaxed);
                            if resp
                                .header("connection")
                                .is_some_and(|v| v.eq_ignore_ascii_case("close"))
                            {
                                conn = None;
                            }
                        }
                        Ok(resp) => {
                            failures.lock().unwrap().push(resp.describe());
                            conn = None;
                        }
                        Err(e) => {
                            failures
                                .lock()
                                .unwrap()
                                .push(format!("{} {e}", if post { "POST" } else { "GET" }));
                            conn = None;
                        }
                    }
                }
            })
        })
        .collect();

    // Each replica in turn: SIGTERM, exit 0, the same port again, back in
    // HAProxy's rotation before the next.
    let answered_at = |n: u64| {
        let target = answered.load(Ordering::Relaxed) + n;
        wait_until(Duration::from_secs(60), || {
            answered.load(Ordering::Relaxed) >= target
        })
    };
    assert!(answered_at(500), "the load did not start");
    for i in 0..2 {
        let server = &mut replicas[i];
        server.signal("TERM");
        let status = server.wait_exit(Duration::from_secs(60));
        assert_eq!(status.code(), Some(0), "{}", server.stderr_text());
        assert!(server.stderr_text().contains("draining for 3 s"));
        *server = replica(ports[i], &postgres, &redis);
        let started = Instant::now();
        while !both_in_service(front, &[&replicas[0], &replicas[1]]) {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "replica {} not back in rotation",
                i + 1
            );
            thread::sleep(Duration::from_millis(100));
        }
        assert!(answered_at(300), "the load stalled");
    }
    stop.store(true, Ordering::SeqCst);
    for client in clients {
        client.join().unwrap();
    }

    let failures = failures.lock().unwrap();
    let created = created.lock().unwrap();
    assert!(
        failures.is_empty(),
        "{} client-visible failures in {} answered requests, first: {:?}",
        failures.len(),
        answered.load(Ordering::Relaxed),
        &failures[..failures.len().min(5)]
    );
    assert!(created.len() > 100, "only {} creates", created.len());
    // Every 201 is readable afterwards, through HAProxy.
    let mut c = Conn::open(front);
    for id in created.iter() {
        c.send(
            format!("GET /v1/pets/{id} HTTP/1.1\r\nHost: petstore\r\nAuthorization: Bearer {KEY}\r\n\r\n")
                .as_bytes(),
        )
        .unwrap();
        let resp = c.read_response();
        assert_eq!(resp.status, 200, "pet {id}: {}", resp.describe());
        if resp
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
        {
            c = Conn::open(front);
        }
    }
}
