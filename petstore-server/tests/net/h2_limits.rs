//! Every protection of HTTP/1.1 holds for HTTP/2, with a raw HTTP/2 client
//! (the h2 crate, and frames written by hand where no client library
//! would send them): the per-address cap, the idle timeout, a client that
//! grants no flow-control window, streams cancelled at speed (rapid
//! reset, CVE-2023-44487), a CONTINUATION flood, the concurrent streams
//! and the header list bounds, the body timeout per stream, and the
//! drain's GOAWAY.

use crate::common;

use std::io::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::transport::runtime;
use common::*;

use h2::client::{self, SendRequest};
use hyper::body::Bytes;
use tokio::net::TcpStream as TokioStream;

/// The connection of a raw HTTP/2 client to `addr`, driven by a task of
/// its own; the task's handle ends when the connection does.
async fn h2_connect(
    addr: SocketAddr,
    builder: &client::Builder,
) -> (
    SendRequest<Bytes>,
    tokio::task::JoinHandle<Result<(), h2::Error>>,
) {
    let tcp = TokioStream::connect(addr).await.unwrap();
    let (send, connection) = builder.handshake(tcp).await.unwrap();
    (send, tokio::spawn(connection))
}

fn request(addr: SocketAddr, method: &str, path: &str, key: bool) -> hyper::Request<()> {
    let mut request = hyper::Request::builder()
        .method(method)
        .uri(format!("http://127.0.0.1:{}{path}", addr.port()));
    if key {
        request = request.header("authorization", format!("Bearer {KEY}"));
    }
    if method == "POST" {
        request = request.header("content-type", "application/json");
    }
    request.body(()).unwrap()
}

/// A GET of the pets, with the key, on `send`: its response head, within
/// [`IO_TIMEOUT`] (a bound that only cuts off a hang).
async fn get_pets(send: &SendRequest<Bytes>, addr: SocketAddr) -> hyper::Response<h2::RecvStream> {
    let mut send = send.clone().ready().await.unwrap();
    let (response, _) = send
        .send_request(request(addr, "GET", "/v1/pets", true), true)
        .unwrap();
    tokio::time::timeout(IO_TIMEOUT, response)
        .await
        .expect("no response head in time")
        .unwrap()
}

/// A plain HTTP/1.1 request still answers 200 on another connection.
fn still_serves(server: &Server) {
    let resp = server.get("/v1/pets", Some(KEY));
    assert_eq!(resp.status, 200, "{}", resp.describe());
}

#[test]
fn an_idle_http2_connection_gets_goaway_after_the_header_timeout() {
    let server = Server::start(&["--header-timeout", "1"]);
    let rt = runtime();
    rt.block_on(async {
        // Preface and settings only, never a request.
        let started = Instant::now();
        let (_send, connection) = h2_connect(server.addr, &client::Builder::new()).await;
        let ended = tokio::time::timeout(Duration::from_secs(30), connection).await;
        assert!(
            ended.is_ok(),
            "the idle connection is still open after 30 s"
        );
        assert!(
            started.elapsed() >= Duration::from_secs(1),
            "closed before the header timeout: {:?}",
            started.elapsed()
        );
    });
    still_serves(&server);
}

#[test]
fn a_connection_that_never_sends_the_preface_or_a_request_is_closed() {
    let server = Server::start(&["--header-timeout", "1"]);
    // Half a preface, then silence: neither HTTP/1.1 nor HTTP/2 yet.
    let mut conn = server.connect();
    conn.send(b"PRI * HTTP/2.0\r\n").unwrap();
    assert!(
        conn.closed_within(Duration::from_secs(30)),
        "a half preface holds the connection"
    );
    // Nothing at all.
    let mut conn = server.connect();
    assert!(
        conn.closed_within(Duration::from_secs(30)),
        "a silent connection stays open"
    );
    still_serves(&server);
}

