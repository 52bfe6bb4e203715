//! The rulers of the load benchmarks (`scripts/bench/load`, `scripts/bench/load-h2`,
//! `scripts/bench/profile`): hyper answering every request with one fixed,
//! pre-encoded response and doing no other work but reading a request's
//! body. The default mode runs through the server's own runtime and
//! connection layer ([`petstore_server::net::runtime`],
//! [`petstore_server::net::serve`]); `--plain http1|h2|h2-changing` is
//! hyper alone, the last with rate-limit values that change on every
//! request ([`Changing`]).
//!
//! Run: `cargo run --release -p petstore-server --example baseline -- [--plain http1|h2|h2-changing] 127.0.0.1:0 [RESPONSE]`
//! (`RESPONSE`: a file holding the one HTTP/1.1 response to answer).
//! What each ruler measures, and the response file: docs/performance.md,
//! "The ruler".

use std::convert::Infallible;
use std::future::{ready, Future};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::future::Either;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::body::{Body, Bytes};
use hyper::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use petstore_server::http::ResponseBody;
use petstore_server::net::{self, serve, ConnLimits};
use tokio::net::TcpListener;

/// What every request gets. Static (leaked once), so answering touches no
/// shared reference count: the ruler does no avoidable work.
#[derive(Clone, Copy, Debug)]
struct Answer {
    status: StatusCode,
    headers: &'static HeaderMap,
    body: &'static [u8],
    /// `--plain h2-changing`: the rate-limit values made anew per request.
    changing: Option<&'static Changing>,
}

/// How many requests' rate-limit values `--plain h2-changing` makes at
/// start-up, then hands out in turn. A value comes again only after this
/// many responses, long after HPACK's table (4 KiB by default, about 70
/// entries of these) has dropped it, so each is new to the encoder.
const CHANGING_VALUES: usize = 8192;

/// The rate-limit values of `--plain h2-changing`, made from the captured
/// ones as a draining key's move on: request `n` answers `remaining - n`,
/// `reset + ceil(n * w / q)` and `"window";r=remaining - n;t=t + ceil(n *
/// w / q)`, where `q` and `w` are the binding window's quota and seconds
/// in the captured `RateLimit-Policy` (a draining bucket's refill time
/// grows by one token's, `w / q` seconds, per request).
///
/// They are made before the first request and handed out as static
/// slices (a clone copies a pointer): the ruler spends nothing on making
/// values, so over the fixed-value ruler it shows HPACK's cost of new
/// values alone. The server does make its values; that stays in its
/// share.
#[derive(Debug)]
struct Changing {
    /// `X-RateLimit-Remaining`, `X-RateLimit-Reset`, `RateLimit` per request.
    values: Vec<[HeaderValue; 3]>,
    /// Where those three stand among the captured map's values.
    slots: [usize; 3],
    /// Requests answered so far.
    served: AtomicUsize,
}

impl Changing {
    /// From the captured headers; `None` when one of them is missing or
    /// not of the contract's form.
    fn from_headers(headers: &HeaderMap) -> Option<Changing> {
        let number = |name: &str| headers.get(name)?.to_str().ok()?.parse::<u64>().ok();
        let remaining = number("x-ratelimit-remaining")?;
        let reset = number("x-ratelimit-reset")?;
        // `"day";r=99999;t=1`
        let current = headers.get("ratelimit")?.to_str().ok()?;
        let (window, rest) = current.split_once(";r=")?;
        let (_, t) = rest.split_once(";t=")?;
        let t: u64 = t.parse().ok()?;
        // `"minute";q=60;w=60, "day";q=1000;w=86400`
        let policy = headers.get("ratelimit-policy")?.to_str().ok()?;
        let entry = policy
            .split(", ")
            .find_map(|entry| entry.strip_prefix(window)?.strip_prefix(";q="))?;
        let (quota, seconds) = entry.split_once(";w=")?;
        let quota: u64 = quota.parse().ok().filter(|&q| q > 0)?;
        let seconds: u64 = seconds.parse().ok()?;
        let at = |name: &str| headers.iter().position(|(key, _)| key == name);
        let slots = [
            at("x-ratelimit-remaining")?,
            at("x-ratelimit-reset")?,
            at("ratelimit")?,
        ];
        let value = |text: String| -> Option<HeaderValue> {
            HeaderValue::from_str(&text).ok()?;
            Some(HeaderValue::from_static(text.leak()))
        };
        let values = (0..CHANGING_VALUES as u64)
            .map(|n| {
                let left = remaining.saturating_sub(n);
                let later = (n * seconds).div_ceil(quota);
                Some([
                    value(left.to_string())?,
                    value((reset + later).to_string())?,
                    value(format!("{window};r={left};t={}", t + later))?,
                ])
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Changing {
            values,
            slots,
            served: AtomicUsize::new(0),
        })
    }

    /// The next request's values into `headers`, a clone of the map they
    /// were read from: written into its value slots by position, as the
    /// server writes into its template's, so no name is hashed.
    fn apply(&self, headers: &mut HeaderMap) {
        let n = self.served.fetch_add(1, Ordering::Relaxed);
        let values = &self.values[n % self.values.len()];
        for (at, slot) in headers.values_mut().enumerate() {
            if let Some(which) = self.slots.iter().position(|&s| s == at) {
                *slot = values[which].clone();
            }
        }
    }
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
        changing: None,
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
        changing: None,
    })
}

