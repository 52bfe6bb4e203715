//! The one request driver: hyper's service call for each request of a
//! connection. It answers at once what can be answered at once (every
//! read the inventory holds, every refusal), and otherwise drives the
//! rest in one future ([`drive`]): the rate limit to await, the body to
//! read, the store to wait for, in that order. Every step of the contract
//! runs under `catch_unwind`: a bug becomes a logged 500 `internal`,
//! never a dropped connection or a dead worker.

use std::convert::Infallible;
use std::future::{poll_fn, ready, Future, Ready};
use std::panic::AssertUnwindSafe;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::{Body as _, Bytes, Incoming};
use hyper::header::{HeaderValue, CONNECTION, STRICT_TRANSPORT_SECURITY};
use hyper::{Method, Request, Version};
use petstore_core::{Clock as _, Decision, Timestamp};

use crate::http::{
    self, declared_length, Admission, Admitted, ApiError, BodyRead, Connection, Decided, Finished,
    Head, HttpResponse, Pending, Served, Waiting, MAX_BODY,
};
use crate::log_error;
use crate::telemetry::recorder::METHODS;
use crate::telemetry::{access_log, panics};

/// The future hyper gets for one request: the response itself when it
/// could be made at once, or the work that has to wait for something.
pub enum Reply {
    /// Answered before hyper saw the future: no body to wait for.
    Now(Ready<Result<HttpResponse, Infallible>>),
    /// A body still to read, or the store to wait for (a create's or a
    /// transition's commit, a catch-up of the read copy).
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

/// Where [`drive`] starts: what [`reply`] could not finish at once.
enum Step {
    /// The rate limit is decided elsewhere: await it first. Boxed: it is
    /// the largest step, and [`drive`]'s future holds a step twice.
    Charge(Box<Pending>),
    /// Admitted, with a body to read.
    ReadBody(Admitted),
    /// Admitted, answered from the store once it catches up.
    Wait(Waiting),
}

/// What [`at_once`] made of a request.
enum Made {
    /// Answered: the response, what it served, and whether the request
    /// was read to the end.
    Answered(HttpResponse, Served, bool),
    /// To be driven on from this step.
    Later(Step),
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
/// call, never pays (`scripts/bench/profile`: `BytesMut::reserve_inner`).
pub(super) fn reply(
    connection: &Arc<Connection>,
    request: Request<Incoming>,
    body_timeout: Duration,
) -> Reply {
    let started = Instant::now();
    let method = method_label(request.method());
    let version = request.version();
    // Every check that needs no body comes first (http::admit), so a
    // refusal never reads the body, and never makes hyper invite it with
    // `100 Continue`.
    let head = Head::of(&request);
    let (body_empty, path) = (head.body_empty, head.uri.path());
    let now = |mut response: HttpResponse, served: &Served, read_to_the_end: bool| {
        answered(
            connection,
            version,
            method,
            &mut response,
            served,
            read_to_the_end,
            started,
        );
        Reply::Now(ready(Ok(response)))
    };
    // The rate limit is charged at the time the request arrived: the
    // clock is read once for it and for the request's duration.
    let arrived = connection.state.clock.at(started);
    let made = unpanicked(
        (method, path),
        || at_once(connection, head, arrived),
        |response, served| Made::Answered(response, served, body_empty),
    );
    // The request is dropped in place on the way out (`drop(request)`
    // moved its 256 bytes first: a `memcpy`, `scripts/bench/profile`).
    let step = match made {
        Made::Answered(response, served, read_to_the_end) => {
            return now(response, &served, read_to_the_end)
        }
        Made::Later(step) => step,
    };
    let asked = Asked {
        method,
        version,
        started,
        body_empty,
        body_timeout,
        declared: declared_length(request.headers()),
    };
    // The head is dropped here, the body kept (and dropped unread when
    // the request has none).
    let body = Some(request.into_body()).filter(|_| !body_empty);
    Reply::Later(Box::pin(drive(connection.clone(), body, step, asked)))
}

/// What [`drive`] needs of a request besides its body and step: the
/// request head itself is gone ([`reply`]'s why).
#[derive(Clone, Copy)]
struct Asked {
    method: &'static str,
    version: Version,
    started: Instant,
    body_empty: bool,
    body_timeout: Duration,
    /// The body's declared `Content-Length`.
    declared: Option<u64>,
}

/// The rest of a request [`reply`] could not answer at once, from `step`
/// on: the rate limit awaited, the body read, the store awaited; then
/// the connection closed after it when it must be (a body left unread
/// on it, or the server draining), and the request recorded.
///
/// Its future is boxed for every request that waits for anything (every
/// POST, every request whose rate limit Redis decides), and moved and
/// copied as a whole, so it is kept small: 984 bytes, within glibc's
/// per-thread cache of small blocks (up to 1,032), where it was 4,488.
/// How:
/// - one `async fn`: an `async` block in `reply` awaiting a second one
///   kept the request's body and step twice;
/// - no request head (the checks after the rate limit made before it is
///   awaited, the allowed origin and the declared length copied out);
/// - the store's wait, the body's read and the largest step boxed on
///   their own: a future is as large as its largest await, and the
///   store's (a journal commit, a PostgreSQL insert) alone is 2.6 KiB.
///   Only the requests that reach them pay for those boxes, each small.
///
/// Under callgrind, a request whose rate limit Redis decides spends less
/// in `memcpy`, `malloc` and `free` this way, though the whole request's
/// count moves within its run-to-run spread.
async fn drive(
    connection: Arc<Connection>,
    body: Option<Incoming>,
    step: Step,
    asked: Asked,
) -> Result<HttpResponse, Infallible> {
    let connection = &*connection;
    let method = asked.method;
    let (mut response, served, read_to_the_end) = 'answered: {
        let admitted = match step {
            Step::Wait(waiting) => {
                let (response, served) = Box::pin(wait(connection, method, waiting)).await;
                break 'answered (response, served, true);
            }
            Step::ReadBody(admitted) => admitted,
            Step::Charge(pending) => {
                let decision = pending.decide().await;
                match admit_decided(connection, method, *pending, decision) {
                    Decided::Admitted(admitted) => admitted,
                    Decided::Answered(response, served) => {
                        break 'answered (response, served, asked.body_empty)
                    }
                }
            }
        };
        let body = match body {
            // Boxed: the largest await left (its timer and the body).
            Some(body) => Box::pin(read_body(asked.declared, body, asked.body_timeout)).await,
            None => BodyRead::Complete(Bytes::new()),
        };
        let read_to_the_end = matches!(body, BodyRead::Complete(_) | BodyRead::Trailers);
        let route = admitted.route();
        let (response, served) = match finish(connection, (method, route), admitted, body) {
            Finished::Answered(response, served) => (response, served),
            Finished::Waiting(waiting) => Box::pin(wait(connection, method, waiting)).await,
        };
        (response, served, read_to_the_end)
    };
    answered(
        connection,
        asked.version,
        method,
        &mut response,
        &served,
        read_to_the_end,
        asked.started,
    );
    Ok(response)
}

/// Makes a request's `response` the last on its connection when it must
/// be (a body left on the connection: not `read_to_the_end`, as for a
/// refusal before it was read; or the server draining), adds the
/// listener's `Strict-Transport-Security` (TLS only), and records it.
/// Every answer passes here, whether at once or after a wait. By
/// reference: a response is 144 bytes, and each move of it in and out
/// was a `memcpy` (`scripts/bench/profile`).
fn answered(
    connection: &Connection,
    version: Version,
    method: &'static str,
    response: &mut HttpResponse,
    served: &Served,
    read_to_the_end: bool,
    started: Instant,
) {
    if (!read_to_the_end && version != Version::HTTP_2) || connection.state.is_draining() {
        close(response);
    }
    // The listener's one value, made at start-up (`Api::hsts`): a clone
    // of a static header value, no formatting.
    if let Some(hsts) = connection.api.hsts() {
        response
            .headers_mut()
            .insert(STRICT_TRANSPORT_SECURITY, hsts.clone());
    }
    record(connection, version, method, response, served, started);
}

/// Marks `response` as the last on its connection (over HTTP/2, where
/// hyper strips the header, it makes the connection send GOAWAY:
/// `h2.rs`). For a request whose
/// body was not read to its end (refused before it, or over the cap, or
/// too slow): what is left of the body on the connection cannot be told
/// from a next request, so hyper closes the connection after the
/// response; this says so to the client (RFC 9112 section 9.6) instead of
/// closing without a word. And for every response while the server
/// drains before stopping: hyper closes the connection after it, and a
/// client or load balancer knows not to send another request on it (one
/// sent on a connection the server is about to close may be lost, and a
/// POST's outcome with it). An HTTP/2 request whose body is left unread
/// does not close its connection: hyper resets that stream alone, and
/// the connection's framing is intact.
fn close(response: &mut HttpResponse) {
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
}

/// Metrics and the access log of one answered request on `connection`,
/// `started` when hyper handed it over.
fn record(
    connection: &Connection,
    version: Version,
    method: &'static str,
    response: &HttpResponse,
    served: &Served,
    started: Instant,
) {
    let (state, peer, elapsed) = (&connection.state, connection.peer, started.elapsed());
    let api = &connection.api;
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
    if api.options.access_log {
        access_log::Line {
            time: crate::telemetry::log::now(),
            method,
            route: served.route,
            status,
            micros: access_log::micros(elapsed),
            key: served.key,
            client: peer,
            protocol: if version == Version::HTTP_2 {
                "h2"
            } else {
                "http1"
            },
            tls: api.options.tls,
        }
        .write();
    }
}

/// A `'static` name for the method, for labels: one of
/// [`METHODS`], the last (`other`) for any method not listed (a
/// client must not be able to mint label values).
fn method_label(method: &Method) -> &'static str {
    // By the method's own constants, not its name compared with each
    // label in turn.
    let i = match *method {
        Method::GET => 0,
        Method::POST => 1,
        Method::PUT => 2,
        Method::DELETE => 3,
        Method::HEAD => 4,
        Method::OPTIONS => 5,
        Method::PATCH => 6,
        Method::TRACE => 7,
        Method::CONNECT => 8,
        _ => METHODS.len() - 1,
    };
    METHODS[i]
}

