//! The inventory's feed of events (beta): every change it publishes is
//! appended to its `EventLog` in the order it publishes them (commit
//! order), and read back as [`Event`]s with the pet or order they left.
//!
//! Why the log is appended under the records' write lock: a reader that
//! takes [`Inventory::events_head`] before it reads a page then sees every
//! change up to that position in the page (it may see later ones too), so
//! a client that lists and then follows from that position misses none.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use super::journal::Change;
use super::ApplyError;
use super::Inventory;
use crate::clock::Timestamp;
use crate::event::event::encode_head;
use crate::event::log::{Entry, EventLog, Happened};
use crate::event::{
    Event, EventData, EventId, EventPage, EventQuery, EventType, FeedError, JsonEvents, Recorded,
};
use crate::order::{OrderId, OrderStatus};
use crate::pet::json::{decode, encode_with_status};
use crate::pet::PetId;

/// What fixes a page of events: its cursor, its limit, and the newest
/// position when it was read.
type PageKey = (EventId, usize, EventId);

/// Told the newest position after each change published.
type EventHook = Box<dyn Fn(EventId) + Send + Sync>;

/// The log, who is told of new events, and the last page encoded.
#[derive(Default)]
pub(super) struct Feed {
    log: RwLock<EventLog>,
    hook: OnceLock<EventHook>,
    /// The last page [`Inventory::events_json`] encoded, by its cursor,
    /// limit and the newest position then (which fix its events: they
    /// never change once appended). Why: a change wakes every waiting
    /// follower at once, and most ask for the same page; it is encoded
    /// once, not once each.
    last_page: Mutex<Option<(PageKey, JsonEvents)>>,
    /// The log's newest position, stored after each append (under the
    /// log's write lock): every list reads it, and an atomic load costs
    /// none of the shared write a read lock's count makes.
    head: AtomicU64,
}

impl std::fmt::Debug for Feed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feed")
            .field("log", &self.log)
            .finish_non_exhaustive()
    }
}

impl Feed {
    /// Appends the events of `changes`, published at `at` (Unix seconds;
    /// an order's own events carry the order's time). Called with the
    /// records' write lock held, so in publishing order.
    pub(super) fn record(&self, changes: &[Change], at: u64) {
        if changes.is_empty() {
            return;
        }
        let mut log = self.log.write();
        for change in changes {
            log.push(entry_of(change, at));
        }
        self.head.store(log.head().get(), Ordering::Release);
    }

    /// Appends one entry (replay).
    pub(super) fn push(&self, entry: Entry) {
        let mut log = self.log.write();
        log.push(entry);
        self.head.store(log.head().get(), Ordering::Release);
    }

    /// The log, to read whole (a snapshot).
    pub(super) fn log(&self) -> parking_lot::RwLockReadGuard<'_, EventLog> {
        self.log.read()
    }

    /// Makes the next position `next` (a snapshot's first event's, on
    /// open, before any event).
    pub(super) fn start_at(&self, next: u64) {
        let mut log = self.log.write();
        log.start_at(next);
        self.head.store(log.head().get(), Ordering::Release);
    }

    /// Sets how long events are kept (what a snapshot keeps, too).
    pub(super) fn set_retention(&self, retention: Duration) {
        self.log.write().set_retention(retention);
    }

    /// Tells the hook, if there is one, the newest position: called once
    /// the locks of a publish are released.
    pub(super) fn announce(&self) {
        if let Some(hook) = self.hook.get() {
            hook(self.log.read().head());
        }
    }
}

/// The event of one published change.
fn entry_of(change: &Change, at: u64) -> Entry {
    match change {
        Change::Created(pet) => Entry::pet_created(pet.id().get(), pet.status(), at),
        Change::Changed(id, status) => Entry::pet_changed(id.get(), *status, at),
        Change::Order(order) => {
            let at = order.closed_at().unwrap_or(order.placed_at()).unix_secs();
            Entry::order(order.id().get(), order.status(), at)
        }
    }
}

/// The entry of an event recorded elsewhere.
fn entry_of_recorded(event: &Recorded) -> Entry {
    let at = event.at.unix_secs();
    let status = event.pet_status.unwrap_or(crate::pet::PetStatus::Available);
    match event.kind {
        EventType::PetCreated => Entry::pet_created(event.subject, status, at),
        EventType::PetStatusChanged => Entry::pet_changed(event.subject, status, at),
        EventType::OrderPlaced => Entry::order(event.subject, OrderStatus::Placed, at),
        EventType::OrderCompleted => Entry::order(event.subject, OrderStatus::Completed, at),
        EventType::OrderCancelled => Entry::order(event.subject, OrderStatus::Cancelled, at),
        EventType::OrderExpired => Entry::order(event.subject, OrderStatus::Expired, at),
    }
}

