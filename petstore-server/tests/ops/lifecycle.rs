//! The process: its output, flags and environment, graceful shutdown,
//! and the connection-level limits (header timeout, header size,
//! connection count).

use crate::common;

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use common::{wait_until, x_ratelimit, Conn, Server, ServerBuilder, TempDir, KEY};

#[test]
fn prints_exactly_one_listening_line_and_no_dev_key_with_a_keys_file() {
    let mut server = Server::start(&[]);
    let lines = server.stdout_lines();
    let listening: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("listening on"))
        .collect();
    assert_eq!(listening.len(), 1, "{lines:?}");
    assert_eq!(
        listening[0].as_str(),
        format!("listening on http://127.0.0.1:{}", server.addr.port())
    );
    assert_ne!(server.addr.port(), 0, "port 0 means: pick a free one");
    assert_eq!(server.get("/healthz", None).status, 200);
    assert_eq!(server.get("/v1/pets", Some(KEY)).status, 200);

    server.signal("TERM");
    let status = server.wait_exit(Duration::from_secs(15));
    assert_eq!(status.code(), Some(0));
    let lines = server.stdout_lines();
    assert_eq!(
        lines.iter().filter(|l| l.contains("listening on")).count(),
        1,
        "{lines:?}"
    );
    assert!(
        !lines.iter().any(|l| l.starts_with("dev key:")),
        "no dev key when a keys file is given: {lines:?}"
    );
}

#[test]
fn without_keys_it_prints_a_working_dev_key_and_a_curl_line() {
    let server = ServerBuilder::default().no_keys().start();
    let line = server.wait_for_stdout_line(Duration::from_secs(5), |l| l.starts_with("dev key: "));
    let key = line.strip_prefix("dev key: ").unwrap().trim();
    assert!(
        key.len() == 67
            && key.starts_with("ps_")
            && key[3..].bytes().all(|b| b.is_ascii_hexdigit()),
        "dev key {key:?} is not ps_ + 64 hex"
    );
    let curl = server.wait_for_stdout_line(Duration::from_secs(5), |l| l.contains("curl"));
    assert!(curl.contains(key), "curl line carries the key: {curl}");
    assert!(curl.contains("Authorization: Bearer"), "{curl}");
    let base = format!("http://127.0.0.1:{}", server.addr.port());
    let url = curl
        .split_whitespace()
        .map(|w| w.trim_matches(|c| c == '\'' || c == '"'))
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in the curl line: {curl}"));
    let path = url
        .strip_prefix(&base)
        .unwrap_or_else(|| panic!("curl URL {url} is not on {base}"));
    assert!(path.starts_with("/v1/"), "{path}");

    // What curl sends for that line.
    let mut conn = server.connect();
    conn.send(
        format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\nAuthorization: Bearer {key}\r\n\r\n",
            server.addr.port()
        )
        .as_bytes(),
    )
    .unwrap();
    let resp = conn.read_response();
    assert_eq!(resp.status, 200, "{}", resp.describe());
    assert_eq!(x_ratelimit(&resp).0, 300, "the dev key is on the pro plan");
    let resp = server.post(
        "/v1/pets",
        Some(key),
        Some("application/json"),
        br#"{"name":"Rex","categoryId":1}"#,
    );
    assert_eq!(resp.status, 201, "{}", resp.describe());
    assert_eq!(server.get("/v1/pets", Some("not-the-dev-key")).status, 401);
}

/// The dev key a durable server printed, read from its output.
fn printed_dev_key(server: &Server) -> String {
    let line = server.wait_for_stdout_line(Duration::from_secs(10), |l| l.starts_with("dev key: "));
    line.strip_prefix("dev key: ").unwrap().trim().to_owned()
}

#[test]
fn the_dev_key_is_kept_in_the_data_directory_across_restarts() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new();
    let data = dir.join("data");
    let mut first = ServerBuilder::default().no_keys().data(&data).start();
    let key = printed_dev_key(&first);
    first.signal("TERM");
    assert_eq!(first.wait_exit(Duration::from_secs(15)).code(), Some(0));
    // Mode 0600, and the same key printed again, and it works.
    let file = data.join("dev.key");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{}", file.display());
    let second = ServerBuilder::default().no_keys().data(&data).start();
    assert_eq!(printed_dev_key(&second), key, "a new key after a restart");
    assert_eq!(second.get("/v1/pets", Some(&key)).status, 200);
    // In memory, a new key each time: there is no data directory.
    let a = ServerBuilder::default().no_keys().start();
    let b = ServerBuilder::default().no_keys().start();
    assert_ne!(printed_dev_key(&a), printed_dev_key(&b));
    assert_ne!(printed_dev_key(&a), key);
}