/// A plain-hyper ruler's one protocol.
#[derive(Clone, Copy, Debug)]
enum Plain {
    Http1,
    H2,
    /// HTTP/2 with the rate-limit values changing per request.
    H2Changing,
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1).peekable();
    let plain = if args.peek().map(String::as_str) == Some("--plain") {
        args.next();
        match args.next().as_deref() {
            Some("http1") => Some(Plain::Http1),
            Some("h2") => Some(Plain::H2),
            Some("h2-changing") => Some(Plain::H2Changing),
            other => {
                eprintln!("--plain takes http1, h2 or h2-changing, not {other:?}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        None
    };
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8081".into());
    let mut answer = match args.next() {
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
    if matches!(plain, Some(Plain::H2Changing)) {
        match Changing::from_headers(answer.headers) {
            Some(changing) => answer.changing = Some(Box::leak(Box::new(changing))),
            None => {
                eprintln!(
                    "--plain h2-changing needs a response with the contract's rate-limit headers"
                );
                return ExitCode::FAILURE;
            }
        }
    }
    // The plain ruler builds tokio's runtime itself (`net::runtime` is
    // tokio's defaults too, but it is ours).
    let runtime = match plain {
        None => net::runtime(),
        Some(_) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
    };
    let runtime = match runtime {
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
        if let Some(plain) = plain {
            tokio::select! {
                () = serve_plain(listener, plain, answer) => {}
                () = shutdown => {}
            }
            return ExitCode::SUCCESS;
        }
        // The load generator is one address: its cap is lifted here as
        // scripts/bench/load lifts the server's (PETSTORE_MAX_CONNECTIONS_PER_ADDRESS).
        // Every accept still goes through the per-address table, as the
        // server's do.
        let limits = ConnLimits::default();
        let limits = ConnLimits {
            max_connections_per_address: limits.max_connections,
            ..limits
        };
        serve(listener, limits, None, shutdown, move |_peer| {
            move |request| respond(answer, request)
        })
        .await;
        ExitCode::SUCCESS
    })
}

/// The plain-hyper ruler's accept loop: a task a connection, hyper's
/// builder with its defaults, nothing else (no limits, no timers, no
/// stop signal: the process ends on Ctrl-C with its connections).
async fn serve_plain(listener: TcpListener, plain: Plain, answer: Answer) {
    let http1 = http1::Builder::new();
    let http2 = http2::Builder::new(TokioExecutor::new());
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                // EMFILE and friends: back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // As the server's sockets: answers leave at once, not after the
        // next read's acknowledgement.
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(stream);
        let service = service_fn(move |request| respond(answer, request));
        match plain {
            Plain::Http1 => {
                let connection = http1.serve_connection(io, service);
                tokio::spawn(async move {
                    let _ = connection.await;
                });
            }
            Plain::H2 | Plain::H2Changing => {
                let connection = http2.serve_connection(io, service);
                tokio::spawn(async move {
                    let _ = connection.await;
                });
            }
        }
    }
}

/// `answer` to `request`, at once when it has no body.
fn respond(
    answer: Answer,
    request: Request<Incoming>,
) -> impl Future<Output = Result<Response<ResponseBody>, Infallible>> {
    // The fastest way to hand hyper fixed headers: clone a finished map
    // (no name is hashed), as the server does.
    let mut response = Response::new(ResponseBody::full(Bytes::from_static(answer.body)));
    *response.status_mut() = answer.status;
    *response.headers_mut() = answer.headers.clone();
    if let Some(changing) = answer.changing {
        changing.apply(response.headers_mut());
    }
    if request.body().is_end_stream() {
        return Either::Left(ready(Ok::<_, Infallible>(response)));
    }
    // A request with a body (the POST scenarios) is read whole before it
    // is answered, as the server reads it: a body left unread is hyper's
    // to drain or to end the connection over, and the ruler's cost then
    // depended on the moment the body arrived.
    Either::Right(async move {
        let _ = request.into_body().collect().await;
        Ok(response)
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

    #[test]
    fn changing_values_move_on_as_a_draining_key_s() {
        let text = b"HTTP/1.1 200 OK\r\nx-ratelimit-limit: 1000\r\n\
x-ratelimit-remaining: 990\r\nx-ratelimit-reset: 1800000000\r\n\
ratelimit-policy: \"minute\";q=60;w=60, \"day\";q=1000;w=86400\r\n\
ratelimit: \"day\";r=990;t=865\r\n\r\n[]";
        let answer = parse_response(text).unwrap();
        let changing = Changing::from_headers(answer.headers).unwrap();
        let mut headers = answer.headers.clone();
        changing.apply(&mut headers);
        assert_eq!(headers["x-ratelimit-remaining"], "990");
        assert_eq!(headers["x-ratelimit-reset"], "1800000000");
        assert_eq!(headers["ratelimit"], "\"day\";r=990;t=865");
        changing.apply(&mut headers);
        // One token of the day's: 86.4 s, rounded up.
        assert_eq!(headers["x-ratelimit-remaining"], "989");
        assert_eq!(headers["x-ratelimit-reset"], "1800000087");
        assert_eq!(headers["ratelimit"], "\"day\";r=989;t=952");
        assert_eq!(headers.len(), answer.headers.len());
        let fixed = parse_response(b"HTTP/1.1 200 OK\r\nx-ratelimit-remaining: 1\r\n\r\n").unwrap();
        assert!(Changing::from_headers(fixed.headers).is_none());
    }
}
