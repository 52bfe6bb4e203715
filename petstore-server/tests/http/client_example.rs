//! Runs the `client` example (`examples/client.rs`) against the real
//! server binary on a plan tight enough that it must meet 429s, and checks
//! that it backs off well enough never to be banned; and, as a control,
//! that a naive client retrying at once on the same plan IS banned.
//!
//! Self-contained on purpose (of the common harness it takes only
//! `TempDir`): it spawns the server itself and speaks HTTP/1.1 over
//! `std::net::TcpStream`, as the example does.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::TempDir;

const SERVER: &str = env!("CARGO_BIN_EXE_petstore-server");

/// The plan both tests run on: a minute bucket of 60 requests refilled at
/// one a second (`Retry-After: 1` once it is empty), and a ban after the
/// 5th refusal within 3 s. A client that honours `Retry-After` meets at
/// most one 429 a second, so at most 3 within any 3 s: never banned. One
/// that retries at once collects 5 refusals in milliseconds.
///
/// The ratio matters: `Retry-After` is at least 1 s, so a client that obeys
/// it can still meet up to one 429 a second while it saturates its plan.
/// A ban policy of `strikes / windowSeconds` <= 1 per second (the default,
/// 60 / 60 s, is exactly 1) therefore bans even a perfect client after
/// about `windowSeconds` of saturation; 5 / 3 s leaves it a margin.
const PER_MINUTE: u64 = 60;
const STRIKES: u64 = 5;

fn keys_file(name: &str, key: &str) -> Value {
    json!({
        "keys": [{"name": name, "key": key, "plan": "free"}],
        "plans": {"free": {"perMinute": PER_MINUTE, "perDay": 100_000}},
        "ban": {"strikes": STRIKES, "windowSeconds": 3, "banSeconds": 600},
        "anonymousPerMinute": 1000
    })
}

/// Pets the client creates, and its page size: 8 creations and 2 or 3
/// pages, about 11 requests. The test empties the bucket before the
/// client starts, so each of them needs a token that comes back one a
/// second: the client meets a 429 whenever it asks sooner than a second
/// after its last token, whatever the machine's speed up to requests
/// that take most of a second each. About 10 429s; the run takes about
/// 10 s.
const CREATE: u64 = 8;
const PAGE_SIZE: u64 = 4;

/// Collects a child's pipe in the background.
fn drain(mut pipe: impl Read + Send + 'static) -> (Arc<Mutex<Vec<u8>>>, thread::JoinHandle<()>) {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&buf);
    let handle = thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut chunk) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
    (buf, handle)
}

/// A server process, killed (by its own handle) on drop.
struct Server {
    child: Child,
    addr: SocketAddr,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// Holds the keys file; removed after the process is gone.
    _dir: TempDir,
}

impl Server {
    fn start(keys: &Value) -> Server {
        let dir = TempDir::new();
        let keys_path = dir.join("keys.json");
        std::fs::write(&keys_path, serde_json::to_vec_pretty(keys).unwrap()).unwrap();
        let mut cmd = Command::new(SERVER);
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("PETSTORE_") {
                cmd.env_remove(name);
            }
        }
        let mut child = cmd
            .args(["--addr", "127.0.0.1:0", "--in-memory", "--keys"])
            .arg(&keys_path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn petstore-server");
        let (stderr, _) = drain(child.stderr.take().unwrap());
        // Read stdout line by line until `listening on`, then keep
        // draining it so the server never blocks on a full pipe.
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(addr) = line.strip_prefix("listening on http://") {
                    let _ = tx.send(addr.trim().parse::<SocketAddr>());
                }
            }
        });
        let mut server = Server {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            stderr,
            _dir: dir,
        };
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(Ok(addr)) => server.addr = addr,
            other => panic!(
                "no `listening on` line ({other:?}); exit {:?}; stderr:\n{}",
                server.child.try_wait(),
                server.stderr_text()
            ),
        }
        server
    }

    fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One response, read to the end of a `Connection: close` exchange.
