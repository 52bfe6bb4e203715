//! Black-box test harness: spawns the `petstore-server` binary and talks
//! HTTP/1.1 to it over plain `std::net::TcpStream`s, so every test controls
//! the exact bytes on the wire.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub mod redis;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

pub mod postgres;

/// The server binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_petstore-server");

/// How long the server may take to print its `listening on` line.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);

/// Read timeout of an ordinary request.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Enterprise key with limits no test reaches.
pub const KEY: &str = "test-key-main";
/// Free-plan key; the default keys file overrides the free plan to 3/min.
pub const FREE_KEY: &str = "test-key-free";
/// Pro-plan key stored in the keys file only as its SHA-256.
pub const HASHED_KEY: &str = "test-key-hashed";

/// The exact `WWW-Authenticate` of a request without credentials.
pub const CHALLENGE: &str = r#"Bearer realm="petstore""#;
/// The exact `WWW-Authenticate` of a request with a bad or unknown key.
pub const CHALLENGE_INVALID: &str = r#"Bearer realm="petstore", error="invalid_token""#;

/// Lower-case hex SHA-256 of `s`.
pub fn sha256_hex(s: &str) -> String {
    let digest = Sha256::digest(s.as_bytes());
    let mut out = String::with_capacity(64);
    for b in digest {
        write!(out, "{b:02x}").unwrap();
    }
    out
}

/// The keys file most tests run with.
pub fn default_keys() -> Value {
    json!({
        "keys": [
            {"name": "main", "key": KEY, "plan": "enterprise",
             "perMinute": 1_000_000, "perDay": 100_000_000},
            {"name": "free", "key": FREE_KEY, "plan": "free"},
            {"name": "hashed", "sha256": sha256_hex(HASHED_KEY), "plan": "pro"}
        ],
        "plans": {"free": {"perMinute": 3, "perDay": 1000}},
        "ban": {"strikes": 3, "windowSeconds": 60, "banSeconds": 600},
        "anonymousPerMinute": 1000
    })
}