/// Runs one synchronous step of a request, with a panic turned into a
/// logged 500 `internal` (built by `internal` from the response): a bug
/// never drops the connection or kills a worker.
///
/// `said` is the method and the path (or the route, once the request
/// head is gone) for the log.
fn unpanicked<T>(
    said: (&str, &str),
    step: impl FnOnce() -> T,
    internal: impl FnOnce(HttpResponse, Served) -> T,
) -> T {
    std::panic::catch_unwind(AssertUnwindSafe(step)).unwrap_or_else(|_| {
        panicked(said);
        internal(ApiError::Internal.to_response(), Served::default())
    })
}

/// Everything of a request that needs no wait: [`http::admit`], and for
/// a request without a body [`Admitted::finish`] as well. One function,
/// so that one `catch_unwind` covers both (each was a call and a copy of
/// the answer out of it, `scripts/bench/profile`).
fn at_once(connection: &Connection, head: Head<'_>, now: Timestamp) -> Made {
    match http::admit(connection, head, now) {
        Admission::Answered(response, served) => Made::Answered(response, served, head.body_empty),
        Admission::Admitted(admitted) if head.body_empty => {
            match admitted.finish(connection, BodyRead::Complete(Bytes::new())) {
                Finished::Answered(response, served) => Made::Answered(response, served, true),
                // A get of an id the store's read copy may not hold yet.
                Finished::Waiting(waiting) => Made::Later(Step::Wait(waiting)),
            }
        }
        Admission::Admitted(admitted) => Made::Later(Step::ReadBody(admitted)),
        // The rate limit is decided elsewhere (a shared limiter): awaited
        // in `drive`. Only in that mode: the in-process limiter decided
        // synchronously above.
        Admission::Charge(pending) => Made::Later(Step::Charge(Box::new(pending))),
    }
}