#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn code(&self) -> Option<String> {
        let v: Value = serde_json::from_slice(&self.body).ok()?;
        Some(v.get("code")?.as_str()?.to_owned())
    }

    fn describe(&self) -> String {
        let mut s = format!("HTTP {}\n", self.status);
        for (n, v) in &self.headers {
            s.push_str(&format!("{n}: {v}\n"));
        }
        s.push_str(&String::from_utf8_lossy(&self.body));
        s
    }
}

fn request(addr: SocketAddr, method: &str, path: &str, key: &str, body: Option<&str>) -> Response {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n"
    );
    if let Some(body) = body {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ));
    } else {
        req.push_str("\r\n");
    }
    stream.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no end of head in {:?}", String::from_utf8_lossy(&raw)));
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line in {head:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Response {
        status,
        headers,
        body: raw[end + 4..].to_vec(),
    }
}

/// A 429 of an empty bucket (`rate_limited`), never of a ban.
fn assert_rate_limited(resp: &Response) {
    assert_eq!(
        resp.code().as_deref(),
        Some("rate_limited"),
        "{}",
        resp.describe()
    );
}

/// Builds the `client` example with the profile and target directory of
/// this test and returns its path. Integration tests do not get examples
/// built for them (`cargo test` builds this one only as its unit tests),
/// so this runs `cargo build --example client` (a no-op when it is fresh).
fn client_example() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        // CARGO_TARGET_TMPDIR is `<target-dir>/tmp`; this test runs from
        // `<target-dir>[/<triple>]/<profile>/deps/`.
        let target_dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .parent()
            .expect("target dir")
            .to_owned();
        let exe = std::env::current_exe().unwrap();
        let profile_dir = exe.parent().and_then(Path::parent).expect("profile dir");
        let profile = profile_dir
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let mut cmd = Command::new(env!("CARGO"));
        // Not the variables cargo set for this test's own crate: a build
        // script that watches one (ring's, `CARGO_MANIFEST_DIR`) saw it
        // change, so this build and the next `cargo test` each rebuilt
        // ring, rustls and the server, the slowest crates of the build.
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy();
            if name.starts_with("CARGO_PKG_")
                || name.starts_with("CARGO_BIN_EXE_")
                || [
                    "CARGO_MANIFEST_DIR",
                    "CARGO_MANIFEST_PATH",
                    "CARGO_CRATE_NAME",
                    "CARGO_BIN_NAME",
                    "CARGO_TARGET_TMPDIR",
                    "CARGO_PRIMARY_PACKAGE",
                ]
                .contains(&name.as_ref())
            {
                cmd.env_remove(name.as_ref());
            }
        }
        // `--workspace`, as the README's `cargo test --workspace`: cargo
        // unifies features over the packages it builds, so a build of this
        // package alone resolves some dependencies' features differently
        // and compiles its own copy of the server's library, a second
        // build of it. This way only the example itself is built.
        cmd.args(["build", "--workspace", "--example", "client"])
            .args(["--message-format", "json"])
            .arg("--manifest-path")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .arg("--target-dir")
            .arg(&target_dir);
        match profile.as_str() {
            "debug" => {}
            "release" => {
                cmd.arg("--release");
            }
            other => {
                cmd.args(["--profile", other]);
            }
        }
        let output = cmd.stdin(Stdio::null()).output().expect("run cargo build");
        assert!(
            output.status.success(),
            "cargo build --example client failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        // The compiler-artifact message of the example names its executable.
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "client")
            .find_map(|m| m["executable"].as_str().map(PathBuf::from))
            .unwrap_or_else(|| {
                panic!(
                    "no executable of the client example in cargo's output:\n{}",
                    String::from_utf8_lossy(&output.stdout)
                )
            })
    })
}

