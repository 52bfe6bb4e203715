//! `Strict-Transport-Security`: on every response of a TLS listener,
//! two years by default, `--hsts-max-age` (and its environment variable)
//! to change it, 0 to send none; never on a plaintext response.

use crate::common;

use common::transport::{build, connect, runtime, TestCa, Transport};
use common::*;

fn tls_server(ca: &TestCa) -> ServerBuilder {
    Server::builder()
        .arg("--tls-cert")
        .arg(ca.cert.to_str().unwrap())
        .arg("--tls-key")
        .arg(ca.key.to_str().unwrap())
}

/// The `Strict-Transport-Security` values of a served pet list, a 401
/// and a 404, over both TLS transports (each response must carry the
/// same).
fn hsts_over_tls(server: &Server, ca: &TestCa) -> Vec<Vec<String>> {
    let rt = runtime();
    rt.block_on(async {
        let mut seen = Vec::new();
        for transport in [Transport::Https1, Transport::Https2] {
            let mut sender = connect(transport, server.addr, Some(ca)).await;
            let auth = format!("Bearer {KEY}");
            for (path, headers, status) in [
                ("/v1/pets", vec![("authorization", auth.as_str())], 200),
                ("/v1/pets", vec![], 401),
                ("/nowhere", vec![], 404),
            ] {
                let request = build("GET", server.addr, transport, path, &headers, b"");
                let response = sender.send(request).await;
                assert_eq!(response.status, status, "{}", response.describe());
                seen.push(
                    response
                        .header_all("strict-transport-security")
                        .into_iter()
                        .map(str::to_owned)
                        .collect(),
                );
            }
        }
        seen
    })
}

#[test]
fn every_tls_response_carries_two_years_by_default() {
    let dir = TempDir::new();
    let ca = TestCa::new(&dir);
    let server = tls_server(&ca).start();
    for values in hsts_over_tls(&server, &ca) {
        assert_eq!(values, ["max-age=63072000"]);
    }
}

#[test]
fn the_flag_and_its_variable_set_the_max_age_and_0_sends_none() {
    let dir = TempDir::new();
    let ca = TestCa::new(&dir);
    let server = tls_server(&ca).arg("--hsts-max-age").arg("600").start();
    for values in hsts_over_tls(&server, &ca) {
        assert_eq!(values, ["max-age=600"]);
    }
    drop(server);
    let server = tls_server(&ca)
        .env("PETSTORE_HSTS_MAX_AGE", "86400")
        .start();
    for values in hsts_over_tls(&server, &ca) {
        assert_eq!(values, ["max-age=86400"]);
    }
    drop(server);
    let server = tls_server(&ca).arg("--hsts-max-age").arg("0").start();
    for values in hsts_over_tls(&server, &ca) {
        assert!(values.is_empty(), "{values:?}");
    }
}

#[test]
fn a_plaintext_response_never_carries_it() {
    let server = Server::start(&["--hsts-max-age", "600"]);
    let rt = runtime();
    rt.block_on(async {
        for transport in [Transport::Http1, Transport::H2c] {
            let mut sender = connect(transport, server.addr, None).await;
            let request = build("GET", server.addr, transport, "/v1/pets", &[], b"");
            let response = sender.send(request).await;
            assert_eq!(response.status, 401);
            assert!(
                response.header("strict-transport-security").is_none(),
                "{}",
                response.describe()
            );
        }
    });
    // Nor the plaintext admin listener beside a TLS public one.
    let dir = TempDir::new();
    let ca = TestCa::new(&dir);
    let server = tls_server(&ca)
        .arg("--admin-addr")
        .arg("127.0.0.1:0")
        .start();
    let line = server.wait_for_stdout_line(IO_TIMEOUT, |l| l.starts_with("admin "));
    let admin = line.rsplit("http://").next().unwrap().parse().unwrap();
    let mut conn = Conn::open(admin);
    conn.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let response = conn.read_response();
    assert_eq!(response.status, 200, "{}", response.describe());
    assert!(
        response.header("strict-transport-security").is_none(),
        "{}",
        response.describe()
    );
}
