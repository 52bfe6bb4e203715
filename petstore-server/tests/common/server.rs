//! A real server process: how it is started, its output, its end.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

#[allow(unused_imports)]
use super::*;

/// Configures and starts one server process.
#[derive(Debug, Clone)]
pub struct ServerBuilder {
    keys: KeysSpec,
    args: Vec<String>,
    envs: Vec<(String, String)>,
    via_env: bool,
    data: Option<PathBuf>,
    postgres: Option<String>,
    addr: Option<String>,
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
            addr: None,
        }
    }
}

impl ServerBuilder {
    /// Listens on `addr` (a replica restarted behind a load balancer
    /// comes back on its own port) instead of a port of the system's choice.
    pub fn addr(mut self, addr: &str) -> Self {
        self.addr = Some(addr.to_owned());
        self
    }

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
        let addr = self.addr.as_deref().unwrap_or("127.0.0.1:0");
        if self.via_env {
            cmd.env("PETSTORE_ADDR", addr);
            if let Some(p) = &keys_path {
                cmd.env("PETSTORE_KEYS", p);
            }
        } else {
            cmd.args(["--addr", addr]);
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
        let dir = TempDir::new();
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

/// Parses a `listening on http://IP:PORT` (or `https://`) line.
pub fn parse_listening_line(line: &str) -> Option<SocketAddr> {
    let rest = line.strip_prefix("listening on ")?;
    let rest = (rest.strip_prefix("http://")).or_else(|| rest.strip_prefix("https://"))?;
    rest.parse().ok()
}

/// A running server process; killed on drop.
#[derive(Debug)]
pub struct Server {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    dir: TempDir,
    keys_path: Option<PathBuf>,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    readers: Vec<thread::JoinHandle<()>>,
    exit: Option<ExitStatus>,
}

impl Server {
    /// The value of the metric line `name` in its `/metrics`, 0 when
    /// absent.
    pub fn metric(&self, name: &str) -> u64 {
        let text = self.get("/metrics", None).text();
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or(0)
    }

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

    /// Its admin listener's address (`--admin-addr`), as it printed it.
    pub fn admin_addr(&self) -> SocketAddr {
        let line = self.wait_for_stdout_line(Duration::from_secs(10), |l| l.starts_with("admin "));
        line.rsplit("http://").next().unwrap().parse().unwrap()
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

    /// Its stderr once `needle` is in it. The harness reads the pipe on a
    /// thread of its own, so a line the server wrote before answering
    /// may reach the test after the response: wait for it, at most 30 s,
    /// a bound that only cuts off a line that never comes.
    pub fn stderr_once_logged(&self, needle: &str) -> String {
        assert!(
            wait_until(Duration::from_secs(30), || self
                .stderr_text()
                .contains(needle)),
            "never logged {needle:?}:\n{}",
            self.stderr_text()
        );
        self.stderr_text()
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
    /// Kills the process, then prints all it wrote on stderr. libtest
    /// captures a test's output and shows it only when the test fails,
    /// so a failure shows every server the test started (a replica
    /// replaced halfway through included), and a server's panic line
    /// names its place there.
    fn drop(&mut self) {
        if self.try_exit().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        self.join_readers();
        let stderr = self.stderr_text();
        if !stderr.is_empty() {
            eprintln!(
                "--- stderr of the server on {} (pid {}):\n{}--- end of its stderr",
                self.addr,
                self.child.id(),
                stderr
            );
        }
        // `dir` goes with the fields, after the process is gone.
    }
}