/// Runs the client to its end (killed after `limit`); returns its exit
/// status, stdout and stderr.
fn run_client(args: &[String], limit: Duration) -> (std::process::ExitStatus, String, String) {
    let mut child = Command::new(client_example())
        .args(args)
        .env_remove("PETSTORE_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the client example");
    let (out, out_reader) = drain(child.stdout.take().unwrap());
    let (err, err_reader) = drain(child.stderr.take().unwrap());
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            let _ = (out_reader.join(), err_reader.join());
            panic!(
                "the client did not finish within {limit:?}\n--- stdout:\n{}\n--- stderr:\n{}",
                String::from_utf8_lossy(&out.lock().unwrap()),
                String::from_utf8_lossy(&err.lock().unwrap())
            );
        }
        thread::sleep(Duration::from_millis(20));
    };
    let _ = (out_reader.join(), err_reader.join());
    let out = String::from_utf8_lossy(&out.lock().unwrap()).into_owned();
    let err = String::from_utf8_lossy(&err.lock().unwrap()).into_owned();
    (status, out, err)
}

/// The number after `label` on a line of the client's summary.
fn summary_number(stdout: &str, label: &str) -> f64 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(label))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no `{label}` number in the summary:\n{stdout}"))
}

#[test]
fn client_backs_off_and_is_never_banned() {
    let client = client_example();
    let server = Server::start(&keys_file("client", "client-key"));
    let base = format!("http://{}/v1", server.addr);
    let args: Vec<String> = [
        "--base",
        &base,
        "--key",
        "client-key",
        "--create",
        &CREATE.to_string(),
        "--page-size",
        &PAGE_SIZE.to_string(),
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    // Empty the bucket first (a 2xx that leaves nothing, or a 429), so
    // that the client's 429s do not depend on its being faster than the
    // refill at the start: had the test 60 requests to make in time to
    // meet some, a slow machine would have refilled the bucket meanwhile.
    // Lists, not creates: the client's counts stay its own.
    let mut emptied = false;
    for _ in 0..10_000 {
        let resp = request(server.addr, "GET", "/v1/pets?limit=1", "client-key", None);
        match resp.status {
            200 if resp.header("x-ratelimit-remaining") == Some("0") => {}
            200 => continue,
            429 => assert_rate_limited(&resp),
            _ => panic!("emptying the bucket: {}", resp.describe()),
        }
        emptied = true;
        break;
    }
    assert!(emptied, "10,000 requests never emptied a bucket of 60");
    let started = Instant::now();
    let (status, stdout, stderr) = run_client(&args, Duration::from_secs(120));
    let took = started.elapsed();
    let context = format!(
        "{} {}\n--- stdout:\n{stdout}\n--- stderr:\n{stderr}\n--- server stderr:\n{}",
        client.display(),
        args.join(" "),
        server.stderr_text()
    );
    eprintln!("client run took {took:.2?}\n{context}");
    assert!(status.success(), "the client failed ({status}):\n{context}");
    assert!(
        !stderr.contains("key_banned"),
        "the client met key_banned:\n{context}"
    );
    assert_eq!(
        summary_number(&stdout, "pets created:"),
        CREATE as f64,
        "{context}"
    );
    assert_eq!(
        summary_number(&stdout, "pets listed:"),
        CREATE as f64,
        "{context}"
    );
    // The bucket was empty: about one 429 per request after the first.
    // Fewer than 3 would take requests of most of a second each (a hang,
    // not a slow machine).
    let limited = summary_number(&stdout, "429 received:");
    assert!(
        limited >= 3.0,
        "the empty bucket should have forced several 429s:\n{context}"
    );
    // Each 429 said `Retry-After: 1` and the client waits at least that.
    let waited = summary_number(&stdout, "time waited:");
    assert!(
        waited >= limited - 0.001,
        "waited {waited} s for {limited} 429s: sooner than Retry-After:\n{context}"
    );
    // Every 429 was `rate_limited` (the client logs each one).
    let logged = stderr.lines().filter(|l| l.starts_with("429 ")).count();
    assert_eq!(logged as f64, limited, "{context}");
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.starts_with("429 rate_limited "))
            .count(),
        logged,
        "{context}"
    );

    // The key is in good standing afterwards: 200, or at worst 429
    // rate_limited (the bucket may still be empty), never key_banned.
    let resp = request(server.addr, "GET", "/v1/pets?limit=1", "client-key", None);
    match resp.status {
        200 => {}
        429 => assert_rate_limited(&resp),
        _ => panic!("unexpected answer after the run: {}", resp.describe()),
    }
    thread::sleep(Duration::from_millis(1100));
    let resp = request(server.addr, "GET", "/v1/pets?limit=1", "client-key", None);
    assert_eq!(resp.status, 200, "{}", resp.describe());
}

