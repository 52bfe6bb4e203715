//! HTTP/2 connections: the limits hyper's HTTP/2 server has, and a
//! watchdog for the ones it has not.
//!
//! hyper's HTTP/1 server closes an idle or slow connection with its
//! header timeout, and a stalled write fails through `WriteTimeout`. An
//! HTTP/2 connection has neither: a client may open it and never send a
//! request, and a client that grants no flow-control window (no
//! `WINDOW_UPDATE`) stalls the server's writes without the socket ever
//! blocking. So each connection runs beside a [`Watchdog`] that counts
//! its open streams and when they last moved:
//! - no stream open for the header timeout: GOAWAY (the HTTP/1 idle
//!   keep-alive close);
//! - streams open and none moving (no response written, none finished)
//!   for the write timeout plus the body timeout: the connection is
//!   dropped, as a stalled HTTP/1 write would be. The sum, because a
//!   stream may legitimately wait that long for its body;
//! - more than [`MAX_CANCELLED`] streams cancelled by the client before
//!   their response was written, and more cancelled than completed:
//!   GOAWAY (rapid reset, CVE-2023-44487: each cancelled stream cost an
//!   admission, and a connection must not make that work unbounded);
//! - a response marked `Connection: close` (the drain before stopping):
//!   GOAWAY, which lets the streams in flight finish. (A body left
//!   unread closes an HTTP/1.1 connection, whose framing it breaks; an
//!   HTTP/2 stream is reset alone, so the driver does not mark it.)
//!
//! hyper's own limits, set in [`builder`]: at most [`MAX_STREAMS`]
//! concurrent streams, a 16 KiB header list (as HTTP/1's head), hyper's
//! bound on streams reset before they were accepted, and h2's bound on
//! CONTINUATION frames (the header list limit covers them too).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Frame, SizeHint};
use hyper::header::CONNECTION;
use hyper::server::conn::http2;
use hyper::Response;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::limits::ConnLimits;

/// Concurrent streams a client may open on one connection.
pub const MAX_STREAMS: u32 = 100;

/// Streams a client may cancel before the connection is told to go away
/// (when it has cancelled more than it completed).
pub const MAX_CANCELLED: u64 = 100;

/// The HTTP/2 server's settings for `limits`.
pub(super) fn builder(limits: &ConnLimits) -> http2::Builder<TokioExecutor> {
    let mut builder = http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .max_concurrent_streams(MAX_STREAMS)
        .max_header_list_size(16 * 1024)
        // A ping when the connection is quiet, and the connection closed
        // when the client does not answer it: a dead peer does not hold
        // its slot until the idle GOAWAY's write fails.
        .keep_alive_interval(Some(limits.header_timeout))
        .keep_alive_timeout(limits.header_timeout)
        // hyper's default (20) spelled out: streams reset by the client
        // before they were accepted, beyond which the connection is closed.
        .max_pending_accept_reset_streams(Some(20));
    builder
}

/// What the watchdog tells the connection to do.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum WatchdogAction {
    /// Nothing yet; look again at this instant (or when a stream moves).
    Wait(Instant),
    /// Send GOAWAY and let the streams in flight finish.
    GoAway,
    /// Drop the connection now.
    Abort,
}

#[derive(Debug)]
struct Counts {
    open: usize,
    /// When a stream last opened, wrote its response or closed.
    moved: Instant,
    completed: u64,
    cancelled: u64,
    close_asked: bool,
}

/// The streams of one connection, as the watchdog sees them.
#[derive(Debug)]
pub(super) struct Watchdog {
    counts: Mutex<Counts>,
    changed: Notify,
    idle: Duration,
    stalled: Duration,
}

impl Watchdog {
    pub(super) fn new(limits: &ConnLimits, now: Instant) -> Arc<Self> {
        Arc::new(Watchdog {
            counts: Mutex::new(Counts {
                open: 0,
                moved: now,
                completed: 0,
                cancelled: 0,
                close_asked: false,
            }),
            changed: Notify::new(),
            idle: limits.header_timeout,
            stalled: limits.write_timeout + limits.body_timeout,
        })
    }

    /// A stream opened: the guard counts it until its response is
    /// written or it is dropped unanswered.
    pub(super) fn open(self: &Arc<Self>) -> StreamGuard {
        let mut counts = self.counts.lock();
        counts.open += 1;
        counts.moved = Instant::now();
        StreamGuard {
            watchdog: self.clone(),
            written: false,
        }
    }

    /// What to do at `now`; `going_away` once GOAWAY was sent (after it
    /// only a stall matters: hyper closes the connection itself once its
    /// streams are done).
    pub(super) fn action(&self, now: Instant, going_away: bool) -> WatchdogAction {
        let counts = self.counts.lock();
        let wants_out = counts.close_asked
            || (counts.cancelled > MAX_CANCELLED && counts.cancelled > counts.completed);
        if counts.open > 0 {
            let due = counts.moved + self.stalled;
            return if now >= due {
                WatchdogAction::Abort
            } else if wants_out && !going_away {
                WatchdogAction::GoAway
            } else {
                WatchdogAction::Wait(due)
            };
        }
        if going_away {
            return WatchdogAction::Wait(now + self.idle);
        }
        let due = counts.moved + self.idle;
        if wants_out || now >= due {
            WatchdogAction::GoAway
        } else {
            WatchdogAction::Wait(due)
        }
    }

