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
//! Why from the files and not from the live state: the files at the
//! swap are a frozen view for free, with no copy made under a lock, and
//! a snapshot built by the code that replays is by construction what a
//! start would have rebuilt. The cost is a second copy of the state in
//! memory while a compaction runs.

use std::time::Instant;

use super::error::CompactError;
use super::journal::{read_closed, Compaction, CompactionStats, FinishStep};
use super::restore::Restorer;
use super::Inventory;
use crate::clock::{Clock, SystemClock, Timestamp};

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
        self.compact_steps(SystemClock::new().now(), &mut |_| Ok(()))
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
        let before = journal.segments();
        let rotated = journal.rotate().map_err(CompactError::Storage)?;
        step(CompactStep::Rotated).map_err(write)?;
        let mut state = Restorer::new(now, self.event_retention());
        let read = read_closed(&dir, rotated.base, rotated.segment, &mut state)
            .map_err(CompactError::Read)?;
        step(CompactStep::Read).map_err(write)?;
        let writer = state.write_snapshot(&dir, rotated.segment).map_err(write)?;
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
            replaced_bytes: before.snapshot_bytes + read.segment_bytes,
            pets: read.pets,
            took,
        })
    }
}
