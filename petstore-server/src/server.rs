//! The accept loop: hyper's HTTP/1 connection per client, the limits that
//! keep hostile clients cheap, and graceful shutdown.
//!
//! Limits, and why each:
//! - `header_read_timeout` with a timer: a client trickling headers one byte
//!   at a time would otherwise hold a connection forever (hyper ignores the
//!   timeout unless a timer is set).
//! - `max_header_size` 16 KiB (hyper answers 431), and hyper's default
//!   limit of 100 header fields (431 too).
//! - a body timeout (408) and the 64 KiB body cap (413), in [`read_body`].
//! - at most `max_connections` open connections: past that the loop stops
//!   accepting, so the kernel's backlog queues new clients until one closes,
//!   instead of the process running out of file descriptors or memory.
//! - at most `max_connections_per_address` of them from one address
//!   ([`PerAddress`]): a connection over it is closed as soon as it is
//!   accepted, so one address cannot take every slot.
//! - with `--proxy-protocol`, the client's address is the one its load
//!   balancer's PROXY header names ([`proxy_protocol`]), read in the
//!   connection's own task within the header timeout; a connection
//!   without the header is closed.
//! - a write timeout ([`WriteTimeout`]): a connection whose client stops
//!   reading is closed when a write makes no progress for that long.
//! - idle keep-alive connections are closed by the header timeout: hyper
//!   starts it as soon as a response is written and the connection waits
//!   for the next request's head (hyper 1.x, `Conn::poll_read_head`), so
//!   no timer of our own is needed for them.
//! - every handler runs under `catch_unwind`: a bug becomes a logged 500
//!   `internal`, never a dropped connection or a dead worker.

use std::convert::Infallible;
use std::future::{poll_fn, Future};
use std::future::{ready, Ready};
use std::net::IpAddr;
use std::panic::AssertUnwindSafe;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::{Body as _, Bytes, Incoming};
use hyper::header::{HeaderValue, CONNECTION};
use hyper::http::request::Parts;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use crate::access_log;
use crate::connection::Connection;
use crate::error::{ApiError, HttpResponse};
use crate::per_address::PerAddress;
use crate::proxy_protocol;
use crate::recorder::METHODS;
use crate::routes::{
    self, declared_length, Admission, Admitted, BodyRead, Decided, Finished, Served, Waiting,
    MAX_BODY,
};
use crate::state::AppState;
use crate::write_timeout::WriteTimeout;
use crate::{log_error, log_info};

/// The runtime the server runs on: tokio's multi-threaded scheduler with
/// its defaults (one worker per core). The load benchmark's baseline
/// builds its runtime here too, so both run on the same settings.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

/// Limits of the HTTP layer.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Time allowed for a request's headers to arrive, and for an idle
    /// keep-alive connection to send its next request.
    pub header_timeout: Duration,
    /// Time a write to the client may make no progress before the
    /// connection is closed.
    pub write_timeout: Duration,
    /// Time allowed for a request's body to arrive.
    pub body_timeout: Duration,
    /// Connections served at once.
    pub max_connections: usize,
    /// Connections served at once from one client address.
    pub max_connections_per_address: usize,
    /// How long shutdown waits for requests in flight.
    pub shutdown_grace: Duration,
    /// Every connection starts with a PROXY protocol header whose source
    /// address is the client's ([`proxy_protocol`]); one without is
    /// closed.
    pub proxy_protocol: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(10),
            max_connections: 1024,
            max_connections_per_address: PerAddress::default_cap(1024),
            shutdown_grace: Duration::from_secs(10),
            proxy_protocol: false,
        }
    }
}