#[test]
fn naive_client_that_retries_at_once_is_banned() {
    let server = Server::start(&keys_file("naive", "naive-key"));
    let mut ok = 0;
    let mut limited = 0;
    let mut banned = None;
    for i in 0..(PER_MINUTE + 10 * STRIKES) {
        let body = json!({"name": format!("naive-{i}"), "categoryId": 1}).to_string();
        let resp = request(server.addr, "POST", "/v1/pets", "naive-key", Some(&body));
        match (resp.status, resp.code().as_deref()) {
            (201, _) => ok += 1,
            (429, Some("rate_limited")) => {
                assert!(resp.header("retry-after").is_some(), "{}", resp.describe());
                limited += 1;
            }
            (429, Some("key_banned")) => {
                banned = Some(resp);
                break;
            }
            _ => panic!("unexpected answer: {}", resp.describe()),
        }
    }
    let banned = banned.unwrap_or_else(|| {
        panic!(
            "{ok} created, {limited} refused, never banned: the plan is too loose to tell a careless client"
        )
    });
    // The bucket of 60 (plus what refilled meanwhile) went through. The
    // first refusal is no strike (the client had not been told to wait
    // yet); each immediate retry after it is, and the 5th strike within
    // 3 s earned the ban.
    assert!(ok >= PER_MINUTE, "only {ok} created before the ban");
    assert_eq!(limited, STRIKES, "refusals before the ban");
    let retry: u64 = banned
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("key_banned without Retry-After: {}", banned.describe()));
    assert!((590..=600).contains(&retry), "{}", banned.describe());
    // Still banned for the next request.
    let resp = request(server.addr, "GET", "/v1/pets?limit=1", "naive-key", None);
    assert_eq!(resp.status, 429, "{}", resp.describe());
    assert_eq!(
        resp.code().as_deref(),
        Some("key_banned"),
        "{}",
        resp.describe()
    );
}

/// Reads one HTTP/1.1 message (head, then a `Content-Length` body) from
/// `stream`; `None` when the stream ends first.
fn read_message(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut raw = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |n| n.trim().parse().unwrap());
            if raw.len() >= end + 4 + length {
                return Some(raw);
            }
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        raw.extend_from_slice(&chunk[..n]);
    }
}

