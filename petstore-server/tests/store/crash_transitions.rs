//! Crash test of the transitions: no acknowledged change of status is
//! ever lost, and none that was not acknowledged is half there.
//!
//! The harness is `crash.rs`'s: the real server binary on one data
//! directory, concurrent writers over real TCP, SIGKILL at a random
//! moment (after a random number of the round's 200s, never before the
//! writes began), a restart. Each writer owns its pets and moves them
//! through reserve, release and now and then sell, so after a restart
//! every pet is where its last acknowledged transition left it, or where
//! the one transition in flight at the kill would have taken it; nowhere
//! else, and its other fields unchanged. A round counts only if a
//! transition was in flight at the kill; four such rounds are asked for,
//! in at most twenty. A negative control runs the checker against the
//! journal as it was before the last round's transitions.
//!
//! The transitions are doors to orders (reserve places one, release
//! cancels it, sell completes it or records a sale), so every restart
//! also checks the orders against the pets: a pet is `pending` exactly
//! when one placed order holds it, and no order is ever half written.

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::crash::{exchange, post, rng, start, unlimited_keys, KEY};
use crate::common::TempDir;

const WRITERS: u64 = 8;
const PETS_PER_WRITER: u64 = 16;

/// What a pet must be after a restart: its status after the last
/// acknowledged transition, or the one in flight at the kill.
#[derive(Clone, Debug)]
struct Expected {
    name: String,
    status: &'static str,
    in_flight: Option<&'static str>,
}

/// A transition request of pet `id` on a kept-alive connection.
fn transition(stream: &mut TcpStream, id: u64, action: &str) -> std::io::Result<(u16, String)> {
    let request = format!(
        "POST /v1/pets/{id}/{action} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\r\n"
    );
    exchange(stream, &request)
}

/// Every pet the server does not hold as `pets` expect; and the status
/// each holds, to go on from.
fn check(addr: &str, pets: &BTreeMap<u64, Expected>) -> (Vec<u64>, BTreeMap<u64, &'static str>) {
    let mut stream = TcpStream::connect(addr).unwrap();
    let mut wrong = Vec::new();
    let mut held = BTreeMap::new();
    for (id, want) in pets {
        let request =
            format!("GET /v1/pets/{id} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\r\n");
        let (status, body) = exchange(&mut stream, &request).unwrap();
        let pet: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        let got = ["available", "pending", "sold"]
            .into_iter()
            .find(|s| pet["status"] == *s);
        let fields_kept = pet["id"] == *id && pet["name"] == want.name && pet["categoryId"] == 1;
        match got {
            Some(got)
                if status == 200
                    && fields_kept
                    && (got == want.status || Some(got) == want.in_flight) =>
            {
                held.insert(*id, got);
            }
            _ => wrong.push(*id),
        }
    }
    (wrong, held)
}

/// The pets that a placed order holds, read page by page: each at most
/// once, or the pet's id in the second list (held twice).
fn held_by_orders(addr: &str) -> (Vec<u64>, Vec<u64>) {
    let mut stream = TcpStream::connect(addr).unwrap();
    let (mut held, mut twice) = (Vec::new(), Vec::new());
    let mut after = String::new();
    loop {
        let request = format!(
            "GET /v1/store/orders?status=placed&limit=100{after} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\r\n"
        );
        let (status, body) = exchange(&mut stream, &request).unwrap();
        assert_eq!(status, 200, "{body}");
        let page: Vec<serde_json::Value> = serde_json::from_str(&body).unwrap();
        for order in &page {
            let pet = order["petId"].as_u64().unwrap();
            if held.contains(&pet) {
                twice.push(pet);
            }
            held.push(pet);
        }
        match page.last() {
            Some(last) if page.len() == 100 => after = format!("&after={}", last["id"]),
            _ => break,
        }
    }
    held.sort_unstable();
    (held, twice)
}

