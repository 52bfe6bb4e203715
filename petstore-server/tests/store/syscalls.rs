//! Durability that reading the file back cannot show: reading proves the
//! page cache, not the disk. This runs the real server under
//! `strace -f -e trace=fdatasync,fsync,openat` and checks the real system
//! calls on the real files: every 201, and every 200 of a transition, is
//! preceded, after its request was sent, by an `fdatasync` of the
//! journal's descriptor that returned 0, and creating the journal fsyncs
//! its directory.
//!
//! strace is required: without it this test fails, saying so (`.ci/run`
//! installs it).

use crate::common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::*;

/// Seconds since the epoch, as strace's `-ttt` prints them.
fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// One traced call that returned.
#[derive(Debug, Clone)]
struct Call {
    /// When it was entered.
    at: f64,
    name: String,
    /// Everything between the parentheses.
    args: String,
    /// What it returned (the text after `= `).
    result: String,
}

/// Parses strace `-f -ttt` output, joining `<unfinished ...>` and
/// `<... resumed>` halves by thread id.
fn parse(trace: &str) -> Vec<Call> {
    let mut calls = Vec::new();
    let mut pending: HashMap<String, (f64, String, String)> = HashMap::new();
    for line in trace.lines() {
        // `TID  TIMESTAMP CALL`, padded with a varying number of spaces.
        let Some((tid, rest)) = line.trim_start().split_once(' ') else {
            continue;
        };
        let Some((ts, rest)) = rest.trim_start().split_once(' ') else {
            continue;
        };
        let Ok(at) = ts.parse::<f64>() else { continue };
        if let Some(rest) = rest.strip_prefix("<... ") {
            // `<... fdatasync resumed>) = 0`
            let Some((at, name, args)) = pending.remove(tid) else {
                continue;
            };
            let result = rest
                .rsplit_once(" = ")
                .map(|(_, r)| r.trim().to_owned())
                .unwrap_or_default();
            calls.push(Call {
                at,
                name,
                args,
                result,
            });
            continue;
        }
        let Some((name, after)) = rest.split_once('(') else {
            continue;
        };
        if let Some(args) = after.strip_suffix(" <unfinished ...>") {
            pending.insert(tid.to_owned(), (at, name.to_owned(), args.to_owned()));
            continue;
        }
        if let Some((args, result)) = after.rsplit_once(" = ") {
            let args = args.trim_end().trim_end_matches(')').to_owned();
            calls.push(Call {
                at,
                name: name.to_owned(),
                args,
                result: result.trim().to_owned(),
            });
        }
    }
    calls
}

/// The descriptor an `openat` of `path` returned, if this call is one.
fn opened(call: &Call, path: &Path) -> Option<String> {
    let quoted = format!("\"{}\"", path.display());
    (call.name == "openat" && call.args.contains(&quoted)).then(|| call.result.clone())
}

/// The server under strace; both are killed on drop.
struct Traced {
    strace: Child,
    addr: std::net::SocketAddr,
}

