//! The ruler of the load benchmark (`scripts/load`): raw hyper with the
//! same runtime and connection settings as petstore-server
//! ([`petstore_server::net::runtime`], [`petstore_server::net::serve`]),
//! answering every request with one fixed, pre-encoded page of 20 pets and
//! doing no other work but reading a request's body when it has one (as
//! any server must). It is the physical limit the server is measured
//! against, not a product. Through `serve` it speaks HTTP/2 with prior
//! knowledge too, so it is also the ruler of `scripts/load-h2`.
//!
//! Run: `cargo run --release -p petstore-server --example baseline -- 127.0.0.1:0 [RESPONSE]`
//! (prints `listening on http://IP:PORT` like the server).
//!
//! - With `RESPONSE`, a file holding one HTTP/1.1 response (status line,
//!   header lines, a blank line, the body; `scripts/load` captures the
//!   server's own `GET /v1/pets?limit=20`), it answers every request with
//!   exactly that status, those headers and that body: raw hyper answering
//!   the same bytes as the server, with no work at all. `Content-Length`
//!   and `Date` are left out of the file's headers because hyper writes
//!   them on every response, the server's included.
//! - Without it, a built-in page with only `Content-Type` ("page only"):
//!   the ruler of the earlier reports, which leaves out the rate-limit and
//!   `Link` headers that the contract puts on every page, and with them
//!   about 330 bytes per response that the kernel and the load generator
//!   handle.

use std::convert::Infallible;
use std::future::ready;
use std::process::ExitCode;

use futures_util::future::Either;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Bytes};
use hyper::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use petstore_server::net::{self, serve, ConnLimits};
use tokio::net::TcpListener;

/// What every request gets. Static (leaked once), so answering touches no
/// shared reference count: the ruler does no avoidable work.
#[derive(Clone, Copy, Debug)]
struct Answer {
    status: StatusCode,
    headers: &'static HeaderMap,
    body: &'static [u8],
}

/// The built-in page: 20 pets as `GET /v1/pets?limit=20` answers them on
/// a seeded server, with only a `Content-Type`.
fn page_only() -> Answer {
    let statuses = ["available", "pending", "sold"];
    let pets: Vec<String> = (1..=20)
        .map(|id| {
            format!(
                r#"{{"id":{id},"name":"pet-{id:06}","categoryId":{},"status":"{}"}}"#,
                id % 10 + 1,
                statuses[id % 3]
            )
        })
        .collect();
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Answer {
        status: StatusCode::OK,
        headers: Box::leak(Box::new(headers)),
        body: format!("[{}]", pets.join(",")).leak().as_bytes(),
    }
}

/// Headers hyper writes itself on every response, so a captured response
/// must not repeat them.
const WRITTEN_BY_HYPER: [&str; 5] = [
    "content-length",
    "date",
    "connection",
    "keep-alive",
    "transfer-encoding",
];

/// The response in `text`: status line, header lines, blank line, body.
fn parse_response(text: &[u8]) -> Result<Answer, String> {
    let split = text
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no blank line after the headers")?;
    let head = std::str::from_utf8(&text[..split]).map_err(|e| format!("head: {e}"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|code| StatusCode::from_bytes(code.as_bytes()).ok())
        .ok_or_else(|| format!("not a status line: {status_line:?}"))?;
    let mut headers = HeaderMap::new();
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format!("not a header line: {line:?}"))?;
        let name = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|e| format!("header name {name:?}: {e}"))?;
        if WRITTEN_BY_HYPER.contains(&name.as_str()) {
            continue;
        }
        let value =
            HeaderValue::from_str(value.trim()).map_err(|e| format!("value of {name}: {e}"))?;
        headers.append(name, value);
    }
    Ok(Answer {
        status,
        headers: Box::leak(Box::new(headers)),
        body: text[split + 4..].to_vec().leak(),
    })
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8081".into());
    let answer = match args.next() {
        None => page_only(),
        Some(path) => match std::fs::read(&path).map_err(|e| e.to_string()) {
            Ok(text) => match parse_response(&text) {
                Ok(answer) => answer,
                Err(e) => {
                    eprintln!("{path}: not an HTTP response: {e}");
                    return ExitCode::FAILURE;
                }
            },
            Err(e) => {
                eprintln!("cannot read {path}: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    let runtime = match net::runtime() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let listener = match TcpListener::bind(&addr).await {
            Ok(listener) => listener,
            Err(e) => {
                eprintln!("cannot listen on {addr}: {e}");
                return ExitCode::FAILURE;
            }
        };
        if let Ok(local) = listener.local_addr() {
            println!("listening on http://{local}");
        }
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        // The load generator is one address: its cap is lifted here as
        // scripts/load lifts the server's (PETSTORE_MAX_CONNECTIONS_PER_ADDRESS).
        // Every accept still goes through the per-address table, as the
        // server's do.
        let limits = ConnLimits::default();
        let limits = ConnLimits {
            max_connections_per_address: limits.max_connections,
            ..limits
        };
        serve(listener, limits, None, shutdown, move |_peer| {
            move |request: hyper::Request<hyper::body::Incoming>| {
                // The fastest way to hand hyper fixed headers: clone a
                // finished map (no name is hashed), as the server does.
                let mut response = Response::new(Full::new(Bytes::from_static(answer.body)));
                *response.status_mut() = answer.status;
                *response.headers_mut() = answer.headers.clone();
                if request.body().is_end_stream() {
                    return Either::Left(ready(Ok::<_, Infallible>(response)));
                }
                // A request with a body (the POST scenarios) is read whole
                // before it is answered, as the server reads it: a body
                // left unread is hyper's to drain or to end the connection
                // over, and the ruler's cost then depended on the moment
                // the body arrived.
                Either::Right(async move {
                    let _ = request.into_body().collect().await;
                    Ok(response)
                })
            }
        })
        .await;
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_captured_response_is_answered_as_it_was() {
        let text = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
x-ratelimit-limit: 60\r\nlink: </v1/pets?limit=20&after=20>; rel=\"next\"\r\n\
content-length: 2\r\ndate: Mon, 23 Nov 2026 10:58:39 GMT\r\n\r\n[]";
        let answer = parse_response(text).unwrap();
        assert_eq!(answer.status, StatusCode::OK);
        let names: Vec<&str> = answer.headers.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["content-type", "x-ratelimit-limit", "link"]);
        assert_eq!(
            answer.headers["link"],
            "</v1/pets?limit=20&after=20>; rel=\"next\""
        );
        assert_eq!(answer.body, b"[]");
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n").is_err());
        assert!(parse_response(b"garbage").is_err());
    }
}
