//! The server's stop signal: [`Stopper`], the accept loop's end, tells
//! every open connection to finish gracefully and counts them until they
//! are gone; [`Stop`], each connection's end, is a future that completes
//! when told.
//!
//! Underneath is a `watch` channel of one `bool` (the count is its
//! receivers, the wait for the last one its `closed`). What is added is
//! the cost of asking: a connection's task polls every branch of its
//! `select!` each time it wakes (every read, every write), and a poll of
//! the channel's `wait_for` takes the channel's lock, reads the value and
//! registers its waiter again, on every request (`scripts/bench/profile`, the
//! server and the baseline alike). The signal
//! changes once in the life of a process, so [`Stop`] polls the channel
//! only when it may have something new for it: on the first poll, when
//! the task's waker is another than the one the channel holds, and once
//! the stopper has raised its flag (one atomic load); else it answers
//! `Pending` at once.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use tokio::sync::watch;

/// The accept loop's end of the stop signal.
#[derive(Debug)]
pub(super) struct Stopper {
    sender: watch::Sender<bool>,
    /// Raised before the channel's value is sent: what a [`Stop`] reads
    /// on every poll instead of the channel.
    raised: Arc<AtomicBool>,
}

impl Stopper {
    /// A signal not raised, with no connection yet.
    pub(super) fn new() -> Self {
        Stopper {
            sender: watch::channel(false).0,
            raised: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The end of one more connection: counted until it is dropped.
    pub(super) fn subscribe(&self) -> Stop {
        let mut receiver = self.sender.subscribe();
        Stop {
            state: State::Waiting(Box::pin(async move {
                // An error is a dropped stopper: stopped too.
                let _ = receiver.wait_for(|stop| *stop).await;
                receiver
            })),
            raised: self.raised.clone(),
            waker: None,
        }
    }

    /// Connections still open (their [`Stop`]s not dropped).
    pub(super) fn open(&self) -> usize {
        self.sender.receiver_count()
    }

    /// Tells every connection to stop. The flag goes first: a connection
    /// woken by the channel finds it raised and polls the channel.
    pub(super) fn stop(&self) {
        self.raised.store(true, Ordering::Release);
        self.sender.send_replace(true);
    }

    /// Completes when every connection's [`Stop`] is dropped.
    pub(super) async fn closed(&self) {
        self.sender.closed().await;
    }
}

impl Drop for Stopper {
    /// A dropped stopper (the accept loop's future dropped) stops its
    /// connections too: the channel closes, and the flag says so.
    fn drop(&mut self) {
        self.raised.store(true, Ordering::Release);
    }
}

/// A connection's end of the stop signal: completes once [`Stopper::stop`]
/// is called (or the stopper is dropped).
pub(super) struct Stop {
    state: State,
    raised: Arc<AtomicBool>,
    /// The waker the channel's wait was last polled with: the one the
    /// channel wakes.
    waker: Option<Waker>,
}

/// Where a [`Stop`] is.
enum State {
    /// The channel's wait, which owns this connection's receiver and
    /// hands it back when told to stop.
    Waiting(Pin<Box<dyn Future<Output = watch::Receiver<bool>> + Send>>),
    /// Told. The receiver is kept: the connection is counted as open
    /// (and waited for) until its `Stop` is dropped, not until it is
    /// told.
    Stopped { _receiver: watch::Receiver<bool> },
}

impl std::fmt::Debug for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stop")
            .field("raised", &self.raised.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Stop {
    /// Whether the stop was told (or the stopper dropped): one atomic
    /// load, for a task that polls this `Stop` only when it may be ready.
    pub(super) fn raised(&self) -> bool {
        self.raised.load(Ordering::Acquire)
    }
}

impl Future for Stop {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let State::Waiting(wait) = &mut this.state else {
            return Poll::Ready(());
        };
        let registered = this
            .waker
            .as_ref()
            .is_some_and(|waker| waker.will_wake(cx.waker()));
        if registered && !this.raised.load(Ordering::Acquire) {
            return Poll::Pending;
        }
        match wait.as_mut().poll(cx) {
            Poll::Ready(receiver) => {
                this.state = State::Stopped {
                    _receiver: receiver,
                };
                Poll::Ready(())
            }
            Poll::Pending => {
                if !registered {
                    this.waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::test_waker::counting;

    fn poll(stop: &mut Stop, waker: &Waker) -> Poll<()> {
        Pin::new(stop).poll(&mut Context::from_waker(waker))
    }

    #[test]
    fn a_stop_completes_when_told_and_wakes_the_waker_it_was_polled_with_last() {
        let stopper = Stopper::new();
        let mut stop = stopper.subscribe();
        let mut other = stopper.subscribe();
        assert_eq!(stopper.open(), 2);
        let (first, first_waker) = counting();
        let (second, second_waker) = counting();
        assert!(poll(&mut stop, &first_waker).is_pending());
        // Polled again by the same task: not registered anew.
        assert!(poll(&mut stop, &first_waker).is_pending());
        // Moved to another task: the channel now wakes that one.
        assert!(poll(&mut stop, &second_waker).is_pending());
        assert!(poll(&mut other, &first_waker).is_pending());

        stopper.stop();
        assert_eq!(second.wakes(), 1, "the last waker is woken");
        assert_eq!(first.wakes(), 1, "the other stop's waker");
        assert!(poll(&mut stop, &second_waker).is_ready());
        assert!(poll(&mut other, &first_waker).is_ready());
        // Told, but still open: counted (and waited for) until dropped.
        assert_eq!(stopper.open(), 2);
        assert!(poll(&mut stop, &first_waker).is_ready(), "stays ready");

        // A connection opened after the stop stops at once.
        let mut late = stopper.subscribe();
        assert!(poll(&mut late, &first_waker).is_ready());
        drop((stop, other, late));
        assert_eq!(stopper.open(), 0);
    }

    #[test]
    fn a_dropped_stopper_stops_its_connections() {
        let stopper = Stopper::new();
        let mut stop = stopper.subscribe();
        let (woken, waker) = counting();
        assert!(poll(&mut stop, &waker).is_pending());
        drop(stopper);
        assert_eq!(woken.wakes(), 1);
        assert!(poll(&mut stop, &waker).is_ready());
    }
}