/// A proxy in front of `server` that drops the answer to the first
/// request it is sent: it hands that request to the server, reads the
/// whole answer (so the server has carried it out), and closes the
/// client's connection instead of passing the answer on. Every later
/// connection is passed through both ways. Returns its address and the
/// answer it dropped, once there is one.
fn dropping_proxy(server: SocketAddr) -> (SocketAddr, Arc<Mutex<Option<Vec<u8>>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let dropped = Arc::new(Mutex::new(None));
    let kept = Arc::clone(&dropped);
    thread::spawn(move || {
        let mut first = true;
        for client in listener.incoming() {
            let Ok(mut client) = client else { return };
            let Ok(mut upstream) = TcpStream::connect(server) else {
                return;
            };
            if std::mem::take(&mut first) {
                let request = read_message(&mut client).unwrap();
                upstream.write_all(&request).unwrap();
                let answer = read_message(&mut upstream).unwrap();
                *kept.lock().unwrap() = Some(answer);
                let _ = client.shutdown(std::net::Shutdown::Both);
                continue;
            }
            let (mut from_client, mut to_server) =
                (client.try_clone().unwrap(), upstream.try_clone().unwrap());
            thread::spawn(move || {
                let _ = std::io::copy(&mut from_client, &mut to_server);
                let _ = to_server.shutdown(std::net::Shutdown::Write);
            });
            thread::spawn(move || {
                let _ = std::io::copy(&mut upstream, &mut client);
                let _ = client.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    (addr, dropped)
}

#[test]
fn client_retries_a_create_whose_answer_was_dropped_and_makes_one_pet() {
    // The first create reaches the server, which stores the pet and
    // answers 201; the answer never reaches the client. The client
    // retries with the same Idempotency-Key and gets that same 201
    // replayed: one pet, not two.
    let client = client_example();
    let server = Server::start(&keys_file("client", "client-key"));
    let (proxy, dropped) = dropping_proxy(server.addr);
    let base = format!("http://{proxy}/v1");
    let args: Vec<String> = [
        "--base",
        &base,
        "--key",
        "client-key",
        "--create",
        "3",
        "--sell",
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    let (status, stdout, stderr) = run_client(&args, Duration::from_secs(120));
    let context = format!(
        "{} {}\n--- stdout:\n{stdout}\n--- stderr:\n{stderr}\n--- server stderr:\n{}",
        client.display(),
        args.join(" "),
        server.stderr_text()
    );
    assert!(status.success(), "the client failed ({status}):\n{context}");
    let dropped = dropped.lock().unwrap().take().expect("an answer dropped");
    let dropped = String::from_utf8_lossy(&dropped).into_owned();
    assert!(dropped.starts_with("HTTP/1.1 201 "), "{dropped}\n{context}");
    assert_eq!(summary_number(&stdout, "pets created:"), 3.0, "{context}");
    assert_eq!(summary_number(&stdout, "replayed:"), 1.0, "{context}");
    assert!(summary_number(&stdout, "retries:") >= 1.0, "{context}");
    // The server holds three pets, the dropped answer's among them.
    let listed = request(server.addr, "GET", "/v1/pets?limit=100", "client-key", None);
    assert_eq!(listed.status, 200, "{}", listed.describe());
    let pets: Value = serde_json::from_slice(&listed.body).unwrap();
    let ids: Vec<u64> = pets
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [1, 2, 3], "{context}");
    assert!(
        dropped.contains(r#"{"id":1,"name":"client-pet-1""#),
        "{dropped}"
    );
    // And it sold the first as an order: one order, completed.
    assert_eq!(summary_number(&stdout, "pets sold:"), 1.0, "{context}");
    let orders = request(server.addr, "GET", "/v1/store/orders", "client-key", None);
    let orders: Value = serde_json::from_slice(&orders.body).unwrap();
    assert_eq!(orders.as_array().map(Vec::len), Some(1), "{orders}");
    assert_eq!(orders[0]["petId"], 1);
    assert_eq!(orders[0]["status"], "completed");
}

#[test]
fn the_client_follows_the_feed_from_the_lists_cursor_and_sees_its_sale() {
    let server = Server::start(&keys_file("client", "client-key"));
    let base = format!("http://{}/v1", server.addr);
    let args: Vec<String> = [
        "--base",
        &base,
        "--key",
        "client-key",
        "--create",
        "3",
        "--sell",
        "--follow",
        "4",
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    let (status, stdout, stderr) = run_client(&args, Duration::from_secs(120));
    let context = format!(
        "--- stdout:\n{stdout}\n--- stderr:\n{stderr}\n--- server stderr:\n{}",
        server.stderr_text()
    );
    assert!(status.success(), "the client failed ({status}):\n{context}");
    // The list came before the sale: following from its cursor gives the
    // sale's four changes, and not the three creates.
    let events: Vec<&str> = stdout.lines().filter(|l| l.starts_with("event ")).collect();
    assert_eq!(
        events,
        [
            "event 4 order.placed 1",
            "event 5 pet.status_changed 1",
            "event 6 order.completed 1",
            "event 7 pet.status_changed 1",
        ],
        "{context}"
    );
    assert_eq!(summary_number(&stdout, "events:"), 4.0, "{context}");
}
