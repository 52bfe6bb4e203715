//! Kill -9 and keyed creates: a retry after the restart never makes a
//! second pet. Writers send keyed creates, each with its own key, over
//! real TCP; the server is killed with SIGKILL once some were
//! acknowledged (others are in flight: committed and not yet answered,
//! or not committed); after the restart every key is sent again. Each
//! retry gets a 201; one that was acknowledged before the kill gets that
//! very answer again (`Idempotent-Replayed: true`); and the pets are
//! exactly one per key, never two.

use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::crash::{exchange, start, unlimited_keys, KEY};
use crate::common::TempDir;

const WRITERS: usize = 4;
const PER_WRITER: usize = 40;

/// A keyed create of a pet named after its key: (status, body).
fn keyed_create(stream: &mut TcpStream, key: &str) -> std::io::Result<(u16, String)> {
    let body = format!(r#"{{"name":"{key}","categoryId":1}}"#);
    let request = format!(
        "POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\
         Content-Type: application/json\r\nIdempotency-Key: {key}\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    exchange(stream, &request)
}

#[test]
fn a_retry_after_kill_9_gets_the_original_pet_never_a_second() {
    let root = TempDir::new();
    let keys_file = unlimited_keys(&root);
    let data = root.join("data");
    let server = start(Some(&data), &keys_file);
    let acknowledged: Arc<Mutex<BTreeMap<String, String>>> = Arc::default();
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (addr, acknowledged) = (server.addr.clone(), acknowledged.clone());
            thread::spawn(move || {
                let Ok(mut stream) = TcpStream::connect(&addr) else {
                    return;
                };
                // Only cuts off a hang; the kill ends every read at once.
                stream
                    .set_read_timeout(Some(Duration::from_secs(30)))
                    .unwrap();
                for i in 0..PER_WRITER {
                    let key = format!("w{w}-{i}");
                    match keyed_create(&mut stream, &key) {
                        Ok((201, body)) => {
                            acknowledged.lock().unwrap().insert(key, body);
                        }
                        Ok((status, body)) => panic!("{key}: {status} {body}"),
                        // Cut by the kill.
                        Err(_) => return,
                    }
                }
            })
        })
        .collect();
    // Kill once a few were acknowledged: writes are under way.
    let deadline = Instant::now() + Duration::from_secs(60);
    while acknowledged.lock().unwrap().len() < WRITERS * 3 {
        assert!(Instant::now() < deadline, "no creates acknowledged in 60 s");
        thread::sleep(Duration::from_millis(1));
    }
    drop(server); // SIGKILL, then wait.
    for writer in writers {
        writer.join().unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    println!(
        "{} keyed creates acknowledged before the kill",
        acknowledged.len()
    );

    let server = start(Some(&data), &keys_file);
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    let mut ids = BTreeSet::new();
    for w in 0..WRITERS {
        for i in 0..PER_WRITER {
            let key = format!("w{w}-{i}");
            let (status, body) = keyed_create(&mut stream, &key).unwrap();
            assert_eq!(status, 201, "{key}: {body}");
            if let Some(before) = acknowledged.get(&key) {
                assert_eq!(&body, before, "{key}: the original pet");
            }
            let pet: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(pet["name"], key.as_str());
            assert!(ids.insert(pet["id"].as_u64().unwrap()), "{key}: {body}");
        }
    }
    // One pet per key: nothing made twice, nothing in between.
    let request =
        format!("GET /v1/pets?limit=100&after={} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\r\n", WRITERS * PER_WRITER);
    let (status, rest) = exchange(&mut stream, &request).unwrap();
    assert_eq!(
        (status, rest.as_str()),
        (200, "[]"),
        "no pet beyond one per key"
    );
    assert_eq!(ids.len(), WRITERS * PER_WRITER);
    assert_eq!(ids.last().copied(), Some((WRITERS * PER_WRITER) as u64));
}