/// Seconds since the Unix epoch.
pub fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A fresh, empty directory under the system temp dir.
pub fn unique_temp_dir() -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let dir = std::env::temp_dir().join(format!("petstore-it-{}-{n}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Polls `cond` every 20 ms until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

#[derive(Debug, Clone)]
enum KeysSpec {
    None,
    Json(Value),
    Text(String),
    Path(PathBuf),
}

/// Configures and starts one server process.
#[derive(Debug, Clone)]
pub struct ServerBuilder {
    keys: KeysSpec,
    args: Vec<String>,
    envs: Vec<(String, String)>,
    via_env: bool,
    data: Option<PathBuf>,
    postgres: Option<String>,
}

impl Default for ServerBuilder {
    fn default() -> Self {
        ServerBuilder {
            keys: KeysSpec::Json(default_keys()),
            args: Vec::new(),
            envs: Vec::new(),
            via_env: false,
            data: None,
            postgres: None,
        }
    }
}

impl ServerBuilder {
    /// Writes this JSON as the keys file.
    pub fn keys(mut self, keys: Value) -> Self {
        self.keys = KeysSpec::Json(keys);
        self
    }

    /// Writes this exact text as the keys file.
    pub fn keys_text(mut self, text: &str) -> Self {
        self.keys = KeysSpec::Text(text.to_owned());
        self
    }

    /// Passes this path as the keys file, writing nothing.
    pub fn keys_path(mut self, path: &Path) -> Self {
        self.keys = KeysSpec::Path(path.to_owned());
        self
    }

    /// No `--keys` at all (the server makes a dev key).
    pub fn no_keys(mut self) -> Self {
        self.keys = KeysSpec::None;
        self
    }

    /// A durable inventory in `dir` (`--data dir`) instead of the
    /// default `--in-memory`.
    pub fn data(mut self, dir: &Path) -> Self {
        self.data = Some(dir.to_owned());
        self
    }

    /// The inventory in PostgreSQL (`--postgres url`) instead of the
    /// default `--in-memory`.
    pub fn postgres(mut self, url: &str) -> Self {
        self.postgres = Some(url.to_owned());
        self
    }

    /// One more command-line argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// One more environment variable for the child.
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.envs.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Gives the address and the keys file through `PETSTORE_ADDR` and
    /// `PETSTORE_KEYS` instead of flags.
    pub fn via_env(mut self) -> Self {
        self.via_env = true;
        self
    }

    fn command(&self, dir: &Path) -> (Command, Option<PathBuf>) {
        let keys_path = match &self.keys {
            KeysSpec::None => None,
            KeysSpec::Path(p) => Some(p.clone()),
            KeysSpec::Json(v) => {
                let p = dir.join("keys.json");
                std::fs::write(&p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
                Some(p)
            }
            KeysSpec::Text(t) => {
                let p = dir.join("keys.json");
                std::fs::write(&p, t).unwrap();
                Some(p)
            }
        };
        let mut cmd = Command::new(BIN);
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("PETSTORE_") {
                cmd.env_remove(name);
            }
        }
        if self.via_env {
            cmd.env("PETSTORE_ADDR", "127.0.0.1:0");
            if let Some(p) = &keys_path {
                cmd.env("PETSTORE_KEYS", p);
            }
        } else {
            cmd.args(["--addr", "127.0.0.1:0"]);
            if let Some(p) = &keys_path {
                cmd.arg("--keys").arg(p);
            }
        }
        match (&self.postgres, &self.data) {
            (Some(url), _) => cmd.arg("--postgres").arg(url),
            (None, Some(dir)) => cmd.arg("--data").arg(dir),
            (None, None) => cmd.arg("--in-memory"),
        };
        cmd.args(&self.args);
        for (k, v) in &self.envs {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        (cmd, keys_path)
    }

    /// Spawns the server with its output readers; not yet listening.
    fn spawn(self) -> Server {
        let dir = unique_temp_dir();
        let (mut cmd, keys_path) = self.command(&dir);
        let mut child = cmd.spawn().expect("spawn petstore-server");
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let readers = spawn_readers(&mut child, &stdout, &stderr);
        Server {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            dir,
            keys_path,
            stdout,
            stderr,
            readers,
            exit: None,
        }
    }

    /// Starts the server and waits for its `listening on` line.
    pub fn start(self) -> Server {
        let mut server = self.spawn();
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Some(addr) = server.listening_addr() {
                server.addr = addr;
                return server;
            }
            if let Some(status) = server.child.try_wait().unwrap() {
                server.exit = Some(status);
                server.join_readers();
                panic!(
                    "server exited with {status} before listening\n--- stdout:\n{}\n--- stderr:\n{}",
                    server.stdout_lines().join("\n"),
                    server.stderr_text()
                );
            }
            if Instant::now() >= deadline {
                panic!(
                    "server printed no `listening on` line within {STARTUP_TIMEOUT:?}\n--- stdout:\n{}\n--- stderr:\n{}",
                    server.stdout_lines().join("\n"),
                    server.stderr_text()
                );
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Runs a server that must refuse to start; returns how it ended.
    pub fn expect_startup_failure(self) -> Failure {
        let mut server = self.spawn();
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Some(status) = server.child.try_wait().unwrap() {
                server.exit = Some(status);
                server.join_readers();
                return Failure {
                    status,
                    stdout: server.stdout_lines().join("\n"),
                    stderr: server.stderr_text(),
                };
            }
            if server.listening_addr().is_some() {
                panic!(
                    "server started although it should have refused to\n--- stderr:\n{}",
                    server.stderr_text()
                );
            }
            assert!(
                Instant::now() < deadline,
                "server neither started nor exited within {STARTUP_TIMEOUT:?}"
            );
            thread::sleep(Duration::from_millis(10));
        }
    }
}

/// How a server that refused to start ended.
#[derive(Debug)]
pub struct Failure {
    /// Its exit status.
    pub status: ExitStatus,
    /// Everything it printed on stdout.
    pub stdout: String,
    /// Everything it printed on stderr.
    pub stderr: String,
}

fn spawn_readers(
    child: &mut Child,
    stdout: &Arc<Mutex<Vec<String>>>,
    stderr: &Arc<Mutex<Vec<u8>>>,
) -> Vec<thread::JoinHandle<()>> {
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let lines = Arc::clone(stdout);
    let errbuf = Arc::clone(stderr);
    let t1 = thread::spawn(move || {
        let mut pending = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            match out.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    pending.extend_from_slice(&chunk[..n]);
                    while let Some(pos) = pending.iter().position(|&b| b == b'\n') {
                        let line: Vec<u8> = pending.drain(..=pos).collect();
                        let text = String::from_utf8_lossy(&line);
                        let text = text.trim_end_matches(['\r', '\n']).to_owned();
                        lines.lock().unwrap().push(text);
                    }
                }
            }
        }
        if !pending.is_empty() {
            lines
                .lock()
                .unwrap()
                .push(String::from_utf8_lossy(&pending).into_owned());
        }
    });
    let t2 = thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        loop {
            match err.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => errbuf.lock().unwrap().extend_from_slice(&chunk[..n]),
            }
        }
    });
    vec![t1, t2]
}

