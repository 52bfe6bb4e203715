//! HTTP/1.1 rules the server enforces itself: HEAD, `Host`, transfer
//! codings, `Expect: 100-continue`, and saying `Connection: close` when it
//! closes; and that the designed 501 is not logged as a fault.

use crate::common;

use std::io::Read;
use std::time::{Duration, Instant};

use common::{assert_error, Conn, Server, KEY};
use serde_json::json;

/// Everything the server sends on `conn` until it closes (bounded: 10 s,
/// 1 MiB).
fn read_to_close(conn: &mut Conn) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut all = conn.buffered().to_vec();
    let mut chunk = [0u8; 16384];
    while Instant::now() < deadline && all.len() < 1 << 20 {
        conn.stream
            .set_read_timeout(Some(
                deadline
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1)),
            ))
            .unwrap();
        match conn.stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => all.extend_from_slice(&chunk[..n]),
        }
    }
    all
}

/// The head of the first response in `bytes` (status line and header
/// lines, lower-case names) and the bytes after its blank line.
fn split_head(bytes: &[u8]) -> (u16, Vec<(String, String)>, &[u8]) {
    let end = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no complete head in {:?}", String::from_utf8_lossy(bytes)));
    let head = String::from_utf8_lossy(&bytes[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (status, headers, &bytes[end + 4..])
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// Headers whose values legitimately differ between two requests.
const MOVING: [&str; 5] = [
    "date",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "ratelimit",
    "content-length",
];

#[test]
fn head_is_get_without_the_body_on_every_get_route() {
    // A key whose binding window is its day (100): it refills about once
    // in 15 minutes, so the remaining count moves only with requests.
    let mut keys = common::default_keys();
    keys["keys"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "head", "key": "head-key", "plan": "enterprise", "perMinute": 1_000_000, "perDay": 100}));
    let server = Server::builder().keys(keys).start();
    server.create_pet(&json!({"name": "Rex", "categoryId": 1}));
    let auth = "Bearer head-key";
    for path in [
        "/healthz",
        "/v1/openapi.json",
        "/metrics",
        "/v1/pets",
        "/v1/pets/1",
        "/v1/pets/2",
        "/v1/store/orders",
        "/docs",
    ] {
        let request = |method: &str| {
            format!("{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n\r\n")
        };
        // HEAD, then GET on the same connection: whatever follows the HEAD
        // response's head must be the GET response, not a body.
        let mut conn = server.connect();
        let mut both = request("HEAD");
        both.push_str(&request("GET").replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n"));
        conn.send(both.as_bytes()).unwrap();
        let bytes = read_to_close(&mut conn);
        let (head_status, head_headers, rest) = split_head(&bytes);
        let (get_status, get_headers, get_body) = split_head(rest);
        assert!(
            rest.starts_with(b"HTTP/1.1 "),
            "HEAD {path} sent a body: {:?}",
            String::from_utf8_lossy(&rest[..rest.len().min(80)])
        );
        assert_eq!(head_status, get_status, "HEAD {path}");
        assert_ne!(head_status, 405, "HEAD {path}");
        // Same headers (less those that move between two requests, and
        // the GET's Connection: close).
        let fixed = |headers: &[(String, String)]| {
            let mut kept: Vec<(String, String)> = headers
                .iter()
                .filter(|(n, _)| !MOVING.contains(&n.as_str()) && n != "connection")
                .cloned()
                .collect();
            kept.sort();
            kept
        };
        assert_eq!(fixed(&head_headers), fixed(&get_headers), "HEAD {path}");
        // Content-Length is the GET body's (except /metrics, whose counters
        // moved with the HEAD itself).
        if path != "/metrics" {
            assert_eq!(
                header(&head_headers, "content-length"),
                Some(get_body.len().to_string().as_str()),
                "HEAD {path}"
            );
        }
        // The same token charged: the GET saw one fewer remaining.
        if path.starts_with("/v1/") && path != "/v1/openapi.json" {
            let remaining = |h: &[(String, String)]| {
                header(h, "x-ratelimit-remaining")
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or_else(|| panic!("{path}: no X-RateLimit-Remaining"))
            };
            assert_eq!(
                remaining(&head_headers),
                remaining(&get_headers) + 1,
                "{path}"
            );
        }
    }
}

#[test]
fn http_1_1_without_exactly_one_host_is_400() {
    let server = Server::start(&[]);
    for (what, request) in [
        ("no Host", "GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n".to_owned()),
        (
            "two Hosts",
            "GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n".to_owned(),
        ),
        (
            "two Hosts, an operation",
            format!("GET /v1/pets HTTP/1.1\r\nHost: a\r\nHost: a\r\nAuthorization: Bearer {KEY}\r\nConnection: close\r\n\r\n"),
        ),
    ] {
        let resp = server.raw(request.as_bytes());
        let message = assert_error(&resp, 400, "invalid_header");
        assert!(message.contains("Host"), "{what}: {message}");
    }
    // HTTP/1.0 has no Host requirement.
    let resp = server.raw(b"GET /healthz HTTP/1.0\r\n\r\n");
    assert_eq!(resp.status, 200, "{}", resp.describe());
    let resp = server.raw(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(resp.status, 200);
}

#[test]
fn a_transfer_coding_other_than_chunked_is_501_and_stores_nothing() {
    let server = Server::start(&[]);
    let body = br#"{"name":"Rex","categoryId":1}"#;
    let chunked = format!(
        "{:x}\r\n{}\r\n0\r\n\r\n",
        body.len(),
        String::from_utf8_lossy(body)
    );
    for codings in [
        "Transfer-Encoding: gzip, chunked\r\n",
        "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: chunked, chunked\r\n",
    ] {
        let request = format!(
            "POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\n{codings}\r\n{chunked}"
        );
        let mut conn = server.connect();
        conn.send(request.as_bytes()).unwrap();
        let resp = conn.read_response();
        assert_error(&resp, 501, "not_implemented");
        assert_eq!(resp.header("connection"), Some("close"), "{codings:?}");
        assert!(conn.closed_within(Duration::from_secs(5)), "{codings:?}");
    }
    assert_eq!(
        server.list_ids("/v1/pets").0,
        Vec::<u64>::new(),
        "nothing stored"
    );
    // Plain chunked is served.
    let request = format!(
        "POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{chunked}"
    );
    assert_eq!(server.raw(request.as_bytes()).status, 201);
}

/// Sends the head of a create with `Expect: 100-continue` and these extra
/// header lines, and returns the first response the server sends.
fn expect_continue(server: &Server, extra: &str) -> (Conn, common::Response, Vec<u8>) {
    let mut conn = server.connect();
    conn.send(
        format!(
            "POST /v1/pets HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 29\r\n{extra}\r\n"
        )
        .as_bytes(),
    )
    .unwrap();
    // Read raw bytes: the harness skips interim responses, this test must
    // see them.
    let mut first = Vec::new();
    let mut chunk = [0u8; 4096];
    conn.stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    while !first.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => first.extend_from_slice(&chunk[..n]),
        }
    }
    let (status, headers, _) = split_head(&first);
    let resp = common::Response {
        status,
        headers: common::Headers(headers),
        body: Vec::new(),
    };
    (conn, resp, first)
}

#[test]
fn expect_100_continue_is_refused_before_the_body_is_invited() {
    let server = Server::start(&[]);
    let json = "Content-Type: application/json\r\n";
    let bad_key = format!("Authorization: Bearer nope\r\n{json}");
    let good_key = format!("Authorization: Bearer {KEY}\r\n");
    for (what, extra, status) in [
        ("no key", json.to_owned(), 401),
        ("a bad key", bad_key, 401),
        (
            "text/plain",
            format!("{good_key}Content-Type: text/plain\r\n"),
            415,
        ),
    ] {
        let (mut conn, first, bytes) = expect_continue(&server, &extra);
        assert_eq!(
            first.status,
            status,
            "{what}: the first response: {:?}",
            String::from_utf8_lossy(&bytes)
        );
        assert_eq!(first.header("connection"), Some("close"), "{what}");
        assert!(
            conn.closed_within(Duration::from_secs(5)),
            "{what}: not closed"
        );
    }
    // Too large by its declared length: 413 at once, no 100 either.
    let mut conn = server.connect();
    conn.send(
        format!(
            "POST /v1/pets HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nAuthorization: Bearer {KEY}\r\n{json}Content-Length: 70000\r\n\r\n"
        )
        .as_bytes(),
    )
    .unwrap();
    let bytes = read_to_close(&mut conn);
    assert!(
        bytes.starts_with(b"HTTP/1.1 413"),
        "{:?}",
        String::from_utf8_lossy(&bytes)
    );

    // With a good key and a JSON body: 100 Continue, then the 201.
    let (mut conn, first, bytes) = expect_continue(&server, &format!("{good_key}{json}"));
    assert_eq!(first.status, 100, "{:?}", String::from_utf8_lossy(&bytes));
    conn.send(br#"{"name":"Rex","categoryId":1}"#).unwrap();
    assert_eq!(conn.read_response().status, 201);
}

#[test]
fn a_413_that_closes_the_connection_says_connection_close() {
    let server = Server::start(&[]);
    // Declared over the cap: refused before a byte of the body.
    let mut conn = server.connect();
    conn.send(
        format!(
            "POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\nContent-Length: 70000\r\n\r\n"
        )
        .as_bytes(),
    )
    .unwrap();
    assert_413_then_closed(&mut conn);

    // Chunked, found over the cap while reading.
    let mut conn = server.connect();
    let chunk = "a".repeat(16 * 1024);
    let mut request = format!(
        "POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    for _ in 0..5 {
        request.push_str(&format!("{:x}\r\n{chunk}\r\n", chunk.len()));
    }
    let _ = conn.send(request.as_bytes());
    assert_413_then_closed(&mut conn);
}

/// The next response on `conn` is a 413 that says `Connection: close`,
/// and the server then closes the connection.
fn assert_413_then_closed(conn: &mut Conn) {
    let resp = conn.read_response();
    assert_error(&resp, 413, "payload_too_large");
    assert_eq!(
        resp.header("connection"),
        Some("close"),
        "{}",
        resp.describe()
    );
    assert!(conn.closed_within(Duration::from_secs(5)), "not closed");
}

#[test]
fn a_refused_order_step_is_not_logged_as_an_error() {
    let mut server = Server::start(&[]);
    for _ in 0..3 {
        let resp = server.get("/v1/store/orders/7", Some(KEY));
        assert_error(&resp, 404, "not_found");
        let auth = format!("Bearer {KEY}");
        let headers = [
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/json"),
        ];
        let resp = server.request("POST", "/v1/store/orders", &headers, Some(b"{}"));
        assert_error(&resp, 400, "invalid_body");
    }
    // Everything the server logged, to its last line.
    server.signal("TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(15)).code(), Some(0));
    let stderr = server.stderr_text();
    assert!(stderr.contains("stopped"), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains(" ERROR ")).collect();
    assert!(errors.is_empty(), "logged as errors: {errors:?}");
}
