//! A stream of events (Server-Sent Events) through the documented
//! HAProxy: `scripts/cluster.d/haproxy.cfg` itself, its ports filled in,
//! in front of a server with `--proxy-protocol` and `--admin-addr` (where
//! its health checks go). The stream's events come through as they are
//! made, not held until the response ends, and the recipe's `timeout
//! client` and `timeout server` are longer than the stream's heartbeat,
//! so an idle stream is never cut.
//!
//! Needs HAProxy (Debian `haproxy`; `.ci/run` installs it): fails, naming
//! it, without.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::haproxy::Haproxy;
use common::{free_port, proxy_v1, wait_until, Server, KEY};
use serde_json::json;

/// The recipe's timeouts, read from it: in seconds.
fn recipe_timeout(cfg: &str, name: &str) -> u64 {
    cfg.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("timeout {name} ")))
        .and_then(|v| v.trim().strip_suffix('s'))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no `timeout {name}` in seconds in the recipe"))
}

#[test]
fn a_stream_through_the_documented_haproxy_brings_each_event_as_it_is_made() {
    let recipe = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scripts/cluster.d/haproxy.cfg"
    ))
    .unwrap();
    // The heartbeat (15 s) comes well within both of the recipe's idle
    // timeouts: an idle stream is never cut by HAProxy.
    for name in ["client", "server"] {
        assert!(recipe_timeout(&recipe, name) > 15 + 5, "timeout {name}");
    }
    let server = Server::builder()
        .arg("--proxy-protocol")
        .arg("--admin-addr")
        .arg("127.0.0.1:0")
        .start();
    let admin = server.admin_addr();
    let front = free_port();
    let dir = Haproxy::dir();
    let port = server.addr.port().to_string();
    let admin_port = admin.port().to_string();
    let config = recipe
        .replace("@PORT@", &front.to_string())
        .replace("@R1@", &port)
        .replace("@R2@", &port)
        .replace("@A1@", &admin_port)
        .replace("@A2@", &admin_port)
        .replace("@DIR@", dir.to_str().unwrap());
    let haproxy = Haproxy::start(dir, &config);
    let create = |name: &str| {
        let mut c = common::Conn::open(server.addr);
        c.send(proxy_v1("127.0.0.1").as_bytes()).unwrap();
        let body = json!({"name": name, "categoryId": 1}).to_string();
        let request = format!(
            "POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        c.send(request.as_bytes()).unwrap();
        assert_eq!(c.read_response().status, 201);
    };
    create("Rex");

    // HAProxy takes the server in once its checks pass: until then a
    // request through it is 503.
    let open = || -> Option<(TcpStream, Vec<u8>)> {
        let mut socket = TcpStream::connect(("127.0.0.1", front)).ok()?;
        socket
            .set_read_timeout(Some(Duration::from_secs(10)))
            .ok()?;
        let request = format!(
            "GET /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\
             Accept: text/event-stream\r\n\r\n"
        );
        socket.write_all(request.as_bytes()).ok()?;
        let mut read = vec![0u8; 4096];
        let n = socket.read(&mut read).ok()?;
        read.truncate(n);
        read.starts_with(b"HTTP/1.1 200").then_some((socket, read))
    };
    let mut opened = None;
    assert!(
        wait_until(Duration::from_secs(30), || {
            opened = open();
            opened.is_some()
        }),
        "HAProxy never passed a stream to the server"
    );
    let (mut socket, mut read) = opened.unwrap();
    let mut until = |needle: &str, read: &mut Vec<u8>| {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(read).contains(needle) {
            assert!(Instant::now() < deadline, "never {needle:?}");
            let n = socket.read(&mut buf).unwrap();
            assert!(n > 0, "the stream ended: {}", String::from_utf8_lossy(read));
            read.extend_from_slice(&buf[..n]);
        }
    };
    until("id: 1\nevent: pet.created\n", &mut read);
    assert!(
        String::from_utf8_lossy(&read)
            .to_lowercase()
            .contains("content-type: text/event-stream"),
        "{}",
        String::from_utf8_lossy(&read)
    );
    // Made after the stream opened: it comes through while the response
    // goes on, not at its end.
    create("Tom");
    until("id: 2\nevent: pet.created\n", &mut read);
    drop(haproxy);
}
