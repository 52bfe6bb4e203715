//! `petstore-server healthcheck`: one `GET /healthz` over plain HTTP, for
//! a container's `HEALTHCHECK` on a base image that has no curl (the
//! `Containerfile`'s default base has none, and distroless has no shell).
//!
//! It is a client of the server's own contract and nothing more: a
//! blocking socket with a deadline, one request, the status line read
//! back. Its target is the server's own flags or environment variables,
//! so the same `PETSTORE_*` settings that configure a container's server
//! point its health check at it.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use super::flags::Cli;

/// The most of an answer read: `/healthz` answers a few dozen bytes.
const MAX_ANSWER: usize = 4096;

/// The most of the answer's body printed.
const MAX_SHOWN: usize = 200;

/// What to ask and how.
#[derive(Debug, PartialEq, Eq)]
pub struct Target {
    /// `HOST:PORT` to connect to (and the `Host` header).
    authority: String,
    /// The request's path, `/healthz` unless a URL said otherwise.
    path: String,
    /// Send `PROXY UNKNOWN` first: the public listener under
    /// `--proxy-protocol` closes a connection without a PROXY header.
    proxy_header: bool,
}

/// Why there is nothing to ask (exit 2).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// Only `http://` URLs.
    #[error("--url must be http://HOST:PORT/PATH (plain HTTP; for a TLS server, give it --admin-addr and ask that)")]
    NotHttp,
    /// The public listener speaks TLS and there is no admin listener.
    #[error("--addr serves TLS and this check speaks plain HTTP: give the server --admin-addr (PETSTORE_ADMIN_ADDR), where /healthz is served in plaintext")]
    Tls,
}

impl Target {
    /// The target the server `cli` describes, or the `--url` given.
    pub fn of(cli: &Cli, url: Option<&str>) -> Result<Target, TargetError> {
        if let Some(url) = url {
            return Target::from_url(url);
        }
        let (addr, proxy_header) = match &cli.admin_addr {
            Some(admin) => (admin.as_str(), false),
            None if cli.tls_cert.is_some() => return Err(TargetError::Tls),
            None => (cli.addr.as_str(), cli.proxy_protocol),
        };
        Ok(Target {
            authority: on_loopback(addr),
            path: "/healthz".into(),
            proxy_header,
        })
    }

    fn from_url(url: &str) -> Result<Target, TargetError> {
        let rest = url.strip_prefix("http://").ok_or(TargetError::NotHttp)?;
        let (authority, path) = match rest.find('/') {
            Some(at) => rest.split_at(at),
            None => (rest, "/healthz"),
        };
        let authority_ok = !authority.is_empty()
            && authority
                .bytes()
                .all(|b| b.is_ascii_graphic() && !matches!(b, b'@' | b'/' | b'?' | b'#'));
        let path_ok = path.bytes().all(|b| b.is_ascii_graphic());
        if !authority_ok || !path_ok {
            return Err(TargetError::NotHttp);
        }
        let authority = if authority.contains(':') && !authority.ends_with(']') {
            authority.to_owned()
        } else {
            format!("{authority}:80")
        };
        Ok(Target {
            authority: on_loopback(&authority),
            path: path.to_owned(),
            proxy_header: false,
        })
    }
}

/// A wildcard listening address (`0.0.0.0`, `[::]`) is asked on the
/// loopback address of its family: that is where a server bound to
/// every address is reachable from inside its own container.
fn on_loopback(addr: &str) -> String {
    match addr.parse::<SocketAddr>() {
        Ok(SocketAddr::V4(a)) if a.ip().is_unspecified() => format!("127.0.0.1:{}", a.port()),
        Ok(SocketAddr::V6(a)) if a.ip().is_unspecified() => format!("[::1]:{}", a.port()),
        _ => addr.to_owned(),
    }
}

/// What the server answered.
#[derive(Debug, PartialEq, Eq)]
pub struct Answer {
    /// The status code.
    status: u16,
    /// The body, as far as read, printable ASCII only.
    body: String,
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.status, self.body)
    }
}

/// Runs the check: prints one line, `healthy: 200 {...}` or `unhealthy:
/// ...`, and returns the exit status (0, 1, or 2 when there is nothing
/// to ask).
pub fn run(cli: &Cli, url: Option<&str>, timeout: Duration) -> ExitCode {
    let target = match Target::of(cli, url) {
        Ok(target) => target,
        Err(e) => {
            eprintln!("healthcheck: {e}");
            return ExitCode::from(2);
        }
    };
    match ask(&target, Instant::now() + timeout) {
        Ok(answer) if answer.status == 200 => {
            println!("healthy: {answer}");
            ExitCode::SUCCESS
        }
        Ok(answer) => {
            println!("unhealthy: {answer}");
            ExitCode::FAILURE
        }
        Err(e) => {
            println!("unhealthy: http://{}{}: {e}", target.authority, target.path);
            ExitCode::FAILURE
        }
    }
}

/// One request, every step bounded by `deadline`.
fn ask(target: &Target, deadline: Instant) -> io::Result<Answer> {
    let mut stream = connect(&target.authority, deadline)?;
    let mut request = String::new();
    if target.proxy_header {
        request.push_str("PROXY UNKNOWN\r\n");
    }
    request.push_str(&format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: petstore-server-healthcheck\r\nConnection: close\r\n\r\n",
        target.path, target.authority
    ));
    stream.set_write_timeout(Some(remaining(deadline)?))?;
    stream.write_all(request.as_bytes())?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        stream.set_read_timeout(Some(remaining(deadline)?))?;
        let n = match stream.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if is_timeout(&e) => return Err(timed_out()),
            Err(e) => return Err(e),
        };
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
        if answer.len() >= MAX_ANSWER {
            break;
        }
    }
    parse(&answer).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "not an HTTP answer"))
}