/// [`http::admit_decided`], panics caught.
fn admit_decided(
    connection: &Connection,
    method: &str,
    pending: Pending,
    decision: Decision,
) -> Decided {
    let route = pending.route();
    unpanicked(
        (method, route),
        || http::admit_decided(connection, pending, decision),
        Decided::Answered,
    )
}

/// [`Admitted::finish`], panics caught.
fn finish(
    connection: &Connection,
    said: (&str, &str),
    admitted: Admitted,
    body: BodyRead,
) -> Finished {
    unpanicked(
        said,
        || admitted.finish(connection, body),
        Finished::Answered,
    )
}

/// [`Waiting::finish`], with a panic in any of its polls turned into a
/// logged 500 `internal`.
async fn wait(connection: &Connection, method: &str, waiting: Waiting) -> (HttpResponse, Served) {
    let route = waiting.route();
    let mut future = pin!(waiting.finish(connection));
    let polled = poll_fn(move |cx| {
        match std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(Poll::Ready(answer)) => Poll::Ready(Some(answer)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(None),
        }
    })
    .await;
    polled.unwrap_or_else(|| {
        panicked((method, route));
        (ApiError::Internal.to_response(), Served::default())
    })
}

/// The driver's line for a caught panic, after the hook's own line
/// (`telemetry/panics.rs`), whose place it names again: the request's
/// method and path (never its query or headers, so never its key).
fn panicked((method, path): (&str, &str)) {
    let place = panics::take_last_place();
    let place = place
        .as_deref()
        .unwrap_or("a place the panic hook did not note");
    log_error!("handler panicked at {place} on {method} {path}; answered 500");
}

