//! [`Journal`]: the open journal and its group commit. A create or a
//! transition appends its line to a pending buffer; one thread at a time
//! leads a batch to disk and wakes the others (docs/durability.md, "Group
//! commit").

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use parking_lot::{Condvar, Mutex, MutexGuard, RwLock};

use super::compaction::{prune, read_closed, remove_temps};
use super::dir_lock::lock_dir;
use super::files::{
    ensure_regular_file, ensure_regular_path, file_identity, sync_dir, JOURNAL_FILE,
};
use super::layout::{segment_path, snapshot_path, Layout, MISSING_SEGMENT};
use super::options::{CompactionPolicy, FsyncPolicy, JournalOptions};
use super::record::{encode_keyed_line, encode_line, encode_time_line, KeyedWrite};
use super::replay::{replay, Recovery, TornTail};
use super::save_aside::cut_aside;
use super::snapshot::Restore;
use super::stats::JournalStats;
use crate::idempotency::Keyed;
use crate::inventory::error::{CreateError, OpenError, StorageFailure, StorageFault};
use crate::order::Order;
use crate::pet::{NewPet, Pet, PetId, PetStatus};

/// Called once, when the journal turns failed.
type FailureHook = Box<dyn Fn(&StorageFailure) + Send + Sync>;

/// One record of a batch, as published to readers once durable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// A new pet.
    Created(Pet),
    /// A pet's new status.
    Changed(PetId, PetStatus),
    /// An order as it now stands (new, or its status changed).
    Order(Order),
}

/// How the caller publishes a durable batch, in journal order, with the
/// time (Unix seconds) of the time record that dates it.
pub(crate) type Publish<'a> = &'a dyn Fn(&[Change], u64);

/// An open journal: appends pets and transitions by group commit and holds the data
/// directory's lock for as long as it lives. One mutex guards the pending
/// batch and the commit state (held only between I/O, never across it); the
/// condition variable wakes the creates that wait for a leader's flush.
pub(crate) struct Journal {
    path: PathBuf,
    dir: PathBuf,
    fsync: FsyncPolicy,
    compaction: CompactionPolicy,
    /// The journal file's `(device, inode)` as opened: the path must keep
    /// naming it. `None` in unit tests over fake storage. Written only
    /// while the live journal is swapped for a new one ([`rotate`]), and
    /// held for the whole swap, so that a health check never sees the
    /// path between two files.
    ///
    /// [`rotate`]: Journal::rotate
    identity: RwLock<Option<(u64, u64)>>,
    /// The segments and the snapshot: what a compaction reads and makes.
    segments: Mutex<Segments>,
    /// Held by the one compaction that may run at a time.
    compacting: Mutex<()>,
    /// The data directory's lock, held (open) for the journal's life.
    _lock: Option<File>,
    on_failure: OnceLock<FailureHook>,
    state: Mutex<CommitState>,
    flushed: Condvar,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("path", &self.path)
            .field("fsync", &self.fsync)
            .finish_non_exhaustive()
    }
}

/// Where batches go: the journal file, or in unit tests a file that fails
/// on demand (a real disk error cannot be provoked portably).
trait Storage: Write + Send {
    fn sync(&mut self) -> io::Result<()>;
}

impl Storage for File {
    fn sync(&mut self) -> io::Result<()> {
        // Data and the size change that appending makes; not the mtime.
        self.sync_data()
    }
}

/// The closed files, and their sizes, for the compaction's trigger.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Segments {
    /// The number the next closed segment takes.
    pub(crate) next: u64,
    /// The newest snapshot, if there is one.
    pub(crate) snapshot: Option<u64>,
    /// Its size in bytes.
    pub(crate) snapshot_bytes: u64,
    /// When it was written (Unix seconds; at open, when it was taken).
    pub(crate) snapshot_time: u64,
    /// Bytes of the closed segments after it.
    pub(crate) closed_bytes: u64,
    /// Compactions finished since open.
    pub(crate) compactions: u64,
    /// Compactions that failed since open.
    pub(crate) failures: u64,
    /// How long the last finished compaction took.
    pub(crate) last_duration: std::time::Duration,
}