#[test]
fn with_log_format_json_every_line_is_one_json_object() {
    let mut server = ServerBuilder::default()
        .arg("--log-format")
        .arg("json")
        .arg("--access-log")
        .start();
    assert_eq!(server.get("/v1/pets", Some(KEY)).status, 200);
    assert_eq!(server.get("/v1/pets", Some("no-such-key")).status, 401);
    server.signal("TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(15)).code(), Some(0));
    let stderr = server.stderr_text();
    let lines: Vec<serde_json::Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    // Start-up, the two requests, shutdown: every line has the three
    // fields, as strings.
    assert!(lines.len() >= 5, "{stderr}");
    for line in &lines {
        for field in ["ts", "level", "msg"] {
            assert!(line[field].is_string(), "{field} in {line}");
        }
    }
    let requests: Vec<_> = lines.iter().filter(|l| l["msg"] == "request").collect();
    assert_eq!(requests.len(), 2, "{stderr}");
    assert_eq!(requests[0]["route"], "/v1/pets");
    assert_eq!(requests[0]["status"], 200);
    assert_eq!(requests[1]["status"], 401);
    assert!(lines.iter().any(|l| l["msg"] == "stopped"), "{stderr}");
    assert!(!stderr.contains(KEY), "a key in the log");

    let refused = ServerBuilder::default()
        .arg("--log-format")
        .arg("xml")
        .expect_startup_failure();
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        refused.stderr.contains("must be text or json"),
        "{}",
        refused.stderr
    );
}

#[test]
fn environment_variables_configure_it_and_flags_win() {
    let server = ServerBuilder::default().via_env().start();
    assert_eq!(
        server.get("/v1/pets", Some(KEY)).status,
        200,
        "PETSTORE_KEYS read"
    );
    drop(server);

    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let server = ServerBuilder::default()
        .via_env()
        .arg("--addr")
        .arg(format!("127.0.0.1:{port}"))
        .start();
    assert_eq!(server.addr.port(), port, "--addr wins over PETSTORE_ADDR");
    assert_eq!(server.get("/v1/pets", Some(KEY)).status, 200);
}

#[test]
fn help_explains_every_flag() {
    let out = Command::new(common::BIN).arg("--help").output().unwrap();
    assert!(out.status.success(), "{}", out.status);
    let text = String::from_utf8_lossy(&out.stdout);
    for word in [
        "--addr",
        "--keys",
        "--base-url",
        "--cors-origin",
        "--header-timeout",
        "--body-timeout",
        "--max-connections",
        "--max-connections-per-address",
        "--write-timeout",
        "PETSTORE_MAX_CONNECTIONS_PER_ADDRESS",
        "PETSTORE_WRITE_TIMEOUT",
        "--in-memory",
        "PETSTORE_ADDR",
        "PETSTORE_KEYS",
        "PETSTORE_BASE_URL",
        "--tls-cert",
        "--tls-key",
        "PETSTORE_TLS_CERT",
        "PETSTORE_TLS_KEY",
        "keygen",
    ] {
        assert!(
            text.contains(word),
            "--help does not mention {word}:\n{text}"
        );
    }
    let bad = Command::new(common::BIN)
        .arg("--no-such-flag")
        .output()
        .unwrap();
    assert!(!bad.status.success(), "an unknown flag is an error");
}

#[test]
fn sigterm_finishes_the_request_in_flight_then_exits_0() {
    let mut server = Server::start(&[]);
    let mut conn = server.connect();
    // The connection is accepted and served...
    conn.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert_eq!(conn.read_response().status, 200);
    // ...and now carries a request whose body is on its way. The server
    // asks for the body (100 Continue) only once the request has passed
    // its checks and is being read: from then on it is in flight.
    let body = br#"{"name":"Slowpoke","categoryId":1}"#;
    let head = format!(
        "POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    conn.send(head.as_bytes()).unwrap();
    let interim = read_head(&mut conn);
    assert_eq!(interim, "HTTP/1.1 100 Continue", "the body is asked for");
    conn.send(&body[..10]).unwrap();
    server.signal("TERM");

    // The listener is closed (the log says so, after closing it), with
    // the request in flight still open...
    assert!(
        wait_until(Duration::from_secs(15), || server
            .stderr_text()
            .contains("shutting down: waiting for 1 open connection(s)")),
        "no shutdown with one connection open logged; stderr:\n{}",
        server.stderr_text()
    );
    // ...so a new connection is refused outright: not a timeout, not any
    // error.
    let addr = server.addr;
    match Conn::try_open(addr) {
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}"),
        Ok(_) => panic!("a new connection was accepted after SIGTERM"),
    }
    assert!(
        server.try_exit().is_none(),
        "exited with a request in flight; stderr:\n{}",
        server.stderr_text()
    );

    conn.send(&body[10..]).unwrap();
    let resp = conn.read_response();
    assert_eq!(resp.status, 201, "{}", resp.describe());
    assert_eq!(resp.json()["name"], "Slowpoke");

    // It exits once that request is answered, not at the end of the 10 s
    // shutdown grace (which would also end it, and log that requests
    // were still in flight: that line, not the time taken, tells them
    // apart).
    let status = server.wait_exit(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "stderr:\n{}", server.stderr_text());
    assert!(
        !server.stderr_text().contains("still in flight"),
        "the grace ran out; stderr:\n{}",
        server.stderr_text()
    );
    match Conn::try_open(addr) {
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}"),
        Ok(_) => panic!("a connection was accepted after exit"),
    }
}