/// Serves `listener` until `shutdown` completes, then stops accepting and
/// waits (at most `limits.shutdown_grace`) for the requests in flight.
pub async fn run(
    listener: TcpListener,
    state: Arc<AppState>,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) {
    let body_timeout = limits.body_timeout;
    serve(listener, limits, shutdown, move |peer| {
        // One Arc per connection, cloned only by requests that must wait
        // (a body to read, an fsync): its count is touched by that
        // connection alone, where cloning the shared state's Arc per
        // request would bounce one cache line between all worker threads.
        let connection = Arc::new(Connection::new(state.clone(), peer));
        move |request| reply(&connection, request, body_timeout)
    })
    .await;
}

/// The future hyper gets for one request: the response itself when it
/// could be made at once, or the work that has to wait for something.
pub enum Reply {
    /// Answered before hyper saw the future: no body to wait for.
    Now(Ready<Result<HttpResponse, Infallible>>),
    /// A body still to read, or the store to wait for (a create's commit,
    /// a catch-up of the read copy).
    Later(Pin<Box<dyn Future<Output = Result<HttpResponse, Infallible>> + Send>>),
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Reply::Now(_) => "Reply::Now",
            Reply::Later(_) => "Reply::Later",
        })
    }
}

impl Future for Reply {
    type Output = Result<HttpResponse, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Both variants are `Unpin` (a `Ready`, a `Pin<Box<_>>`).
        match self.get_mut() {
            Reply::Now(ready) => Pin::new(ready).poll(cx),
            Reply::Later(later) => later.as_mut().poll(cx),
        }
    }
}

/// hyper's service call for one request. A request without a body (every
/// GET) is answered right here, and the request is dropped before this
/// returns.
///
/// Why at once, and not in an `async fn`: hyper parses the request head
/// out of its connection read buffer, and the head's URI and header
/// values are slices of that buffer. Before it first polls the returned
/// future, hyper reads ahead on the connection (to notice a client that
/// hangs up mid-request), which reserves room in the buffer. While the
/// request is alive inside a not-yet-polled future the buffer is shared,
/// so that reserve allocated a fresh 8 KiB buffer on every request, and
/// the split of the next head another shared header: two allocations and
/// cold memory per request that raw hyper, which drops its request in the
/// call, never pays (`scripts/profile`: `BytesMut::reserve_inner`).
fn reply(
    connection: &Arc<Connection>,
    request: Request<Incoming>,
    body_timeout: Duration,
) -> Reply {
    let started = Instant::now();
    let (head, body) = request.into_parts();
    let method = method_label(&head.method);
    // Every check that needs no body comes first (routes::admit), so a
    // refusal never reads the body, and never makes hyper invite it with
    // `100 Continue`.
    let body_empty = body.is_end_stream();
    let admitted = match admit(connection, &head, body_empty) {
        Admission::Answered(response, served) => {
            drop((body, head));
            let response =
                answered_unread(connection, method, response, &served, body_empty, started);
            return Reply::Now(ready(Ok(response)));
        }
        Admission::Admitted(admitted) => admitted,
        Admission::Charge(pending) => {
            // The rate limit is Redis's (`--redis`): await it, then go on
            // as below. Only in that mode: the in-process limiter decides
            // synchronously above.
            let connection = connection.clone();
            return Reply::Later(Box::pin(async move {
                let decision = pending.decide(&connection.state).await;
                let admitted =
                    match admit_decided(&connection, &head, body_empty, pending, decision) {
                        Decided::Admitted(admitted) => admitted,
                        Decided::Answered(response, served) => {
                            return Ok(answered_unread(
                                &connection,
                                method,
                                response,
                                &served,
                                body_empty,
                                started,
                            ));
                        }
                    };
                let body = read_body(&head, body, body_timeout).await;
                Ok(answer_later(connection, head, admitted, body, started).await)
            }));
        }
    };
    if !body_empty {
        let connection = connection.clone();
        return Reply::Later(Box::pin(async move {
            let body = read_body(&head, body, body_timeout).await;
            Ok(answer_later(connection, head, admitted, body, started).await)
        }));
    }
    drop(body);
    match finish(
        connection,
        &head,
        admitted,
        BodyRead::Complete(Bytes::new()),
    ) {
        Finished::Answered(response, served) => {
            drop(head);
            record(connection, method, &response, &served, started);
            Reply::Now(ready(Ok(response)))
        }
        // A get of an id the store's read copy may not hold yet.
        Finished::Waiting(waiting) => {
            let connection = connection.clone();
            Reply::Later(Box::pin(async move {
                let (response, served) = wait(&connection, &head, waiting).await;
                record(&connection, method, &response, &served, started);
                Ok(response)
            }))
        }
    }
}