/// A pet is `pending` exactly when a placed order holds it.
fn assert_orders_match_pets(addr: &str, held: &BTreeMap<u64, &'static str>, round: usize) {
    let (by_orders, twice) = held_by_orders(addr);
    assert_eq!(twice, Vec::<u64>::new(), "round {round}: pets held twice");
    let pending: Vec<u64> = held
        .iter()
        .filter(|(_, status)| **status == "pending")
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(
        by_orders, pending,
        "round {round}: held by orders vs pending"
    );
}

/// The transition a writer makes next of a pet in `status`, and where it
/// takes it; `None` for a sold pet. Every `sell_every`-th move a sale.
fn next_move(status: &str, sell: bool) -> Option<(&'static str, &'static str)> {
    match (status, sell) {
        ("sold", _) => None,
        (_, true) => Some(("sell", "sold")),
        ("available", false) => Some(("reserve", "pending")),
        _ => Some(("release", "available")),
    }
}

#[test]
fn kill_9_during_concurrent_transitions_loses_no_acknowledged_change() {
    let root = TempDir::new();
    let keys = unlimited_keys(&root);
    let data = root.join("data");
    let mut random = rng();

    // The pets, created once and acknowledged.
    let pets: Arc<Mutex<BTreeMap<u64, Expected>>> = Arc::default();
    {
        let server = start(Some(&data), &keys);
        let mut stream = TcpStream::connect(&server.addr).unwrap();
        for i in 0..WRITERS * PETS_PER_WRITER {
            let name = format!("pet {i} \"q\"");
            let body = serde_json::json!({"name": name, "categoryId": 1}).to_string();
            let (status, created) = post(&mut stream, &body).unwrap();
            assert_eq!(status, 201, "{created}");
            let v: serde_json::Value = serde_json::from_str(&created).unwrap();
            let expected = Expected {
                name,
                status: "available",
                in_flight: None,
            };
            pets.lock()
                .unwrap()
                .insert(v["id"].as_u64().unwrap(), expected);
        }
    }

    // A copy of the journal at the start of the last round, and where
    // each pet was then: the negative control's.
    let before_last_round = root.join("before");
    let mut held_before_last_round = BTreeMap::new();
    let (mut counted, mut rounds) = (0, 0);
    let acknowledged = Arc::new(AtomicUsize::new(0));
    while counted < 4 {
        assert!(
            rounds < 20,
            "{counted} of {rounds} rounds had transitions in flight at the kill"
        );
        let round = rounds;
        rounds += 1;
        let server = start(Some(&data), &keys);
        // Every acknowledged transition of earlier rounds survived the
        // kill; go on from where each pet is.
        let (wrong, held) = check(&server.addr, &pets.lock().unwrap());
        assert_eq!(wrong, Vec::<u64>::new(), "round {round}");
        assert_orders_match_pets(&server.addr, &held, round);
        for (&id, &status) in &held {
            let mut pets = pets.lock().unwrap();
            let pet = pets.get_mut(&id).unwrap();
            pet.status = status;
            pet.in_flight = None;
        }
        // No write is under way: the writers start below.
        copy_dir(&data, &before_last_round);
        held_before_last_round = held;
        let before = acknowledged.load(Ordering::SeqCst) as u64;

        // As in `crash.rs`: `killing` is set just before the SIGKILL; an
        // error on a request sent before it is a transition in flight at
        // the kill, and an error before it fails the test.
        let killing = Arc::new(AtomicBool::new(false));
        let in_flight = Arc::new(AtomicUsize::new(0));
        let seed = random();
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (addr, killing, in_flight, acknowledged, pets) = (
                    server.addr.clone(),
                    killing.clone(),
                    in_flight.clone(),
                    acknowledged.clone(),
                    pets.clone(),
                );
                std::thread::spawn(move || {
                    let mine: Vec<u64> = pets
                        .lock()
                        .unwrap()
                        .keys()
                        .copied()
                        .filter(|id| id % WRITERS == w)
                        .collect();
                    let mut stream = match TcpStream::connect(&addr) {
                        Ok(stream) => stream,
                        Err(_) if killing.load(Ordering::SeqCst) => return,
                        Err(e) => panic!("writer {w}: connect to a running server failed: {e}"),
                    };
                    stream
                        .set_read_timeout(Some(Duration::from_secs(60)))
                        .unwrap();
                    for i in 0.. {
                        if killing.load(Ordering::SeqCst) {
                            return;
                        }
                        let id = mine[(i + seed as usize) % mine.len()];
                        let status = pets.lock().unwrap()[&id].status;
                        let sell = (i as u64 + seed + w).is_multiple_of(97);
                        let Some((action, to)) = next_move(status, sell) else {
                            if mine
                                .iter()
                                .all(|id| pets.lock().unwrap()[id].status == "sold")
                            {
                                return;
                            }
                            continue;
                        };
                        pets.lock().unwrap().get_mut(&id).unwrap().in_flight = Some(to);
                        match transition(&mut stream, id, action) {
                            Ok((200, body)) => {
                                let v: serde_json::Value = serde_json::from_str(&body).unwrap();
                                assert_eq!(v["status"], to, "writer {w}: {body}");
                                let mut pets = pets.lock().unwrap();
                                let pet = pets.get_mut(&id).unwrap();
                                pet.status = to;
                                pet.in_flight = None;
                                acknowledged.fetch_add(1, Ordering::SeqCst);
                            }
                            Ok((status, other)) => {
                                panic!("writer {w}: {action} of pet {id} ({status}): {other}")
                            }
                            Err(e) if killing.load(Ordering::SeqCst) => {
                                in_flight.fetch_add(1, Ordering::SeqCst);
                                println!(
                                    "writer {w}: {action} of pet {id} in flight at the kill: {e}"
                                );
                                return;
                            }
                            Err(e) => panic!("writer {w}: I/O error before the kill: {e}"),
                        }
                    }
                })
            })
            .collect();
        // The random moment, an event and not a time (`crash.rs`'s why).
        let target = before + 1 + random() % 200;
        let started = Instant::now();
        while (acknowledged.load(Ordering::SeqCst) as u64) < target
            && !writers.iter().all(std::thread::JoinHandle::is_finished)
            && started.elapsed() < Duration::from_secs(120)
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        let moment = started.elapsed();
        let mut server = server;
        killing.store(true, Ordering::SeqCst);
        server.child.kill().unwrap();
        server.child.wait().unwrap();
        for w in writers {
            w.join().unwrap();
        }
        let after = acknowledged.load(Ordering::SeqCst) as u64;
        let cut = in_flight.load(Ordering::SeqCst);
        println!(
            "round {round}: killed {moment:?} after the writers started, {} transitions \
             acknowledged (target {}), {cut} in flight",
            after - before,
            target - before
        );
        assert!(
            after >= target,
            "round {round}: {} transitions acknowledged in {moment:?}, the kill was for after {}",
            after - before,
            target - before
        );
        if cut > 0 {
            counted += 1;
        }
    }

    let server = start(Some(&data), &keys);
    let pets = pets.lock().unwrap().clone();
    let (wrong, held) = check(&server.addr, &pets);
    assert_eq!(wrong, Vec::<u64>::new());
    assert_orders_match_pets(&server.addr, &held, rounds);
    drop(server);

    // Negative control: the journal as it was before the last round's
    // transitions. The checker must report exactly the pets whose place
    // then is neither of the places allowed now; that round acknowledged
    // at least one transition, and each writer's first moves are of
    // different pets, so some pet moved once and is among them.
    let old = start(Some(&before_last_round), &keys);
    let lost = check(&old.addr, &pets).0;
    let moved: Vec<u64> = pets
        .iter()
        .filter(|(id, want)| {
            let then = held_before_last_round[*id];
            then != want.status && Some(then) != want.in_flight
        })
        .map(|(id, _)| *id)
        .collect();
    assert!(!moved.is_empty(), "the last round moved no pet for good");
    assert_eq!(lost, moved, "the checker missed lost transitions");
}

/// Copies the files of `from` (a data directory, flat) into `to`,
/// replacing what `to` held; nothing may be writing to `from`.
fn copy_dir(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}
