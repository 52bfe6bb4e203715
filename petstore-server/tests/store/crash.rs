//! Crash test: no acknowledged pet is ever lost.
//!
//! Each round starts the real server binary on one data directory, runs
//! concurrent creates over real TCP, kills the process with SIGKILL at a
//! random moment (after a random number of 201s of the round, so never
//! before the writes began, however slow the machine), restarts it, and
//! checks that every pet that got a 201 is there with identical content
//! and that ids continue. A round counts only if creates were in flight at
//! the kill (the race the test is about happened); four such rounds are
//! asked for, in at most twenty. A writer's error before the kill fails
//! the test. Negative
//! controls run the same checker against servers that lost pets, and one
//! whose journal holds a changed pet (with a valid checksum), to prove the
//! checker would catch each.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::TempDir;

pub(super) const KEY: &str = "crash-test-key";

pub(super) struct Server {
    pub(super) child: Child,
    pub(super) addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(super) fn start(data: Option<&Path>, keys: &Path) -> Server {
    start_with(data, keys, &[])
}

/// [`start`] with more flags.
pub(super) fn start_with(data: Option<&Path>, keys: &Path, flags: &[&str]) -> Server {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_petstore-server"));
    cmd.args(["--addr", "127.0.0.1:0", "--keys"])
        .arg(keys)
        .args(flags);
    match data {
        Some(dir) => cmd.arg("--data").arg(dir),
        None => cmd.arg("--in-memory"),
    };
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("server exited before listening")
            .unwrap();
        if let Some(addr) = line.strip_prefix("listening on http://") {
            break addr.to_owned();
        }
    };
    Server { child, addr }
}

