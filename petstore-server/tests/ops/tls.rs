//! TLS as an operator meets it: `--tls-cert`/`--tls-key`, a broken pair
//! refused at start naming the file, SIGHUP reloading the pair (new
//! connections get the new certificate, open ones keep theirs, a broken
//! pair leaves the old one in force), the certificate's expiry in
//! `/metrics` following the pair in force, plain HTTP on the TLS port
//! not served, and a client that never says hello closed by the header
//! timeout.

use crate::common;

use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant};

use common::transport::{build, connect, peer_certificate, runtime, TestCa, Transport};
use common::*;

fn tls_server(ca: &TestCa, extra: &[&str]) -> ServerBuilder {
    let mut builder = Server::builder()
        .arg("--tls-cert")
        .arg(ca.cert.to_str().unwrap())
        .arg("--tls-key")
        .arg(ca.key.to_str().unwrap());
    for arg in extra {
        builder = builder.arg(*arg);
    }
    builder
}

#[test]
fn a_missing_or_broken_pair_refuses_the_start_naming_the_file() {
    let dir = TempDir::new();
    let ca = TestCa::new(&dir);

    let missing = dir.join("nowhere.crt");
    let failure = Server::builder()
        .arg("--tls-cert")
        .arg(missing.to_str().unwrap())
        .arg("--tls-key")
        .arg(ca.key.to_str().unwrap())
        .expect_startup_failure();
    assert_eq!(failure.status.code(), Some(2), "{}", failure.stderr);
    assert!(failure.stderr.contains("nowhere.crt"), "{}", failure.stderr);

    let garbage = dir.join("garbage.key");
    std::fs::write(&garbage, "not a key\n").unwrap();
    let failure = Server::builder()
        .arg("--tls-cert")
        .arg(ca.cert.to_str().unwrap())
        .arg("--tls-key")
        .arg(garbage.to_str().unwrap())
        .expect_startup_failure();
    assert_eq!(failure.status.code(), Some(2), "{}", failure.stderr);
    assert!(failure.stderr.contains("garbage.key"), "{}", failure.stderr);

    // A key that is not the certificate's.
    let other_key = dir.join("other.key");
    std::fs::copy(&ca.key, &other_key).unwrap();
    ca.issue("second");
    let failure = Server::builder()
        .arg("--tls-cert")
        .arg(ca.cert.to_str().unwrap())
        .arg("--tls-key")
        .arg(other_key.to_str().unwrap())
        .expect_startup_failure();
    assert_eq!(failure.status.code(), Some(2), "{}", failure.stderr);
    assert!(
        failure.stderr.contains("cannot be used together"),
        "{}",
        failure.stderr
    );

    // One without the other is a usage error.
    let failure = Server::builder()
        .arg("--tls-cert")
        .arg(ca.cert.to_str().unwrap())
        .expect_startup_failure();
    assert_eq!(failure.status.code(), Some(2), "{}", failure.stderr);
    assert!(failure.stderr.contains("--tls-key"), "{}", failure.stderr);
}

#[test]
fn sighup_reloads_the_pair_for_new_connections_and_keeps_a_broken_one_out() {
    let dir = TempDir::new();
    let ca = TestCa::new(&dir);
    let first = std::fs::read(&ca.cert).unwrap();
    let server = tls_server(&ca, &[]).start();
    assert!(server
        .stdout_lines()
        .iter()
        .any(|l| l.starts_with("listening on https://")));
    let rt = runtime();
    rt.block_on(async {
        let served_first = peer_certificate(server.addr, &ca).await;
        let mut open = connect(Transport::Https2, server.addr, Some(&ca)).await;

        let second = ca.issue("second");
        assert_ne!(std::fs::read(&ca.cert).unwrap(), first);
        server.signal("HUP");
        assert!(
            wait_until(IO_TIMEOUT, || server
                .stderr_text()
                .contains("reloaded the TLS certificate")),
            "{}",
            server.stderr_text()
        );
        let served_second = peer_certificate(server.addr, &ca).await;
        assert_eq!(served_second, second, "a new connection gets the new pair");
        assert_ne!(served_second, served_first);
        // The connection opened before keeps being served.
        let request = build("GET", server.addr, Transport::Https2, "/v1/pets", &[], b"");
        assert_eq!(open.send(request).await.status, 401);

        // A broken pair: reported, and the second stays in force.
        std::fs::write(&ca.key, "-----BEGIN PRIVATE KEY-----\nbroken\n").unwrap();
        server.signal("HUP");
        assert!(
            wait_until(IO_TIMEOUT, || server
                .stderr_text()
                .contains("the previous certificate and key stay in force")),
            "{}",
            server.stderr_text()
        );
        assert_eq!(peer_certificate(server.addr, &ca).await, second);
    });
}