/// A request answered before its body was read (a refusal, or a route
/// that takes none): a body left on the connection closes it; recorded.
fn answered_unread(
    connection: &Connection,
    method: &'static str,
    mut response: HttpResponse,
    served: &Served,
    body_empty: bool,
    started: Instant,
) -> HttpResponse {
    if !body_empty {
        close(&mut response);
    }
    record(connection, method, &response, served, started);
    response
}

/// Marks `response` as the last on its connection. For a request whose
/// body was not read to its end (refused before it, or over the cap, or
/// too slow): what is left of the body on the connection cannot be told
/// from a next request, so hyper closes the connection after the
/// response; this says so to the client (RFC 9112 section 9.6) instead of
/// closing without a word.
fn close(response: &mut HttpResponse) {
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
}

/// A connection whose PROXY header has been read: its stream, the
/// client's address, its slot.
type Proxied = (TcpStream, IpAddr, OwnedSemaphorePermit);

/// The accept loop with all the limits, around any handler:
/// `connect(peer)` makes the handler of one connection's requests. [`run`]
/// uses it with the API; the load benchmark's baseline server uses it with
/// a handler that does no work, so both have the same runtime and
/// connection settings.
pub async fn serve<C, H, F>(
    listener: TcpListener,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
    mut connect: C,
) where
    C: FnMut(IpAddr) -> H,
    H: Fn(Request<Incoming>) -> F + Send + 'static,
    F: Future<Output = Result<HttpResponse, Infallible>> + Send + 'static,
{
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_header_size(16 * 1024)
        .keep_alive(true);
    let graceful = GracefulShutdown::new();
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let per_address = PerAddress::new(limits.max_connections_per_address);
    let mut shutdown = pin!(shutdown);

    // A slot is taken before accepting, and the address is checked after:
    // while every slot is held nothing is accepted, so waiting clients
    // stay in the kernel's backlog (bounded memory, no fd per client).
    // The backlog is first in, first out: a connection over its address's
    // cap that waits there is accepted in its turn, closed at once, and
    // its slot goes straight to the next accept, so it delays the clients
    // behind it by one accept and one close, never by a slot. (Accepting
    // first and then waiting for a slot with the connection in hand
    // would hold it just the same, plus its file descriptor.)
    // With `--proxy-protocol`, a connection's address is known only once
    // its header is read: that happens in a task of its own (bounded by
    // the header timeout, holding its slot), which hands the connection
    // back here to be counted per address and served.
    let (ready_tx, mut ready_rx) = mpsc::unbounded_channel::<Proxied>();
    let mut start = |stream: TcpStream, ip: IpAddr, slot: OwnedSemaphorePermit| {
        let Some(address_slot) = per_address.take(ip) else {
            // Over the address's cap: closed now (the drop); the slot
            // goes back to the caller.
            drop(stream);
            return Some(slot);
        };
        let _ = stream.set_nodelay(true);
        let service = service_fn(connect(ip));
        let io = TokioIo::new(WriteTimeout::new(stream, limits.write_timeout));
        let connection = graceful.watch(http.serve_connection(io, service));
        tokio::spawn(async move {
            // The address's place is given back before the slot (a
            // tuple drops in order): the accept that the freed slot lets
            // through must find the count already lowered, or it would
            // refuse a connection that is within the cap.
            let _slots = (address_slot, slot);
            // Errors here are the client's (reset, timeout, bad framing);
            // hyper has already answered what could be answered.
            let _ = connection.await;
        });
        None
    };
    let mut permit = None;
    loop {
        let slot = match permit.take() {
            Some(slot) => slot,
            None => tokio::select! {
                slot = permits.clone().acquire_owned() => match slot {
                    Ok(slot) => slot,
                    Err(_) => break, // the semaphore is never closed
                },
                Some((stream, ip, slot)) = ready_rx.recv() => {
                    drop(start(stream, ip, slot));
                    continue;
                }
                () = &mut shutdown => break,
            },
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    log_error!("accept failed: {e}");
                    permit = Some(slot);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            Some((stream, ip, ready_slot)) = ready_rx.recv() => {
                drop(start(stream, ip, ready_slot));
                permit = Some(slot);
                continue;
            }
            () = &mut shutdown => break,
        };
        if limits.proxy_protocol {
            let ready = ready_tx.clone();
            let timeout = limits.header_timeout;
            tokio::spawn(async move {
                let mut stream = stream;
                let read = proxy_protocol::read_header(&mut stream, peer.ip());
                // Otherwise closed (the drop): no header, a bad one, or
                // none in time. Not logged: anyone can connect.
                if let Ok(Ok(ip)) = tokio::time::timeout(timeout, read).await {
                    let _ = ready.send((stream, ip, slot));
                }
            });
            continue;
        }
        // Over the address's cap: the slot is kept for the next client.
        permit = start(stream, peer.ip(), slot);
    }

    drop(listener);
    log_info!(
        "shutting down: waiting for {} open connection(s)",
        graceful.count()
    );
    tokio::select! {
        () = graceful.shutdown() => log_info!("all connections closed"),
        () = tokio::time::sleep(limits.shutdown_grace) => {
            log_error!("requests still in flight after {:?}; stopping anyway", limits.shutdown_grace);
        }
    }
}

