//! Durable creates and transitions wait without a thread each: the
//! journal's committers (`store/journal.rs`) hold one blocking thread per
//! group commit, not one per waiting write, which would grow the server's
//! threads with its connections.

use crate::common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::Duration;

use common::{Server, TempDir, KEY};

/// The server's thread count, from `/proc`.
fn threads(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn sixty_four_durable_creators_hold_no_thread_each() {
    let dir = TempDir::new();
    let server = Server::builder().data(&dir).start();
    let done = AtomicBool::new(false);
    let most = Mutex::new(0);
    let ids = Mutex::new(BTreeSet::new());
    thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                let n = threads(server.pid());
                let mut most = most.lock().unwrap();
                *most = (*most).max(n);
                drop(most);
                thread::sleep(Duration::from_millis(2));
            }
        });
        let creators: Vec<_> = (0..64)
            .map(|c| {
                let (server, ids) = (&server, &ids);
                s.spawn(move || {
                    let mut conn = server.connect();
                    for i in 0..15 {
                        let body = format!(r#"{{"name":"c{c} #{i}","categoryId":1}}"#);
                        let request = format!(
                            "POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\
                             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        conn.send(request.as_bytes()).unwrap();
                        let resp = conn.read_response();
                        assert_eq!(resp.status, 201, "{}", resp.describe());
                        ids.lock()
                            .unwrap()
                            .insert(resp.json()["id"].as_u64().unwrap());
                    }
                })
            })
            .collect();
        for creator in creators {
            creator.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
    });
    let ids = ids.into_inner().unwrap();
    assert_eq!(ids, (1..=64 * 15).collect::<BTreeSet<u64>>());
    // The runtime's workers (one per core), one blocking thread for the
    // group commit, and a few of tokio's and the process's own.
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    let most = most.into_inner().unwrap();
    assert!(
        most <= cores + 12,
        "{most} threads under 64 durable creators on {cores} cores"
    );
}

#[test]
fn sixty_four_durable_transitions_hold_no_thread_each() {
    let dir = TempDir::new();
    let server = Server::builder().data(&dir).start();
    for i in 0..64 {
        server.create_pet(&serde_json::json!({"name": format!("p{i}"), "categoryId": 1}));
    }
    let done = AtomicBool::new(false);
    let most = Mutex::new(0);
    thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                let n = threads(server.pid());
                let mut most = most.lock().unwrap();
                *most = (*most).max(n);
                drop(most);
                thread::sleep(Duration::from_millis(2));
            }
        });
        // Each clerk reserves and releases its own pet, and ends by
        // selling it.
        let clerks: Vec<_> = (1..=64u64)
            .map(|id| {
                let server = &server;
                s.spawn(move || {
                    let mut conn = server.connect();
                    let mut act = |action: &str| {
                        let request = format!(
                            "POST /v1/pets/{id}/{action} HTTP/1.1\r\nHost: x\r\n\
                             Authorization: Bearer {KEY}\r\n\r\n"
                        );
                        conn.send(request.as_bytes()).unwrap();
                        let resp = conn.read_response();
                        assert_eq!(resp.status, 200, "{action} {id}: {}", resp.describe());
                        resp.json()["status"].as_str().unwrap().to_owned()
                    };
                    for _ in 0..7 {
                        assert_eq!(act("reserve"), "pending");
                        assert_eq!(act("release"), "available");
                    }
                    assert_eq!(act("sell"), "sold");
                })
            })
            .collect();
        for clerk in clerks {
            clerk.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
    });
    let (sold, _) = server.list_ids("/v1/pets?status=sold&limit=100");
    assert_eq!(sold, (1..=64).collect::<Vec<u64>>());
    // As for creates: the runtime's workers, the committers' blocking
    // threads, and a few of tokio's and the process's own.
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    let most = most.into_inner().unwrap();
    assert!(
        most <= cores + 12,
        "{most} threads under 64 durable clerks on {cores} cores"
    );
}
