//! The feed of events as a stream (beta, Server-Sent Events) over real
//! TCP: `Accept: text/event-stream` on `GET /v1/events`, what follows the
//! cursor then each event as it is made, `Last-Event-ID` resuming (and
//! outranking `after`), the 400s and the 410 before a stream starts, a
//! drain that ends every stream cleanly, and the same over HTTP/2 beside
//! other requests on the connection. The heartbeat's 15 s are the unit
//! tests' (`store/feed.rs`, on a paused clock).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use serde_json::json;

use crate::common;

use common::transport::{build, connect, runtime, Sender, Transport};
use common::{assert_error, Server, IO_TIMEOUT, KEY};

/// A stream opened over HTTP/1.1: its head, and what came of its body.
struct Stream {
    socket: TcpStream,
    head: String,
    read: Vec<u8>,
}

impl Stream {
    fn open(server: &Server, query: &str, headers: &[(&str, &str)]) -> Stream {
        let mut socket = TcpStream::connect(server.addr).unwrap();
        socket.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        let mut request = format!(
            "GET /v1/events{query} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\
             Accept: text/event-stream\r\n"
        );
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        socket.write_all(request.as_bytes()).unwrap();
        let mut stream = Stream {
            socket,
            head: String::new(),
            read: Vec::new(),
        };
        stream.until("\r\n\r\n");
        let end = find(&stream.read, b"\r\n\r\n").unwrap() + 4;
        stream.head = String::from_utf8_lossy(&stream.read[..end]).to_lowercase();
        stream.read.drain(..end);
        stream
    }

    /// Reads until `needle` has come (a bound catches a hang only).
    fn until(&mut self, needle: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut buf = [0u8; 4096];
        while find(&self.read, needle.as_bytes()).is_none() {
            assert!(
                Instant::now() < deadline,
                "never {needle:?} in {}",
                self.text()
            );
            let n = self.socket.read(&mut buf).unwrap();
            assert!(n > 0, "the stream ended before {needle:?}: {}", self.text());
            self.read.extend_from_slice(&buf[..n]);
        }
    }