fn connect(authority: &str, deadline: Instant) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the host has no address");
    for addr in authority.to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, remaining(deadline)?) {
            Ok(stream) => return Ok(stream),
            Err(e) if is_timeout(&e) => return Err(timed_out()),
            Err(e) => last = e,
        }
    }
    Err(last)
}

fn remaining(deadline: Instant) -> io::Result<Duration> {
    match deadline.checked_duration_since(Instant::now()) {
        Some(left) if !left.is_zero() => Ok(left),
        _ => Err(timed_out()),
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    )
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "no answer within --timeout")
}

/// The status code and body of an HTTP/1.x answer.
fn parse(answer: &[u8]) -> Option<Answer> {
    let text = String::from_utf8_lossy(answer);
    let status_line = text.lines().next()?;
    let mut parts = status_line.split(' ');
    if !parts.next()?.starts_with("HTTP/1.") {
        return None;
    }
    let status = parts.next()?.parse::<u16>().ok()?;
    let body = text.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    let body: String = body
        .chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .take(MAX_SHOWN)
        .collect();
    Some(Answer { status, body })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn cli(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("petstore-server").chain(args.iter().copied())).unwrap()
    }

    fn target(authority: &str, path: &str, proxy_header: bool) -> Target {
        Target {
            authority: authority.into(),
            path: path.into(),
            proxy_header,
        }
    }

    #[test]
    fn the_target_follows_the_servers_flags() {
        assert_eq!(
            Target::of(&cli(&[]), None),
            Ok(target("127.0.0.1:8080", "/healthz", false))
        );
        assert_eq!(
            Target::of(&cli(&["--addr", "0.0.0.0:9000"]), None),
            Ok(target("127.0.0.1:9000", "/healthz", false))
        );
        assert_eq!(
            Target::of(&cli(&["--addr", "[::]:9000"]), None),
            Ok(target("[::1]:9000", "/healthz", false))
        );
        assert_eq!(
            Target::of(&cli(&["--addr", "0.0.0.0:1", "--proxy-protocol"]), None),
            Ok(target("127.0.0.1:1", "/healthz", true))
        );
        let admin = ["--proxy-protocol", "--admin-addr", "0.0.0.0:9901"];
        assert_eq!(
            Target::of(&cli(&admin), None),
            Ok(target("127.0.0.1:9901", "/healthz", false))
        );
        let tls = ["--tls-cert", "c.pem", "--tls-key", "k.pem"];
        assert_eq!(Target::of(&cli(&tls), None), Err(TargetError::Tls));
        let tls_admin = [&tls[..], &["--admin-addr", "127.0.0.1:9901"]].concat();
        assert_eq!(
            Target::of(&cli(&tls_admin), None),
            Ok(target("127.0.0.1:9901", "/healthz", false))
        );
    }

    #[test]
    fn a_url_wins_and_must_be_plain_http() {
        let tls = cli(&["--tls-cert", "c.pem", "--tls-key", "k.pem"]);
        assert_eq!(
            Target::of(&tls, Some("http://127.0.0.1:9/healthz")),
            Ok(target("127.0.0.1:9", "/healthz", false))
        );
        let plain = cli(&[]);
        assert_eq!(
            Target::of(&plain, Some("http://[::]:9/healthz?x")),
            Ok(target("[::1]:9", "/healthz?x", false))
        );
        assert_eq!(
            Target::of(&plain, Some("http://localhost")),
            Ok(target("localhost:80", "/healthz", false))
        );
        assert_eq!(
            Target::of(&plain, Some("http://[::1]/")),
            Ok(target("[::1]:80", "/", false))
        );
        for bad in [
            "https://127.0.0.1:9/healthz",
            "127.0.0.1:9",
            "http://",
            "http://user@host/",
            "http://h:1/a b",
        ] {
            assert_eq!(
                Target::of(&plain, Some(bad)),
                Err(TargetError::NotHttp),
                "{bad}"
            );
        }
    }

    #[test]
    fn answers_are_parsed_and_bounded() {
        assert_eq!(
            parse(b"HTTP/1.1 200 OK\r\ncontent-length: 15\r\n\r\n{\"status\":\"ok\"}"),
            Some(Answer {
                status: 200,
                body: r#"{"status":"ok"}"#.into()
            })
        );
        assert_eq!(
            parse(b"HTTP/1.1 503 Service Unavailable\r\n\r\n{\"status\":\"draining\"}\x1b[2J")
                .map(|a| (a.status, a.body)),
            Some((503, r#"{"status":"draining"}[2J"#.into()))
        );
        let long = [&b"HTTP/1.0 200 OK\r\n\r\n"[..], &[b'a'; 1000]].concat();
        assert_eq!(parse(&long).map(|a| a.body.len()), Some(MAX_SHOWN));
        for bad in [
            &b""[..],
            b"SSH-2.0-x\r\n",
            b"HTTP/1.1 abc\r\n\r\n",
            b"HTTP/2 200\r\n",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}
