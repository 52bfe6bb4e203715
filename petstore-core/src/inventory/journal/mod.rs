//! The append-only journal that makes a durable [`Inventory`]: every created
//! pet, and every transition of one, is a line of `pets.journal` in the
//! data directory, and a create or a transition is acknowledged only once
//! its line is on disk.
//!
//! | file | holds |
//! |---|---|
//! | `options.rs` | [`JournalOptions`], [`FsyncPolicy`] |
//! | `stats.rs` | [`JournalStats`], [`FSYNC_BUCKETS`], [`BATCH_BUCKETS`] |
//! | `files.rs` | [`JOURNAL_FILE`], [`LOCK_FILE`], regular-file checks, file identity, directory sync |
//! | `dir_lock.rs` | the data directory's lock |
//! | `group_commit.rs` | [`Journal`]: open, append, group commit, failure |
//! | `record.rs` | the record format: a line per pet or per transition with its CRC-32, written and checked |
//! | `lines.rs` | [`Lines`](lines::Lines): the streaming reader, bounded memory |
//! | `replay.rs` | replay on open, [`Recovery`], [`TornTail`] |
//! | `save_aside.rs` | bytes cut from the journal, copied aside first |
//! | `repair.rs` | [`check_journal`], [`repair_journal`]: the way out of a damaged journal |
//!
//! May use: `pet`, `idempotency`, `clock.rs`, `inventory/error.rs`.
//!
//! # Format
//!
//! JSON lines, readable with `jq`:
//!
//! ```text
//! {"pet":{"id":1,"name":"Rex","categoryId":1,"status":"available"},"crc32":"dd81283e"}
//! {"transition":{"id":1,"action":"sell"},"crc32":"9e621b94"}
//! ```
//!
//! `crc32` is the CRC-32 (IEEE) of the exact bytes of the `pet` or
//! `transition` value, in 8 lowercase hex digits. Pet records hold ids 1,
//! 2, 3, ... in file order. A transition record names a pet created on an
//! earlier line and the transition (`reserve`, `release`, `sell`); replay
//! applies it in file order, and it must be one the pet's status by then
//! allows: one that is not (or names a pet no earlier line created) is
//! corruption, as a bad checksum is. It names the transition rather than
//! the status it leads to so that replay checks the same rule that
//! decided it. A journal without transition records is read as before.
//!
//! A write with an idempotency key is one *keyed* record, the key and
//! the write under one CRC, so the two are durable together:
//!
//! ```text
//! {"keyed":{"scope":"shop","key":"k-1","fingerprint":"<64 hex>","at":<unix ns>,"pet":{...}},"crc32":"..."}
//! ```
//!
//! with `"transition":{...}` in place of `"pet"`, or
//! `"conflict":{"id":1,"status":"sold","action":"sell"}` for a refused
//! transition whose answer is kept (it changes no pet). Replay applies
//! the pet or the transition as an unkeyed one and hands the key to the
//! inventory, which keeps it unless it has expired.
//!
//! # Group commit
//!
//! A create or a transition appends its line to a pending buffer under a
//! mutex, in one order for both: the journal's. If no
//! flush is under way, that thread becomes the *leader*: it takes the whole
//! pending buffer, writes it and fsyncs it *outside* the mutex, publishes
//! the batch's pets to readers, and wakes the others. Creates that arrive
//! during a flush wait on a condition variable and go out together in the
//! next one, so throughput grows with concurrency (one fsync per batch)
//! instead of one fsync per pet.
//!
//! A pet or a change is published to `get`/`list` only after its fsync
//! returned, so no reader ever sees one that a crash could take away.
//!
//! A transition is decided under the same mutex, against its pet's
//! status after every record appended before it: published, or still on
//! its way to disk (the journal keeps those statuses until their batch is
//! published). Two racing transitions of one pet so see each other
//! before either is durable, and exactly one of two that need the same
//! status wins. Only a published pet can change: one whose create is not
//! yet acknowledged is not there for any client.
//!
//! # One process per directory
//!
//! The data directory is locked for the life of the inventory with a lock
//! file, [`LOCK_FILE`] (`flock`, released by the kernel when the process
//! ends, however it ends). Locking the directory rather than the journal
//! matters: a lock on the journal file goes with the file, so once the
//! file was deleted a second server could create a new journal beside a
//! running one, and the two would give out the same ids.
//!
//! # Failure
//!
//! A failed write or fsync is never retried: after an fsync error the
//! kernel may already have dropped the dirty pages and reported the error
//! once, so a retry that "succeeds" proves nothing. The journal turns
//! *failed*: the batch's creates and transitions and every later one get
//! [`CreateError::Storage`] (or [`TransitionError::Storage`]), reads go
//! on, and a restart recovers what is on disk.
//!
//! The same happens when the journal's path no longer names the open file
//! (deleted, or replaced by another file): pets written into an unlinked
//! file would be acknowledged and then lost at the next start. Each group
//! commit checks this with one `stat` after its fsync and before it
//! acknowledges anything: one system call per batch, not per pet.
//!
//! # Recovery
//!
//! On open the journal is replayed. An unterminated final line (no
//! newline) is what a crash or a full disk in the middle of a write
//! leaves: only its bytes are kept aside (`pets.journal.torn-<unix-seconds>`,
//! so recovery needs free space for the torn bytes, not for the journal),
//! the file is cut after the last complete record, and
//! [`Recovery::torn_tail`] says so. A complete line (one that ends in a
//! newline) that does not check out is corruption, wherever it is, the
//! last line included: opening fails with [`OpenError::Corrupt`] naming
//! the file and line, and nothing is dropped silently. `repair.rs` gives
//! the operator the way out.
//!
//! The journal is read as a stream, a buffer at a time, never whole: the
//! memory replay needs is the read buffer plus one record, whatever the
//! file's size. A line longer than any record can be ([`MAX_RECORD_LEN`])
//! is corruption too, terminated or not: no write of a record leaves it,
//! so it is not a torn write, and a start neither reads it whole nor
//! copies it aside (a multi-gigabyte file of garbage, or a sparse one,
//! would otherwise cost that much memory and that much disk at a start).
//!
//! [`Inventory`]: crate::Inventory
//! [`CreateError::Storage`]: crate::CreateError::Storage
//! [`TransitionError::Storage`]: crate::TransitionError::Storage
//! [`OpenError::Corrupt`]: crate::OpenError::Corrupt
//! [`MAX_RECORD_LEN`]: record::MAX_RECORD_LEN

mod dir_lock;
mod files;
mod group_commit;
mod lines;
mod options;
mod record;
mod repair;
mod replay;
mod save_aside;
mod stats;

pub use files::{JOURNAL_FILE, LOCK_FILE};
pub(crate) use group_commit::{Change, Journal};
pub use options::{FsyncPolicy, JournalOptions};
pub(crate) use record::Record;
pub use repair::{check_journal, repair_journal, BadLine, JournalCheck, JournalRepair, MAX_LISTED};
pub use replay::{Recovery, TornTail};
pub use stats::{JournalStats, BATCH_BUCKETS, FSYNC_BUCKETS};
