//! Compaction: the journal's history replaced by a snapshot of the live
//! state, while writes go on.
//!
//! The sequence, each step safe to stop at (a crash there leaves files
//! that open with every acknowledged change; docs/durability.md,
//! "Compaction"):
//!
//! 1. Under the journal's commit lock, between two batches, the live
//!    journal is closed into the next segment and a new one opened: a
//!    consistent point, for the cost of a rename and a directory sync.
//! 2. With no lock of the inventory held, the previous snapshot and the
//!    closed segments are read back into a private state (`Restorer`),
//!    exactly as a start would read them.
//! 3. That state is written to a temporary file, synced, renamed into
//!    place, and the directory synced.
//! 4. The segments it covers, and snapshots older than the previous one,
//!    are removed.
//!
//! Steps 2 and 3 are paced (`Pace`): after each half millisecond of
//! work they rest `CompactionPolicy::rest` times as long, because on a machine
//! of few cores a thread that works flat out takes a core from the
//! requests for as long as it runs (their p99 follows the scheduler's
//! slices), while one that works in short slices between rests leaves
//! them a share they can count on.
//!
//! Why from the files and not from the live state: the files at the
//! swap are a frozen view for free, with no copy made under a lock, and
//! a snapshot built by the code that replays is by construction what a
//! start would have rebuilt. The cost is a second copy of the state in
//! memory while a compaction runs.

use std::time::{Duration, Instant};

use super::error::CompactError;
use super::journal::{
    read_closed, Compaction, CompactionStats, FinishStep, Item, Record, Restore, SnapshotHeader,
};
use super::restore::Restorer;
use super::Inventory;
use crate::clock::{Clock, SystemClock, Timestamp};
use crate::idempotency::Keyed;

/// The points of a compaction a test may stop at, as a crash would.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CompactStep {
    /// The live journal closed into a segment, a new one opened.
    Rotated,
    /// The closed files read back.
    Read,
    /// A step of writing the snapshot.
    Snapshot(FinishStep),
    /// The snapshot durable, nothing removed yet.
    Durable,
}

impl Inventory {
    /// Compacts the journal now: its history is replaced by a snapshot of
    /// the state it holds, so that the next start reads what is held, not
    /// everything that happened. Writes and reads go on meanwhile (see
    /// `inventory/compact.rs`); one compaction runs at a time (a second
    /// call waits for the first). Blocks for the whole sequence: an async
    /// caller runs it on a blocking thread.
    ///
    /// # Errors
    ///
    /// [`CompactError`]: an in-memory inventory, or a file that could not
    /// be written or read. The journal then still opens with every
    /// acknowledged change, and the next compaction starts over.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::{CategoryId, Inventory, JournalOptions, NewPet, PetId, Transition};
    /// let dir = std::env::temp_dir().join(format!("petstore-compact-doc-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// {
    ///     let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
    ///     let rex = inventory.create(NewPet::new("Rex", CategoryId::MIN).unwrap()).unwrap();
    ///     inventory.transition(rex.id(), Transition::Sell).unwrap();
    ///     let done = inventory.compact().unwrap();
    ///     assert_eq!(done.pets, 1);
    /// }
    /// let reopened = Inventory::open(&dir, JournalOptions::default()).unwrap();
    /// assert!(reopened.recovery().unwrap().snapshot.is_some());
    /// assert_eq!(reopened.get(PetId::MIN).unwrap().status().as_str(), "sold");
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn compact(&self) -> Result<Compaction, CompactError> {
        let outcome = self.compact_steps(SystemClock::new().now(), &mut |_| Ok(()));
        if let (Err(_), Some(journal)) = (&outcome, &self.journal) {
            // A snapshot half-written (a full disk) gives its space back
            // now, not at the next compaction or start.
            journal.remove_temporary_snapshots();
        }
        outcome
    }

    /// Whether the journal has outgrown its last snapshot as its
    /// [`CompactionPolicy`](crate::journal::CompactionPolicy) says: a
    /// server asks now and then, and compacts when it is. Always `false`
    /// in memory.
    pub fn compaction_due(&self) -> bool {
        self.journal.as_ref().is_some_and(|j| j.compaction_due())
    }

