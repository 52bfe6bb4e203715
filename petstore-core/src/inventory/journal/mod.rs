//! The append-only journal that makes a durable [`Inventory`]: every created
//! pet, and every transition of one, is a line of `pets.journal` in the
//! data directory, and a create or a transition is acknowledged only once
//! its line is on disk. A compaction replaces the history with a snapshot
//! of the live state, so the files stay the size of what they hold. Concurrent writes share one fsync (group commit),
//! one process holds the directory, a failed write is never retried, and
//! a damaged line is cut (a torn last one) or refused (any other).
//!
//! | file | holds |
//! |---|---|
//! | `options.rs` | [`JournalOptions`], [`FsyncPolicy`] |
//! | `stats.rs` | [`JournalStats`], [`FSYNC_BUCKETS`], [`BATCH_BUCKETS`], [`CompactionStats`], [`Compaction`] |
//! | `files.rs` | [`JOURNAL_FILE`], [`LOCK_FILE`], regular-file checks, file identity, directory sync |
//! | `dir_lock.rs` | the data directory's lock |
//! | `group_commit.rs` | `Journal`: open, append, group commit, failure |
//! | `record.rs` | the record format: a line per pet, per transition or order step, and the time records that date them, each with its CRC-32, written and checked |
//! | `lines.rs` | `Lines`: the streaming reader, bounded memory |
//! | `replay.rs` | replay on open, [`Recovery`], [`TornTail`] |
//! | `save_aside.rs` | bytes cut from the journal, copied aside first |
//! | `repair.rs` | [`check_journal`], [`repair_journal`]: the way out of a damaged journal |
//! | `layout.rs` | the directory after compactions: the live journal, closed segments, snapshots, their names |
//! | `snapshot.rs` | the snapshot format: the live state in checksummed lines, written whole and renamed into place |
//! | `compaction.rs` | reading a snapshot and the segments after it; removing what a newer snapshot replaced |
//!
//! May use: `pet`, `order`, `idempotency`, `event`, `clock.rs`, `inventory/error.rs`.
//!
//! The record format, group commit, failure, recovery and repair, and why
//! each is as it is: docs/durability.md ("Record format", "Group commit",
//! "When a write fails", "One process per directory", "Recovery on open",
//! "Repair").
//!
//! [`Inventory`]: crate::Inventory

mod compaction;
mod dir_lock;
mod files;
mod group_commit;
mod layout;
mod lines;
mod options;
mod record;
mod repair;
mod replay;
mod save_aside;
mod snapshot;
mod stats;

pub(crate) use compaction::read_closed;
pub use files::{JOURNAL_FILE, LOCK_FILE};
pub(crate) use group_commit::{Change, Journal};
pub(crate) use layout::snapshot_path as snapshot_file;
pub use options::{CompactionPolicy, FsyncPolicy, JournalOptions};
pub(crate) use record::{
    encode_keyed_line, encode_order_line, encode_transition_line, KeyedWrite, OrderStep, Record,
    StepKind,
};
pub use repair::{check_journal, repair_journal, BadLine, JournalCheck, JournalRepair, MAX_LISTED};
pub use replay::{Recovery, TornTail};
pub(crate) use snapshot::{
    FinishStep, Item, Restore, SnapshotHeader, SnapshotWriter, SNAPSHOT_VERSION,
};
pub use stats::{Compaction, CompactionStats, JournalStats, BATCH_BUCKETS, FSYNC_BUCKETS};