/// Parses a `listening on http://IP:PORT` line.
pub fn parse_listening_line(line: &str) -> Option<SocketAddr> {
    line.strip_prefix("listening on http://")?.parse().ok()
}

/// A running server process; killed on drop.
#[derive(Debug)]
pub struct Server {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    dir: PathBuf,
    keys_path: Option<PathBuf>,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    readers: Vec<thread::JoinHandle<()>>,
    exit: Option<ExitStatus>,
}

impl Server {
    /// A server with the default keys file and these extra flags.
    pub fn start(args: &[&str]) -> Server {
        let mut b = ServerBuilder::default();
        for a in args {
            b = b.arg(*a);
        }
        b.start()
    }

    /// A builder with the default keys file.
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    fn listening_addr(&self) -> Option<SocketAddr> {
        self.stdout
            .lock()
            .unwrap()
            .iter()
            .find_map(|l| parse_listening_line(l))
    }

    fn join_readers(&mut self) {
        for t in self.readers.drain(..) {
            let _ = t.join();
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Every stdout line so far.
    pub fn stdout_lines(&self) -> Vec<String> {
        self.stdout.lock().unwrap().clone()
    }

    /// Everything on stderr so far.
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Bytes of stderr so far.
    pub fn stderr_len(&self) -> usize {
        self.stderr.lock().unwrap().len()
    }

    /// Waits for a stdout line matching `pred`.
    pub fn wait_for_stdout_line(&self, timeout: Duration, pred: impl Fn(&str) -> bool) -> String {
        let mut found = None;
        wait_until(timeout, || {
            found = self.stdout_lines().into_iter().find(|l| pred(l));
            found.is_some()
        });
        found.unwrap_or_else(|| {
            panic!(
                "no matching stdout line within {timeout:?}; stdout:\n{}",
                self.stdout_lines().join("\n")
            )
        })
    }

    /// The keys file it was started with.
    pub fn keys_path(&self) -> &Path {
        self.keys_path.as_deref().expect("server has a keys file")
    }

    /// Rewrites the keys file (send `HUP` afterwards to reload it).
    pub fn write_keys(&self, keys: &Value) {
        self.write_keys_text(&serde_json::to_string_pretty(keys).unwrap());
    }

    /// Rewrites the keys file with this exact text.
    pub fn write_keys_text(&self, text: &str) {
        let tmp = self.dir.join("keys.json.tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, self.keys_path()).unwrap();
    }

    /// Sends a signal (`"HUP"`, `"TERM"`, `"INT"`) with `kill`.
    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{sig} failed: {status}");
    }

    /// The exit status if the process has ended.
    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().unwrap();
        }
        self.exit
    }

    /// Waits for the process to end; panics after `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_exit() {
                self.join_readers();
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "server did not exit within {timeout:?}; stderr:\n{}",
                self.stderr_text()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// A new connection.
    pub fn connect(&self) -> Conn {
        Conn::open(self.addr)
    }

    /// Sends these exact bytes on a new connection; reads one response.
    pub fn raw(&self, bytes: &[u8]) -> Response {
        let mut conn = self.connect();
        // The server may answer and close before it has read everything.
        let _ = conn.send(bytes);
        conn.read_response()
    }

