//! `--proxy-protocol` under attack: connections that never send their
//! PROXY header must not take the slots of everyone else, nor hold their
//! connection for longer than one header timeout by sending it late.

use crate::common;

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use common::{connect_from, proxy_v1, Conn, Server};

const HEALTH: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";

#[test]
fn with_the_proxy_protocol_one_address_cannot_hold_every_slot_before_its_header() {
    // 16 connections from one address that never send their PROXY
    // header. Counted under the socket's address while
    // the header is awaited, only 4 of them hold a slot; the others are
    // closed at once, and a client from another address is served. Were
    // they not counted, all 16 slots would stay taken for the header
    // timeout (120 s here) and the client would wait as long.
    let server = Server::start(&[
        "--proxy-protocol",
        "--max-connections",
        "16",
        "--max-connections-per-address",
        "4",
        "--header-timeout",
        "120",
    ]);
    // An address of its own (not HOSTILE's), so that this test and the
    // others of the area, which run beside it, never share a source.
    let silent_source = Ipv4Addr::new(127, 0, 0, 3);
    let silent: Vec<Conn> = (0..16)
        .map(|_| connect_from(silent_source, server.addr, None).unwrap())
        .collect();
    let mut conn = server.connect();
    let mut request = proxy_v1("192.0.2.9").into_bytes();
    request.extend_from_slice(HEALTH);
    conn.send(&request).unwrap();
    // A bound far below the header timeout, only to catch the old hang.
    let response = conn
        .try_read_response(Duration::from_secs(60))
        .expect("the client behind a proxy header was never served");
    assert_eq!(response.status, 200);
    drop(silent);
}

#[test]
fn one_header_timeout_covers_the_proxy_header_and_the_http_head() {
    // A client that sends its PROXY header late and its HTTP head never
    // must not hold its connection for two header timeouts, one for
    // each. One timeout covers both: the head gets what the PROXY
    // header left. Timeout 6 s, the header after 3 s, then a head that
    // never ends: closed 6 s after the connection was accepted; the old
    // code gave the head 6 s of its own from when it read the header.
    let timeout = Duration::from_secs(6);
    let server = Server::start(&["--proxy-protocol", "--header-timeout", "6"]);
    for attempt in 1..=3 {
        // Taken before connecting: the server's timer starts at the
        // accept, which cannot be earlier.
        let connected = Instant::now();
        let mut conn = server.connect();
        std::thread::sleep(timeout / 2);
        // Taken before the header is sent: the server cannot read it
        // sooner, so the old code could not close sooner than `timeout`
        // after this.
        let header_at = connected.elapsed();
        // A busy machine may send these after the server closed: that is
        // a close too, so a failed send is no failure.
        let _ = conn.send(proxy_v1("192.0.2.10").as_bytes());
        let _ = conn.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n");
        let sent_by = connected.elapsed();
        assert!(
            conn.closed_within(Duration::from_secs(60)),
            "the connection was never closed"
        );
        let held = connected.elapsed();
        assert!(
            held >= timeout,
            "closed after {held:?}, before the header timeout"
        );
        if sent_by >= timeout {
            // The case under test did not happen (the header went out
            // after the timeout, the test thread having lost the CPU for
            // seconds): try again rather than pass or fail on it.
            eprintln!("attempt {attempt}: the header went out after {sent_by:?}; again");
            continue;
        }
        assert!(
            held < header_at + timeout,
            "held {held:?}, the PROXY header sent after {header_at:?}: the head got a \
             header timeout of its own after the PROXY header's"
        );
        return;
    }
    panic!("the PROXY header never went out within the header timeout in 3 attempts");
}