impl Inventory {
    /// The newest event's position: the feed's position that what the
    /// inventory holds now reflects. A page read after this call shows
    /// every change up to it (and perhaps later ones), so a client that
    /// lists, then follows the feed from here, misses no change.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::*;
    /// use petstore_core::event::{EventId, EventQuery};
    /// let inventory = Inventory::in_memory();
    /// assert_eq!(inventory.events_head(), EventId::START);
    /// let rex = inventory.create(NewPet::new("Rex", CategoryId::MIN).unwrap()).unwrap();
    /// let cursor = inventory.events_head();
    /// inventory.transition(rex.id(), Transition::Sell).unwrap();
    /// // Following from the cursor gives the sale and not the create.
    /// let now = SystemClock::new().now();
    /// let page = inventory.events(&EventQuery::new().after(cursor), now).unwrap();
    /// let kinds: Vec<&str> = page.events.iter().map(|e| e.kind.as_str()).collect();
    /// assert_eq!(kinds, ["order.completed", "pet.status_changed"]);
    /// ```
    pub fn events_head(&self) -> EventId {
        // Acquire: the changes published before the position was stored
        // are seen by the page read after this.
        EventId::new(self.feed.head.load(Ordering::Acquire))
    }

    /// How long events are kept: those older are dropped, and a cursor
    /// before them is [`FeedError::Expired`]. 7 days unless set
    /// ([`DEFAULT_RETENTION`](crate::event::DEFAULT_RETENTION)).
    pub fn set_event_retention(&self, retention: Duration) {
        self.feed.log.write().set_retention(retention);
    }

    /// Adds events recorded elsewhere (a database's table), in position
    /// order, which follow position `after`: how a read copy keeps the
    /// feed of the store it copies. A copy that holds no event yet starts
    /// its feed after `after` (older events are past their retention);
    /// then positions must follow on from the copy's newest without a gap,
    /// and events it already holds are skipped. Returns how many were
    /// added. All or nothing. A durable inventory refuses
    /// ([`ApplyError::Durable`]).
    ///
    /// Apply the pets and orders an event names first: the event is read
    /// back with them, and a list's [`events_head`](Self::events_head)
    /// must not run ahead of what the list shows.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::*;
    /// use petstore_core::event::{EventId, EventQuery, EventType, Recorded};
    /// use petstore_core::inventory::ApplyError;
    /// let copy = Inventory::in_memory();
    /// copy.apply(&[NewPet::new("Rex", CategoryId::MIN).unwrap().into_pet(PetId::MIN)]).unwrap();
    /// let at = Timestamp::from_unix_secs(u32::MAX.into());
    /// let event = |id| Recorded {
    ///     id: EventId::new(id),
    ///     kind: EventType::PetStatusChanged,
    ///     subject: 1,
    ///     pet_status: Some(PetStatus::Sold),
    ///     at,
    /// };
    /// // The store keeps events from 41 on: the copy's feed starts there.
    /// assert_eq!(copy.apply_events(EventId::new(40), &[]), Ok(0));
    /// assert_eq!(copy.events_head(), EventId::new(40));
    /// assert_eq!(copy.apply_events(EventId::new(40), &[event(41), event(42)]), Ok(2));
    /// assert_eq!(copy.apply_events(EventId::new(41), &[event(42), event(43)]), Ok(1));
    /// assert_eq!(
    ///     copy.apply_events(EventId::new(44), &[event(45)]),
    ///     Err(ApplyError::EventGap { expected: 44, found: 45 })
    /// );
    /// let page = copy.events(&EventQuery::new().after(EventId::new(41)), at).unwrap();
    /// assert_eq!(page.events.len(), 2);
    /// ```
    pub fn apply_events(&self, after: EventId, events: &[Recorded]) -> Result<usize, ApplyError> {
        if self.journal.is_some() {
            return Err(ApplyError::Durable);
        }
        let mut log = self.feed.log.write();
        log.start_at(after.get() + 1);
        self.feed.head.store(log.head().get(), Ordering::Release);
        let head = log.head().get();
        let fresh = events
            .iter()
            .position(|event| event.id.get() > head)
            .map_or(&[][..], |at| &events[at..]);
        for (i, event) in fresh.iter().enumerate() {
            let expected = head + 1 + i as u64;
            if event.id.get() != expected {
                return Err(ApplyError::EventGap {
                    expected,
                    found: event.id.get(),
                });
            }
        }
        for event in fresh {
            log.push(entry_of_recorded(event));
        }
        self.feed.head.store(log.head().get(), Ordering::Release);
        drop(log);
        if !fresh.is_empty() {
            self.feed.announce();
        }
        Ok(fresh.len())
    }

    /// How long events are kept ([`set_event_retention`](Self::set_event_retention)).
    pub fn event_retention(&self) -> Duration {
        self.feed.log.read().retention()
    }

    /// How many events are held.
    pub fn events_held(&self) -> usize {
        self.feed.log.read().len()
    }

    /// Calls `hook` with the newest position after every change that
    /// reaches the feed (a batch of them at once): a server wakes the
    /// clients waiting for events there. Called on the thread that
    /// published, with no lock held; it must be quick. Only the first
    /// hook set is kept.
    pub fn on_events(&self, hook: impl Fn(EventId) + Send + Sync + 'static) {
        let _ = self.feed.hook.set(Box::new(hook));
    }