#[test]
fn a_client_that_grants_no_window_is_dropped() {
    // write + body timeout: 2 s of no progress drops the connection.
    let server = Server::start(&["--write-timeout", "1", "--body-timeout", "1"]);
    server.create_pet(&serde_json::json!({"name": "Rex", "categoryId": 1}));
    let rt = runtime();
    rt.block_on(async {
        let mut builder = client::Builder::new();
        builder.initial_window_size(0);
        let (send, connection) = h2_connect(server.addr, &builder).await;
        let mut send = send.ready().await.unwrap();
        let (response, _) = send
            .send_request(request(server.addr, "GET", "/v1/pets", true), true)
            .unwrap();
        // The head needs no window; the body does, and never gets any.
        let response = tokio::time::timeout(IO_TIMEOUT, response)
            .await
            .expect("no response head")
            .unwrap();
        assert_eq!(response.status(), 200);
        let mut body = response.into_body();
        let started = Instant::now();
        let ended = tokio::time::timeout(Duration::from_secs(60), connection).await;
        assert!(ended.is_ok(), "a connection without window stays open");
        assert!(started.elapsed() >= Duration::from_secs(1));
        // Not one byte of the body came through.
        let data = body.data().await;
        assert!(!matches!(data, Some(Ok(ref bytes)) if !bytes.is_empty()));
    });
    still_serves(&server);
}

#[test]
fn a_stream_whose_body_never_comes_gets_408_and_the_connection_serves_on() {
    let server = Server::start(&["--body-timeout", "1"]);
    let rt = runtime();
    rt.block_on(async {
        let (send, _connection) = h2_connect(server.addr, &client::Builder::new()).await;
        let mut send = send.ready().await.unwrap();
        let started = Instant::now();
        // Headers, then no DATA frame and no end of stream.
        let (response, _body_left_open) = send
            .send_request(request(server.addr, "POST", "/v1/pets", true), false)
            .unwrap();
        let response = tokio::time::timeout(Duration::from_secs(30), response)
            .await
            .expect("no answer to a body that never comes")
            .unwrap();
        assert_eq!(response.status(), 408);
        assert!(started.elapsed() >= Duration::from_secs(1));
        // Another stream on the same connection is served.
        assert_eq!(get_pets(&send, server.addr).await.status(), 200);
    });
}

#[test]
fn streams_cancelled_at_speed_get_the_connection_goaway() {
    let server = Server::start(&[]);
    let rt = runtime();
    let sent = rt.block_on(async {
        let (mut send, connection) = h2_connect(server.addr, &client::Builder::new()).await;
        let mut sent = 0u32;
        // Each stream: a create whose body never comes, cancelled once the
        // server has admitted it (its key is good) and waits for the body,
        // in batches of 20 so that the server takes each stream before
        // its cancel (as an attacker would, to make it work). A server
        // slower than that refuses the resets of streams it has not
        // taken yet (hyper's bound), which ends the connection too.
        // Bounded: a server that never says GOAWAY fails the test after
        // 5,000 streams.
        'streams: while sent < 5_000 {
            let mut batch = Vec::new();
            for _ in 0..20 {
                let Ok(ready) = tokio::time::timeout(IO_TIMEOUT, send.ready()).await else {
                    panic!("the connection neither took a stream nor closed");
                };
                let Ok(ready) = ready else { break 'streams };
                send = ready;
                let Ok((_, stream)) =
                    send.send_request(request(server.addr, "POST", "/v1/pets", true), false)
                else {
                    break 'streams;
                };
                sent += 1;
                batch.push(stream);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            for mut stream in batch {
                stream.send_reset(h2::Reason::CANCEL);
            }
        }
        let ended = tokio::time::timeout(Duration::from_secs(30), connection).await;
        assert!(ended.is_ok(), "the connection was not closed after GOAWAY");
        sent
    });
    assert!(
        sent < 5_000,
        "5,000 streams opened and cancelled, and the connection was never told to go away"
    );
    still_serves(&server);
}

#[test]
fn a_continuation_flood_is_cut_off() {
    let server = Server::start(&[]);
    let mut stream = std::net::TcpStream::connect(server.addr).unwrap();
    stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len() as u32;
        let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        out.extend_from_slice(&stream.to_be_bytes());
        out.extend_from_slice(payload);
        out
    }
    let mut head = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    head.extend(frame(0x4, 0, 0, &[])); // SETTINGS
                                        // HEADERS without END_HEADERS: `:method GET` (indexed), then
                                        // CONTINUATION frames of literal headers, never ending.
    head.extend(frame(0x1, 0x1, 1, &[0x82]));
    stream.write_all(&head).unwrap();
    // A literal header without indexing, new name: 0x00, name, value.
    let mut chunk = Vec::new();
    while chunk.len() < 16_000 {
        chunk.extend_from_slice(&[0x00, 0x03, b'x', b'-', b'a', 0x7f, 0x00]);
        chunk.extend(std::iter::repeat_n(b'v', 127));
    }
    let continuation = frame(0x9, 0, 1, &chunk);
    let mut written = 0usize;
    let total = 64 * 1024 * 1024;
    while written < total {
        if stream.write_all(&continuation).is_err() {
            break;
        }
        written += continuation.len();
    }
    assert!(
        written < total,
        "{written} bytes of CONTINUATION frames accepted: the header block is not bounded"
    );
    still_serves(&server);
}