    /// The journal's size and compactions; `None` in memory.
    pub fn compaction_stats(&self) -> Option<CompactionStats> {
        let journal = self.journal.as_ref()?;
        let segments = journal.segments();
        Some(CompactionStats {
            journal_bytes: journal.bytes(),
            snapshot_bytes: segments.snapshot_bytes,
            snapshot_time: segments.snapshot.map(|_| segments.snapshot_time),
            compactions: segments.compactions,
            failures: segments.failures,
            last_duration: segments.last_duration,
        })
    }

    /// [`compact`](Self::compact) judged at `now` (which idempotency
    /// answers and events have expired), calling `step` at each point of
    /// the sequence: an `Err` from it stops the sequence there.
    pub(crate) fn compact_steps(
        &self,
        now: Timestamp,
        step: &mut dyn FnMut(CompactStep) -> std::io::Result<()>,
    ) -> Result<Compaction, CompactError> {
        let journal = self.journal.as_ref().ok_or(CompactError::InMemory)?;
        let _one = journal.compaction_lock();
        let started = Instant::now();
        let outcome = self.compact_locked(journal, now, started, step);
        if outcome.is_err() {
            journal.compaction_failed();
        }
        outcome
    }

    fn compact_locked(
        &self,
        journal: &super::journal::Journal,
        now: Timestamp,
        started: Instant,
        step: &mut dyn FnMut(CompactStep) -> std::io::Result<()>,
    ) -> Result<Compaction, CompactError> {
        let dir = journal.dir().to_path_buf();
        let write = |source| CompactError::Write {
            dir: dir.clone(),
            source,
        };
        let rotated = journal.rotate().map_err(CompactError::Storage)?;
        step(CompactStep::Rotated).map_err(write)?;
        let mut pace = Pace::new(journal.compaction_policy().rest);
        let mut state = Restorer::new(now, self.event_retention());
        let read = read_closed(
            &dir,
            rotated.base,
            rotated.segment,
            &mut Paced {
                inner: &mut state,
                pace: &mut pace,
            },
        )
        .map_err(CompactError::Read)?;
        step(CompactStep::Read).map_err(write)?;
        let writer = state
            .write_snapshot(&dir, rotated.segment, &mut || pace.tick())
            .map_err(write)?;
        let bytes = writer
            .finish(&mut |at| step(CompactStep::Snapshot(at)))
            .map_err(write)?;
        step(CompactStep::Durable).map_err(write)?;
        let took = started.elapsed();
        journal
            .compacted(rotated.segment, bytes, now.unix_secs(), took)
            .map_err(write)?;
        Ok(Compaction {
            snapshot: super::journal::snapshot_file(&dir, rotated.segment),
            bytes,
            replaced_bytes: read.snapshot_bytes + read.segment_bytes,
            pets: read.pets,
            took,
        })
    }
}

/// Rests `rest` times as long as it worked, once it has worked half a
/// millisecond: told of each record read and each line written (an item
/// of many orders or events counts as many), it looks at the clock once
/// every 64 of them. Why slices this short: a request that waits behind a
/// slice waits for all of it, so the slice is what a compaction adds to
/// the requests' p99.
struct Pace {
    rest: u32,
    since: Instant,
    count: usize,
}

impl Pace {
    const SLICE: Duration = Duration::from_micros(500);

    fn new(rest: u32) -> Self {
        Pace {
            rest,
            since: Instant::now(),
            count: 0,
        }
    }

    fn tick(&mut self) {
        self.tick_many(1);
    }

    fn tick_many(&mut self, n: usize) {
        if self.rest == 0 {
            return;
        }
        self.count += n;
        if self.count < 64 {
            return;
        }
        self.count = 0;
        let worked = self.since.elapsed();
        if worked >= Self::SLICE {
            std::thread::sleep(worked.saturating_mul(self.rest));
            self.since = Instant::now();
        }
    }
}

/// A [`Restore`] that paces the one it wraps.
struct Paced<'a> {
    inner: &'a mut Restorer,
    pace: &'a mut Pace,
}