/// The segment a [`Journal::rotate`] closed, and the snapshot before it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rotated {
    /// The closed segment's number: the snapshot to write takes it.
    pub(crate) segment: u64,
    /// The newest snapshot before it.
    pub(crate) base: Option<u64>,
}

struct CommitState {
    /// The file; `None` while a leader is writing to it.
    file: Option<Box<dyn Storage>>,
    next_id: u64,
    pending: Vec<u8>,
    pending_changes: Vec<Change>,
    /// Records appended since open (each create and each transition).
    written: u64,
    /// Every record up to this one (counted as `written`) is durable and
    /// published.
    durable: u64,
    flushing: bool,
    failed: Option<StorageFailure>,
    stats: JournalStats,
    /// The second of the last time record written since open.
    last_time: Option<u64>,
    /// Bytes of the live journal: its valid length at open, and every
    /// batch written since.
    live_bytes: u64,
}

/// A failed write or sync, classified: a full disk is worth saying so.
fn io_failure(path: &Path, fault: StorageFault, what: &str, e: &io::Error) -> StorageFailure {
    let fault = if e.kind() == io::ErrorKind::StorageFull {
        StorageFault::NoSpace
    } else {
        fault
    };
    StorageFailure {
        fault,
        detail: format!("{what} {}: {e}", path.display()),
    }
}

impl Journal {
    /// Opens (or creates) the journal in `dir` and replays it: the newest
    /// snapshot, the closed segments after it, then the live journal, each
    /// record given to `restore` in file order (pets in id order).
    pub(crate) fn open(
        dir: &Path,
        options: JournalOptions,
        restore: &mut dyn Restore,
    ) -> Result<(Journal, Recovery), OpenError> {
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| OpenError::Io { path, source }
        };
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        // One process per directory: a second writer would give out the
        // same ids. Taken before the journal is even looked at.
        let lock = lock_dir(dir)?;
        let layout = Layout::scan(dir).map_err(io_err(dir))?;
        let base = layout.newest_snapshot();
        let closed = layout
            .segments_to_replay()
            .map_err(|missing| OpenError::Corrupt {
                path: segment_path(dir, missing),
                line: 0,
                reason: MISSING_SEGMENT.into(),
            })?;
        let upto = closed.last().copied().or(base).unwrap_or(0);
        let read = read_closed(dir, base, upto, restore)?;
        match base {
            // A crash after a snapshot was written, before what it
            // replaces was removed, left that behind: removed now.
            Some(n) => prune(dir, n, layout.snapshots.iter().rev().nth(1).copied()),
            // A crash while the first snapshot was written left it half.
            None => remove_temps(&layout),
        }
        .map_err(io_err(dir))?;

        let path = dir.join(JOURNAL_FILE);
        let existed = path.exists();
        ensure_regular_path(&path).map_err(io_err(&path))?;
        let file = open_live(&path, dir)?;
        let identity = file_identity(&file.metadata().map_err(io_err(&path))?);
        if !existed {
            // The new file's name must survive a crash too.
            sync_dir(dir).map_err(io_err(dir))?;
        }

