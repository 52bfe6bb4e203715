//! HTTP/2 connections: the limits hyper's HTTP/2 server has, set in
//! [`builder`] (at most [`MAX_STREAMS`] concurrent streams, a 16 KiB
//! header list, its bounds on streams reset before they were accepted and
//! on CONTINUATION frames), and a [`Watchdog`] per connection for those
//! it has not: GOAWAY to a connection idle for the header timeout, to one
//! whose client cancelled more than [`MAX_CANCELLED`] streams (rapid
//! reset) and after a response marked `Connection: close`; the connection
//! dropped when its streams stop moving for the write timeout plus the
//! body timeout. Each limit and why: docs/http.md, "HTTP/2 and TLS"
//! ("Limits of an HTTP/2 connection"); why counters and looks, not a
//! clock per stream: [`Watchdog`].

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use hyper::body::{Body, Frame, SizeHint};
use hyper::header::CONNECTION;
use hyper::server::conn::http2;
use hyper::Response;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use parking_lot::Mutex;
use tokio::time::Instant;

use super::hpack::IndexChanging;
use super::limits::ConnLimits;

/// Concurrent streams a client may open on one connection.
pub const MAX_STREAMS: u32 = 100;

/// Streams a client may cancel before the connection is told to go away
/// (when it has cancelled more than it completed).
pub const MAX_CANCELLED: u64 = 100;

/// Looks at a connection's counts per its shorter timeout (header, or
/// write plus body): how late, at most, as a fraction of it, the idle
/// GOAWAY or the stall's drop comes.
pub(super) const LOOKS: u32 = 4;

/// The HTTP/2 server's settings for `limits`.
pub(super) fn builder() -> http2::Builder<TokioExecutor> {
    let mut builder = http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .max_concurrent_streams(MAX_STREAMS)
        .max_header_list_size(16 * 1024)
        // No keep-alive pings (hyper's default): with them hyper took a
        // lock and read the clock on every poll of the connection and
        // every request head, for what the watchdog does by its looks.
        // A dead peer with streams open is a stall (dropped after the
        // write plus the body timeout); one without is idle (GOAWAY after
        // the header timeout), and a connection going away that never
        // closes (its client never answers GOAWAY's PING) is dropped
        // after the header timeout more.
        // hyper's default (20) spelled out: streams reset by the client
        // before they were accepted, beyond which the connection is closed.
        .max_pending_accept_reset_streams(Some(20));
    builder
}

/// What the watchdog tells the connection to do.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum WatchdogAction {
    /// Nothing yet; look again at this instant (or at the alarm).
    Wait(Instant),
    /// Send GOAWAY and let the streams in flight finish.
    GoAway,
    /// Drop the connection now.
    Abort,
}

/// The streams of one connection, as its streams report them: counters
/// only, bumped without a lock. The connection's task looks at them now
/// and then ([`Look`]).
///
/// Why counters and looks, not a clock and a wake per stream: the
/// timeouts are seconds long, and a stream lives for microseconds. A
/// stream only bumps counters (no lock, no clock read, no wake of the
/// connection's task); the connection's task dates a change of the counts
/// when it sees it, at looks at most a [`LOOKS`]th of the shorter timeout
/// apart. So a deadline is never early (a change is dated no earlier than
/// it happened) and at most that fraction late. Only what must be acted
/// on at once, a `Connection: close` and the cancel budget spent, wakes
/// the task (an alarm: a flag, and its waker kept in a lock taken only
/// then and when the task's waker changes).
#[derive(Debug)]
pub(super) struct Watchdog {
    opened: AtomicU64,
    completed: AtomicU64,
    cancelled: AtomicU64,
    /// Response frames hyper took: progress inside a stream.
    frames: AtomicU64,
    close_asked: AtomicBool,
    /// Raised when the connection must look at once.
    alarm: AtomicBool,
    /// The connection task's waker, woken by the alarm.
    waker: Mutex<Option<Waker>>,
    idle: Duration,
    stalled: Duration,
    /// The connection's turn to index the changing rate-limit values:
    /// here because every stream holds the watchdog already.
    pub(super) index_changing: IndexChanging,
}