    /// A request with `Host`, these headers and `Connection: close`; a
    /// `Content-Length` is added when there is a body.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Response {
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", self.addr);
        for (name, value) in headers {
            req.push_str(&format!("{name}: {value}\r\n"));
        }
        if let Some(body) = body {
            req.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        req.push_str("Connection: close\r\n\r\n");
        let mut bytes = req.into_bytes();
        if let Some(body) = body {
            bytes.extend_from_slice(body);
        }
        self.raw(&bytes)
    }

    /// `GET path`, with `Authorization: Bearer key` when a key is given.
    pub fn get(&self, path: &str, key: Option<&str>) -> Response {
        let auth = key.map(|k| format!("Bearer {k}"));
        let mut headers = Vec::new();
        if let Some(a) = &auth {
            headers.push(("Authorization", a.as_str()));
        }
        self.request("GET", path, &headers, None)
    }

    /// `POST path` with this body, `Content-Type` when given, and the key.
    pub fn post(
        &self,
        path: &str,
        key: Option<&str>,
        content_type: Option<&str>,
        body: &[u8],
    ) -> Response {
        let auth = key.map(|k| format!("Bearer {k}"));
        let mut headers = Vec::new();
        if let Some(a) = &auth {
            headers.push(("Authorization", a.as_str()));
        }
        if let Some(ct) = content_type {
            headers.push(("Content-Type", ct));
        }
        self.request("POST", path, &headers, Some(body))
    }

    /// Creates a pet with the main key; asserts 201; returns the pet.
    pub fn create_pet(&self, body: &Value) -> Value {
        let resp = self.post(
            "/v1/pets",
            Some(KEY),
            Some("application/json"),
            body.to_string().as_bytes(),
        );
        assert_eq!(resp.status, 201, "create {body}: {}", resp.describe());
        resp.json()
    }

    /// Lists with the main key; asserts 200; returns the ids and the
    /// `Link` header.
    pub fn list_ids(&self, path: &str) -> (Vec<u64>, Option<String>) {
        let resp = self.get(path, Some(KEY));
        assert_eq!(resp.status, 200, "GET {path}: {}", resp.describe());
        let ids = resp
            .json()
            .as_array()
            .unwrap_or_else(|| panic!("GET {path}: body is not an array: {}", resp.describe()))
            .iter()
            .map(|p| p["id"].as_u64().expect("pet id"))
            .collect();
        let link = resp.header_all("link");
        assert!(
            link.len() <= 1,
            "GET {path}: several Link headers: {link:?}"
        );
        (ids, link.first().map(|s| (*s).to_owned()))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.try_exit().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The headers of a response: a case-insensitive multimap in order.
#[derive(Debug, Clone, Default)]
pub struct Headers(pub Vec<(String, String)>);

impl Headers {
    /// Every value of this header, in order.
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// One parsed HTTP response.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The headers.
    pub headers: Headers,
    /// The body (de-chunked).
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of a header.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.all(name).first().copied()
    }

    /// Every value of a header.
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers.all(name)
    }

    /// The one value of a header; panics if it is absent or repeated.
    pub fn single(&self, name: &str) -> &str {
        let all = self.headers.all(name);
        assert_eq!(
            all.len(),
            1,
            "expected exactly one `{name}` header: {}",
            self.describe()
        );
        all[0]
    }

    /// A header parsed as an integer.
    pub fn header_u64(&self, name: &str) -> u64 {
        let v = self.single(name);
        v.trim().parse().unwrap_or_else(|_| {
            panic!(
                "`{name}: {v}` is not a non-negative integer: {}",
                self.describe()
            )
        })
    }

    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.describe()))
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Status, headers and (the start of) the body, for failure messages.
    pub fn describe(&self) -> String {
        let mut s = format!("HTTP {}\n", self.status);
        for (n, v) in &self.headers.0 {
            s.push_str(&format!("{n}: {v}\n"));
        }
        let body = self.text();
        let body: String = body.chars().take(2000).collect();
        s.push_str(&body);
        s
    }
}

