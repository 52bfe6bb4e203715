//! [`Feed`]: the requests that wait for events (beta), `listEvents` with
//! `wait`. The inventory tells one watch channel its newest position
//! after every change it publishes; each waiting request holds a receiver
//! and sleeps until the position passes its cursor, its time is up, or
//! the server drains. Nothing polls: while nothing changes, a thousand
//! waiters cost no CPU, and one change wakes them all at once.
//!
//! A stream of events (Server-Sent Events, `Accept: text/event-stream`)
//! is a waiter that never leaves: a task per stream ([`Feed::stream`])
//! writes every event after its cursor, then sleeps on the same channel
//! until the next, sending a comment line every [`HEARTBEAT`] so that
//! proxies (and clients) see a live connection; a drain ends every
//! stream once it has sent what there is.
//!
//! Waiters are bounded, per key and in total (streams and long polls
//! together), so that one client cannot hold every slot (or every
//! connection's memory) of the server: past a bound a request is refused
//! at once rather than queued.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Bytes;
use parking_lot::Mutex;
use petstore_core::event::{Event, EventId, EventLimit, EventQuery, FeedError};
use petstore_core::{Clock, Inventory};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use tokio::sync::{mpsc, watch};

/// At most this many requests of one key wait at once.
pub const MAX_WAITERS_PER_KEY: usize = 1_000;
/// At most this many requests wait at once, of every key.
pub const MAX_WAITERS: usize = 10_000;

/// How long a stream of events stays silent at most: then it sends a
/// comment line. Under the 30 s and more that proxies (the documented
/// HAProxy's `timeout server`, 40 s) allow an idle connection.
pub const HEARTBEAT: Duration = Duration::from_secs(15);

/// Events a stream reads and sends at a time.
const STREAM_PAGE: usize = 100;

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
        self.feed.give_back(self.key);
    }
}

/// A stream's place among the waiters, held by its task.
#[derive(Debug)]
struct StreamSlot {
    feed: Arc<Feed>,
    key: &'static str,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.feed.give_back(self.key);
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
        self.take(key)?;
        Ok(WaitSlot { feed: self, key })
    }

    fn take(&self, key: &'static str) -> Result<(), WaitRefused> {
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
        Ok(())
    }

    fn give_back(&self, key: &'static str) {
        let mut waiting = self.waiting.lock();
        waiting.total = waiting.total.saturating_sub(1);
        if let Some(count) = waiting.per_key.get_mut(key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                waiting.per_key.remove(key);
            }
        }
    }

    /// Starts a stream of the events after `after` (from the oldest kept
    /// when `None`) for a request of `key`, in a place among the waiters:
    /// the receiving end of its bytes, in the `text/event-stream` format,
    /// ending when the server drains, when a cursor falls out of the
    /// retention (after an `error` event), or when the receiver is
    /// dropped (the client went away). `replica`: reads come from a read
    /// copy, which may not hold yet what `after` names.
    pub fn stream(
        self: &Arc<Self>,
        key: &'static str,
        source: StreamSource,
        after: Option<EventId>,
    ) -> Result<mpsc::Receiver<Bytes>, WaitRefused> {
        self.take(key)?;
        let slot = StreamSlot {
            feed: Arc::clone(self),
            key,
        };
        // Few chunks ahead: a client that reads slowly holds the task
        // back (and its memory to a few pages), not the other way round.
        let (tx, rx) = mpsc::channel(4);
        let signal = self.signal.subscribe();
        tokio::spawn(produce(slot, signal, source, after, tx));
        Ok(rx)
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

/// Where a stream reads its events, and by which clock.
#[derive(Clone)]
pub struct StreamSource {
    /// The inventory whose feed it follows.
    pub inventory: Arc<Inventory>,
    /// What judges which events have passed their retention.
    pub clock: Arc<dyn Clock>,
    /// Whether the inventory is a read copy of a store other servers
    /// write too (a cursor a moment ahead of it is another replica's).
    pub replica: bool,
    /// The contract's error body for a cursor that fell out of the feed
    /// while streaming: the data of the stream's last event. Given by
    /// the HTTP layer, the one place that maps an error to its body.
    pub expired: fn(&FeedError) -> Vec<u8>,
}

impl std::fmt::Debug for StreamSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamSource")
            .field("replica", &self.replica)
            .finish_non_exhaustive()
    }
}

/// A stream's task: what follows the cursor, then a wait for the next
/// change, a heartbeat or the end.
async fn produce(
    _slot: StreamSlot,
    mut signal: watch::Receiver<Signal>,
    source: StreamSource,
    mut after: Option<EventId>,
    tx: mpsc::Sender<Bytes>,
) {
    let limit = EventLimit::new(STREAM_PAGE).unwrap_or_default();
    loop {
        // Marked seen before the pages are read: a change published
        // while they are, wakes the wait below at once.
        let draining = signal.borrow_and_update().draining;
        loop {
            let mut query = EventQuery::new().limit(limit);
            if let Some(cursor) = after {
                query = query.after(cursor);
            }
            let page = match source.inventory.events(&query, source.clock.now()) {
                Ok(page) => page,
                Err(FeedError::Ahead { .. }) if source.replica => break,
                Err(e) => {
                    let _ = tx.send(error_event(&(source.expired)(&e))).await;
                    return;
                }
            };
            if page.events.is_empty() {
                break;
            }
            let mut chunk = Vec::with_capacity(page.events.len() * 256);
            for event in &page.events {
                write_event(event, &mut chunk);
            }
            after = Some(page.next);
            if tx.send(Bytes::from(chunk)).await.is_err() {
                return;
            }
        }
        if draining {
            return;
        }
        tokio::select! {
            changed = signal.changed() => if changed.is_err() { return },
            () = tokio::time::sleep(HEARTBEAT) => {
                if tx.send(Bytes::from_static(b": keep-alive\n\n")).await.is_err() {
                    return;
                }
            }
            () = tx.closed() => return,
        }
    }
}