/// The connection task's view of its [`Watchdog`]: the counts' sum at its
/// last look, and when it saw that sum change.
#[derive(Debug)]
pub(super) struct Look {
    progress: u64,
    moved: Instant,
    /// Since when the connection has been going away.
    going_away: Option<Instant>,
}

impl Look {
    /// A connection opened at `now`.
    pub(super) fn new(now: Instant) -> Self {
        Look {
            progress: 0,
            moved: now,
            going_away: None,
        }
    }

    /// GOAWAY was sent at `now` (by the watchdog's word or the stop
    /// signal's).
    pub(super) fn go_away(&mut self, now: Instant) {
        self.going_away.get_or_insert(now);
    }

    /// Whether GOAWAY was sent.
    pub(super) fn going_away(&self) -> bool {
        self.going_away.is_some()
    }
}

impl Watchdog {
    pub(super) fn new(limits: &ConnLimits) -> Arc<Self> {
        Arc::new(Watchdog {
            opened: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            frames: AtomicU64::new(0),
            close_asked: AtomicBool::new(false),
            alarm: AtomicBool::new(false),
            waker: Mutex::new(None),
            idle: limits.header_timeout,
            stalled: limits.write_timeout + limits.body_timeout,
            index_changing: IndexChanging::new(),
        })
    }

    /// A stream opened: the guard counts it until its response is
    /// written or it is dropped unanswered.
    pub(super) fn open(self: &Arc<Self>) -> StreamGuard {
        self.opened.fetch_add(1, Ordering::Relaxed);
        StreamGuard {
            watchdog: self.clone(),
            written: false,
        }
    }

    /// What to do at `now`, from what `look` saw last (updated here).
    /// Once GOAWAY was sent, a stall still drops the connection; and a
    /// connection whose client never lets it close (hyper waits for the
    /// client's answer to the GOAWAY's PING, and then for the streams
    /// in flight) is dropped once it has had no stream open for the
    /// header timeout since.
    pub(super) fn action(&self, look: &mut Look, now: Instant) -> WatchdogAction {
        // The ends before the starts: a stream counted as ended was
        // counted as opened before, so `open` never counts below zero.
        let completed = self.completed.load(Ordering::Acquire);
        let cancelled = self.cancelled.load(Ordering::Acquire);
        let frames = self.frames.load(Ordering::Relaxed);
        let opened = self.opened.load(Ordering::Acquire);
        let open = opened.saturating_sub(completed + cancelled);
        let progress = opened
            .wrapping_add(completed)
            .wrapping_add(cancelled)
            .wrapping_add(frames);
        if progress != look.progress {
            // Dated when seen: never earlier than it happened.
            look.progress = progress;
            look.moved = now;
        }
        let next_look = now + self.idle.min(self.stalled) / LOOKS;
        let wants_out = self.close_asked.load(Ordering::Relaxed)
            || (cancelled > MAX_CANCELLED && cancelled > completed);
        if open > 0 {
            let due = look.moved + self.stalled;
            return if now >= due {
                WatchdogAction::Abort
            } else if wants_out && !look.going_away() {
                WatchdogAction::GoAway
            } else {
                WatchdogAction::Wait(due.min(next_look))
            };
        }
        let due = match look.going_away {
            Some(since) => since.max(look.moved) + self.idle,
            None if wants_out => return WatchdogAction::GoAway,
            None => look.moved + self.idle,
        };
        match (now >= due, look.going_away()) {
            (true, true) => WatchdogAction::Abort,
            (true, false) => WatchdogAction::GoAway,
            (false, _) => WatchdogAction::Wait(due.min(next_look)),
        }
    }