/// One client connection.
#[derive(Debug)]
pub struct Conn {
    /// The socket.
    pub stream: TcpStream,
    buf: Vec<u8>,
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

impl Conn {
    /// Connects; panics on failure.
    pub fn open(addr: SocketAddr) -> Conn {
        Conn::try_open(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"))
    }

    /// Connects.
    pub fn try_open(addr: SocketAddr) -> io::Result<Conn> {
        Conn::from_stream(TcpStream::connect_timeout(&addr, Duration::from_secs(5))?)
    }

    /// A connection over an already connected stream (e.g. one bound to
    /// another source address).
    pub fn from_stream(stream: TcpStream) -> io::Result<Conn> {
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            buf: Vec::new(),
        })
    }

    /// Writes these bytes.
    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    /// Reads one response within [`IO_TIMEOUT`]; panics on failure.
    pub fn read_response(&mut self) -> Response {
        self.try_read_response(IO_TIMEOUT)
            .unwrap_or_else(|e| panic!("reading the response: {e}"))
    }

    /// Reads one response; fails if a read waits longer than `timeout`.
    pub fn try_read_response(&mut self, timeout: Duration) -> io::Result<Response> {
        self.stream.set_read_timeout(Some(timeout))?;
        loop {
            let resp = self.read_one()?;
            // Skip interim responses (100 Continue).
            if !(100..200).contains(&resp.status) || resp.status == 101 {
                return Ok(resp);
            }
        }
    }

    /// Reads more bytes into the buffer; `Ok(0)` at end of stream.
    fn fill(&mut self) -> io::Result<usize> {
        let mut chunk = [0u8; 16384];
        let n = self.stream.read(&mut chunk)?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    fn eof() -> io::Error {
        io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed")
    }

    fn read_one(&mut self) -> io::Result<Response> {
        let head_end = loop {
            if let Some(pos) = find(&self.buf, b"\r\n\r\n") {
                break pos;
            }
            if self.fill()? == 0 {
                return Err(Conn::eof());
            }
        };
        let head: Vec<u8> = self.buf.drain(..head_end + 4).collect();
        let head = String::from_utf8_lossy(&head[..head_end]).into_owned();
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or_default();
        if !version.starts_with("HTTP/1.") {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad status line {status_line:?}"),
            ));
        }
        let status: u16 = parts.next().and_then(|s| s.parse().ok()).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad status line {status_line:?}"),
            )
        })?;
        let mut headers = Headers::default();
        for line in lines {
            if let Some((n, v)) = line.split_once(':') {
                headers
                    .0
                    .push((n.trim().to_ascii_lowercase(), v.trim().to_owned()));
            }
        }
        let chunked = headers
            .all("transfer-encoding")
            .iter()
            .any(|v| v.to_ascii_lowercase().contains("chunked"));
        let length = headers
            .all("content-length")
            .first()
            .and_then(|v| v.trim().parse::<usize>().ok());
        let body = if (100..200).contains(&status) || status == 204 || status == 304 {
            Vec::new()
        } else if chunked {
            self.read_chunked()?
        } else if let Some(len) = length {
            while self.buf.len() < len {
                if self.fill()? == 0 {
                    return Err(Conn::eof());
                }
            }
            self.buf.drain(..len).collect()
        } else {
            while self.fill()? != 0 {}
            std::mem::take(&mut self.buf)
        };
        Ok(Response {
            status,
            headers,
            body,
        })
    }

    fn read_line(&mut self) -> io::Result<String> {
        loop {
            if let Some(pos) = find(&self.buf, b"\r\n") {
                let line: Vec<u8> = self.buf.drain(..pos + 2).collect();
                return Ok(String::from_utf8_lossy(&line[..pos]).into_owned());
            }
            if self.fill()? == 0 {
                return Err(Conn::eof());
            }
        }
    }

    fn read_chunked(&mut self) -> io::Result<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            let line = self.read_line()?;
            let size_text = line.split(';').next().unwrap_or_default().trim();
            let size = usize::from_str_radix(size_text, 16).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidData, format!("chunk size {line:?}"))
            })?;
            if size == 0 {
                // Trailers, up to the empty line.
                while !self.read_line()?.is_empty() {}
                return Ok(body);
            }
            while self.buf.len() < size + 2 {
                if self.fill()? == 0 {
                    return Err(Conn::eof());
                }
            }
            body.extend(self.buf.drain(..size));
            self.buf.drain(..2);
        }
    }

    /// Whether the peer has closed the connection (or reset it), waiting
    /// at most `timeout` for a sign of it; bytes that arrive meanwhile are
    /// kept for [`Conn::read_response`].
    pub fn closed_within(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            match self.fill() {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return false
                }
                Err(_) => return true,
            }
        }
    }

    /// Bytes received but not yet consumed.
    pub fn buffered(&self) -> &[u8] {
        &self.buf
    }
}