#[test]
fn concurrent_streams_and_the_header_list_are_bounded() {
    let server = Server::start(&[]);
    let rt = runtime();
    rt.block_on(async {
        let (send, _connection) = h2_connect(server.addr, &client::Builder::new()).await;
        assert_eq!(get_pets(&send, server.addr).await.status(), 200);
        // The server's SETTINGS have arrived with that response.
        assert_eq!(send.current_max_send_streams(), 100);

        // A 20 KiB header: over the 16 KiB list (as HTTP/1.1's head).
        let mut big = request(server.addr, "GET", "/v1/pets", true);
        big.headers_mut()
            .insert("x-big", "v".repeat(20 * 1024).parse().unwrap());
        let mut send = send.ready().await.unwrap();
        let answered = match send.send_request(big, true) {
            Err(_) => None,
            Ok((response, _)) => tokio::time::timeout(IO_TIMEOUT, response)
                .await
                .expect("no answer to an oversized header list")
                .ok()
                .map(|r| r.status().as_u16()),
        };
        assert!(
            matches!(answered, None | Some(431)),
            "an oversized header list was answered {answered:?}"
        );
    });
    still_serves(&server);
}

#[test]
fn the_per_address_cap_counts_http2_connections() {
    let server = Server::start(&["--max-connections-per-address", "2"]);
    let rt = runtime();
    rt.block_on(async {
        let (_a, _ca) = h2_connect(server.addr, &client::Builder::new()).await;
        let (_b, _cb) = h2_connect(server.addr, &client::Builder::new()).await;
        // The third is closed at accept: its handshake or first request fails.
        let tcp = TokioStream::connect(server.addr).await.unwrap();
        let third = async {
            let (send, connection) = client::handshake(tcp).await?;
            tokio::spawn(connection);
            let mut send = send.ready().await?;
            let (response, _) =
                send.send_request(request(server.addr, "GET", "/v1/pets", true), true)?;
            response.await.map(|_| ())
        };
        let outcome = tokio::time::timeout(IO_TIMEOUT, third)
            .await
            .expect("the third connection hangs");
        assert!(
            outcome.is_err(),
            "a third connection from one address was served"
        );
    });
    // The two HTTP/2 connections are closed with the runtime's tasks; the
    // server counts them down when it notices, and only then has a place
    // for the metrics request from the same address.
    let refused = || -> Option<u64> {
        let mut conn = Conn::try_open(server.addr).ok()?;
        conn.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .ok()?;
        let resp = conn.try_read_response(IO_TIMEOUT).ok()?;
        String::from_utf8_lossy(&resp.body).lines().find_map(|l| {
            l.strip_prefix("petstore_connections_refused_total ")?
                .parse()
                .ok()
        })
    };
    let mut count = None;
    assert!(
        wait_until(Duration::from_secs(30), || {
            count = refused();
            count.is_some()
        }),
        "no /metrics answer once the connections closed"
    );
    assert!(count >= Some(1), "refused connections counted: {count:?}");
}

#[test]
fn the_drain_sends_goaway_after_a_response_and_new_connections_are_served() {
    let mut server = Server::start(&["--shutdown-delay", "600"]);
    let rt = runtime();
    rt.block_on(async {
        let (send, connection) = h2_connect(server.addr, &client::Builder::new()).await;
        let send = send.ready().await.unwrap();
        server.signal("TERM");
        assert!(wait_until(Duration::from_secs(30), || {
            server.get("/healthz", None).status == 503
        }));
        // A request on the open connection is answered, then GOAWAY.
        assert_eq!(get_pets(&send, server.addr).await.status(), 200);
        let ended = tokio::time::timeout(Duration::from_secs(30), connection).await;
        assert!(ended.is_ok(), "no GOAWAY during the drain");
        // A new connection is still served meanwhile.
        let (send, _connection) = h2_connect(server.addr, &client::Builder::new()).await;
        assert_eq!(get_pets(&send, server.addr).await.status(), 200);
    });
    server.signal("TERM");
    assert!(server.wait_exit(Duration::from_secs(60)).success());
}