        // Through the handle that is locked and will be cut, not the path
        // again; streamed, never read whole (see `READ_BUFFER`).
        let replay = replay(&file, &path, read.pets, restore)?;
        let torn_tail = match replay.torn_line {
            None => None,
            Some(line) => {
                // At most `MAX_RECORD_LEN` bytes: a longer line is
                // corruption, refused by `replay`.
                let bytes_dropped = replay.len - replay.good_len;
                let copy = cut_aside(dir, &file, replay.good_len, bytes_dropped, "torn")?;
                Some(TornTail {
                    line,
                    bytes_dropped,
                    copy,
                })
            }
        };
        let pets = read.pets + replay.pets;
        let recovery = Recovery {
            path: path.clone(),
            pets,
            transitions: read.transitions + replay.transitions,
            snapshot: base.map(|n| snapshot_path(dir, n)),
            segments: read.segments,
            torn_tail,
        };
        let snapshot_time = base
            .and_then(|n| fs::metadata(snapshot_path(dir, n)).ok())
            .and_then(|meta| meta.modified().ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs());
        let segments = Segments {
            next: layout.next_segment(),
            snapshot: base,
            snapshot_bytes: read.snapshot_bytes,
            snapshot_time,
            closed_bytes: read.segment_bytes,
            ..Segments::default()
        };
        let journal = Journal {
            path,
            dir: dir.to_path_buf(),
            fsync: options.fsync,
            compaction: options.compaction,
            identity: RwLock::new(identity),
            segments: Mutex::new(segments),
            compacting: Mutex::new(()),
            _lock: Some(lock),
            on_failure: OnceLock::new(),
            state: Mutex::new(CommitState {
                file: Some(Box::new(file)),
                next_id: pets + 1,
                pending: Vec::new(),
                pending_changes: Vec::new(),
                written: 0,
                durable: 0,
                flushing: false,
                failed: None,
                stats: JournalStats::default(),
                last_time: None,
                live_bytes: replay.good_len,
            }),
            flushed: Condvar::new(),
        };
        Ok((journal, recovery))
    }

    /// The data directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The segments and the snapshot, as they stand.
    pub(crate) fn segments(&self) -> Segments {
        *self.segments.lock()
    }

    /// Bytes on disk that a start reads: the snapshot, the closed segments
    /// after it and the live journal.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes_and_snapshot().0
    }

    /// [`bytes`](Self::bytes), and the snapshot's share of them, read
    /// together.
    fn bytes_and_snapshot(&self) -> (u64, u64) {
        let live = self.state.lock().live_bytes;
        let segments = self.segments.lock();
        let bytes = segments.snapshot_bytes + segments.closed_bytes + live;
        (bytes, segments.snapshot_bytes)
    }

    /// Whether the journal has grown enough that a compaction is due (see
    /// [`CompactionPolicy`]).
    pub(crate) fn compaction_due(&self) -> bool {
        let (bytes, snapshot) = self.bytes_and_snapshot();
        bytes > self.compaction.min_bytes
            && bytes > snapshot.saturating_mul(u64::from(self.compaction.ratio.get()))
    }

    /// The compaction policy the journal was opened with.
    pub(crate) fn compaction_policy(&self) -> CompactionPolicy {
        self.compaction
    }

    /// Held by a compaction for its whole sequence: one at a time.
    pub(crate) fn compaction_lock(&self) -> MutexGuard<'_, ()> {
        self.compacting.lock()
    }

    /// Counts a compaction that failed.
    pub(crate) fn compaction_failed(&self) {
        self.segments.lock().failures += 1;
    }

    /// Removes snapshots a failed compaction left half-written (best
    /// effort: a start removes them too).
    pub(crate) fn remove_temporary_snapshots(&self) {
        let _one = self.compacting.lock();
        if let Ok(layout) = Layout::scan(&self.dir) {
            let _ = remove_temps(&layout);
        }
    }

    /// Closes the live journal into the next segment and opens a new,
    /// empty one in its place, between two batches: the records before
    /// the swap are the closed files' state, those after it the new
    /// journal's. Holds the commit lock for the swap alone (two renames'
    /// worth of I/O and a directory sync), never for a snapshot.
    ///
    /// A failure before the rename changes nothing; one after it (the
    /// new file cannot be made) turns the journal failed, since its path
    /// no longer names the file being written.
    pub(crate) fn rotate(&self) -> Result<Rotated, StorageFailure> {
        let mut state = self.state.lock();
        while state.flushing {
            self.flushed.wait(&mut state);
        }
        if let Some(failed) = &state.failed {
            return Err(failed.clone());
        }
        let mut identity = self.identity.write();
        let mut segments = self.segments.lock();
        let closed = segment_path(&self.dir, segments.next);
        let failure = |what: &str, path: &Path, e: &io::Error| {
            io_failure(path, StorageFault::WriteFailed, what, e)
        };
        fs::rename(&self.path, &closed)
            .map_err(|e| failure("closing the journal into", &closed, &e))?;
        let opened = open_live(&self.path, &self.dir)
            .map_err(|e| {
                let e = match e {
                    OpenError::Io { source, .. } => source,
                    other => io::Error::other(other),
                };
                failure("opening a new journal at", &self.path, &e)
            })
            .and_then(|file| {
                let id = file
                    .metadata()
                    .map_err(|e| failure("reading", &self.path, &e))?;
                sync_dir(&self.dir).map_err(|e| failure("syncing", &self.dir, &e))?;
                Ok((file, file_identity(&id)))
            });
        let (file, id) = match opened {
            Ok(opened) => opened,
            Err(failure) => {
                drop((identity, segments));
                self.fail(&mut state, failure.clone());
                return Err(failure);
            }
        };
        *identity = id;
        state.file = Some(Box::new(file));
        // The new file's first batch is dated afresh.
        state.last_time = None;
        segments.closed_bytes += std::mem::take(&mut state.live_bytes);
        let rotated = Rotated {
            segment: segments.next,
            base: segments.snapshot,
        };
        segments.next += 1;
        Ok(rotated)
    }

    /// Records that snapshot `n` (`bytes` long, covering every segment up
    /// to `n`) is durable, and removes what it replaces.
    pub(crate) fn compacted(
        &self,
        n: u64,
        bytes: u64,
        time: u64,
        took: std::time::Duration,
    ) -> io::Result<()> {
        let previous = {
            let mut segments = self.segments.lock();
            let previous = segments.snapshot;
            // One compaction runs at a time, and only it closes segments:
            // every closed one is covered now.
            segments.closed_bytes = 0;
            segments.snapshot = Some(n);
            segments.snapshot_bytes = bytes;
            segments.snapshot_time = time;
            segments.compactions += 1;
            segments.last_duration = took;
            previous
        };
        prune(&self.dir, n, previous)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn stats(&self) -> JournalStats {
        self.state.lock().stats
    }

    /// Sets the function called once, with the details, when the journal
    /// turns failed. Only the first call has an effect.
    pub(crate) fn on_failure(&self, hook: FailureHook) {
        let _ = self.on_failure.set(hook);
    }

    /// Why pets or changes cannot be stored, or `None` if they can. Also looks
    /// whether the journal's path still names the open file (one `stat`),
    /// so a health check notices a deleted journal before a create does.
    pub(crate) fn failure(&self) -> Option<StorageFailure> {
        if let Some(failed) = &self.state.lock().failed {
            return Some(failed.clone());
        }
        let failure = self.check_path().err()?;
        let mut state = self.state.lock();
        self.fail(&mut state, failure);
        state.failed.clone()
    }

    /// Whether the journal's path still names the file being written.
    fn check_path(&self) -> Result<(), StorageFailure> {
        let identity = self.identity.read();
        let Some(identity) = *identity else {
            return Ok(());
        };
        let replaced = |detail: String| StorageFailure {
            fault: StorageFault::JournalReplaced,
            detail,
        };
        match fs::metadata(&self.path) {
            Ok(meta) if file_identity(&meta) == Some(identity) => Ok(()),
            Ok(_) => Err(replaced(format!(
                "{} is no longer the file this server opened (replaced by another file)",
                self.path.display()
            ))),
            Err(e) => Err(replaced(format!(
                "{} is no longer the file this server opened ({e})",
                self.path.display()
            ))),
        }
    }

    /// Turns the journal failed, unless it already is; the first failure
    /// is the one kept and reported (once, through the hook, with the
    /// lock released).
    ///
    /// For good: a failed write or sync is never retried, because after
    /// an fsync error the kernel may already have dropped the dirty pages
    /// and reported the error once, so a retry that "succeeds" proves
    /// nothing.
    fn fail(&self, state: &mut MutexGuard<'_, CommitState>, failure: StorageFailure) {
        if state.failed.is_some() {
            return;
        }
        state.failed = Some(failure.clone());
        if let Some(hook) = self.on_failure.get() {
            MutexGuard::unlocked(state, || hook(&failure));
        }
    }

    /// Appends a pet and returns once it is durable and published (through
    /// `publish`, called by the leader with each batch in id order).
    pub(crate) fn append(&self, new: NewPet, publish: Publish<'_>) -> Result<Pet, CreateError> {
        let mut state = self.state.lock();
        if let Some(failed) = &state.failed {
            return Err(CreateError::Storage(failed.clone()));
        }
        let id = PetId::new(state.next_id).ok_or(CreateError::IdsExhausted)?;
        state.next_id += 1;
        let pet = new.into_pet(id);
        encode_line(&pet, &mut state.pending);
        state.pending_changes.push(Change::Created(pet.clone()));
        state.written += 1;
        let record = state.written;
        self.wait_durable(&mut state, record, publish)
            .map_err(CreateError::Storage)?;
        Ok(pet)
    }

    /// [`append`](Self::append) for several pets at once, given
    /// consecutive ids in their order: one wait for all of them (a caller
    /// that batches creates itself holds one thread per batch, not per
    /// pet). All or nothing: on an error no pet is acknowledged. The pet
    /// at index `i` is written with the idempotency key `keys[i]`, when
    /// there is one, in its own record.
    pub(crate) fn append_many(
        &self,
        news: Vec<NewPet>,
        keys: &[Option<&Keyed>],
        publish: Publish<'_>,
    ) -> Result<Vec<Pet>, CreateError> {
        let mut state = self.state.lock();
        if let Some(failed) = &state.failed {
            return Err(CreateError::Storage(failed.clone()));
        }
        let Some(last) = (news.len() as u64).checked_sub(1) else {
            return Ok(Vec::new());
        };
        let first = state.next_id;
        let last = first
            .checked_add(last)
            .and_then(PetId::new)
            .ok_or(CreateError::IdsExhausted)?;
        state.next_id = last.get() + 1;
        let pets: Vec<Pet> = news
            .into_iter()
            .zip(first..)
            .map(|(new, id)| new.into_pet(PetId::new(id).unwrap_or(last)))
            .collect();
        for (i, pet) in pets.iter().enumerate() {
            match keys.get(i).copied().flatten() {
                Some(keyed) => encode_keyed_line(keyed, KeyedWrite::Pet(pet), &mut state.pending),
                None => encode_line(pet, &mut state.pending),
            }
            state.pending_changes.push(Change::Created(pet.clone()));
        }
        state.written += pets.len() as u64;
        let record = state.written;
        self.wait_durable(&mut state, record, publish)
            .map_err(CreateError::Storage)?;
        Ok(pets)
    }

    /// Appends records encoded by the caller (`lines`, `count` of them)
    /// and the changes they make, and returns once they are durable and
    /// published: the caller decided them (an inventory's order steps and
    /// transitions, under its own lock, against what is published) and
    /// encoded them with the journal's record writers. `Err` when the
    /// journal failed before or while they were written: then none is
    /// acknowledged.
    pub(crate) fn append_records(
        &self,
        lines: &[u8],
        count: u64,
        changes: Vec<Change>,
        publish: Publish<'_>,
    ) -> Result<(), StorageFailure> {
        let mut state = self.state.lock();
        if let Some(failed) = &state.failed {
            return Err(failed.clone());
        }
        if count == 0 {
            return Ok(());
        }
        state.pending.extend_from_slice(lines);
        state.pending_changes.extend(changes);
        state.written += count;
        let record = state.written;
        self.wait_durable(&mut state, record, publish)
    }

    /// Waits until every record up to `record` is durable and published,
    /// leading a group commit when none is under way.
    fn wait_durable(
        &self,
        state: &mut MutexGuard<'_, CommitState>,
        record: u64,
        publish: Publish<'_>,
    ) -> Result<(), StorageFailure> {
        loop {
            if state.durable >= record {
                return Ok(());
            }
            if let Some(failed) = &state.failed {
                return Err(failed.clone());
            }
            if state.flushing {
                self.flushed.wait(state);
            } else {
                self.lead(state, publish);
            }
        }
    }

    /// Writes, syncs and publishes everything pending, with the lock
    /// released during the I/O.
    fn lead(&self, state: &mut MutexGuard<'_, CommitState>, publish: Publish<'_>) {
        state.flushing = true;
        let mut batch = std::mem::take(&mut state.pending);
        // A batch is dated by the time record before it: one is written
        // when the second is not the last one written.
        let time = crate::clock::Clock::now(&crate::clock::SystemClock::new()).unix_secs();
        if state.last_time != Some(time) {
            let mut dated = Vec::with_capacity(batch.len() + 40);
            encode_time_line(time, &mut dated);
            dated.extend_from_slice(&batch);
            batch = dated;
            state.last_time = Some(time);
        }
        let changes = std::mem::take(&mut state.pending_changes);
        let upto = state.written;
        // Records, not changes: an order's step is one record of two.
        let records = upto - state.durable;
        let Some(mut file) = state.file.take() else {
            let failure = StorageFailure {
                fault: StorageFault::WriteFailed,
                detail: format!("{}: journal file handle lost", self.path.display()),
            };
            state.flushing = false;
            self.fail(state, failure);
            self.flushed.notify_all();
            return;
        };
        let fsync = self.fsync;
        let path = &self.path;
        let (result, fsync_time) = MutexGuard::unlocked(state, || {
            let written = file.write_all(&batch);
            let started = Instant::now();
            let synced = match (written, fsync) {
                (Err(e), _) => Err(io_failure(path, StorageFault::WriteFailed, "writing", &e)),
                (Ok(()), FsyncPolicy::Always) => file
                    .sync()
                    .map_err(|e| io_failure(path, StorageFault::SyncFailed, "syncing", &e)),
                (Ok(()), FsyncPolicy::Never) => Ok(()),
            };
            let fsync_time = started.elapsed();
            // After the sync, before anything is acknowledged: a batch
            // synced into a deleted or replaced file is not durable.
            let checked = synced.and_then(|()| self.check_path());
            if checked.is_ok() {
                publish(&changes, time);
            }
            (checked, fsync_time)
        });
        state.file = Some(file);
        state.flushing = false;
        match result {
            Ok(()) => {
                state.durable = upto;
                state.live_bytes += batch.len() as u64;
                state.stats.record(records as usize, fsync_time);
            }
            Err(failure) => self.fail(state, failure),
        }
        self.flushed.notify_all();
    }
}