/// The rest of [`reply`] for a request that had to wait for its body:
/// answers it (awaiting the store for a create it cannot answer at once)
/// and records it.
async fn answer_later(
    connection: Arc<Connection>,
    head: Parts,
    admitted: Admitted,
    body: BodyRead,
    started: Instant,
) -> HttpResponse {
    let method = method_label(&head.method);
    let read_to_the_end = matches!(body, BodyRead::Complete(_));
    let (mut response, served) = match finish(&connection, &head, admitted, body) {
        Finished::Answered(response, served) => (response, served),
        Finished::Waiting(waiting) => wait(&connection, &head, waiting).await,
    };
    if !read_to_the_end {
        close(&mut response);
    }
    record(&connection, method, &response, &served, started);
    response
}

/// Metrics and the access log of one answered request on `connection`,
/// `started` when hyper handed it over.
fn record(
    connection: &Connection,
    method: &'static str,
    response: &HttpResponse,
    served: &Served,
    started: Instant,
) {
    let (state, peer, elapsed) = (&connection.state, connection.peer, started.elapsed());
    let status = response.status().as_u16();
    // Neither 501 nor 503 is logged per request: a 501 is an answer by
    // design (store orders, a transfer coding other than chunked), not a
    // fault of the service, and logging it at ERROR on every request buried
    // the real faults; a 503's cause is logged once when it starts (the
    // inventory's failure hook), not once per refused request.
    if status >= 500 && status != 501 && status != 503 {
        log_error!("answered {status} to {method} {} from {peer}", served.route);
    }
    if let Some(metrics) = &state.metrics {
        metrics.observe(served.route, method, status, served.refusal, elapsed);
    }
    if state.options.access_log {
        access_log::Line {
            time: crate::log::now(),
            method,
            route: served.route,
            status,
            micros: access_log::micros(elapsed),
            key: served.key,
            client: peer,
        }
        .write();
    }
}

