//! One accepted connection, from its first byte to its close: the TLS
//! handshake when the listener has TLS, the protocol (HTTP/1.1 or HTTP/2),
//! and hyper's connection for it, stopped gracefully at shutdown.
//!
//! Which protocol: over TLS, the one ALPN agreed (`h2`, else HTTP/1.1);
//! in plaintext, HTTP/2 when the client starts with HTTP/2's connection
//! preface (h2c with prior knowledge, RFC 9113 section 3.3), else
//! HTTP/1.1. No `Upgrade: h2c` (RFC 9113 deprecated it). The handshake
//! and the preface are read within the header timeout: a client that
//! connects and sends nothing (no ClientHello, no request) is closed
//! like a slow HTTP/1 head.
//!
//! Why a stop signal of our own (`stop.rs`) rather than hyper-util's
//! `GracefulShutdown`: that one takes the connection future out of our
//! hands, and an HTTP/2 connection needs it in hand to send GOAWAY when
//! its watchdog says so (`h2.rs`). The signal is the same idea (a watch
//! channel every connection holds a receiver of; its sender counts them
//! and waits until they are all gone), made cheap to poll on every wake.

use std::convert::Infallible;
use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;

use hyper::body::{Body as _, Incoming};
use hyper::header::{HeaderValue, CONTENT_LENGTH};
use hyper::rt::{Read, Write};
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper::{Method, Request};
use hyper_util::rt::{TokioExecutor, TokioIo};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::h2::{Look, Watchdog, WatchdogAction};
use super::hpack::REINDEX;
use super::limits::ConnLimits;
use super::stop::Stop;
use super::write_timeout::WriteTimeout;
use crate::http::{HttpResponse, ResponseBody};

/// HTTP/2's connection preface: what an h2c client sends first.
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Connections served since the process started, by protocol: HTTP/1.1
/// and HTTP/2, each in plaintext and over TLS
/// (`petstore_connections_total{protocol, tls}`). Process-wide, as the
/// refused connections are, so that `/metrics` needs no handle on the
/// accept loop.
static SERVED: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

/// A connection's protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1 (or 1.0).
    Http1,
    /// HTTP/2.
    H2,
}

impl Protocol {
    /// The label of logs and metrics: `http1` or `h2`.
    pub fn label(self) -> &'static str {
        match self {
            Protocol::Http1 => "http1",
            Protocol::H2 => "h2",
        }
    }
}

/// The slot of [`SERVED`] for `protocol` over TLS or not.
fn served(protocol: Protocol, tls: bool) -> &'static AtomicU64 {
    &SERVED[usize::from(protocol == Protocol::H2) * 2 + usize::from(tls)]
}

fn count(protocol: Protocol, tls: bool) {
    served(protocol, tls).fetch_add(1, Ordering::Relaxed);
}

/// Connections served so far with `protocol`, over TLS or not.
pub fn served_total(protocol: Protocol, tls: bool) -> u64 {
    served(protocol, tls).load(Ordering::Relaxed)
}

/// `/metrics`' view of the connections served by protocol.
#[derive(Debug)]
pub struct ConnectionsByProtocol;