/// Opens (creating) the live journal at `path` for appending, and locks
/// the file itself, as servers before the directory lock did, so that
/// one of those cannot share it either.
fn open_live(path: &Path, dir: &Path) -> Result<File, OpenError> {
    let io_err = |source| OpenError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .map_err(io_err)?;
    ensure_regular_file(&file).map_err(io_err)?;
    file.try_lock().map_err(|e| match e {
        fs::TryLockError::WouldBlock => OpenError::Locked {
            dir: dir.to_path_buf(),
            lock: path.to_path_buf(),
        },
        fs::TryLockError::Error(source) => OpenError::Io {
            path: path.to_path_buf(),
            source,
        },
    })?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::super::record::Record;
    use super::*;
    use crate::pet::CategoryId;

    /// Keeps what is written; fails every sync when `fail_sync`.
    struct Failing {
        written: std::sync::Arc<Mutex<Vec<u8>>>,
        fail_sync: bool,
    }

    impl Write for Failing {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.written.lock().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Storage for Failing {
        fn sync(&mut self) -> io::Result<()> {
            if self.fail_sync {
                Err(io::Error::other("injected EIO"))
            } else {
                Ok(())
            }
        }
    }

    fn journal_over(storage: Failing) -> Journal {
        Journal {
            path: PathBuf::from("test.journal"),
            dir: PathBuf::from("."),
            fsync: FsyncPolicy::Always,
            compaction: CompactionPolicy::default(),
            identity: RwLock::new(None),
            segments: Mutex::new(Segments::default()),
            compacting: Mutex::new(()),
            _lock: None,
            on_failure: OnceLock::new(),
            state: Mutex::new(CommitState {
                file: Some(Box::new(storage)),
                next_id: 1,
                pending: Vec::new(),
                pending_changes: Vec::new(),
                written: 0,
                durable: 0,
                flushing: false,
                failed: None,
                stats: JournalStats::default(),
                last_time: None,
                live_bytes: 0,
            }),
            flushed: Condvar::new(),
        }
    }

    #[test]
    fn a_failed_fsync_is_never_acknowledged_and_stops_creates() {
        let written = std::sync::Arc::new(Mutex::new(Vec::new()));
        let journal = journal_over(Failing {
            written: written.clone(),
            fail_sync: true,
        });
        let published = Mutex::new(Vec::new());
        let publish = |b: &[Change], _| published.lock().extend_from_slice(b);
        let new = || NewPet::new("Rex", CategoryId::MIN).unwrap();
        let first = journal.append(new(), &publish);
        assert!(matches!(first, Err(CreateError::Storage(ref f))
            if f.detail.contains("injected EIO") && f.fault == StorageFault::SyncFailed));
        // Written but never synced: not published, not acknowledged.
        assert!(!written.lock().is_empty());
        assert!(published.lock().is_empty());
        // Later creates are refused without touching the file again.
        let len = written.lock().len();
        assert!(matches!(
            journal.append(new(), &publish),
            Err(CreateError::Storage(_))
        ));
        assert_eq!(written.lock().len(), len);
        assert_eq!(journal.stats().batches, 0);
    }

    #[test]
    fn a_failed_fsync_acknowledges_no_record_of_the_batch() {
        let written = std::sync::Arc::new(Mutex::new(Vec::new()));
        let journal = journal_over(Failing {
            written: written.clone(),
            fail_sync: true,
        });
        let published = Mutex::new(Vec::new());
        let publish = |b: &[Change], _| published.lock().extend_from_slice(b);
        let change = || vec![Change::Changed(PetId::MIN, PetStatus::Sold)];
        let outcome = journal.append_records(b"x\n", 1, change(), &publish);
        assert!(matches!(outcome, Err(ref f) if f.fault == StorageFault::SyncFailed));
        // Written (after the batch's time record), never synced: nothing
        // published, later ones refused without touching the file.
        assert!(written.lock().starts_with(br#"{"time":"#));
        assert!(written.lock().ends_with(b"}\nx\n"));
        assert!(published.lock().is_empty());
        let len = written.lock().len();
        assert!(journal
            .append_records(b"y\n", 1, change(), &publish)
            .is_err());
        assert_eq!(written.lock().len(), len);
    }

    #[test]
    fn a_good_storage_publishes_in_order() {
        let written = std::sync::Arc::new(Mutex::new(Vec::new()));
        let journal = journal_over(Failing {
            written: written.clone(),
            fail_sync: false,
        });
        let published = Mutex::new(Vec::new());
        let publish = |b: &[Change], _| {
            published.lock().extend(b.iter().filter_map(|c| match c {
                Change::Created(p) => Some(p.id().get()),
                Change::Changed(..) | Change::Order(_) => None,
            }))
        };
        for _ in 0..3 {
            journal
                .append(NewPet::new("Rex", CategoryId::MIN).unwrap(), &publish)
                .unwrap();
        }
        assert_eq!(*published.lock(), [1, 2, 3]);
        let stats = journal.stats();
        assert_eq!((stats.batches, stats.records), (3, 3));
        assert_eq!(stats.batch_buckets[0], 3, "three batches of one pet");
        assert_eq!(stats.fsync_buckets.iter().sum::<u64>(), 3);
        struct Ids(Vec<u64>);
        impl Restore for Ids {
            fn record(&mut self, record: Record, _: &[u8], _: Option<Keyed>) -> Result<(), String> {
                if let Record::Pet(id, _) = record {
                    self.0.push(id.get());
                }
                Ok(())
            }
            fn header(&mut self, _: &super::super::snapshot::SnapshotHeader) -> Result<(), String> {
                Err("no snapshot here".into())
            }
            fn item(&mut self, _: super::super::snapshot::Item, _: &[u8]) -> Result<(), String> {
                Err("no snapshot here".into())
            }
        }
        let mut restored = Ids(Vec::new());
        let replayed = replay(&written.lock()[..], Path::new("x"), 0, &mut restored).ok();
        assert_eq!(replayed.map(|r| (r.pets, r.torn_line)), Some((3, None)));
        assert_eq!(restored.0, [1, 2, 3]);
    }
}
