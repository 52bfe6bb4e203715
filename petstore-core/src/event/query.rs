//! [`EventQuery`]: which events a page asks for; [`EventPage`] and
//! [`JsonEvents`]: what it gets.

use super::event::Event;
use super::id::EventId;

/// How many events a page holds at most: 1 to [`EventLimit::MAX`].
///
/// # Examples
///
/// ```
/// use petstore_core::event::EventLimit;
/// assert_eq!(EventLimit::new(1000).map(EventLimit::get), Some(1000));
/// assert_eq!(EventLimit::new(0), None);
/// assert_eq!(EventLimit::new(1001), None);
/// assert_eq!(EventLimit::default().get(), 100);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventLimit(u16);

impl EventLimit {
    /// The largest page: 1,000 events.
    pub const MAX: usize = 1000;
    /// A page when the client names no limit: 100 events.
    pub const DEFAULT: EventLimit = EventLimit(100);

    /// `n` events, if `n` is 1 to [`MAX`](Self::MAX).
    pub fn new(n: usize) -> Option<Self> {
        (1..=Self::MAX).contains(&n).then_some(EventLimit(n as u16))
    }

    /// The limit as a number.
    pub const fn get(self) -> usize {
        self.0 as usize
    }
}

impl Default for EventLimit {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Which events a page asks for: those after a cursor, oldest first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventQuery {
    /// Events after this position; `None`: from the oldest kept.
    pub after: Option<EventId>,
    /// At most this many.
    pub limit: EventLimit,
}

impl EventQuery {
    /// From the oldest event kept, a page of [`EventLimit::DEFAULT`].
    pub fn new() -> Self {
        Self::default()
    }

    /// The events after `cursor`.
    pub fn after(mut self, cursor: EventId) -> Self {
        self.after = Some(cursor);
        self
    }

    /// At most `limit` events.
    pub fn limit(mut self, limit: EventLimit) -> Self {
        self.limit = limit;
        self
    }
}

/// A page of events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventPage {
    /// The events, oldest first.
    pub events: Vec<Event>,
    /// Where the next page starts: the last event's position, or on an
    /// empty page the position it asked after (the oldest kept, when it
    /// asked from the start).
    pub next: EventId,
}

/// A page of events already encoded as the JSON response body (a bare
/// array of Event).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonEvents {
    /// The JSON array.
    pub body: Vec<u8>,
    /// How many events it holds.
    pub count: usize,
    /// Where the next page starts, as [`EventPage::next`].
    pub next: EventId,
}

/// An event as another store recorded it (a database's table of
/// events), for a read copy to apply
/// ([`Inventory::apply_events`](crate::Inventory::apply_events)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// Its position.
    pub id: EventId,
    /// What kind of change it is.
    pub kind: super::event::EventType,
    /// The pet's or the order's id.
    pub subject: u64,
    /// The status the change left a pet in; `None` for an order's event,
    /// whose type says its status.
    pub pet_status: Option<crate::pet::PetStatus>,
    /// When it was committed.
    pub at: crate::clock::Timestamp,
}
