//! [`HeaderTimer`]: the timer hyper's HTTP/1 header timeout runs on.
//!
//! Why not hyper-util's `TokioTimer`: hyper arms the header timeout for
//! every request head, as soon as the previous response is written, and
//! drops it once the head is read. On tokio's timer that is a timer
//! entry made, inserted into the runtime's wheel, removed again, and a
//! worker that parks with a timeout computed from the wheel: a visible
//! share of every request, in the server and the raw-hyper ruler alike
//! (`scripts/bench/profile`), for a deadline seconds away that almost never
//! passes.
//!
//! Here a sleep is a deadline and, once polled, a slot in one table with
//! its task's waker; dropping it frees the slot. A ticker thread looks
//! over the table every [`TICK`] and wakes the sleeps whose deadline has
//! passed. A sleep completes only when `Instant::now()` has reached its
//! deadline (never early); it is woken at most one tick late. The ticker
//! is a thread, not a tokio task: a tokio interval would keep an entry
//! in the runtime's timer wheel, and a worker parks more cheaply when
//! the wheel is empty (`scripts/bench/profile`). It holds the table weakly and
//! ends once the server's timer and every sleep are gone.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use hyper::rt::{Sleep, Timer};
use parking_lot::Mutex;

/// How often the ticker looks for passed deadlines: how late, at most, a
/// header timeout closes its connection. Against timeouts of seconds.
pub(super) const TICK: Duration = Duration::from_millis(100);

/// A [`Timer`] for hyper whose sleeps share one table and one ticker.
#[derive(Clone, Debug)]
pub(super) struct HeaderTimer {
    table: Arc<Table>,
    /// The ticker thread, for the tests to see it end.
    #[cfg(test)]
    ticker: Arc<std::thread::JoinHandle<()>>,
}

/// The sleeps that have been polled and are still waiting: their
/// deadlines and wakers, by slot.
#[derive(Debug, Default)]
struct Table {
    slots: Mutex<Slots>,
}

#[derive(Debug, Default)]
struct Slots {
    entries: Vec<Option<Entry>>,
    /// Slots free for reuse: the table is as long as the most sleeps
    /// ever waiting at once (one per open connection), never longer.
    free: Vec<usize>,
}

#[derive(Debug)]
struct Entry {
    deadline: Instant,
    waker: Waker,
}

impl HeaderTimer {
    /// A timer, with its ticker thread started.
    pub(super) fn new() -> std::io::Result<Self> {
        let table = Arc::new(Table::default());
        let weak = Arc::downgrade(&table);
        let _ticker = std::thread::Builder::new()
            .name("header-timer".into())
            .spawn(move || tick(&weak))?;
        Ok(HeaderTimer {
            table,
            #[cfg(test)]
            ticker: Arc::new(_ticker),
        })
    }

    /// Sleeps polled and not yet dropped.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        let slots = self.table.slots.lock();
        slots.entries.len() - slots.free.len()
    }
}

impl Timer for HeaderTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        let now = Instant::now();
        // A deadline past what an `Instant` can hold is never reached: a
        // year stands for it (`+` would panic).
        let year = Duration::from_secs(365 * 24 * 3600);
        self.sleep_until(now.checked_add(duration).unwrap_or(now + year))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Sleep>> {
        Box::pin(HeaderSleep {
            table: self.table.clone(),
            deadline,
            slot: None,
        })
    }
}

/// Wakes, every [`TICK`], the sleeps whose deadline has passed, until the
/// table is gone.
fn tick(table: &Weak<Table>) {
    loop {
        std::thread::sleep(TICK);
        let Some(table) = table.upgrade() else {
            return;
        };
        let now = Instant::now();
        let slots = table.slots.lock();
        // A woken sleep is woken again on each tick until its task polls
        // it (and it completes) or drops it: a wake is never lost.
        for entry in slots.entries.iter().flatten() {
            if entry.deadline <= now {
                entry.waker.wake_by_ref();
            }
        }
    }
}

/// One deadline of a [`HeaderTimer`].
struct HeaderSleep {
    table: Arc<Table>,
    deadline: Instant,
    /// Its slot in the table, once polled.
    slot: Option<usize>,
}

impl Sleep for HeaderSleep {}

impl Future for HeaderSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if Instant::now() >= this.deadline {
            this.leave();
            return Poll::Ready(());
        }
        let mut slots = this.table.slots.lock();
        let slots = &mut *slots;
        match this.slot.and_then(|i| slots.entries.get_mut(i)) {
            Some(Some(entry)) => {
                if !entry.waker.will_wake(cx.waker()) {
                    entry.waker = cx.waker().clone();
                }
            }
            _ => {
                let entry = Some(Entry {
                    deadline: this.deadline,
                    waker: cx.waker().clone(),
                });
                let i = match slots.free.pop() {
                    Some(i) => {
                        if let Some(free) = slots.entries.get_mut(i) {
                            *free = entry;
                        }
                        i
                    }
                    None => {
                        slots.entries.push(entry);
                        slots.entries.len() - 1
                    }
                };
                this.slot = Some(i);
            }
        }
        Poll::Pending
    }
}

impl HeaderSleep {
    /// Frees its slot, if it has one.
    fn leave(&mut self) {
        if let Some(i) = self.slot.take() {
            let mut slots = self.table.slots.lock();
            if let Some(entry) = slots.entries.get_mut(i) {
                *entry = None;
                slots.free.push(i);
            }
        }
    }
}