    /// A page of events after the query's cursor, oldest first, judged at
    /// `now` for their retention. See [`Event`] for an example.
    pub fn events(&self, query: &EventQuery, now: Timestamp) -> Result<EventPage, FeedError> {
        let (after, entries) = self
            .feed
            .log
            .read()
            .read(query.after, query.limit.get(), now)?;
        let next = EventId::new(after.get() + entries.len() as u64);
        let events = self.render(after, &entries);
        Ok(EventPage { events, next })
    }

    /// [`events`](Self::events), encoded as the JSON response body: a
    /// bare array of Event.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::*;
    /// use petstore_core::event::EventQuery;
    /// let inventory = Inventory::in_memory();
    /// let now = SystemClock::new().now();
    /// assert_eq!(inventory.events_json(&EventQuery::new(), now).unwrap().body, b"[]");
    /// inventory.create(NewPet::new("Rex", CategoryId::MIN).unwrap()).unwrap();
    /// let page = inventory.events_json(&EventQuery::new(), now).unwrap();
    /// let events: serde_json::Value = serde_json::from_slice(&page.body).unwrap();
    /// assert_eq!(events[0]["data"]["name"], "Rex");
    /// assert_eq!((page.count, page.next.get()), (1, 1));
    /// ```
    pub fn events_json(&self, query: &EventQuery, now: Timestamp) -> Result<JsonEvents, FeedError> {
        let limit = query.limit.get();
        let (after, entries, head) = {
            let log = self.feed.log.read();
            let (after, entries) = log.read(query.after, limit, now)?;
            (after, entries, log.head())
        };
        let key = (after, limit, head);
        if let Some((kept, page)) = &*self.feed.last_page.lock() {
            if *kept == key {
                return Ok(page.clone());
            }
        }
        let (body, count) = self.encode_events(after, &entries);
        let page = JsonEvents {
            body,
            count,
            next: EventId::new(after.get() + entries.len() as u64),
        };
        *self.feed.last_page.lock() = Some((key, page.clone()));
        Ok(page)
    }

    /// The JSON array of the events of `entries`, which follow `after`,
    /// and how many it holds: [`render`](Self::render)'s events, written
    /// straight from the arena's pets and the book's orders.
    fn encode_events(&self, after: EventId, entries: &[Entry]) -> (Vec<u8>, usize) {
        let records = self.records.read();
        let book = self.orders.read();
        let mut body = Vec::with_capacity(2 + entries.len() * 176);
        body.push(b'[');
        let mut count = 0;
        // Events of one second share its text: written once.
        let mut when: Option<(Timestamp, String)> = None;
        for (entry, position) in entries.iter().zip(after.get() + 1..) {
            let at = entry.at();
            if when.as_ref().is_none_or(|(t, _)| *t != at) {
                when = Some((at, at.to_rfc3339()));
            }
            let at_text = when.as_ref().map_or("", |(_, text)| text.as_str());
            let start = body.len();
            if count > 0 {
                body.push(b',');
            }
            encode_head(EventId::new(position), entry.kind(), at_text, &mut body);
            let written = match entry.happened() {
                Happened::Pet { id, status, .. } => PetId::new(id)
                    .and_then(|id| records.index_of(id))
                    .is_some_and(|index| {
                        encode_with_status(
                            records.json(index),
                            records.statuses[index],
                            status,
                            &mut body,
                        )
                    }),
                Happened::Order { id, status } => {
                    match OrderId::new(id).and_then(|id| book.get(id)) {
                        Some(mut order) => {
                            order.status = status;
                            if status == OrderStatus::Placed {
                                order.closed_at = None;
                            }
                            order.encode(&mut body);
                            true
                        }
                        None => false,
                    }
                }
            };
            if written {
                body.push(b'}');
                count += 1;
            } else {
                // As `render`: skipped rather than made up.
                body.truncate(start);
            }
        }
        body.push(b']');
        (body, count)
    }

    /// The events of `entries`, which follow `after`: each with the pet or
    /// order it names as the change left it. A pet or order an event
    /// names is never gone (nothing deletes either), but should one be
    /// missing the event is skipped rather than made up.
    fn render(&self, after: EventId, entries: &[Entry]) -> Vec<Event> {
        let records = self.records.read();
        let book = self.orders.read();
        let mut events = Vec::with_capacity(entries.len());
        for (entry, position) in entries.iter().zip(after.get() + 1..) {
            let data =
                match entry.happened() {
                    Happened::Pet { id, status, .. } => PetId::new(id)
                        .and_then(|id| Some((id, records.index_of(id)?)))
                        .and_then(|(id, index)| {
                            decode(id, records.statuses[index], records.json(index))
                        })
                        .map(|pet| EventData::Pet(pet.with_status(status))),
                    Happened::Order { id, status } => OrderId::new(id)
                        .and_then(|id| book.get(id))
                        .map(|mut order| {
                            order.status = status;
                            if status == OrderStatus::Placed {
                                order.closed_at = None;
                            }
                            EventData::Order(order)
                        }),
                };
            if let Some(data) = data {
                events.push(Event {
                    id: EventId::new(position),
                    kind: entry.kind(),
                    at: entry.at(),
                    data,
                });
            }
        }
        events
    }
}