    /// Whether the alarm was raised since the last call (and lowers it),
    /// with `waker` the one to wake at the next.
    pub(super) fn alarmed(&self, waker: &Waker, known: &mut Option<Waker>) -> bool {
        if !known.as_ref().is_some_and(|k| k.will_wake(waker)) {
            *known = Some(waker.clone());
            *self.waker.lock() = Some(waker.clone());
        }
        self.alarm.load(Ordering::Acquire) && self.alarm.swap(false, Ordering::AcqRel)
    }

    /// Whether the alarm is raised, without lowering it: for a task that
    /// calls [`alarmed`](Self::alarmed) only when it may be.
    pub(super) fn alarm_raised(&self) -> bool {
        self.alarm.load(Ordering::Acquire)
    }

    /// Raises the alarm: the connection looks at once.
    fn raise(&self) {
        self.alarm.store(true, Ordering::Release);
        if let Some(waker) = &*self.waker.lock() {
            waker.wake_by_ref();
        }
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
    pub(super) fn respond<B>(self, mut response: Response<B>) -> Response<Tracked<B>> {
        self.watchdog.index_changing.prepare(response.headers_mut());
        if response.headers().contains_key(CONNECTION) {
            self.watchdog.close_asked.store(true, Ordering::Relaxed);
            self.watchdog.raise();
        }
        response.map(|body| Tracked { body, guard: self })
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let watchdog = &self.watchdog;
        if self.written {
            watchdog.completed.fetch_add(1, Ordering::Release);
            return;
        }
        let cancelled = watchdog.cancelled.fetch_add(1, Ordering::Release) + 1;
        // The budget spent: the one cancel that crosses it (or any later
        // one, while cancels outnumber completions) raises the alarm.
        if cancelled > MAX_CANCELLED && cancelled > watchdog.completed.load(Ordering::Acquire) {
            watchdog.raise();
        }
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
            this.guard.watchdog.frames.fetch_add(1, Ordering::Relaxed);
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
    use crate::http::ResponseBody;
    use crate::net::test_waker::counting;
    use hyper::body::Bytes;

    fn limits() -> ConnLimits {
        ConnLimits {
            header_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(10),
            ..ConnLimits::default()
        }
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    /// A look every quarter of the header timeout (10 s, shorter than
    /// write plus body).
    const LOOK: Duration = Duration::from_millis(2500);

    #[test]
    fn an_idle_connection_goes_away_after_the_header_timeout() {
        let start = Instant::now();
        let dog = Watchdog::new(&limits());
        let mut look = Look::new(start);
        assert_eq!(
            dog.action(&mut look, start),
            WatchdogAction::Wait(start + LOOK)
        );
        assert_eq!(
            dog.action(&mut look, start + secs(9)),
            WatchdogAction::Wait(start + secs(10))
        );
        assert_eq!(
            dog.action(&mut look, start + secs(10)),
            WatchdogAction::GoAway
        );
    }

    #[test]
    fn an_open_stream_that_never_moves_aborts_after_write_plus_body_timeout() {
        let start = Instant::now();
        let dog = Watchdog::new(&limits());
        let mut look = Look::new(start);
        let guard = dog.open();
        // Seen at the next look: the stall is counted from there.
        let seen = start + secs(1);
        assert_eq!(
            dog.action(&mut look, seen),
            WatchdogAction::Wait(seen + LOOK)
        );
        assert_eq!(
            dog.action(&mut look, seen + secs(39)),
            WatchdogAction::Wait(seen + secs(40))
        );
        assert_eq!(
            dog.action(&mut look, seen + secs(40)),
            WatchdogAction::Abort
        );
        // Going away changes nothing for a stalled stream.
        look.go_away(seen + secs(40));
        assert_eq!(
            dog.action(&mut look, seen + secs(40)),
            WatchdogAction::Abort
        );
        drop(guard);
    }

    #[test]
    fn a_written_response_counts_as_completed_and_restarts_the_idle_clock_when_seen() {
        let start = Instant::now();
        let dog = Watchdog::new(&limits());
        let mut look = Look::new(start);
        let response = dog
            .open()
            .respond(Response::new(ResponseBody::full(Bytes::from_static(b"[]"))));
        let mut body = response.into_body();
        let mut cx = Context::from_waker(Waker::noop());
        assert!(Pin::new(&mut body).poll_frame(&mut cx).is_ready());
        drop(body);
        let counts = |dog: &Watchdog| {
            (
                dog.opened.load(Ordering::SeqCst),
                dog.completed.load(Ordering::SeqCst),
                dog.cancelled.load(Ordering::SeqCst),
            )
        };
        assert_eq!(counts(&dog), (1, 1, 0));
        // The stream came and went before this look: dated at the look,
        // so the idle GOAWAY is 10 s after it, never before.
        let seen = start + secs(8);
        assert_eq!(
            dog.action(&mut look, seen),
            WatchdogAction::Wait(seen + LOOK)
        );
        assert_eq!(
            dog.action(&mut look, seen + secs(9)),
            WatchdogAction::Wait(seen + secs(10))
        );
        assert_eq!(
            dog.action(&mut look, seen + secs(10)),
            WatchdogAction::GoAway
        );
    }

    #[test]
    fn more_cancelled_than_completed_past_the_budget_goes_away_at_once() {
        let start = Instant::now();
        let dog = Watchdog::new(&limits());
        let mut look = Look::new(start);
        let (woken, waker) = counting();
        let mut known = None;
        assert!(!dog.alarmed(&waker, &mut known), "no alarm yet");
        for _ in 0..MAX_CANCELLED {
            drop(dog.open());
        }
        assert_eq!(woken.wakes(), 0, "within the budget: no wake");
        assert!(matches!(
            dog.action(&mut look, start),
            WatchdogAction::Wait(_)
        ));
        drop(dog.open());
        assert_eq!(woken.wakes(), 1, "the budget spent wakes the connection");
        assert!(dog.alarmed(&waker, &mut known));
        assert!(!dog.alarmed(&waker, &mut known), "the alarm is lowered");
        assert_eq!(dog.action(&mut look, start), WatchdogAction::GoAway);
    }

    #[test]
    fn connection_close_on_a_response_asks_for_goaway_at_once() {
        let start = Instant::now();
        let dog = Watchdog::new(&limits());
        let mut look = Look::new(start);
        let (woken, waker) = counting();
        let mut known = None;
        assert!(!dog.alarmed(&waker, &mut known));
        let mut response = Response::new(ResponseBody::default());
        response
            .headers_mut()
            .insert(CONNECTION, hyper::header::HeaderValue::from_static("close"));
        let _kept = dog.open().respond(response);
        assert_eq!(woken.wakes(), 1);
        assert!(dog.alarmed(&waker, &mut known));
        assert_eq!(dog.action(&mut look, start), WatchdogAction::GoAway);
        // Once GOAWAY is sent, the stream in flight is let finish.
        look.go_away(start);
        assert!(matches!(
            dog.action(&mut look, start),
            WatchdogAction::Wait(_)
        ));
    }

    #[test]
    fn a_connection_going_away_that_never_closes_is_dropped_after_the_header_timeout() {
        let start = Instant::now();
        let dog = Watchdog::new(&limits());
        let mut look = Look::new(start);
        look.go_away(start + secs(3));
        assert_eq!(
            dog.action(&mut look, start + secs(12)),
            WatchdogAction::Wait(start + secs(13))
        );
        assert_eq!(
            dog.action(&mut look, start + secs(13)),
            WatchdogAction::Abort
        );
    }

    #[test]
    fn the_alarm_wakes_the_waker_of_the_last_look() {
        let dog = Watchdog::new(&limits());
        let ((first, first_waker), (second, second_waker)) = (counting(), counting());
        let mut known = None;
        assert!(!dog.alarmed(&first_waker, &mut known));
        // The connection's task moved to another waker.
        assert!(!dog.alarmed(&second_waker, &mut known));
        dog.raise();
        assert_eq!((first.wakes(), second.wakes()), (0, 1));
    }
}