impl Drop for HeaderSleep {
    fn drop(&mut self) {
        self.leave();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::test_waker::counting;

    fn poll(sleep: &mut Pin<Box<dyn Sleep>>, waker: &Waker) -> Poll<()> {
        sleep.as_mut().poll(&mut Context::from_waker(waker))
    }

    /// A sleep an hour away, to be polled while its deadline is surely
    /// ahead, however slow the machine.
    fn far_off(timer: &HeaderTimer) -> HeaderSleep {
        HeaderSleep {
            table: timer.table.clone(),
            deadline: Instant::now() + Duration::from_secs(3600),
            slot: None,
        }
    }

    fn poll_sleep(sleep: &mut HeaderSleep, waker: &Waker) -> Poll<()> {
        Pin::new(sleep).poll(&mut Context::from_waker(waker))
    }

    /// Moves a polled sleep's deadline (its own and its slot's) to
    /// `deadline`: a sleep until `deadline` that was polled in time,
    /// without a window between its making and its polls that a busy
    /// machine could outlast.
    fn bring_forward(sleep: &mut HeaderSleep, deadline: Instant) {
        sleep.deadline = deadline;
        let mut slots = sleep.table.slots.lock();
        let entry = sleep.slot.and_then(|i| slots.entries.get_mut(i));
        entry
            .and_then(Option::as_mut)
            .expect("a polled sleep has a slot")
            .deadline = deadline;
    }

    /// Waits up to a minute (a hang, not a slow machine) for `done`.
    fn eventually(done: impl Fn() -> bool) -> bool {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(60) {
            if done() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    #[test]
    fn a_sleep_is_woken_after_its_deadline_and_never_completes_before_it() {
        let timer = HeaderTimer::new().unwrap();
        let (count, waker) = counting();
        let mut sleep = far_off(&timer);
        assert!(poll_sleep(&mut sleep, &waker).is_pending());
        assert_eq!(timer.waiting(), 1);
        let deadline = Instant::now() + Duration::from_millis(300);
        bring_forward(&mut sleep, deadline);
        // Woken by the ticker (the only thing that holds the waker),
        // and not before the deadline: the ticker wakes only passed ones.
        assert!(eventually(|| count.wakes() > 0), "never woken");
        let woken = count.first_woken().unwrap_or(deadline);
        assert!(
            woken >= deadline,
            "woken {:?} before its deadline",
            deadline - woken
        );
        assert!(poll_sleep(&mut sleep, &waker).is_ready());
        assert_eq!(timer.waiting(), 0, "a completed sleep leaves its slot");
    }

    #[test]
    fn a_sleep_not_yet_due_is_pending_and_one_due_is_ready_at_once() {
        let timer = HeaderTimer::new().unwrap();
        let (_, waker) = counting();
        let mut due = timer.sleep_until(Instant::now());
        assert!(poll(&mut due, &waker).is_ready());
        assert_eq!(
            timer.waiting(),
            0,
            "a sleep due when first polled takes no slot"
        );
        let mut later = timer.sleep(Duration::from_secs(3600));
        assert!(poll(&mut later, &waker).is_pending());
        assert!(poll(&mut later, &waker).is_pending());
        assert_eq!(timer.waiting(), 1, "polled twice, one slot");
        // Past what an Instant holds: pending, not a panic.
        let mut never = timer.sleep(Duration::MAX);
        assert!(poll(&mut never, &waker).is_pending());
    }

    #[test]
    fn a_dropped_sleep_frees_its_slot_for_the_next() {
        let timer = HeaderTimer::new().unwrap();
        let (_, waker) = counting();
        let hour = Duration::from_secs(3600);
        let mut first = timer.sleep(hour);
        let mut second = timer.sleep(hour);
        assert!(poll(&mut first, &waker).is_pending());
        assert!(poll(&mut second, &waker).is_pending());
        assert_eq!(timer.waiting(), 2);
        drop(first);
        assert_eq!(timer.waiting(), 1);
        // The next sleep takes the freed slot: the table does not grow
        // with the requests a connection serves, only with the sleeps
        // waiting at once.
        let mut third = timer.sleep(hour);
        assert!(poll(&mut third, &waker).is_pending());
        assert_eq!(timer.waiting(), 2);
        assert_eq!(timer.table.slots.lock().entries.len(), 2);
        // Never polled: never in the table.
        drop(timer.sleep(hour));
        assert_eq!(timer.waiting(), 2);
    }

    #[test]
    fn the_waker_of_the_last_poll_is_the_one_woken() {
        let timer = HeaderTimer::new().unwrap();
        let ((first, first_waker), (second, second_waker)) = (counting(), counting());
        let mut sleep = far_off(&timer);
        assert!(poll_sleep(&mut sleep, &first_waker).is_pending());
        // Moved to another task before its deadline.
        assert!(poll_sleep(&mut sleep, &second_waker).is_pending());
        bring_forward(&mut sleep, Instant::now() + Duration::from_millis(200));
        assert!(
            eventually(|| second.wakes() > 0),
            "the task polling it last was never woken"
        );
        assert_eq!(first.wakes(), 0, "the earlier task was woken");
    }

    #[test]
    fn the_ticker_ends_once_the_timer_and_its_sleeps_are_gone() {
        let timer = HeaderTimer::new().unwrap();
        let ticker = timer.ticker.clone();
        let (_, waker) = counting();
        let mut sleep = timer.sleep(Duration::from_secs(3600));
        assert!(poll(&mut sleep, &waker).is_pending());
        drop(timer);
        // A sleep outliving the timer keeps the ticker going: its
        // deadline is still watched.
        std::thread::sleep(TICK * 3);
        assert!(
            !ticker.is_finished(),
            "the ticker ended under a waiting sleep"
        );
        drop(sleep);
        assert!(
            eventually(|| ticker.is_finished()),
            "the ticker thread outlived its table"
        );
    }
}