/// Reads the body, at most [`MAX_BODY`] bytes within `timeout`. A
/// `declared` `Content-Length` over the cap is refused without reading a
/// byte.
async fn read_body(declared: Option<u64>, body: Incoming, timeout: Duration) -> BodyRead {
    if body.is_end_stream() {
        return BodyRead::Complete(Default::default());
    }
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return BodyRead::TooLarge;
    }
    match tokio::time::timeout(timeout, Limited::new(body, MAX_BODY).collect()).await {
        Err(_) => BodyRead::TimedOut(timeout),
        // Refused whole rather than the trailers dropped: the request as
        // the client meant it is not the one its head and data say.
        Ok(Ok(collected)) if collected.trailers().is_some() => BodyRead::Trailers,
        Ok(Ok(collected)) => BodyRead::Complete(collected.to_bytes()),
        Ok(Err(e)) if e.is::<LengthLimitError>() => BodyRead::TooLarge,
        Ok(Err(_)) => BodyRead::Broken,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_that_panics_is_answered_500_internal() {
        let made = unpanicked(
            ("GET", "/v1/pets"),
            || -> Made { panic!("a bug in a step (this panic is the test's)") },
            |response, served| Made::Answered(response, served, false),
        );
        let Made::Answered(response, served, read_to_the_end) = made else {
            panic!("not answered");
        };
        assert_eq!(response.status(), 500);
        assert_eq!(served, Served::default());
        assert!(!read_to_the_end, "the fallback's own answer");
    }

    #[test]
    fn each_method_listed_is_its_own_label() {
        for label in &METHODS[..METHODS.len() - 1] {
            let method = Method::from_bytes(label.as_bytes()).unwrap();
            assert_eq!(method_label(&method), *label);
        }
    }

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