/// A `'static` name for the method, for labels: one of
/// [`METHODS`], the last (`other`) for any method not listed (a
/// client must not be able to mint label values).
fn method_label(method: &Method) -> &'static str {
    const OTHER: usize = METHODS.len() - 1;
    METHODS[..OTHER]
        .iter()
        .copied()
        .find(|label| *label == method.as_str())
        .unwrap_or(METHODS[OTHER])
}

/// Runs one synchronous step of a request, with a panic turned into a
/// logged 500 `internal` (built by `internal` from the response): a bug
/// never drops the connection or kills a worker.
fn unpanicked<T>(
    head: &Parts,
    step: impl FnOnce() -> T,
    internal: fn(HttpResponse, Served) -> T,
) -> T {
    std::panic::catch_unwind(AssertUnwindSafe(step)).unwrap_or_else(|_| {
        panicked(head);
        internal(ApiError::Internal.to_response(), Served::default())
    })
}

/// [`routes::admit`], panics caught.
fn admit(connection: &Connection, head: &Parts, body_empty: bool) -> Admission {
    unpanicked(
        head,
        || routes::admit(connection, head, body_empty),
        Admission::Answered,
    )
}

/// [`routes::admit_decided`], panics caught.
fn admit_decided(
    connection: &Connection,
    head: &Parts,
    body_empty: bool,
    pending: routes::Pending,
    decision: petstore_core::Decision,
) -> Decided {
    unpanicked(
        head,
        || routes::admit_decided(connection, head, body_empty, pending, decision),
        Decided::Answered,
    )
}

/// [`Admitted::finish`], panics caught.
fn finish(connection: &Connection, head: &Parts, admitted: Admitted, body: BodyRead) -> Finished {
    unpanicked(
        head,
        || admitted.finish(connection, head, body),
        Finished::Answered,
    )
}

/// [`Waiting::finish`], with a panic in any of its polls turned into a
/// logged 500 `internal`.
async fn wait(connection: &Connection, head: &Parts, waiting: Waiting) -> (HttpResponse, Served) {
    let mut future = pin!(waiting.finish(connection, head));
    let polled = poll_fn(move |cx| {
        match std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(Poll::Ready(answer)) => Poll::Ready(Some(answer)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(None),
        }
    })
    .await;
    polled.unwrap_or_else(|| {
        panicked(head);
        (ApiError::Internal.to_response(), Served::default())
    })
}

fn panicked(head: &Parts) {
    log_error!(
        "handler panicked on {} {}; answered 500",
        head.method,
        head.uri.path()
    );
}

/// Reads the body, at most [`MAX_BODY`] bytes within `timeout`. A declared
/// `Content-Length` over the cap is refused without reading a byte.
pub async fn read_body(head: &Parts, body: Incoming, timeout: Duration) -> BodyRead {
    if body.is_end_stream() {
        return BodyRead::Complete(Default::default());
    }
    if declared_length(&head.headers).is_some_and(|n| n > MAX_BODY as u64) {
        return BodyRead::TooLarge;
    }
    match tokio::time::timeout(timeout, Limited::new(body, MAX_BODY).collect()).await {
        Err(_) => BodyRead::TimedOut(timeout),
        Ok(Ok(collected)) => BodyRead::Complete(collected.to_bytes()),
        Ok(Err(e)) if e.is::<LengthLimitError>() => BodyRead::TooLarge,
        Ok(Err(_)) => BodyRead::Broken,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_labels_are_the_recorders() {
        assert_eq!(method_label(&Method::GET), "GET");
        assert_eq!(method_label(&Method::CONNECT), "CONNECT");
        let brew = Method::from_bytes(b"BREW").unwrap();
        assert_eq!(method_label(&brew), "other");
        // A method that happens to be named like the fallback label.
        let other = Method::from_bytes(b"other").unwrap();
        assert_eq!(method_label(&other), "other");
    }
}