impl Restore for Paced<'_> {
    fn record(&mut self, record: Record, json: &[u8], keyed: Option<Keyed>) -> Result<(), String> {
        self.pace.tick();
        self.inner.record(record, json, keyed)
    }

    fn header(&mut self, header: &SnapshotHeader) -> Result<(), String> {
        self.inner.header(header)
    }

    fn item(&mut self, item: Item, json: &[u8]) -> Result<(), String> {
        self.pace.tick_many(match &item {
            Item::Orders(orders) => orders.len(),
            Item::Events(events) => events.len(),
            Item::Pet(..) | Item::Kept(..) => 1,
        });
        self.inner.item(item, json)
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::event::{EventLimit, EventQuery};
    use crate::idempotency::{Fingerprint, IdempotencyKey, Keyed, KeyedOutcome, Scope, Seen};
    use crate::journal::{check_journal, JournalOptions};
    use crate::order::{Actor, NewOrder, OrderId};
    use crate::pet::{CategoryId, NewPet, PetId, Transition};
    use crate::ListQuery;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("petstore-compact-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn keyed(key: &str, now: Timestamp) -> Keyed {
        Keyed {
            scope: Scope::new("shop").unwrap(),
            key: IdempotencyKey::new(key).unwrap(),
            fingerprint: Fingerprint::from_bytes([7; 32]),
            at: now,
        }
    }

    /// Pets, orders (one hold open), a keyed create and their events.
    fn write_some(inventory: &Inventory, round: u64, now: Timestamp) {
        let new = || NewPet::new("Rex", CategoryId::MIN).unwrap();
        let first = inventory.len() as u64 + 1;
        for _ in 0..5 {
            inventory.create(new()).unwrap();
        }
        inventory
            .transition(PetId::new(first).unwrap(), Transition::Sell)
            .unwrap();
        let shop = Actor::new("shop");
        let open = inventory
            .place_order(&shop, NewOrder::new(PetId::new(first + 1).unwrap()), now)
            .unwrap();
        let closed = inventory
            .place_order(&shop, NewOrder::new(PetId::new(first + 2).unwrap()), now)
            .unwrap();
        inventory.complete_order(&shop, closed.id(), now).unwrap();
        let _ = open;
        let outcome = inventory
            .create_keyed(new(), keyed(&format!("k-{round}"), now))
            .unwrap();
        assert!(matches!(outcome, KeyedOutcome::Done(_)), "{outcome:?}");
    }

    /// Everything a client could read, as one string to compare.
    fn picture(inventory: &Inventory, now: Timestamp) -> String {
        let pets = inventory.list(&ListQuery::new().limit(crate::PageSize::MAX));
        let all = Actor::store();
        let orders: Vec<_> = (1..=inventory.orders_len())
            .map(|id| inventory.order(&all, OrderId::new(id).unwrap()))
            .collect();
        let limit = EventLimit::new(1000).unwrap();
        let events = inventory
            .events(&EventQuery::new().limit(limit), now)
            .unwrap();
        format!(
            "{:?}\n{orders:?}\n{:?}\n{:?}",
            pets.pets,
            events.events,
            inventory.next_deadline()
        )
    }

    fn stop_at(at: CompactStep) -> impl FnMut(CompactStep) -> io::Result<()> {
        move |step| match step == at {
            true => Err(io::Error::other(format!("stopped at {step:?}"))),
            false => Ok(()),
        }
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("pets"))
            .collect();
        names.sort();
        names
    }

    /// A compaction stopped at each of its points, as by a crash there:
    /// the directory opens with everything acknowledged before and after
    /// (writes go on after a failed compaction), and the next compaction
    /// succeeds from what the stopped one left.
    #[test]
    fn a_compaction_stopped_at_any_point_loses_nothing() {
        let now = SystemClock::new().now();
        let steps = [
            CompactStep::Rotated,
            CompactStep::Read,
            CompactStep::Snapshot(FinishStep::Written),
            CompactStep::Snapshot(FinishStep::Synced),
            CompactStep::Snapshot(FinishStep::Renamed),
            CompactStep::Durable,
        ];
        for (i, at) in steps.into_iter().enumerate() {
            let dir = scratch(&format!("stop-{i}"));
            let want = {
                let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
                write_some(&inventory, 1, now);
                // A first compaction, so that there is a snapshot to build on.
                inventory.compact().unwrap();
                write_some(&inventory, 2, now);
                let stopped = inventory.compact_steps(now, &mut stop_at(at));
                assert!(stopped.is_err(), "{at:?}");
                assert_eq!(inventory.compaction_stats().unwrap().failures, 1);
                write_some(&inventory, 3, now);
                picture(&inventory, now)
            };
            let reopened = Inventory::open(&dir, JournalOptions::default()).unwrap();
            assert_eq!(picture(&reopened, now), want, "stopped at {at:?}");
            assert!(matches!(reopened.seen(&keyed("k-2", now)), Seen::Replay(_)));
            reopened.compact().unwrap();
            write_some(&reopened, 4, now);
            let want = picture(&reopened, now);
            drop(reopened);
            assert!(check_journal(&dir).unwrap().is_clean(), "{at:?}");
            let again = Inventory::open(&dir, JournalOptions::default()).unwrap();
            assert_eq!(picture(&again, now), want, "compacted after {at:?}");
            for key in ["k-1", "k-2", "k-3", "k-4"] {
                assert!(
                    matches!(again.seen(&keyed(key, now)), Seen::Replay(_)),
                    "{key}"
                );
            }
            drop(again);
            // One snapshot and its previous one; no segment, no temporary.
            let names = files(&dir);
            let snapshots = names.iter().filter(|n| n.ends_with(".snapshot")).count();
            assert_eq!(snapshots, 2, "{names:?}");
            assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");
            assert!(
                !names
                    .iter()
                    .any(|n| n.starts_with("pets-") && n.ends_with(".journal")),
                "{names:?}"
            );
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }

    /// A snapshot cut half-way is given back by the clean-up a failed
    /// `compact` runs, and the next compaction succeeds.
    #[test]
    fn a_half_written_snapshot_is_removed() {
        let now = SystemClock::new().now();
        let dir = scratch("temp");
        let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
        write_some(&inventory, 1, now);
        let stop = CompactStep::Snapshot(FinishStep::Written);
        assert!(inventory.compact_steps(now, &mut stop_at(stop)).is_err());
        assert!(
            files(&dir).iter().any(|n| n.ends_with(".tmp")),
            "{:?}",
            files(&dir)
        );
        if let Some(journal) = &inventory.journal {
            journal.remove_temporary_snapshots();
        }
        assert!(
            !files(&dir).iter().any(|n| n.ends_with(".tmp")),
            "{:?}",
            files(&dir)
        );
        inventory.compact().unwrap();
        drop(inventory);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Without the snapshot's events the ids would restart: the feed
    /// continues with the same positions after a compaction and a start.
    #[test]
    fn events_keep_their_positions_through_a_compaction() {
        let now = SystemClock::new().now();
        let dir = scratch("events");
        let head = {
            let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
            write_some(&inventory, 1, now);
            inventory.compact().unwrap();
            inventory.events_head()
        };
        let reopened = Inventory::open(&dir, JournalOptions::default()).unwrap();
        assert_eq!(reopened.events_head(), head);
        reopened
            .create(NewPet::new("Tom", CategoryId::MIN).unwrap())
            .unwrap();
        let page = reopened
            .events(&EventQuery::new().after(head), now)
            .unwrap();
        assert_eq!(page.events.len(), 1);
        assert_eq!(page.events[0].id.get(), head.get() + 1);
        drop(reopened);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Expired answers and events past their retention are not carried
    /// into a snapshot.
    #[test]
    fn a_snapshot_drops_what_has_expired() {
        let now = SystemClock::new().now();
        let dir = scratch("expired");
        let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
        write_some(&inventory, 1, now);
        assert_eq!(inventory.kept_keys(), 1);
        let later = now + crate::idempotency::RETENTION + Duration::from_secs(1);
        inventory.set_event_retention(Duration::from_secs(60));
        inventory.compact_steps(later, &mut |_| Ok(())).unwrap();
        drop(inventory);
        let reopened = Inventory::open(&dir, JournalOptions::default()).unwrap();
        assert_eq!(reopened.kept_keys(), 0);
        assert_eq!(reopened.events_held(), 0);
        assert_eq!(reopened.len(), 6);
        drop(reopened);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