/// The expiry gauge's value in the admin listener's `/metrics`, if any.
fn expiry(admin: std::net::SocketAddr) -> Option<i64> {
    let mut c = Conn::open(admin);
    c.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let metrics = c.read_response().text();
    metrics.lines().find_map(|l| {
        l.strip_prefix("petstore_tls_certificate_expiry_timestamp_seconds ")?
            .parse()
            .ok()
    })
}

#[test]
fn the_certificates_expiry_is_a_gauge_that_follows_the_pair_in_force() {
    let dir = TempDir::new();
    let ca = TestCa::new(&dir);
    // 2031-05-17 and 2032-01-01, midnight UTC.
    let (first, second) = (1_936_742_400, 1_956_528_000);
    ca.issue_until("first", (2031, 5, 17));
    let server = tls_server(&ca, &["--admin-addr", "127.0.0.1:0"]).start();
    let admin = server.admin_addr();
    assert_eq!(expiry(admin), Some(first));
    ca.issue_until("second", (2032, 1, 1));
    server.signal("HUP");
    assert!(
        wait_until(IO_TIMEOUT, || expiry(admin) == Some(second)),
        "{:?} {}",
        expiry(admin),
        server.stderr_text()
    );
    // A broken pair keeps the second in force, and its date.
    std::fs::write(&ca.key, "-----BEGIN PRIVATE KEY-----\nbroken\n").unwrap();
    server.signal("HUP");
    assert!(wait_until(IO_TIMEOUT, || server
        .stderr_text()
        .contains("the previous certificate and key stay in force")));
    assert_eq!(expiry(admin), Some(second));
    // A server without TLS has no such series.
    let plain = Server::start(&[]);
    assert!(!plain
        .get("/metrics", None)
        .text()
        .contains("tls_certificate"));
}

#[test]
fn plain_http_on_the_tls_port_is_not_served() {
    let dir = TempDir::new();
    let ca = TestCa::new(&dir);
    let server = tls_server(&ca, &[]).start();
    let mut stream = std::net::TcpStream::connect(server.addr).unwrap();
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream
        .write_all(
            format!("GET /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\r\n")
                .as_bytes(),
        )
        .unwrap();
    let mut got = Vec::new();
    let _ = stream.read_to_end(&mut got);
    assert!(
        !got.starts_with(b"HTTP/"),
        "plain HTTP answered on the TLS port: {}",
        String::from_utf8_lossy(&got)
    );
    assert!(
        !String::from_utf8_lossy(&got).contains("[]"),
        "pets served in the clear"
    );
}

#[test]
fn a_client_that_never_says_hello_is_closed_by_the_header_timeout() {
    let dir = TempDir::new();
    let ca = TestCa::new(&dir);
    let server = tls_server(&ca, &["--header-timeout", "1"]).start();
    let started = Instant::now();
    let mut conn = server.connect();
    assert!(
        conn.closed_within(Duration::from_secs(30)),
        "a connection without a ClientHello stays open"
    );
    assert!(started.elapsed() >= Duration::from_secs(1));
}