    /// Resolves when a stream opened, moved or closed since the last call.
    pub(super) async fn changed(&self) {
        self.changed.notified().await;
    }

    fn moved(&self, update: impl FnOnce(&mut Counts)) {
        let mut counts = self.counts.lock();
        update(&mut counts);
        counts.moved = Instant::now();
        drop(counts);
        self.changed.notify_one();
    }
}

/// One open stream, counted by its connection's [`Watchdog`] until its
/// response body is written to the end or dropped.
#[derive(Debug)]
pub(super) struct StreamGuard {
    watchdog: Arc<Watchdog>,
    written: bool,
}

impl StreamGuard {
    /// The response is ready: a `Connection: close` on it asks the
    /// connection to go away (HTTP/2 has no such header; hyper strips
    /// it), and its body is counted as it is written.
    pub(super) fn respond<B>(self, response: Response<B>) -> Response<Tracked<B>> {
        if response.headers().contains_key(CONNECTION) {
            self.watchdog.moved(|counts| counts.close_asked = true);
        }
        response.map(|body| Tracked { body, guard: self })
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let written = self.written;
        self.watchdog.moved(|counts| {
            counts.open -= 1;
            if written {
                counts.completed += 1;
            } else {
                counts.cancelled += 1;
            }
        });
    }
}

/// A response body whose stream's guard lives as long as it does.
#[derive(Debug)]
pub(super) struct Tracked<B> {
    body: B,
    guard: StreamGuard,
}

impl<B: Body + Unpin> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        if let Poll::Ready(frame) = &polled {
            // hyper polls the body once the stream has window for it: a
            // frame taken (or the end) is progress.
            if frame.is_none() || this.body.is_end_stream() {
                this.guard.written = true;
            }
            this.guard.watchdog.moved(|_| {});
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Full;
    use hyper::body::Bytes;

    fn limits() -> ConnLimits {
        ConnLimits {
            header_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(10),
            ..ConnLimits::default()
        }
    }

    #[test]
    fn an_idle_connection_goes_away_after_the_header_timeout() {
        let start = Instant::now();
        let dog = Watchdog::new(&limits(), start);
        assert_eq!(
            dog.action(start, false),
            WatchdogAction::Wait(start + Duration::from_secs(10))
        );
        assert_eq!(
            dog.action(start + Duration::from_secs(10), false),
            WatchdogAction::GoAway
        );
    }

    #[test]
    fn an_open_stream_that_never_moves_aborts_after_write_plus_body_timeout() {
        let start = Instant::now();
        let dog = Watchdog::new(&limits(), start);
        let guard = dog.open();
        let opened = dog.counts.lock().moved;
        assert_eq!(
            dog.action(opened + Duration::from_secs(39), false),
            WatchdogAction::Wait(opened + Duration::from_secs(40))
        );
        assert_eq!(
            dog.action(opened + Duration::from_secs(40), false),
            WatchdogAction::Abort
        );
        // Going away changes nothing for a stalled stream.
        assert_eq!(
            dog.action(opened + Duration::from_secs(40), true),
            WatchdogAction::Abort
        );
        drop(guard);
    }

    #[test]
    fn a_written_response_counts_as_completed_and_resets_the_idle_clock() {
        let start = Instant::now();
        let dog = Watchdog::new(&limits(), start - Duration::from_secs(5));
        let response = dog
            .open()
            .respond(Response::new(Full::new(Bytes::from_static(b"[]"))));
        let mut body = response.into_body();
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(Pin::new(&mut body).poll_frame(&mut cx).is_ready());
        drop(body);
        let counts = dog.counts.lock();
        assert_eq!((counts.open, counts.completed, counts.cancelled), (0, 1, 0));
        let moved = counts.moved;
        drop(counts);
        assert_eq!(
            dog.action(moved, false),
            WatchdogAction::Wait(moved + Duration::from_secs(10))
        );
    }

    #[test]
    fn more_cancelled_than_completed_past_the_budget_goes_away() {
        let start = Instant::now();
        let dog = Watchdog::new(&limits(), start);
        for _ in 0..MAX_CANCELLED {
            drop(dog.open());
        }
        assert!(matches!(
            dog.action(Instant::now(), false),
            WatchdogAction::Wait(_)
        ));
        drop(dog.open());
        assert_eq!(dog.action(Instant::now(), false), WatchdogAction::GoAway);
    }

    #[test]
    fn connection_close_on_a_response_asks_for_goaway() {
        let start = Instant::now();
        let dog = Watchdog::new(&limits(), start);
        let mut response = Response::new(Full::new(Bytes::new()));
        response
            .headers_mut()
            .insert(CONNECTION, hyper::header::HeaderValue::from_static("close"));
        let _kept = dog.open().respond(response);
        assert_eq!(dog.action(Instant::now(), false), WatchdogAction::GoAway);
        // Once GOAWAY is sent, the stream in flight is let finish.
        assert!(matches!(
            dog.action(Instant::now(), true),
            WatchdogAction::Wait(_)
        ));
    }
}