/// Asserts an error response: this status, `application/json`, a body of
/// exactly `{code, message, status}` with this code and `status` equal to
/// the HTTP status. Returns the message.
pub fn assert_error(resp: &Response, status: u16, code: &str) -> String {
    assert_eq!(resp.status, status, "wrong status: {}", resp.describe());
    let ct = resp.single("content-type").to_ascii_lowercase();
    assert!(
        ct == "application/json" || ct.starts_with("application/json;"),
        "error Content-Type is not application/json: {}",
        resp.describe()
    );
    let v = resp.json();
    let obj = v
        .as_object()
        .unwrap_or_else(|| panic!("error body is not an object: {}", resp.describe()));
    let keys: BTreeSet<&str> = obj.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        BTreeSet::from(["code", "message", "status"]),
        "error body fields: {}",
        resp.describe()
    );
    assert_eq!(obj["code"], code, "error code: {}", resp.describe());
    assert_eq!(
        obj["status"].as_u64(),
        Some(u64::from(status)),
        "error body status: {}",
        resp.describe()
    );
    let message = obj["message"]
        .as_str()
        .unwrap_or_else(|| panic!("message is not a string: {}", resp.describe()));
    assert!(
        !message.trim().is_empty(),
        "empty message: {}",
        resp.describe()
    );
    message.to_owned()
}

/// Whether `message` names `field` as a word of its own.
pub fn names(message: &str, field: &str) -> bool {
    message
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|w| w == field)
}

/// Asserts that the error message names the field.
pub fn assert_names(message: &str, field: &str, context: &str) {
    assert!(
        names(message, field),
        "{context}: message {message:?} does not name `{field}`"
    );
}

/// A parsed `RateLimit` header: `"minute";r=42;t=18`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimitField {
    /// The window name.
    pub name: String,
    /// `r=`: requests remaining.
    pub remaining: u64,
    /// `t=`: seconds until the window is full again.
    pub reset: u64,
}

/// Parses a `RateLimit` header value of one window.
pub fn parse_ratelimit(value: &str) -> RateLimitField {
    let mut parts = value.split(';').map(str::trim);
    let name = parts.next().unwrap_or_default();
    let name = name
        .strip_prefix('"')
        .and_then(|n| n.strip_suffix('"'))
        .unwrap_or_else(|| panic!("RateLimit {value:?}: window name not quoted"));
    let mut remaining = None;
    let mut reset = None;
    for p in parts {
        let (k, v) = p
            .split_once('=')
            .unwrap_or_else(|| panic!("RateLimit {value:?}: parameter {p:?}"));
        let n: u64 = v
            .parse()
            .unwrap_or_else(|_| panic!("RateLimit {value:?}: {p:?} not an integer"));
        match k {
            "r" => remaining = Some(n),
            "t" => reset = Some(n),
            _ => panic!("RateLimit {value:?}: unexpected parameter {k}"),
        }
    }
    RateLimitField {
        name: name.to_owned(),
        remaining: remaining.unwrap_or_else(|| panic!("RateLimit {value:?}: no r=")),
        reset: reset.unwrap_or_else(|| panic!("RateLimit {value:?}: no t=")),
    }
}

/// The `X-RateLimit-*` triple of a response: limit, remaining, reset.
pub fn x_ratelimit(resp: &Response) -> (u64, u64, u64) {
    (
        resp.header_u64("x-ratelimit-limit"),
        resp.header_u64("x-ratelimit-remaining"),
        resp.header_u64("x-ratelimit-reset"),
    )
}

/// Asserts that all four rate-limit headers are present once.
pub fn assert_has_ratelimit_headers(resp: &Response) {
    for h in [
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
        "ratelimit-policy",
        "ratelimit",
    ] {
        let _ = resp.single(h);
    }
}