impl Collector for ConnectionsByProtocol {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(
            "connections",
            "Connections served, by protocol (http1, h2) and TLS",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for protocol in [Protocol::Http1, Protocol::H2] {
            for tls in [false, true] {
                let labels = [
                    ("protocol", protocol.label()),
                    ("tls", if tls { "true" } else { "false" }),
                ];
                let counter = ConstCounter::new(served_total(protocol, tls));
                counter.encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

/// What every connection of one listener shares: hyper's two servers,
/// the limits, TLS when the listener has it, and the stop signal.
pub(super) struct Protocols {
    pub http1: http1::Builder,
    pub http2: http2::Builder<TokioExecutor>,
    pub limits: ConnLimits,
    pub tls: Option<Arc<super::tls::Tls>>,
}

/// Serves one connection until it closes, or `stop` turns true and ends
/// it gracefully. `header_left` is what the header timeout has left (a
/// PROXY header may have spent some).
pub(super) async fn serve_connection<H, F>(
    protocols: Arc<Protocols>,
    stream: TcpStream,
    header_left: Duration,
    handler: H,
    stop: Stop,
) where
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Result<HttpResponse, Infallible>> + Send + 'static,
{
    let deadline = Instant::now() + header_left;
    let limits = protocols.limits;
    let Some(tls) = &protocols.tls else {
        let h2 = match tokio::time::timeout_at(deadline, starts_with_preface(&stream)).await {
            Ok(Ok(h2)) => h2,
            // Nothing in time, or the socket failed: closed (the drop).
            _ => return,
        };
        let io = TokioIo::new(WriteTimeout::new(stream, limits.write_timeout));
        return serve_io(&protocols, io, h2, false, deadline, handler, stop).await;
    };
    let acceptor = tls.acceptor();
    let io = WriteTimeout::new(stream, limits.write_timeout);
    let Ok(Ok(stream)) = tokio::time::timeout_at(deadline, acceptor.accept(io)).await else {
        // No ClientHello in time, plain HTTP on the TLS port, a failed
        // handshake: closed. Not logged: anyone can connect.
        return;
    };
    let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
    serve_io(
        &protocols,
        TokioIo::new(stream),
        h2,
        true,
        deadline,
        handler,
        stop,
    )
    .await;
}

/// The answer to a HEAD: the GET's headers, its `Content-Length`
/// included, without the body. hyper's HTTP/1 server drops a HEAD's body
/// itself; its HTTP/2 server sends it, which a client must treat as a
/// protocol error (RFC 9113 section 8.1.1).
fn without_body(response: HttpResponse) -> HttpResponse {
    let (mut parts, body) = response.into_parts();
    if let Some(length) = body.size_hint().exact() {
        parts
            .headers
            .insert(CONTENT_LENGTH, HeaderValue::from(length));
    }
    HttpResponse::from_parts(parts, ResponseBody::default())
}

/// Whether the client's first bytes are HTTP/2's preface. Peeks, so the
/// bytes stay for hyper. Loops only while what has arrived is a strict
/// prefix of the preface (a client sending it in pieces); any other
/// first byte decides at once.
async fn starts_with_preface(stream: &TcpStream) -> std::io::Result<bool> {
    let mut buf = [0u8; PREFACE.len()];
    loop {
        let n = stream.peek(&mut buf).await?;
        if n == 0 || buf[..n] != PREFACE[..n] {
            return Ok(false);
        }
        if n == PREFACE.len() {
            return Ok(true);
        }
        // `peek` returns at once while bytes wait unread: poll gently
        // for the rest (bounded by the caller's header timeout).
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn serve_io<I, H, F>(
    protocols: &Protocols,
    io: I,
    h2: bool,
    tls: bool,
    deadline: Instant,
    handler: H,
    mut stop: Stop,
) where
    I: Read + Write + Unpin + Send + 'static,
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Result<HttpResponse, Infallible>> + Send + 'static,
{
    if h2 {
        count(Protocol::H2, tls);
        return serve_h2(protocols, io, handler, stop).await;
    }
    count(Protocol::Http1, tls);
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return;
    }
    // The first head gets what the header timeout has left after the
    // PROXY header, the TLS handshake and the wait for the first byte;
    // every later head gets the whole timeout (hyper's, armed when the
    // previous response is written). Hence a timer of our own for the
    // first head only: a shorter hyper timeout would hold for every head
    // of the connection, and a client that took most of the timeout to
    // send its first request would see its later ones cut short.
    let first_seen = Arc::new(AtomicBool::new(false));
    let seen = first_seen.clone();
    let service = service_fn(move |request| {
        seen.store(true, Ordering::Relaxed);
        handler(request)
    });
    let mut connection = pin!(protocols.http1.serve_connection(io, service));
    let first_head = pin!(tokio::time::sleep_until(deadline));
    let mut first_head = Some(first_head).filter(|_| left < protocols.limits.header_timeout);
    loop {
        tokio::select! {
            // The connection first: no random pick on every wake-up.
            biased;
            // Errors here are the client's (reset, timeout, bad framing);
            // hyper has already answered what could be answered.
            _ = connection.as_mut() => return,
            // Done as soon as the first head is seen, not at the deadline:
            // the timer is then dropped, where it was polled again on
            // every wake of the connection (each read, each write) and
            // kept in the runtime's timer wheel until it ran out.
            _ = poll_fn(|cx| match first_head.as_mut() {
                Some(_) if first_seen.load(Ordering::Relaxed) => Poll::Ready(()),
                Some(sleep) => sleep.as_mut().poll(cx),
                None => Poll::Pending,
            }), if first_head.is_some() => {
                if !first_seen.load(Ordering::Relaxed) {
                    // No first head in time: closed, as hyper's timeout
                    // closes a connection.
                    return;
                }
                first_head = None;
            }
            () = &mut stop => break,
        }
    }
    connection.as_mut().graceful_shutdown();
    let _ = connection.await;
}

async fn serve_h2<I, H, F>(protocols: &Protocols, io: I, handler: H, mut stop: Stop)
where
    I: Read + Write + Unpin + Send + 'static,
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Result<HttpResponse, Infallible>> + Send + 'static,
{
    let watchdog = Watchdog::new(&protocols.limits);
    let streams = watchdog.clone();
    let handler = Arc::new(handler);
    let service = service_fn(move |request: Request<Incoming>| {
        let guard = streams.open();
        let head = request.method() == Method::HEAD;
        let reply = handler(request);
        async move {
            let Ok(response) = reply.await;
            let response = if head {
                without_body(response)
            } else {
                response
            };
            Ok::<_, Infallible>(guard.respond(response))
        }
    });
    let mut connection = pin!(protocols.http2.serve_connection(io, service));
    let mut look = Look::new(Instant::now());
    let mut known_waker = None;
    // One timer for the connection's life, moved to each next look: the
    // task is woken by its socket, its streams' wakes through hyper, the
    // timer, the watchdog's alarm and the stop signal, and on most wakes
    // only the connection has something new. So the connection is
    // polled first, and the rest costs a flag each: the timer, the stop
    // signal and the alarm are polled again only when one of them is
    // raised (the timer fired or moved), or when the task's waker is
    // another than the one they hold (they wake that one). All three
    // were given the waker the timer holds, in that order, before it.
    let mut timer = pin!(tokio::time::sleep_until(Instant::now()));
    let mut timer_waker: Option<Waker> = None;
    let mut reindex = Instant::now() + REINDEX;
    loop {
        let now = Instant::now();
        watchdog.index_changing.look(&mut reindex, now);
        match watchdog.action(&mut look, now) {
            WatchdogAction::Wait(at) => {
                // Woken for the next turn to index too, however long the
                // watchdog's timeouts are.
                let at = at.min(reindex);
                if at != timer.deadline() {
                    timer.as_mut().reset(at);
                    timer_waker = None;
                }
            }
            WatchdogAction::GoAway => {
                connection.as_mut().graceful_shutdown();
                look.go_away(now);
                continue;
            }
            // Dropped: hyper's streams and the socket with it.
            WatchdogAction::Abort => return,
        }
        let going_away = look.going_away();
        let woke = poll_fn(|cx| {
            if connection.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Woke::Ended);
            }
            let held = timer_waker
                .as_ref()
                .is_some_and(|waker| waker.will_wake(cx.waker()));
            if held
                && !timer.is_elapsed()
                && (going_away || !stop.raised())
                && !watchdog.alarm_raised()
            {
                return Poll::Pending;
            }
            if !going_away && Pin::new(&mut stop).poll(cx).is_ready() {
                return Poll::Ready(Woke::Stop);
            }
            if watchdog.alarmed(cx.waker(), &mut known_waker) {
                return Poll::Ready(Woke::Look);
            }
            if held && !timer.is_elapsed() {
                return Poll::Pending;
            }
            if timer.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Woke::Look);
            }
            timer_waker = Some(cx.waker().clone());
            Poll::Pending
        })
        .await;
        match woke {
            Woke::Ended => return,
            Woke::Stop => {
                connection.as_mut().graceful_shutdown();
                look.go_away(Instant::now());
            }
            Woke::Look => {}
        }
    }
}

/// Why an HTTP/2 connection's task woke with something to do.
enum Woke {
    /// hyper's connection ended (closed, or failed).
    Ended,
    /// The stop signal: GOAWAY.
    Stop,
    /// The watchdog's alarm or its next look.
    Look,
}
