//! Crash test of compaction: a kill -9 at any step of a compaction
//! loses nothing acknowledged.
//!
//! The harness is `crash.rs`'s: the real server binary on one data
//! directory, concurrent writers over real TCP, SIGKILL, a restart. The
//! server compacts whenever anything was written since its last snapshot
//! (`--compact-min-size 1 --compact-ratio 1`), so compactions run back
//! to back under the load. The kill waits for an event, a compaction
//! under way (its closed segment in the directory), then comes after a
//! random pause. A round counts only if the directory the kill left
//! shows a compaction cut half-way (a closed segment or a half-written
//! snapshot still there); three such rounds are asked for, in at most
//! thirty. Half the writers reserve each pet they create, so the
//! snapshot carries statuses and orders, not only pets. A negative
//! control runs the checker against a server that lost everything.

use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::crash::{exchange, missing, post, rng, start, start_with, unlimited_keys, KEY};
use crate::common::TempDir;

const FLAGS: [&str; 4] = ["--compact-min-size", "1", "--compact-ratio", "1"];

/// Whether `dir` holds what only a compaction under way leaves: a closed
/// segment, or a snapshot being written.
fn compaction_under_way(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.filter_map(Result::ok).any(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            (name.starts_with("pets-") && name.ends_with(".journal")) || name.ends_with(".tmp")
        })
    })
}

fn reserve(stream: &mut TcpStream, id: u64) -> std::io::Result<(u16, String)> {
    let request = format!(
        "POST /v1/pets/{id}/reserve HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\r\n"
    );
    exchange(stream, &request)
}

#[test]
fn kill_9_during_compactions_under_load_loses_nothing_acknowledged() {
    let root = TempDir::new();
    let keys = unlimited_keys(&root);
    let data = root.join("data");
    let mut random = rng();
    // Each acknowledged pet as the server last answered it.
    let acknowledged: Arc<Mutex<Vec<(u64, String)>>> = Arc::default();
    let (mut counted, mut rounds) = (0, 0);
    while counted < 3 {
        assert!(
            rounds < 30,
            "{counted} of {rounds} rounds were killed during a compaction"
        );
        let round = rounds;
        rounds += 1;
        let server = start_with(Some(&data), &keys, &FLAGS);
        let mut acked = acknowledged.lock().unwrap().clone();
        acked.sort();
        assert_eq!(
            missing(&server.addr, &acked),
            Vec::<u64>::new(),
            "round {round}: lost after a kill"
        );
        let killing = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..6)
            .map(|w| {
                let (addr, killing, acknowledged) =
                    (server.addr.clone(), killing.clone(), acknowledged.clone());
                std::thread::spawn(move || {
                    let Ok(mut stream) = TcpStream::connect(&addr) else {
                        assert!(killing.load(Ordering::SeqCst), "writer {w}: connect failed");
                        return;
                    };
                    stream
                        .set_read_timeout(Some(Duration::from_secs(60)))
                        .unwrap();
                    for i in 0.. {
                        let body = format!(r#"{{"name":"r{round} w{w} #{i}","categoryId":1}}"#);
                        let created = match post(&mut stream, &body) {
                            Ok((201, pet)) => pet,
                            Ok((status, other)) => panic!("create answered {status}: {other}"),
                            Err(_) if killing.load(Ordering::SeqCst) => return,
                            Err(e) => panic!("writer {w}: I/O error before the kill: {e}"),
                        };
                        let id = serde_json::from_str::<serde_json::Value>(&created).unwrap()["id"]
                            .as_u64()
                            .unwrap();
                        if w % 2 == 1 {
                            acknowledged.lock().unwrap().push((id, created));
                            continue;
                        }
                        // Reserved: acknowledged as the reserve left it; a
                        // reserve cut by the kill may or may not have been
                        // made, so that pet is not checked.
                        match reserve(&mut stream, id) {
                            Ok((200, pet)) => acknowledged.lock().unwrap().push((id, pet)),
                            Ok((status, other)) => panic!("reserve answered {status}: {other}"),
                            Err(_) if killing.load(Ordering::SeqCst) => return,
                            Err(e) => panic!("writer {w}: I/O error before the kill: {e}"),
                        }
                    }
                })
            })
            .collect();
        // The event: a compaction under way. The bound only cuts off a
        // hang; a round without one is not counted.
        let started = Instant::now();
        while !compaction_under_way(&data) && started.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_micros(random() % 20_000));
        let mut server = server;
        killing.store(true, Ordering::SeqCst);
        server.child.kill().unwrap();
        server.child.wait().unwrap();
        for w in writers {
            w.join().unwrap();
        }
        let cut = compaction_under_way(&data);
        println!(
            "round {round}: killed {:?} after the writers started, {} acknowledged in all, \
             compaction cut: {cut}",
            started.elapsed(),
            acknowledged.lock().unwrap().len()
        );
        if cut {
            counted += 1;
        }
    }
    let server = start(Some(&data), &keys);
    let mut acked = acknowledged.lock().unwrap().clone();
    acked.sort();
    assert!(acked.len() > 100, "too little load: {}", acked.len());
    assert_eq!(missing(&server.addr, &acked), Vec::<u64>::new());
    drop(server);
    // Negative control: the same checker against a server that holds
    // nothing reports every pet.
    let amnesiac = start(None, &keys);
    assert_eq!(missing(&amnesiac.addr, &acked).len(), acked.len());
}