    /// Reads to the end of the connection.
    fn read_to_the_end(&mut self) {
        self.socket.read_to_end(&mut self.read).unwrap();
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.read).into_owned()
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn create(server: &Server) -> u64 {
    server.create_pet(&json!({"name": "Rex", "categoryId": 1}))["id"]
        .as_u64()
        .unwrap()
}

#[test]
fn a_stream_sends_what_follows_its_cursor_then_each_event_as_it_is_made() {
    let server = Server::start(&[]);
    create(&server);
    create(&server);
    let mut stream = Stream::open(&server, "?after=1", &[]);
    let head = &stream.head;
    assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
    assert!(
        head.contains("content-type: text/event-stream\r\n"),
        "{head}"
    );
    assert!(head.contains("cache-control: no-store\r\n"), "{head}");
    assert!(head.contains("transfer-encoding: chunked\r\n"), "{head}");
    assert!(!head.contains("content-length"), "{head}");
    // Charged as one request, as any other.
    assert!(head.contains("ratelimit-remaining: "), "{head}");
    stream.until("id: 2\nevent: pet.created\ndata: {");
    stream.until("}\n\n");
    assert!(!stream.text().contains("id: 1\n"), "{}", stream.text());
    let data = stream.text();
    let line = data.lines().find(|l| l.starts_with("data: ")).unwrap();
    let event: serde_json::Value = serde_json::from_str(&line["data: ".len()..]).unwrap();
    assert_eq!(event["id"], "2");
    assert_eq!(event["type"], "pet.created");
    assert_eq!(event["data"]["id"], 2);

    // A pet created now is sent at once, and a sale as its two events.
    create(&server);
    stream.until("id: 3\nevent: pet.created\n");
    let sold = server.post("/v1/pets/3/sell", Some(KEY), None, b"");
    assert_eq!(sold.status, 200, "{}", sold.describe());
    stream.until("id: 4\nevent: order.completed\n");
    stream.until("id: 5\nevent: pet.status_changed\n");
    assert_eq!(server.metric("petstore_event_waiters"), 1);
}

#[test]
fn last_event_id_resumes_and_outranks_after() {
    let server = Server::start(&[]);
    for _ in 0..3 {
        create(&server);
    }
    let mut stream = Stream::open(&server, "?after=0", &[("Last-Event-ID", "2")]);
    stream.until("id: 3\n");
    assert!(!stream.text().contains("id: 1\n"), "{}", stream.text());
    assert!(!stream.text().contains("id: 2\n"), "{}", stream.text());
}

#[test]
fn a_bad_last_event_id_or_a_wait_is_400_and_a_cursor_past_the_feed_410_before_any_stream() {
    let server = Server::start(&[]);
    create(&server);
    let with_accept = |query: &str, accept: &str, extra: &[(&str, &str)]| {
        let auth = format!("Bearer {KEY}");
        let mut headers = vec![("Authorization", auth.as_str()), ("Accept", accept)];
        headers.extend_from_slice(extra);
        server.request("GET", &format!("/v1/events{query}"), &headers, None)
    };
    let stream =
        |query: &str, extra: &[(&str, &str)]| with_accept(query, "text/event-stream", extra);
    let message = assert_error(
        &stream("", &[("Last-Event-ID", "x1")]),
        400,
        "invalid_header",
    );
    assert_eq!(
        message,
        "Last-Event-ID must be a cursor: an event's id (decimal digits), got \"x1\""
    );
    let message = assert_error(&stream("?wait=5", &[]), 400, "invalid_query");
    assert_eq!(
        message,
        "wait is for a long poll; a stream (Accept: text/event-stream) waits by itself"
    );
    let past = stream("?after=99", &[]);
    assert_eq!(past.status, 410, "{}", past.describe());
    assert_eq!(past.json()["code"], "cursor_expired");
    // A weight of 0 refuses the stream: a page, as without the header.
    let page = with_accept("", "application/json, text/event-stream;q=0", &[]);
    assert_eq!(page.status, 200);
    assert_eq!(page.single("content-type"), "application/json");
}

#[test]
fn a_drain_ends_every_stream_once_it_has_sent_what_there_is() {
    let mut server = Server::start(&["--shutdown-delay", "5"]);
    create(&server);
    let mut stream = Stream::open(&server, "", &[]);
    stream.until("id: 1\n");
    server.signal("TERM");
    stream.read_to_the_end();
    // The chunked body's last chunk: a clean end, not a cut connection.
    assert!(stream.text().ends_with("0\r\n\r\n"), "{:?}", stream.text());
    server.wait_exit(Duration::from_secs(30));
}

#[test]
fn over_http2_a_stream_runs_beside_other_requests_on_its_connection() {
    let server = Server::start(&[]);
    create(&server);
    let addr = server.addr;
    runtime().block_on(async move {
        let Sender::H2(mut send) = connect(Transport::H2c, addr, None).await else {
            panic!("h2c gives an HTTP/2 sender");
        };
        let auth = format!("Bearer {KEY}");
        let open = build(
            "GET",
            addr,
            Transport::H2c,
            "/v1/events",
            &[("authorization", &auth), ("accept", "text/event-stream")],
            b"",
        );
        send.ready().await.unwrap();
        let response = tokio::time::timeout(IO_TIMEOUT, send.send_request(open))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        let mut body = response.into_body();
        let mut read = Vec::new();
        let mut until = async |needle: &str, read: &mut Vec<u8>| {
            while find(read, needle.as_bytes()).is_none() {
                let frame = tokio::time::timeout(IO_TIMEOUT, body.frame())
                    .await
                    .expect("no frame in time")
                    .expect("the stream ended")
                    .unwrap();
                if let Some(data) = frame.data_ref() {
                    read.extend_from_slice(data);
                }
            }
        };
        until("id: 1\n", &mut read).await;
        // Another request on the same connection, while the stream is open.
        let mut other = send.clone();
        let create = build(
            "POST",
            addr,
            Transport::H2c,
            "/v1/pets",
            &[
                ("authorization", &auth),
                ("content-type", "application/json"),
            ],
            br#"{"name":"Tom","categoryId":1}"#,
        );
        other.ready().await.unwrap();
        let created = other.send_request(create).await.unwrap();
        assert_eq!(created.status(), 201);
        until("id: 2\nevent: pet.created\n", &mut read).await;
    });
}
