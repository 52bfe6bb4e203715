//! `petstore-server healthcheck`, a container's `HEALTHCHECK`: it finds
//! the server from the same flags and `PETSTORE_*` variables (the admin
//! listener first, a PROXY header when the public one wants it), says
//! healthy only on a 200, and is bounded when nothing answers.

use crate::common;

use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{wait_until, Server};

/// Runs `petstore-server healthcheck ARGS` with only these `PETSTORE_*`
/// variables.
fn check(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(common::BIN);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("PETSTORE_") {
            cmd.env_remove(name);
        }
    }
    cmd.arg("healthcheck").args(args).envs(envs.iter().copied());
    cmd.output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn url(addr: SocketAddr) -> String {
    format!("http://{addr}/healthz")
}

/// The admin address the server printed.
fn admin_addr(server: &Server) -> SocketAddr {
    let line = server.wait_for_stdout_line(Duration::from_secs(10), |l| l.starts_with("admin "));
    line.rsplit("http://").next().unwrap().parse().unwrap()
}

#[test]
fn a_ready_server_is_healthy_by_url_or_by_its_own_environment() {
    let server = Server::start(&[]);
    let by_url = check(&["--url", &url(server.addr)], &[]);
    assert_eq!(by_url.status.code(), Some(0), "{by_url:?}");
    assert_eq!(stdout(&by_url).trim(), r#"healthy: 200 {"status":"ok"}"#);

    // As in a container: the server's address comes from PETSTORE_ADDR,
    // a wildcard one asked on loopback.
    let wildcard = format!("0.0.0.0:{}", server.addr.port());
    let by_env = check(&[], &[("PETSTORE_ADDR", &wildcard)]);
    assert_eq!(by_env.status.code(), Some(0), "{by_env:?}");
}

#[test]
fn it_asks_the_admin_listener_when_there_is_one() {
    let server = Server::builder()
        .arg("--admin-addr")
        .arg("127.0.0.1:0")
        .start();
    let admin = admin_addr(&server);
    let public = server.addr.to_string();
    let admin = admin.to_string();
    let envs = [
        ("PETSTORE_ADDR", public.as_str()),
        ("PETSTORE_ADMIN_ADDR", admin.as_str()),
    ];
    let out = check(&[], &envs);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // The public listener answers /healthz 404 here: not healthy.
    let public_only = check(&[], &envs[..1]);
    assert_eq!(public_only.status.code(), Some(1), "{public_only:?}");
    assert!(
        stdout(&public_only).starts_with("unhealthy: 404 "),
        "{public_only:?}"
    );
}

#[test]
fn behind_the_proxy_protocol_it_sends_a_proxy_header() {
    let server = Server::start(&["--proxy-protocol"]);
    let addr = server.addr.to_string();
    let with = check(
        &[],
        &[
            ("PETSTORE_ADDR", &addr),
            ("PETSTORE_PROXY_PROTOCOL", "true"),
        ],
    );
    assert_eq!(with.status.code(), Some(0), "{with:?}");
    // Without the header the server closes the connection unanswered.
    let without = check(&[], &[("PETSTORE_ADDR", &addr)]);
    assert_eq!(without.status.code(), Some(1), "{without:?}");
}

#[test]
fn a_draining_server_is_unhealthy() {
    let mut server = Server::start(&["--shutdown-delay", "60"]);
    server.signal("TERM");
    assert!(
        wait_until(Duration::from_secs(15), || server
            .stderr_text()
            .contains("draining for 60 s")),
        "{}",
        server.stderr_text()
    );
    let out = check(&["--url", &url(server.addr)], &[]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        stdout(&out).trim(),
        r#"unhealthy: 503 {"status":"draining"}"#
    );
    server.signal("TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(15)).code(), Some(0));
}

#[test]
fn no_server_and_a_silent_server_are_unhealthy_within_the_timeout() {
    let gone = TcpListener::bind("127.0.0.1:0").unwrap();
    let gone_addr = gone.local_addr().unwrap();
    drop(gone);
    let refused = check(&["--url", &url(gone_addr)], &[]);
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    assert!(stdout(&refused).starts_with("unhealthy: "), "{refused:?}");

    // Accepts (the backlog does it) and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let started = Instant::now();
    let out = check(
        &[
            "--url",
            &url(silent.local_addr().unwrap()),
            "--timeout",
            "1",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        stdout(&out).contains("no answer within --timeout"),
        "{out:?}"
    );
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "it waited its timeout out"
    );
    // Only a bound on a hang: the check gives up after its one second.
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn what_it_cannot_ask_is_a_usage_error() {
    let https = check(&["--url", "https://127.0.0.1:1/healthz"], &[]);
    assert_eq!(https.status.code(), Some(2), "{https:?}");
    let tls = check(
        &[],
        &[
            ("PETSTORE_TLS_CERT", "cert.pem"),
            ("PETSTORE_TLS_KEY", "key.pem"),
        ],
    );
    assert_eq!(tls.status.code(), Some(2), "{tls:?}");
    assert!(
        String::from_utf8_lossy(&tls.stderr).contains("--admin-addr"),
        "{tls:?}"
    );
}
