//! [`Feed`]: the requests that wait for events (beta), `listEvents` with
//! `wait`. The inventory tells one watch channel its newest position
//! after every change it publishes; each waiting request holds a receiver
//! and sleeps until the position passes its cursor, its time is up, or
//! the server drains. Nothing polls: while nothing changes, a thousand
//! waiters cost no CPU, and one change wakes them all at once.
//!
//! Waiters are bounded, per key and in total, so that one client cannot
//! hold every slot (or every connection's memory) of the server: past a
//! bound a request is refused at once rather than queued.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use petstore_core::event::EventId;
use petstore_core::Inventory;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use tokio::sync::watch;

/// At most this many requests of one key wait at once.
pub const MAX_WAITERS_PER_KEY: usize = 1_000;
/// At most this many requests wait at once, of every key.
pub const MAX_WAITERS: usize = 10_000;

/// What a waiter watches: the newest position, and whether the server
/// drains (then every waiter answers at once with what it has).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Signal {
    head: EventId,
    draining: bool,
}

/// The feed's waiters.
#[derive(Debug)]
pub struct Feed {
    signal: Arc<watch::Sender<Signal>>,
    waiting: Mutex<Waiting>,
}

#[derive(Debug, Default)]
struct Waiting {
    total: usize,
    per_key: HashMap<&'static str, usize>,
}

/// Why a request may not wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitRefused {
    /// Its key has [`MAX_WAITERS_PER_KEY`] waiting already.
    Key,
    /// The server has [`MAX_WAITERS`] waiting already.
    Total,
}

/// A place among the waiters, given back when dropped.
#[derive(Debug)]
pub struct WaitSlot<'a> {
    feed: &'a Feed,
    key: &'static str,
}

impl Drop for WaitSlot<'_> {
    fn drop(&mut self) {
        let mut waiting = self.feed.waiting.lock();
        waiting.total = waiting.total.saturating_sub(1);
        if let Some(count) = waiting.per_key.get_mut(self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                waiting.per_key.remove(self.key);
            }
        }
    }
}

impl Feed {
    /// The feed of `inventory`, which tells it of every change.
    pub fn new(inventory: &Inventory) -> Feed {
        let signal = Arc::new(watch::Sender::new(Signal {
            head: inventory.events_head(),
            draining: false,
        }));
        let told = Arc::clone(&signal);
        inventory.on_events(move |head| {
            told.send_if_modified(|signal| {
                let newer = head > signal.head;
                if newer {
                    signal.head = head;
                }
                newer
            });
        });
        Feed {
            signal,
            waiting: Mutex::new(Waiting::default()),
        }
    }

    /// The server drains: every waiter answers now, and none waits again.
    pub fn drain(&self) {
        self.signal.send_modify(|signal| signal.draining = true);
    }

    /// How many requests wait now, for `/metrics`.
    pub fn waiting(&self) -> usize {
        self.waiting.lock().total
    }

    /// A place among the waiters for a request of `key`, unless the
    /// key's or the server's are all taken.
    pub fn slot(&self, key: &'static str) -> Result<WaitSlot<'_>, WaitRefused> {
        let mut waiting = self.waiting.lock();
        if waiting.total >= MAX_WAITERS {
            return Err(WaitRefused::Total);
        }
        let count = waiting.per_key.entry(key).or_insert(0);
        if *count >= MAX_WAITERS_PER_KEY {
            return Err(WaitRefused::Key);
        }
        *count += 1;
        waiting.total += 1;
        Ok(WaitSlot { feed: self, key })
    }

    /// Waits, in `slot`, until an event after `after` is published, `wait`
    /// has passed, or the server drains, whichever comes first.
    pub async fn wait(&self, _slot: &WaitSlot<'_>, after: EventId, wait: Duration) {
        let mut signal = self.signal.subscribe();
        let deadline = tokio::time::sleep(wait);
        tokio::pin!(deadline);
        loop {
            let now = *signal.borrow_and_update();
            if now.head > after || now.draining {
                return;
            }
            tokio::select! {
                changed = signal.changed() => if changed.is_err() { return },
                () = &mut deadline => return,
            }
        }
    }
}

impl Feed {
    /// The collector of the feed's metrics: the requests waiting, and the
    /// events held.
    pub fn collector(self: &Arc<Self>, inventory: Arc<Inventory>) -> Box<dyn Collector> {
        Box::new(FeedCollector {
            feed: Arc::clone(self),
            inventory,
        })
    }
}

#[derive(Debug)]
struct FeedCollector {
    feed: Arc<Feed>,
    inventory: Arc<Inventory>,
}

impl Collector for FeedCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let as_gauge = |n: usize| ConstGauge::new(i64::try_from(n).unwrap_or(i64::MAX));
        let waiting = as_gauge(self.feed.waiting());
        let metric = encoder.encode_descriptor(
            "event_waiters",
            "Requests waiting for events (listEvents with wait)",
            None,
            waiting.metric_type(),
        )?;
        waiting.encode(metric)?;
        let held = as_gauge(self.inventory.events_held());
        let metric = encoder.encode_descriptor(
            "events_held",
            "Events kept in memory for the feed (16 bytes each)",
            None,
            held.metric_type(),
        )?;
        held.encode(metric)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use petstore_core::{CategoryId, NewPet};

    fn rex() -> NewPet {
        NewPet::new("Rex", CategoryId::MIN).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_wakes_at_a_change_and_not_before() {
        let inventory = Arc::new(Inventory::in_memory());
        let feed = Arc::new(Feed::new(&inventory));
        let waiter = {
            let feed = Arc::clone(&feed);
            tokio::spawn(async move {
                let slot = feed.slot("a").unwrap();
                feed.wait(&slot, EventId::START, Duration::from_secs(30))
                    .await;
            })
        };
        tokio::task::yield_now().await;
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(!waiter.is_finished());
        assert_eq!(feed.waiting(), 1);
        inventory.create(rex()).unwrap();
        // Woken by the change, not by time: the clock stands still.
        tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(feed.waiting(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_answers_when_its_time_is_up_or_the_server_drains() {
        let inventory = Inventory::in_memory();
        let feed = Feed::new(&inventory);
        let slot = feed.slot("a").unwrap();
        let started = tokio::time::Instant::now();
        feed.wait(&slot, EventId::START, Duration::from_secs(5))
            .await;
        assert_eq!(started.elapsed(), Duration::from_secs(5));
        feed.drain();
        let started = tokio::time::Instant::now();
        feed.wait(&slot, EventId::START, Duration::from_secs(5))
            .await;
        assert_eq!(started.elapsed(), Duration::ZERO);
    }

    #[test]
    fn waiters_are_bounded_per_key_and_in_total() {
        let inventory = Inventory::in_memory();
        let feed = Feed::new(&inventory);
        let slots: Vec<_> = (0..MAX_WAITERS_PER_KEY)
            .map(|_| feed.slot("a").unwrap())
            .collect();
        assert_eq!(feed.slot("a").err(), Some(WaitRefused::Key));
        let others: Vec<_> = (MAX_WAITERS_PER_KEY..MAX_WAITERS)
            .map(|i| {
                feed.slot(["b", "c", "d", "e", "f", "g", "h", "i", "j", "k"][i % 10])
                    .unwrap()
            })
            .collect();
        assert_eq!(feed.slot("z").err(), Some(WaitRefused::Total));
        drop(others);
        drop(slots);
        assert_eq!(feed.waiting(), 0);
        assert!(feed.slot("a").is_ok());
    }
}
