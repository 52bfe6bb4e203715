//! `EventLog`: the events kept, in commit order, each in 16 bytes, and
//! the retention that drops the oldest.
//!
//! An entry holds what changed (a pet or an order id), how (the type and
//! the status it left) and when (Unix seconds); the rest of an event's
//! data never changes after the event (a pet's name and category, an
//! order's pet, key, times), so it is read from the inventory when the
//! event is given out. A position is not stored: entry `i` is at
//! `first + i`.

use std::collections::VecDeque;
use std::time::Duration;

use super::error::FeedError;
use super::event::EventType;
use super::id::EventId;
use crate::clock::Timestamp;
use crate::order::OrderStatus;
use crate::pet::PetStatus;

/// How long events are kept by default: 7 days.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// One kept event: 16 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The pet's or the order's id.
    subject: u64,
    /// Unix seconds (enough until 2106).
    at: u32,
    /// 0 to 2: a pet created, with its status' index; 3 to 5: a pet's
    /// status changed, ditto; 6 to 9: an order left in the status whose
    /// code is `tag - 6`.
    tag: u8,
}

const _: () = assert!(size_of::<Entry>() == 16);

/// What an entry says happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Happened {
    /// A pet created, or changed, leaving it in this status.
    Pet {
        id: u64,
        status: PetStatus,
        created: bool,
    },
    /// An order left in this status.
    Order { id: u64, status: OrderStatus },
}

impl Entry {
    fn secs(at: u64) -> u32 {
        u32::try_from(at).unwrap_or(u32::MAX)
    }

    /// A pet created with `status` at `at` (Unix seconds).
    pub(crate) fn pet_created(id: u64, status: PetStatus, at: u64) -> Self {
        Entry {
            subject: id,
            at: Self::secs(at),
            tag: status.index() as u8,
        }
    }

    /// A pet's status changed to `status`.
    pub(crate) fn pet_changed(id: u64, status: PetStatus, at: u64) -> Self {
        Entry {
            subject: id,
            at: Self::secs(at),
            tag: 3 + status.index() as u8,
        }
    }

    /// An order left in `status`.
    pub(crate) fn order(id: u64, status: OrderStatus, at: u64) -> Self {
        Entry {
            subject: id,
            at: Self::secs(at),
            tag: 6 + status.code(),
        }
    }

    /// The entry in 13 bytes (subject, time, tag; little-endian), as a
    /// snapshot keeps it.
    pub(crate) fn to_bytes(self) -> [u8; 13] {
        let mut bytes = [0u8; 13];
        bytes[..8].copy_from_slice(&self.subject.to_le_bytes());
        bytes[8..12].copy_from_slice(&self.at.to_le_bytes());
        bytes[12] = self.tag;
        bytes
    }

    /// An entry written by [`to_bytes`](Self::to_bytes); `None` for a tag
    /// no entry has.
    pub(crate) fn from_bytes(bytes: [u8; 13]) -> Option<Self> {
        let mut subject = [0u8; 8];
        subject.copy_from_slice(&bytes[..8]);
        let mut at = [0u8; 4];
        at.copy_from_slice(&bytes[8..12]);
        (bytes[12] <= 9).then(|| Entry {
            subject: u64::from_le_bytes(subject),
            at: u32::from_le_bytes(at),
            tag: bytes[12],
        })
    }

    pub(crate) fn happened(self) -> Happened {
        let pet_status = |i: u8| PetStatus::ALL[usize::from(i) % PetStatus::ALL.len()];
        match self.tag {
            0..=2 => Happened::Pet {
                id: self.subject,
                status: pet_status(self.tag),
                created: true,
            },
            3..=5 => Happened::Pet {
                id: self.subject,
                status: pet_status(self.tag - 3),
                created: false,
            },
            _ => Happened::Order {
                id: self.subject,
                status: OrderStatus::from_code(self.tag.saturating_sub(6)),
            },
        }
    }

    pub(crate) fn kind(self) -> EventType {
        match self.happened() {
            Happened::Pet { created: true, .. } => EventType::PetCreated,
            Happened::Pet { .. } => EventType::PetStatusChanged,
            Happened::Order { status, .. } => EventType::of_order(status),
        }
    }

    pub(crate) fn at(self) -> Timestamp {
        Timestamp::from_unix_secs(u64::from(self.at))
    }
}

/// The kept events.
#[derive(Debug)]
pub(crate) struct EventLog {
    /// The position of `entries[0]` (1 until one was dropped).
    first: u64,
    entries: VecDeque<Entry>,
    retention: Duration,
}

impl Default for EventLog {
    fn default() -> Self {
        EventLog {
            first: 1,
            entries: VecDeque::new(),
            retention: DEFAULT_RETENTION,
        }
    }
}

impl EventLog {
    /// The newest event's position ([`EventId::START`] before any).
    pub(crate) fn head(&self) -> EventId {
        EventId::new(self.first + self.entries.len() as u64 - 1)
    }

    /// The position of the oldest event held (the next one's when none is).
    pub(crate) fn first(&self) -> u64 {
        self.first
    }