/// One event in the `text/event-stream` format: its id (what
/// `Last-Event-ID` resumes from), its type, and its JSON (one line).
fn write_event(event: &Event, out: &mut Vec<u8>) {
    out.extend_from_slice(b"id: ");
    out.extend_from_slice(event.id.get().to_string().as_bytes());
    out.extend_from_slice(b"\nevent: ");
    out.extend_from_slice(event.kind.as_str().as_bytes());
    out.extend_from_slice(b"\ndata: ");
    out.extend_from_slice(&event.to_json());
    out.extend_from_slice(b"\n\n");
}

/// The last event of a stream whose cursor fell out of the retention:
/// `body` (the contract's 410 body, one line of JSON) as an `error` event.
fn error_event(body: &[u8]) -> Bytes {
    let mut event = Vec::with_capacity(body.len() + 22);
    event.extend_from_slice(b"event: error\ndata: ");
    event.extend_from_slice(body);
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
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

    /// A one-node stream source on `inventory`, its retention judged by
    /// `clock`; a cursor past it ends the stream with a stand-in body.
    fn source(inventory: &Arc<Inventory>, clock: Arc<dyn Clock>) -> StreamSource {
        StreamSource {
            inventory: Arc::clone(inventory),
            clock,
            replica: false,
            expired: |_| br#"{"code":"cursor_expired"}"#.to_vec(),
        }
    }

    /// Lets the spawned tasks run (time is paused: nothing else moves).
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_stream_sends_a_comment_each_heartbeat_and_a_drain_ends_it() {
        let inventory = Arc::new(Inventory::in_memory());
        inventory.create(rex()).unwrap();
        let feed = Arc::new(Feed::new(&inventory));
        let source = source(&inventory, Arc::new(petstore_core::SystemClock::new()));
        let mut stream = feed.stream("shop", source, None).unwrap();
        assert_eq!(feed.waiting(), 1, "a stream holds a waiter's place");
        let first = stream.recv().await.unwrap();
        assert!(
            first.starts_with(b"id: 1\nevent: pet.created\ndata: {"),
            "{first:?}"
        );
        assert!(first.ends_with(b"}\n\n"), "{first:?}");

        // Silent until the heartbeat is due, then a comment line.
        tokio::time::advance(HEARTBEAT - Duration::from_millis(1)).await;
        settle().await;
        assert!(stream.try_recv().is_err());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(&stream.recv().await.unwrap()[..], b": keep-alive\n\n");

        // A change is sent at once, with no time passing.
        inventory.create(rex()).unwrap();
        let second = stream.recv().await.unwrap();
        assert!(second.starts_with(b"id: 2\n"), "{second:?}");

        // A drain: what there is, then the end, and the place given back.
        inventory.create(rex()).unwrap();
        feed.drain();
        let last = stream.recv().await.unwrap();
        assert!(last.starts_with(b"id: 3\n"), "{last:?}");
        assert!(stream.recv().await.is_none());
        settle().await;
        assert_eq!(feed.waiting(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_cursor_out_of_the_retention_ends_the_stream_with_the_error_body() {
        let inventory = Arc::new(Inventory::in_memory());
        inventory.set_event_retention(Duration::from_secs(60));
        inventory.create(rex()).unwrap();
        let feed = Arc::new(Feed::new(&inventory));
        // Read a day later: the first event is past its retention.
        let later = petstore_core::SystemClock::new().now() + Duration::from_secs(86_400);
        let source = source(&inventory, Arc::new(petstore_core::FakeClock::new(later)));
        let mut stream = feed.stream("shop", source, Some(EventId::START)).unwrap();
        let last = stream.recv().await.unwrap();
        assert_eq!(
            &last[..],
            b"event: error\ndata: {\"code\":\"cursor_expired\"}\n\n"
        );
        assert!(stream.recv().await.is_none());
        settle().await;
        assert_eq!(feed.waiting(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_whose_client_left_ends_and_gives_its_place_back() {
        let inventory = Arc::new(Inventory::in_memory());
        let feed = Arc::new(Feed::new(&inventory));
        let source = source(&inventory, Arc::new(petstore_core::SystemClock::new()));
        let stream = feed.stream("shop", source, None).unwrap();
        settle().await;
        assert_eq!(feed.waiting(), 1);
        drop(stream);
        settle().await;
        assert_eq!(
            feed.waiting(),
            0,
            "no event, no heartbeat: the end seen at once"
        );
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