/// One HTTP/1.1 exchange on a kept-alive connection: (status, body).
pub(super) fn exchange(stream: &mut TcpStream, request: &str) -> std::io::Result<(u16, String)> {
    stream.write_all(request.as_bytes())?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut status_line = String::new();
    if reader.read_line(&mut status_line)? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

pub(super) fn post(stream: &mut TcpStream, body: &str) -> std::io::Result<(u16, String)> {
    let request = format!(
        "POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    exchange(stream, &request)
}

fn get(addr: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\r\n");
    exchange(&mut stream, &request).unwrap()
}

/// Every acknowledged pet that the server does not return identically.
pub(super) fn missing(addr: &str, acknowledged: &[(u64, String)]) -> Vec<u64> {
    let mut stream = TcpStream::connect(addr).unwrap();
    acknowledged
        .iter()
        .filter(|(id, body)| {
            let request = format!(
                "GET /v1/pets/{id} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\r\n"
            );
            let (status, got) = exchange(&mut stream, &request).unwrap();
            status != 200 || got != *body
        })
        .map(|(id, _)| *id)
        .collect()
}

/// A keys file in `root` with one enterprise key whose limits never
/// bind: what is acknowledged is then decided by the crash alone.
pub(super) fn unlimited_keys(root: &Path) -> std::path::PathBuf {
    let keys = root.join("keys.json");
    std::fs::write(
        &keys,
        format!(r#"{{"keys":[{{"name":"crash","key":"{KEY}","plan":"enterprise","perMinute":100000000,"perDay":100000000}}]}}"#),
    )
    .unwrap();
    keys
}

/// A small xorshift generator seeded from the clock: random moments
/// without a rand dependency. The seed is printed so a failure can be
/// replayed.
pub(super) fn rng() -> impl FnMut() -> u64 {
    let mut x = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    println!("seed {x}");
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

#[test]
fn kill_9_during_concurrent_creates_loses_no_acknowledged_pet() {
    let root = TempDir::new();
    let keys = unlimited_keys(&root);
    let data = root.join("data");
    let mut random = rng();
    let acknowledged: Arc<Mutex<Vec<(u64, String)>>> = Arc::default();

    // Rounds with creates in flight at the kill, of the rounds run. A kill
    // that fell between every writer's requests is no failure of the
    // server, but proves nothing: that round is run again.
    let (mut counted, mut rounds) = (0, 0);
    while counted < 4 {
        assert!(
            rounds < 20,
            "{counted} of {rounds} rounds had creates in flight at the kill"
        );
        let round = rounds;
        rounds += 1;
        let server = start(Some(&data), &keys);
        // Everything acknowledged in earlier rounds survived the kill.
        let mut acked = acknowledged.lock().unwrap().clone();
        acked.sort();
        assert_eq!(
            missing(&server.addr, &acked),
            Vec::<u64>::new(),
            "round {round}"
        );
        let before = acked.len() as u64;

        // `killing` is set just before the SIGKILL: an error on a request
        // sent before it is a create in flight at the kill; an error
        // before it at all is a failure of the test, never swallowed.
        let killing = Arc::new(AtomicBool::new(false));
        let in_flight = Arc::new(AtomicUsize::new(0));
        let writers: Vec<_> = (0..8)
            .map(|w| {
                let (addr, killing, in_flight, acknowledged) = (
                    server.addr.clone(),
                    killing.clone(),
                    in_flight.clone(),
                    acknowledged.clone(),
                );
                std::thread::spawn(move || {
                    let mut stream = match TcpStream::connect(&addr) {
                        Ok(stream) => stream,
                        Err(_) if killing.load(Ordering::SeqCst) => return,
                        Err(e) => panic!("writer {w}: connect to a running server failed: {e}"),
                    };
                    // Only cuts off a hang; a kill ends every read at once.
                    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
                    let mut i = 0;
                    loop {
                        let sent_before_kill = !killing.load(Ordering::SeqCst);
                        if !sent_before_kill {
                            return;
                        }
                        let body = format!(r#"{{"name":"r{round} w{w} #{i} \"q\"","categoryId":{},"status":"sold"}}"#, i + 1);
                        match post(&mut stream, &body) {
                            Ok((201, pet)) => {
                                let v: serde_json::Value = serde_json::from_str(&pet).unwrap();
                                let id = v["id"].as_u64().unwrap();
                                acknowledged.lock().unwrap().push((id, pet));
                            }
                            Ok((status, other)) => panic!("create answered {status}: {other}"),
                            Err(e) if killing.load(Ordering::SeqCst) => {
                                // Sent before the kill, cut by it.
                                in_flight.fetch_add(1, Ordering::SeqCst);
                                println!("writer {w}: create in flight at the kill: {e}");
                                return;
                            }
                            Err(e) => panic!("writer {w}: I/O error before the kill: {e}"),
                        }
                        i += 1;
                    }
                })
            })
            .collect();
        // The random moment: after 1 to 200 pets of this round were
        // acknowledged (an event, not a time: a slow machine only takes
        // longer to get there). The bound only cuts off a hang, or writers
        // that all ended (one that failed panicked: joined below).
        let target = before + 1 + random() % 200;
        let started = Instant::now();
        while (acknowledged.lock().unwrap().len() as u64) < target
            && !writers.iter().all(std::thread::JoinHandle::is_finished)
            && started.elapsed() < Duration::from_secs(120)
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        let moment = started.elapsed();
        let mut server = server;
        killing.store(true, Ordering::SeqCst);
        server.child.kill().unwrap(); // SIGKILL: no chance to flush anything
        server.child.wait().unwrap();
        for w in writers {
            w.join().unwrap();
        }
        let after = acknowledged.lock().unwrap().len() as u64;
        let cut = in_flight.load(Ordering::SeqCst);
        println!(
            "round {round}: killed {moment:?} after the writers started, {} pets acknowledged \
             (target {}), {cut} creates in flight",
            after - before,
            target - before
        );
        assert!(
            after >= target,
            "round {round}: {} pets acknowledged in {moment:?}, the kill was for after {}",
            after - before,
            target - before
        );
        if cut > 0 {
            counted += 1;
        }
    }

    let server = start(Some(&data), &keys);
    let mut acked = acknowledged.lock().unwrap().clone();
    acked.sort();
    assert_eq!(missing(&server.addr, &acked), Vec::<u64>::new());
    // Ids are unique and continue after the highest recovered id.
    let ids: Vec<u64> = acked.iter().map(|(id, _)| *id).collect();
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(ids, unique, "an id was acknowledged twice");
    let highest = *ids.last().unwrap();
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    let (status, body) = post(&mut stream, r#"{"name":"after","categoryId":1}"#).unwrap();
    assert_eq!(status, 201);
    let next: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(next["id"].as_u64().unwrap() > highest);
    // Pets that were written but not acknowledged may exist; none beyond.
    let (status, _) = get(
        &server.addr,
        &format!("/v1/pets/{}", next["id"].as_u64().unwrap() + 1),
    );
    assert_eq!(status, 404);

    // Negative control: the same checker, against a server that has lost
    // its pets (in memory) and one that lost only the last pet, reports them.
    let amnesiac = start(None, &keys);
    assert_eq!(missing(&amnesiac.addr, &acked).len(), acked.len());
    drop(amnesiac);
    drop(server);
    // A journal that lost the last acknowledged pet: records are in id
    // order, so keep those below it.
    let text = std::fs::read_to_string(data.join("pets.journal")).unwrap();
    let last = format!("{{\"pet\":{{\"id\":{highest},");
    let lossy: Vec<&str> = text.lines().take_while(|l| !l.starts_with(&last)).collect();
    assert!(lossy.len() < text.lines().count());
    let lossy_dir = root.join("lossy");
    std::fs::create_dir_all(&lossy_dir).unwrap();
    std::fs::write(lossy_dir.join("pets.journal"), lossy.join("\n") + "\n").unwrap();
    let lossy_server = start(Some(&lossy_dir), &keys);
    let lost = missing(&lossy_server.addr, &acked);
    assert!(
        lost.contains(&highest),
        "the checker missed a lost pet: {lost:?}"
    );
    drop(lossy_server);

    // A journal where one acknowledged pet's name was changed, its
    // checksum recomputed so that the server loads it without complaint:
    // the checker must report exactly that pet, by content.
    let changed_id = acked[acked.len() / 2].0;
    let prefix = format!("{{\"pet\":{{\"id\":{changed_id},");
    let mut changed_lines = 0;
    let altered: Vec<String> = text
        .lines()
        .map(|line| {
            if !line.starts_with(&prefix) {
                return line.to_owned();
            }
            changed_lines += 1;
            // `{"pet":` BODY `,"crc32":"xxxxxxxx"}`
            let body = &line[7..line.len() - 20];
            let renamed = body.replacen(r#""name":"r"#, r#""name":"R"#, 1);
            assert_ne!(renamed, body, "the pet's name starts with r");
            format!(
                r#"{{"pet":{renamed},"crc32":"{:08x}"}}"#,
                crc32(renamed.as_bytes())
            )
        })
        .collect();
    assert_eq!(changed_lines, 1);
    let changed_dir = root.join("changed");
    std::fs::create_dir_all(&changed_dir).unwrap();
    std::fs::write(changed_dir.join("pets.journal"), altered.join("\n") + "\n").unwrap();
    let changed_server = start(Some(&changed_dir), &keys);
    assert_eq!(
        missing(&changed_server.addr, &acked),
        [changed_id],
        "the checker missed a changed pet"
    );
    drop(changed_server);
}

/// CRC-32 (IEEE), bit by bit: the journal's checksum, written here
/// independently of the server's code.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn a_damaged_journal_stops_the_server_from_starting() {
    let root = TempDir::new();
    let keys = root.join("keys.json");
    std::fs::write(
        &keys,
        format!(r#"{{"keys":[{{"name":"crash","key":"{KEY}","plan":"pro"}}]}}"#),
    )
    .unwrap();
    let data = root.join("data");
    {
        let server = start(Some(&data), &keys);
        let mut stream = TcpStream::connect(&server.addr).unwrap();
        for i in 0..3 {
            let (status, _) =
                post(&mut stream, &format!(r#"{{"name":"p{i}","categoryId":1}}"#)).unwrap();
            assert_eq!(status, 201);
        }
    }
    let journal = data.join("pets.journal");
    let mut bytes = std::fs::read(&journal).unwrap();
    let second = bytes.iter().position(|b| *b == b'\n').unwrap() + 10;
    bytes[second] ^= 0x04;
    std::fs::write(&journal, &bytes).unwrap();
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_petstore-server"))
        .args(["--addr", "127.0.0.1:0", "--keys"])
        .arg(&keys)
        .arg("--data")
        .arg(&data)
        .output()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("pets.journal line 2"), "{stderr}");
    assert!(!String::from_utf8_lossy(&output.stdout).contains("listening on"));
}