    /// The events held, oldest first.
    pub(crate) fn entries(&self) -> impl Iterator<Item = Entry> + '_ {
        self.entries.iter().copied()
    }

    /// How many events are held (some may be past their retention until
    /// the next push drops them).
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn retention(&self) -> Duration {
        self.retention
    }

    pub(crate) fn set_retention(&mut self, retention: Duration) {
        self.retention = retention;
    }

    /// Whether no event was ever appended: a read copy's log may then
    /// start at any position ([`start_at`](Self::start_at)).
    pub(crate) fn is_new(&self) -> bool {
        self.first == 1 && self.entries.is_empty()
    }

    /// Makes the next position `next` (a read copy that starts where
    /// another store's kept events start); only while [`is_new`](Self::is_new).
    pub(crate) fn start_at(&mut self, next: u64) {
        if self.is_new() && next > 0 {
            self.first = next;
        }
    }

    /// Appends an event at the next position, and drops the events that
    /// are past their retention by its time.
    pub(crate) fn push(&mut self, entry: Entry) {
        self.entries.push_back(entry);
        let now = entry.at();
        while self.entries.len() > 1 && self.expired(self.entries[0], now) {
            self.entries.pop_front();
            self.first += 1;
        }
    }

    /// How many of the oldest events held are past their retention at
    /// `now`: a short prefix, since every push drops what it finds expired.
    pub(crate) fn expired_before(&self, now: Timestamp) -> usize {
        self.entries
            .iter()
            .take_while(|entry| self.expired(**entry, now))
            .count()
    }

    fn expired(&self, entry: Entry, now: Timestamp) -> bool {
        entry.at() + self.retention <= now
    }

    /// Up to `limit` events after `after` (from the oldest kept when
    /// `None`), with their positions, judged at `now`: a cursor whose
    /// next event is past its retention is [`FeedError::Expired`], one
    /// beyond the newest event [`FeedError::Ahead`].
    pub(crate) fn read(
        &self,
        after: Option<EventId>,
        limit: usize,
        now: Timestamp,
    ) -> Result<(EventId, Vec<Entry>), FeedError> {
        // The entries still kept at `now` start here; the expired prefix
        // is short, since every push drops what it finds expired.
        let skip = self.expired_before(now);
        let oldest = EventId::new(self.first + skip as u64 - 1);
        let head = self.head();
        let after = match after {
            None => oldest,
            Some(after) if after < oldest => return Err(FeedError::Expired { after, oldest }),
            Some(after) if after > head => return Err(FeedError::Ahead { after, head }),
            Some(after) => after,
        };
        let start = (after.get() + 1 - self.first) as usize;
        let entries: Vec<Entry> = self.entries.range(start..).take(limit).copied().collect();
        Ok((after, entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 24 * 3600;

    fn log_of(times: &[u64]) -> EventLog {
        let mut log = EventLog::default();
        for (i, &at) in times.iter().enumerate() {
            log.push(Entry::pet_created(i as u64 + 1, PetStatus::Available, at));
        }
        log
    }

    #[test]
    fn entries_say_what_they_were_given() {
        for status in PetStatus::ALL {
            let created = Entry::pet_created(7, status, 10).happened();
            assert_eq!(
                created,
                Happened::Pet {
                    id: 7,
                    status,
                    created: true
                }
            );
            let changed = Entry::pet_changed(7, status, 10).happened();
            assert_eq!(
                changed,
                Happened::Pet {
                    id: 7,
                    status,
                    created: false
                }
            );
        }
        for status in OrderStatus::ALL {
            let entry = Entry::order(u64::MAX, status, u64::MAX);
            assert_eq!(
                entry.happened(),
                Happened::Order {
                    id: u64::MAX,
                    status
                }
            );
            assert_eq!(entry.kind(), EventType::of_order(status));
            assert_eq!(entry.at(), Timestamp::from_unix_secs(u32::MAX.into()));
        }
    }

    #[test]
    fn a_cursor_reads_what_follows_it_and_nothing_before() {
        let log = log_of(&[100, 100, 101]);
        assert_eq!(log.head(), EventId::new(3));
        let now = Timestamp::from_unix_secs(200);
        let (after, entries) = log.read(Some(EventId::new(1)), 10, now).unwrap();
        assert_eq!(after, EventId::new(1));
        assert_eq!(entries.len(), 2);
        assert_eq!(
            entries[0].happened(),
            Happened::Pet {
                id: 2,
                status: PetStatus::Available,
                created: true
            }
        );
        let (_, none) = log.read(Some(EventId::new(3)), 10, now).unwrap();
        assert!(none.is_empty());
        let (_, one) = log.read(None, 1, now).unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(
            log.read(Some(EventId::new(4)), 10, now),
            Err(FeedError::Ahead {
                after: EventId::new(4),
                head: EventId::new(3)
            })
        );
    }

    #[test]
    fn events_past_their_retention_are_dropped_and_their_cursors_expire() {
        let mut log = log_of(&[DAY, DAY + 1, 2 * DAY]);
        log.set_retention(Duration::from_secs(DAY));
        // Judged at reading: the first two are past their day.
        let now = Timestamp::from_unix_secs(2 * DAY + 1);
        assert_eq!(
            log.read(Some(EventId::START), 10, now),
            Err(FeedError::Expired {
                after: EventId::START,
                oldest: EventId::new(2)
            })
        );
        let (after, entries) = log.read(None, 10, now).unwrap();
        assert_eq!((after, entries.len()), (EventId::new(2), 1));
        // A cursor at the edge misses nothing, so it is still good.
        assert_eq!(log.read(Some(EventId::new(2)), 10, now).unwrap().1.len(), 1);
        // The next push drops them for good; positions go on.
        log.push(Entry::pet_changed(1, PetStatus::Sold, 2 * DAY + 1));
        assert_eq!(log.len(), 2);
        assert_eq!(log.head(), EventId::new(4));
    }
}