impl Traced {
    fn start(trace: &Path, keys: &Path, data: &Path) -> Traced {
        let spawned = Command::new("strace")
            .args(["-f", "-ttt", "-e", "trace=fdatasync,fsync,openat", "-o"])
            .arg(trace)
            .arg(BIN)
            .args(["--addr", "127.0.0.1:0", "--keys"])
            .arg(keys)
            .arg("--data")
            .arg(data)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut strace = spawned.unwrap_or_else(|e| {
            panic!(
                "cannot run strace ({e}): this test needs it to see the real fdatasync calls; \
                 install it (apt-get install -y strace, as scripts/test does)"
            )
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout = strace.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(addr) = parse_listening_line(&line) {
                    let _ = tx.send(addr);
                }
            }
        });
        match rx.recv_timeout(STARTUP_TIMEOUT) {
            Ok(addr) => Traced { strace, addr },
            Err(_) => {
                let _ = strace.kill();
                let out = strace.wait_with_output().unwrap();
                panic!(
                    "the server under strace did not start within {STARTUP_TIMEOUT:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }

    /// SIGTERM to the server (strace's child), then waits for both to end,
    /// so that the trace is complete.
    fn stop(mut self) {
        let pid = self.strace.id();
        let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap();
        let server = children.split_whitespace().next().expect("strace's child");
        let status = Command::new("kill")
            .args(["-TERM", server])
            .status()
            .unwrap();
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.strace.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "the server did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Traced {
    fn drop(&mut self) {
        if self.strace.try_wait().ok().flatten().is_none() {
            let _ = self.strace.kill();
            let _ = self.strace.wait();
        }
    }
}

#[test]
fn every_201_and_transition_follows_an_fdatasync_of_the_journal_and_its_creation_fsyncs_the_directory(
) {
    let dir = TempDir::new();
    let keys = dir.join("keys.json");
    std::fs::write(&keys, default_keys().to_string()).unwrap();
    let data = dir.join("data");
    let trace = dir.join("trace");
    let server = Traced::start(&trace, &keys, &data);

    let mut conn = Conn::open(server.addr);
    let mut windows = Vec::new();
    for i in 0..20 {
        let body = format!(r#"{{"name":"pet {i}","categoryId":1}}"#);
        let request = format!(
            "POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let sent = now();
        conn.send(request.as_bytes()).unwrap();
        let resp = conn.read_response();
        let answered = now();
        assert_eq!(resp.status, 201, "{}", resp.describe());
        windows.push((format!("create {i}"), sent, answered));
    }
    // A transition's 200 is as durable as a 201: reserve ten pets, then
    // sell them.
    for i in 0..20 {
        let (id, action) = (i % 10 + 1, if i < 10 { "reserve" } else { "sell" });
        let request = format!(
            "POST /v1/pets/{id}/{action} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\r\n"
        );
        let sent = now();
        conn.send(request.as_bytes()).unwrap();
        let resp = conn.read_response();
        let answered = now();
        assert_eq!(resp.status, 200, "{}", resp.describe());
        windows.push((format!("{action} of pet {id}"), sent, answered));
    }
    drop(conn);
    server.stop();

    let calls = parse(&std::fs::read_to_string(&trace).unwrap());
    let journal = data.join("pets.journal");
    let journal_open = calls
        .iter()
        .position(|c| {
            opened(c, &journal).is_some()
                && c.args.contains("O_APPEND")
                && c.args.contains("O_CREAT")
        })
        .unwrap_or_else(|| {
            panic!(
                "no openat of {} for appending in the trace",
                journal.display()
            )
        });
    let journal_fd = calls[journal_open].result.clone();
    assert!(
        journal_fd.parse::<u32>().is_ok(),
        "{:?}",
        calls[journal_open]
    );

    // Creating the journal fsyncs its directory: the directory is opened
    // after the journal was created, and that descriptor fsynced, before
    // the server took its first request. Before it, because other files
    // in the directory (the limiter state, written after requests) fsync
    // it too, and would hide a journal that did not.
    let first_request = windows.first().map_or(f64::MAX, |w| w.1);
    let dir_synced = calls[journal_open..].iter().enumerate().any(|(i, c)| {
        opened(c, &data).is_some_and(|fd| {
            calls[journal_open + i..].iter().any(|s| {
                s.name == "fsync" && s.args == fd && s.result == "0" && s.at < first_request
            })
        })
    });
    assert!(
        dir_synced,
        "the directory {} was not fsynced after the journal was created",
        data.display()
    );

    // Each 201 and 200 came after an fdatasync of the journal that started
    // after its request was sent and returned 0.
    let syncs: Vec<f64> = calls
        .iter()
        .filter(|c| c.name == "fdatasync" && c.args == journal_fd && c.result == "0")
        .map(|c| c.at)
        .collect();
    for (i, sent, answered) in windows {
        assert!(
            syncs.iter().any(|at| (sent..=answered).contains(at)),
            "{i}: no fdatasync({journal_fd}) between its request ({sent:.6}) and its answer ({answered:.6}); \
             fdatasyncs of the journal at {syncs:?}"
        );
    }
}

#[test]
fn the_trace_parser_joins_unfinished_calls_by_thread() {
    let trace = "\
10  1.000001 openat(AT_FDCWD, \"/d/pets.journal\", O_RDWR|O_CREAT|O_APPEND|O_CLOEXEC, 0666) = 5
11 1.000002 fdatasync(5 <unfinished ...>
10 1.000003 fsync(6)                = 0
11 1.000004 <... fdatasync resumed>) = 0
12 1.000005 fdatasync(5)            = -1 EIO (Input/output error)
";
    let calls = parse(trace);
    let summary: Vec<(f64, &str, &str, &str)> = calls
        .iter()
        .map(|c| (c.at, c.name.as_str(), c.args.as_str(), c.result.as_str()))
        .collect();
    assert_eq!(
        opened(&calls[0], Path::new("/d/pets.journal")).as_deref(),
        Some("5")
    );
    assert_eq!(summary[1], (1.000003, "fsync", "6", "0"));
    assert_eq!(summary[2], (1.000002, "fdatasync", "5", "0"));
    assert_eq!(
        summary[3],
        (1.000005, "fdatasync", "5", "-1 EIO (Input/output error)")
    );
}
