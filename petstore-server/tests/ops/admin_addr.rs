//! `--admin-addr`: `/metrics` and `/healthz` on a second listener, and 404
//! on the public one, so that a public front end cannot expose them.

use crate::common;

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::Duration;

use common::{assert_error, wait_until, Conn, Server, KEY};

fn get(addr: SocketAddr, path: &str, preface: &str) -> common::Response {
    let mut c = Conn::open(addr);
    c.send(
        format!("{preface}GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\r\n")
            .as_bytes(),
    )
    .unwrap();
    c.read_response()
}

#[test]
fn health_and_metrics_move_to_the_admin_listener_and_vanish_from_the_public_one() {
    let server = Server::builder()
        .arg("--admin-addr")
        .arg("127.0.0.1:0")
        .start();
    let admin = server.admin_addr();
    assert_ne!(admin, server.addr);
    // The public port: the API, the OpenAPI document, no health, no metrics.
    assert_eq!(server.get("/v1/pets", Some(KEY)).status, 200);
    assert_eq!(server.get("/v1/openapi.json", None).status, 200);
    assert_error(&server.get("/healthz", None), 404, "not_found");
    assert_error(&server.get("/metrics", None), 404, "not_found");
    // The admin port: health and metrics (which counted the list), nothing else.
    let health = get(admin, "/healthz", "");
    assert_eq!(health.status, 200, "{}", health.describe());
    assert_eq!(health.json()["status"], "ok");
    let metrics = get(admin, "/metrics", "");
    assert_eq!(metrics.status, 200);
    assert!(
        metrics
            .text()
            .contains(r#"petstore_requests_total{route="/v1/pets",method="GET",status="200"} 1"#),
        "{}",
        metrics.text()
    );
    assert_error(&get(admin, "/v1/pets", ""), 404, "not_found");
}

#[test]
fn the_admin_listener_takes_no_proxy_header_and_reports_the_drain() {
    let mut server = Server::builder()
        .arg("--admin-addr")
        .arg("127.0.0.1:0")
        .arg("--proxy-protocol")
        .arg("--shutdown-delay")
        .arg("60")
        .start();
    let admin = server.admin_addr();
    // A monitor on its own port sends no PROXY header (HAProxy does not,
    // for a check on another port); the public port needs one.
    assert_eq!(get(admin, "/healthz", "").status, 200);
    let proxied = get(server.addr, "/v1/pets", &common::proxy_v1("192.0.2.1"));
    assert_eq!(proxied.status, 200, "{}", proxied.describe());

    server.signal("TERM");
    assert!(wait_until(Duration::from_secs(15), || server
        .stderr_text()
        .contains("draining for 60 s")));
    let draining = get(admin, "/healthz", "");
    assert_eq!(draining.status, 503, "{}", draining.describe());
    assert_eq!(draining.json()["status"], "draining");
    server.signal("TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(30)).code(), Some(0));
    for addr in [admin, server.addr] {
        match Conn::try_open(addr) {
            Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e}"),
            Ok(_) => panic!("{addr} accepted a connection after exit"),
        }
    }
}