/// Reads one response head (an interim one included) straight from the
/// socket, and returns its status line. The harness skips interim
/// responses; this test waits on one.
fn read_head(conn: &mut Conn) -> String {
    use std::io::Read;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    // Byte by byte, so that nothing after the head is consumed; bounded by
    // the harness's read timeout and by 1 KiB.
    while !head.ends_with(b"\r\n\r\n") && head.len() < 1024 {
        match conn.stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            other => panic!("reading a response head: {other:?}"),
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    text.lines().next().unwrap_or_default().to_owned()
}

#[test]
fn sigint_exits_0() {
    let mut server = Server::start(&[]);
    assert_eq!(server.get("/healthz", None).status, 200);
    server.signal("INT");
    let status = server.wait_exit(Duration::from_secs(15));
    assert_eq!(status.code(), Some(0), "stderr:\n{}", server.stderr_text());
}

#[test]
fn a_header_trickle_is_cut_off_by_the_header_timeout() {
    let server = Server::start(&["--header-timeout", "1"]);
    // Started before connecting: the server's deadline can only start
    // later, so the connection cannot close before 1 s.
    let start = Instant::now();
    let mut conn = server.connect();
    conn.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").unwrap();
    let mut closed = false;
    // One header line every 250 ms: a per-read timeout never fires, a
    // deadline for the whole head does (after 1 s; the default is 10 s).
    // The bound, 8 s, leaves the 1 s close 7 s of slack and stays below
    // the default, which a server ignoring the flag would use.
    while start.elapsed() < Duration::from_secs(8) {
        if conn.send(b"X-Slow: a\r\n").is_err() || conn.closed_within(Duration::from_millis(250)) {
            closed = true;
            break;
        }
    }
    let lasted = start.elapsed();
    assert!(
        closed,
        "connection still open after 8 s of trickling headers"
    );
    assert!(
        lasted >= Duration::from_secs(1),
        "closed after {lasted:?}, before the 1 s header timeout"
    );
    let answer = String::from_utf8_lossy(conn.buffered()).into_owned();
    assert!(
        !answer.starts_with("HTTP/1.1 2"),
        "the trickled request was served: {answer}"
    );
    // Others are still served.
    assert_eq!(server.get("/healthz", None).status, 200);
}

#[test]
fn oversized_headers_are_431() {
    let server = Server::start(&[]);
    let big = "a".repeat(17 * 1024);
    let resp = server.raw(
        format!("GET /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nX-Big: {big}\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    );
    assert_eq!(resp.status, 431, "a 17 KiB header: {}", resp.describe());

    let mut many = format!("GET /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n");
    // hyper's limit of 100 header fields (docs/http.md, "Bodies").
    for i in 0..98 {
        many.push_str(&format!("X-Field-{i}: v\r\n"));
    }
    many.push_str("Connection: close\r\n\r\n");
    let resp = server.raw(many.as_bytes());
    assert_eq!(resp.status, 431, "101 header fields: {}", resp.describe());

    // Within the limits: fine.
    let medium = "a".repeat(8 * 1024);
    let mut ok = format!(
        "GET /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nX-Medium: {medium}\r\n"
    );
    for i in 0..96 {
        ok.push_str(&format!("X-Field-{i}: v\r\n"));
    }
    ok.push_str("Connection: close\r\n\r\n");
    let resp = server.raw(ok.as_bytes());
    assert_eq!(resp.status, 200, "{}", resp.describe());
}

#[test]
fn connections_over_the_maximum_wait_and_are_served_later() {
    // All from 127.0.0.1: the per-address cap (default an eighth, 1 here)
    // is lifted to the whole maximum; tests/net/hostile_clients.rs tests the cap.
    // The header timeout is far longer than the test: the two held
    // connections (idle keep-alive ones) stay open until they are
    // dropped, however slow the machine.
    let mut server = Server::start(&[
        "--max-connections",
        "2",
        "--max-connections-per-address",
        "2",
        "--header-timeout",
        "600",
    ]);
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut c = server.connect();
        c.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert_eq!(c.read_response().status, 200);
        held.push(c);
    }
    let mut waiting = server.connect();
    waiting
        .send(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let early = waiting.try_read_response(Duration::from_millis(700));
    assert!(
        early.is_err(),
        "a third connection was served while two were open: {early:?}"
    );
    drop(held.pop());
    let resp = waiting.read_response();
    assert_eq!(resp.status, 200, "served once a slot is free");
    drop(held);

    let addr = server.addr;
    let clients: Vec<_> = (0..8)
        .map(|_| {
            thread::spawn(move || {
                let mut c = Conn::open(addr);
                c.send(
                    format!(
                        "GET /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nConnection: close\r\n\r\n"
                    )
                    .as_bytes(),
                )
                .unwrap();
                c.read_response().status
            })
        })
        .collect();
    for c in clients {
        assert_eq!(c.join().unwrap(), 200);
    }
    assert!(server.try_exit().is_none(), "still running");
    assert_eq!(server.get("/healthz", None).status, 200);
}
