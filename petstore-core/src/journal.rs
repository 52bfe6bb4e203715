//! The append-only journal that makes a durable [`Inventory`]: every created
//! pet is a line of `pets.journal` in the data directory, and a create is
//! acknowledged only once its line is on disk.
//!
//! # Format
//!
//! JSON lines, readable with `jq`:
//!
//! ```text
//! {"pet":{"id":1,"name":"Rex","categoryId":1,"status":"available"},"crc32":"1c291ca3"}
//! ```
//!
//! `crc32` is the CRC-32 (IEEE) of the exact bytes of the `pet` value, in
//! 8 lowercase hex digits. Ids are 1, 2, 3, ... in file order.
//!
//! # Group commit
//!
//! A create appends its line to a pending buffer under a mutex. If no
//! flush is under way, that thread becomes the *leader*: it takes the whole
//! pending buffer, writes it and fsyncs it *outside* the mutex, publishes
//! the batch's pets to readers, and wakes the others. Creates that arrive
//! during a flush wait on a condition variable and go out together in the
//! next one, so throughput grows with concurrency (one fsync per batch)
//! instead of one fsync per pet.
//!
//! A pet is published to `get`/`list` only after its fsync returned, so no
//! reader ever sees a pet that a crash could take away.
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
//! once, so a retry that "succeeds" proves nothing (the PostgreSQL fsync
//! lesson of 2018). The journal turns *failed*: the batch's creates and
//! every later one get [`CreateError::Storage`], reads go on, and a
//! restart recovers what is on disk.
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
//! the file and line, and nothing is dropped silently. The `repair`
//! module gives the operator the way out.
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

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::error::{CreateError, OpenError, StorageFailure, StorageFault};
use crate::json::{encode, parse_canonical};
use crate::pet::{validate_name, NewPet, Pet, PetId, PetStatus};

/// The journal's file name inside the data directory.
pub const JOURNAL_FILE: &str = "pets.journal";

/// The lock file inside the data directory: whoever holds its `flock`
/// owns the whole directory (the journal and any other state kept there).
pub const LOCK_FILE: &str = ".lock";

const LINE_PREFIX: &[u8] = br#"{"pet":"#;
const CRC_PREFIX: &[u8] = br#","crc32":""#;
const LINE_SUFFIX: &[u8] = b"\"}";
/// `,"crc32":"` + 8 hex digits + `"}`.
const TRAILER_LEN: usize = 10 + 8 + 2;

/// The longest a record can be without whitespace, newline excluded:
/// [`LINE_PREFIX`] and the trailer around the longest pet JSON that
/// replay accepts. Replay takes any layout serde_json reads (a record
/// need not be what `encode` writes, only check out), so every string
/// may be written with escapes, each character at its longest:
///
/// - the keys `"id"`, `"name"`, `"categoryId"`, `"status"`: 2 + 4 + 10 + 6
///   characters, each `\uXXXX` (6 bytes), plus 2 quotes each:
///   14 + 26 + 62 + 38 = 140;
/// - the name: [`MAX_NAME_CHARS`](crate::pet::MAX_NAME_CHARS) characters,
///   each at most a surrogate pair `\uXXXX\uXXXX` (12 bytes; raw UTF-8 is
///   at most 4), plus 2 quotes: 100 * 12 + 2 = 1,202;
/// - the status: `available`, the longest, 9 * 6 + 2 quotes = 56;
/// - the two numbers: at most 20 digits each (a `u64`) = 40;
/// - `{`, `}`, 3 commas, 4 colons = 9.
///
/// That is 1,447 bytes of pet, 1,474 with the 27 around it.
const LONGEST_COMPACT_RECORD: usize = LINE_PREFIX.len()
    + (2 + 2 * 6) // "id"
    + (2 + 4 * 6) // "name"
    + (2 + 10 * 6) // "categoryId"
    + (2 + 6 * 6) // "status"
    + (2 + crate::pet::MAX_NAME_CHARS * 12)
    + (2 + 9 * 6) // "available"
    + 2 * 20
    + 9
    + TRAILER_LEN;

/// The longest line that can be a record, newline excluded. JSON allows
/// any amount of whitespace between tokens, which nothing here writes but
/// a record assembled by hand may hold, so the bound is not the exact
/// [`LONGEST_COMPACT_RECORD`] but a generous multiple of it (over 40
/// times): a hand-made record is never refused for its spaces, and 64 KiB
/// is still nothing next to the read buffer. A longer line is corruption,
/// never a torn write, and is never held in memory beyond these bytes.
pub(crate) const MAX_RECORD_LEN: usize = 64 * 1024;

const _: () = assert!(MAX_RECORD_LEN >= 40 * LONGEST_COMPACT_RECORD);

/// How much of the journal is read at a time. Replay of a million pets
/// reads about 100 MB: in 1 MiB reads that is about a hundred system
/// calls, not the twelve thousand of `BufReader`'s default 8 KiB. Being
/// many records long, it also holds almost every line whole, and a line
/// that lies whole in the buffer is checked where it lies, not copied.
/// Memory is this buffer plus one record, whatever the journal's size.
const READ_BUFFER: usize = 1 << 20;

/// When created pets reach the disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FsyncPolicy {
    /// fsync (`fdatasync`) before acknowledging: a created pet survives a
    /// crash of the process or of the machine. The default.
    #[default]
    Always,
    /// Write, but let the operating system flush when it likes: a created
    /// pet survives a crash of the process, but the last seconds of pets
    /// can be lost on power loss. For benchmarks and throwaway data.
    Never,
}

/// How to open a durable inventory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct JournalOptions {
    /// When pets reach the disk.
    pub fsync: FsyncPolicy,
}

/// What opening the journal found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovery {
    /// The journal file.
    pub path: PathBuf,
    /// Pets recovered.
    pub pets: u64,
    /// Set when a torn final record was cut off.
    pub torn_tail: Option<TornTail>,
}

/// A torn final record that recovery cut off: an unterminated last line,
/// left by a crash in the middle of a write or by a full disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// Line number (1-based) of the record that was cut off.
    pub line: u64,
    /// Bytes removed from the end of the journal.
    pub bytes_dropped: u64,
    /// The file that keeps the removed bytes, and only those.
    pub copy: PathBuf,
}

/// Upper bounds, in seconds, of the buckets of
/// [`JournalStats::fsync_buckets`]; a last, unbounded bucket follows.
pub const FSYNC_BUCKETS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];

/// Upper bounds of the buckets of [`JournalStats::batch_buckets`] (pets per
/// batch); a last, unbounded bucket follows.
pub const BATCH_BUCKETS: [u64; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/// Counters of the journal, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JournalStats {
    /// Batches written (each one write and, with `FsyncPolicy::Always`,
    /// one fsync).
    pub batches: u64,
    /// Pets written.
    pub records: u64,
    /// Time spent in fsync, in total.
    pub fsync_time: Duration,
    /// How many fsyncs took at most each bound of [`FSYNC_BUCKETS`] (and
    /// more than the previous one); the last entry counts the slower ones.
    pub fsync_buckets: [u64; 13],
    /// How many batches held at most each bound of [`BATCH_BUCKETS`] pets
    /// (and more than the previous one); the last entry counts larger ones.
    pub batch_buckets: [u64; 10],
}

impl JournalStats {
    fn record(&mut self, pets: usize, fsync_time: Duration) {
        self.batches += 1;
        self.records += pets as u64;
        self.fsync_time += fsync_time;
        let secs = fsync_time.as_secs_f64();
        let slot = FSYNC_BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(FSYNC_BUCKETS.len());
        self.fsync_buckets[slot] += 1;
        let slot = BATCH_BUCKETS
            .iter()
            .position(|b| pets as u64 <= *b)
            .unwrap_or(BATCH_BUCKETS.len());
        self.batch_buckets[slot] += 1;
    }
}

/// Called once, when the journal turns failed.
type FailureHook = Box<dyn Fn(&StorageFailure) + Send + Sync>;

pub(crate) struct Journal {
    path: PathBuf,
    fsync: FsyncPolicy,
    /// The journal file's `(device, inode)` as opened: the path must keep
    /// naming it. `None` in unit tests over fake storage.
    identity: Option<(u64, u64)>,
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

struct CommitState {
    /// The file; `None` while a leader is writing to it.
    file: Option<Box<dyn Storage>>,
    next_id: u64,
    pending: Vec<u8>,
    pending_pets: Vec<Pet>,
    flushing: bool,
    /// Every id up to this one is durable and published.
    durable: u64,
    failed: Option<StorageFailure>,
    stats: JournalStats,
}

/// Takes the data directory's lock (creating [`LOCK_FILE`]); the lock
/// lasts as long as the returned file is open.
pub(crate) fn lock_dir(dir: &Path) -> Result<File, OpenError> {
    let lock = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock)
        .map_err(|source| OpenError::Io {
            path: lock.clone(),
            source,
        })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(fs::TryLockError::WouldBlock) => Err(OpenError::Locked {
            dir: dir.to_path_buf(),
            lock,
        }),
        Err(fs::TryLockError::Error(source)) => Err(OpenError::Io { path: lock, source }),
    }
}

/// The `(device, inode)` pair that names a file (`None` where there is no
/// such pair: then the path is not checked). One function with the `cfg`
/// inside, so that mutation testing mutates the code that runs here.
fn file_identity(meta: &fs::Metadata) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((meta.dev(), meta.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        None
    }
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
    /// Opens (or creates) the journal in `dir` and replays it, giving each
    /// recovered pet to `restore` in id order.
    pub(crate) fn open(
        dir: &Path,
        options: JournalOptions,
        mut restore: impl FnMut(PetId, PetStatus, &[u8]),
    ) -> Result<(Journal, Recovery), OpenError> {
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| OpenError::Io { path, source }
        };
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        // One process per directory: a second writer would give out the
        // same ids. Taken before the journal is even looked at.
        let lock = lock_dir(dir)?;
        let path = dir.join(JOURNAL_FILE);
        let existed = path.exists();
        ensure_regular_path(&path).map_err(io_err(&path))?;
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(io_err(&path))?;
        ensure_regular_file(&file).map_err(io_err(&path))?;
        // Also lock the file itself, as servers before the directory lock
        // did, so that one of those cannot share it either.
        file.try_lock().map_err(|e| match e {
            fs::TryLockError::WouldBlock => OpenError::Locked {
                dir: dir.to_path_buf(),
                lock: path.clone(),
            },
            fs::TryLockError::Error(source) => OpenError::Io {
                path: path.clone(),
                source,
            },
        })?;
        let identity = file_identity(&file.metadata().map_err(io_err(&path))?);
        if !existed {
            // The new file's name must survive a crash too.
            sync_dir(dir).map_err(io_err(dir))?;
        }

        // Through the handle that is locked and will be cut, not the path
        // again; streamed, never read whole (see `READ_BUFFER`).
        let replay = replay(&file, &path, &mut restore)?;
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
        let recovery = Recovery {
            path: path.clone(),
            pets: replay.pets,
            torn_tail,
        };
        let journal = Journal {
            path,
            fsync: options.fsync,
            identity,
            _lock: Some(lock),
            on_failure: OnceLock::new(),
            state: Mutex::new(CommitState {
                file: Some(Box::new(file)),
                next_id: replay.pets + 1,
                pending: Vec::new(),
                pending_pets: Vec::new(),
                flushing: false,
                durable: replay.pets,
                failed: None,
                stats: JournalStats::default(),
            }),
            flushed: Condvar::new(),
        };
        Ok((journal, recovery))
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

    /// Why pets cannot be stored, or `None` if they can. Also looks
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
        let Some(identity) = self.identity else {
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
    pub(crate) fn append(&self, new: NewPet, publish: &dyn Fn(&[Pet])) -> Result<Pet, CreateError> {
        let mut state = self.state.lock();
        if let Some(failed) = &state.failed {
            return Err(CreateError::Storage(failed.clone()));
        }
        let id = PetId::new(state.next_id).ok_or(CreateError::IdsExhausted)?;
        state.next_id += 1;
        let pet = new.into_pet(id);
        encode_line(&pet, &mut state.pending);
        state.pending_pets.push(pet.clone());
        self.wait_durable(&mut state, id.get(), publish)?;
        Ok(pet)
    }

    /// [`append`](Self::append) for several pets at once, given
    /// consecutive ids in their order: one wait for all of them (a caller
    /// that batches creates itself holds one thread per batch, not per
    /// pet). All or nothing: on an error no pet is acknowledged.
    pub(crate) fn append_many(
        &self,
        news: Vec<NewPet>,
        publish: &dyn Fn(&[Pet]),
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
        for pet in &pets {
            encode_line(pet, &mut state.pending);
            state.pending_pets.push(pet.clone());
        }
        self.wait_durable(&mut state, last.get(), publish)?;
        Ok(pets)
    }

    /// Waits until every id up to `id` is durable and published, leading
    /// a group commit when none is under way.
    fn wait_durable(
        &self,
        state: &mut MutexGuard<'_, CommitState>,
        id: u64,
        publish: &dyn Fn(&[Pet]),
    ) -> Result<(), CreateError> {
        loop {
            if state.durable >= id {
                return Ok(());
            }
            if let Some(failed) = &state.failed {
                return Err(CreateError::Storage(failed.clone()));
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
    fn lead(&self, state: &mut MutexGuard<'_, CommitState>, publish: &dyn Fn(&[Pet])) {
        state.flushing = true;
        let batch = std::mem::take(&mut state.pending);
        let pets = std::mem::take(&mut state.pending_pets);
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
                publish(&pets);
            }
            (checked, fsync_time)
        });
        state.file = Some(file);
        state.flushing = false;
        match result {
            Ok(()) => {
                state.durable = pets.last().map_or(state.durable, |p| p.id().get());
                state.stats.record(pets.len(), fsync_time);
            }
            Err(failure) => self.fail(state, failure),
        }
        self.flushed.notify_all();
    }
}

/// Appends one journal line for `pet`.
fn encode_line(pet: &Pet, out: &mut Vec<u8>) {
    out.extend_from_slice(LINE_PREFIX);
    let start = out.len();
    encode(pet, out);
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(CRC_PREFIX);
    out.extend_from_slice(format!("{crc:08x}").as_bytes());
    out.extend_from_slice(LINE_SUFFIX);
    out.push(b'\n');
}

/// Checks one line (without its `\n`) and returns its pet's JSON.
fn checked_body(line: &[u8]) -> Result<&[u8], String> {
    if line.len() < LINE_PREFIX.len() + TRAILER_LEN || !line.starts_with(LINE_PREFIX) {
        return Err("not a journal record".into());
    }
    let (body, trailer) =
        line[LINE_PREFIX.len()..].split_at(line.len() - LINE_PREFIX.len() - TRAILER_LEN);
    if !trailer.starts_with(CRC_PREFIX) || !trailer.ends_with(LINE_SUFFIX) {
        return Err("not a journal record (no crc32)".into());
    }
    let hex = std::str::from_utf8(&trailer[CRC_PREFIX.len()..CRC_PREFIX.len() + 8])
        .map_err(|_| "crc32 is not hex".to_string())?;
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("crc32 is not hex".into());
    }
    let stored = u32::from_str_radix(hex, 16).map_err(|_| "crc32 is not hex".to_string())?;
    let actual = crc32fast::hash(body);
    if stored != actual {
        return Err(format!(
            "checksum mismatch (stored {stored:08x}, computed {actual:08x})"
        ));
    }
    Ok(body)
}

/// A checked record's pet JSON, in any layout serde_json accepts.
fn parse_pet(body: &[u8]) -> Result<Pet, String> {
    let pet: Pet = serde_json::from_slice(body).map_err(|e| format!("bad pet: {e}"))?;
    validate_name(pet.name()).map_err(|e| format!("bad pet: name {e}"))?;
    Ok(pet)
}

/// A checked record: its id, status and canonical JSON.
pub(crate) fn decode_record(
    line: &[u8],
    scratch: &mut Vec<u8>,
) -> Result<(PetId, PetStatus), String> {
    let body = checked_body(line)?;
    scratch.clear();
    // Fast path: the bytes are exactly what `encode` writes.
    if let Some(found) = parse_canonical(body) {
        scratch.extend_from_slice(body);
        return Ok(found);
    }
    let pet = parse_pet(body)?;
    encode(&pet, scratch);
    Ok((pet.id(), pet.status()))
}

/// One line of the journal, as [`Lines::next_line`] reads it.
#[derive(Debug)]
pub(crate) enum Line<'a> {
    /// A line that ends in a newline, given without it.
    Complete(&'a [u8]),
    /// The last line, without a newline, and no longer than
    /// [`MAX_RECORD_LEN`]: what a torn write leaves.
    Unterminated(&'a [u8]),
    /// A line longer than [`MAX_RECORD_LEN`], terminated or not (that is
    /// not known yet): no record, ever. Only its first `MAX_RECORD_LEN + 1`
    /// bytes are read; [`Lines::skip_rest`] reads past the rest.
    TooLong,
}

/// The journal's lines, read from a stream with bounded memory: the read
/// buffer, plus at most `MAX_RECORD_LEN + 1` bytes gathered for a line
/// that straddles the buffer's end. Replay and `check`/`repair` share it,
/// so that they cut lines, and call a line too long, the same way.
pub(crate) struct Lines<R> {
    reader: BufReader<R>,
    /// Bytes of the reader's buffer still lent out by the last line
    /// (handed out where it lies, see `READ_BUFFER`): consumed by the next
    /// call, once that borrow is over.
    pending: usize,
    /// A line that straddles the end of the buffer, gathered here.
    line: Vec<u8>,
    /// Offset in the stream where the last line returned starts.
    start: u64,
    /// Offset just past what has been read: past the last line returned
    /// and its newline (or past the part of a too-long line read so far).
    end: u64,
}

impl<R: Read> Lines<R> {
    pub(crate) fn new(inner: R) -> Self {
        Self::with_capacity(READ_BUFFER, inner)
    }

    fn with_capacity(capacity: usize, inner: R) -> Self {
        Lines {
            reader: BufReader::with_capacity(capacity, inner),
            pending: 0,
            line: Vec::new(),
            start: 0,
            end: 0,
        }
    }

    /// Where the last line returned starts.
    pub(crate) fn start(&self) -> u64 {
        self.start
    }

    /// Bytes read so far: the end of the last line returned, its newline
    /// included (at the end of the stream, its length).
    pub(crate) fn end(&self) -> u64 {
        self.end
    }

    /// The next line, or `None` at the end of the stream.
    pub(crate) fn next_line(&mut self) -> io::Result<Option<Line<'_>>> {
        self.reader.consume(std::mem::take(&mut self.pending));
        self.line.clear();
        self.start = self.end;
        loop {
            let buf = fill(&mut self.reader)?;
            if buf.is_empty() {
                return Ok((!self.line.is_empty()).then_some(Line::Unterminated(&self.line)));
            }
            // The newline of a record comes at most `MAX_RECORD_LEN` bytes
            // into its line: look no further, so that a line of garbage is
            // never gathered beyond that.
            let room = MAX_RECORD_LEN + 1 - self.line.len();
            let window = &buf[..buf.len().min(room)];
            if let Some(at) = window.iter().position(|b| *b == b'\n') {
                self.end += at as u64 + 1;
                if self.line.is_empty() {
                    // The common case: the whole line is in the buffer.
                    self.pending = at + 1;
                    return Ok(Some(Line::Complete(&self.reader.buffer()[..at])));
                }
                self.line.extend_from_slice(&window[..at]);
                self.reader.consume(at + 1);
                return Ok(Some(Line::Complete(&self.line)));
            }
            let taken = window.len();
            self.line.extend_from_slice(window);
            self.reader.consume(taken);
            self.end += taken as u64;
            if self.line.len() > MAX_RECORD_LEN {
                return Ok(Some(Line::TooLong));
            }
        }
    }

    /// Reads past the rest of a [`Line::TooLong`], a buffer at a time
    /// (never holding it), and says whether it ended in a newline.
    pub(crate) fn skip_rest(&mut self) -> io::Result<bool> {
        loop {
            let buf = fill(&mut self.reader)?;
            if buf.is_empty() {
                return Ok(false);
            }
            let (taken, newline) = match buf.iter().position(|b| *b == b'\n') {
                Some(at) => (at + 1, true),
                None => (buf.len(), false),
            };
            self.reader.consume(taken);
            self.end += taken as u64;
            if newline {
                return Ok(true);
            }
        }
    }
}

/// `reader`'s buffer, refilled if empty; a read interrupted by a signal
/// (EINTR) is retried rather than taken for a failure of the journal.
fn fill<R: Read>(reader: &mut BufReader<R>) -> io::Result<&[u8]> {
    loop {
        match reader.fill_buf() {
            Ok(_) => return Ok(reader.buffer()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Why a [`Line::TooLong`] is refused, for replay (which stops at it and
/// does not read the rest of it).
pub(crate) fn too_long_reason() -> String {
    format!(
        "line longer than {MAX_RECORD_LEN} bytes, the most a record can be: \
         not a record, and not a torn write"
    )
}

struct Replayed {
    pets: u64,
    /// Length of the valid prefix of the file.
    good_len: u64,
    /// Bytes read in all: the file's length.
    len: u64,
    torn_line: Option<u64>,
}

fn replay(
    file: impl Read,
    path: &Path,
    restore: &mut impl FnMut(PetId, PetStatus, &[u8]),
) -> Result<Replayed, OpenError> {
    let corrupt = |line: u64, reason: String| OpenError::Corrupt {
        path: path.to_path_buf(),
        line,
        reason,
    };
    let mut lines = Lines::new(file);
    let mut pets = 0u64;
    let mut json = Vec::with_capacity(512);
    loop {
        let line_no = pets + 1;
        let line = lines.next_line().map_err(|source| OpenError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let checked = match line {
            None => break,
            Some(Line::Complete(line)) => decode_record(line, &mut json),
            // Only a short unterminated line is a torn write (and it can
            // only be the last); a complete line that fails is corruption.
            Some(Line::Unterminated(_)) => {
                return Ok(Replayed {
                    pets,
                    good_len: lines.start(),
                    len: lines.end(),
                    torn_line: Some(line_no),
                })
            }
            // A line no write of a record leaves is corruption too,
            // complete or not: refused after `MAX_RECORD_LEN + 1` bytes,
            // the rest unread.
            Some(Line::TooLong) => return Err(corrupt(line_no, too_long_reason())),
        };
        let (id, status) = checked.map_err(|reason| corrupt(line_no, reason))?;
        if id.get() != line_no {
            return Err(corrupt(
                line_no,
                format!("expected pet id {line_no}, found {id}"),
            ));
        }
        restore(id, status, &json);
        pets = line_no;
    }
    Ok(Replayed {
        pets,
        good_len: lines.end(),
        len: lines.end(),
        torn_line: None,
    })
}

/// Keeps the `len` bytes of the journal `file` from offset `cut` (to its
/// end) aside, in `pets.journal.<what>-<unix-seconds>`, then cuts the file
/// to `cut` bytes, durably (the file and its directory synced). Only the
/// removed bytes are copied, so this needs free space for them alone,
/// which matters after a full disk. Recovery cuts a torn tail with it (at
/// most a record), and `repair` a damaged one (any size: streamed).
pub(crate) fn cut_aside(
    dir: &Path,
    file: &File,
    cut: u64,
    len: u64,
    what: &str,
) -> Result<PathBuf, OpenError> {
    let journal = dir.join(JOURNAL_FILE);
    let io_err = |source| OpenError::Io {
        path: journal.clone(),
        source,
    };
    let mut source = file;
    source.seek(SeekFrom::Start(cut)).map_err(io_err)?;
    let copy = save_aside(dir, what, &mut source, len, &journal)?;
    let truncate = || -> io::Result<()> {
        file.set_len(cut)?;
        file.sync_all()?;
        sync_dir(dir)
    };
    truncate().map_err(io_err)?;
    Ok(copy)
}

/// Copies exactly `len` bytes of `source` (`from` names it in errors)
/// durably to a new file `pets.journal.<what>-<unix-seconds>` in `dir`
/// and returns its path. A copy that fails half-way (a full disk, say) is
/// removed, so failed attempts leave nothing behind.
pub(crate) fn save_aside(
    dir: &Path,
    what: &str,
    source: &mut dyn Read,
    len: u64,
    from: &Path,
) -> Result<PathBuf, OpenError> {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    save_aside_at(dir, what, source, len, from, secs)
}

/// Which side of a copy failed, so that the error names the right file.
enum CopyFault {
    Read(io::Error),
    Write(io::Error),
}

/// [`save_aside`] with the clock's reading given: the names it tries are
/// `pets.journal.WHAT-SECS`, then `-1` to `-1000` after it.
fn save_aside_at(
    dir: &Path,
    what: &str,
    source: &mut dyn Read,
    len: u64,
    from: &Path,
    secs: u64,
) -> Result<PathBuf, OpenError> {
    let mut n = 0u32;
    loop {
        let name = match n {
            0 => format!("{JOURNAL_FILE}.{what}-{secs}"),
            _ => format!("{JOURNAL_FILE}.{what}-{secs}-{n}"),
        };
        let path = dir.join(name);
        let mut file = match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 1000 => {
                n += 1;
                continue;
            }
            Err(source) => return Err(OpenError::Io { path, source }),
        };
        let written = copy_exactly(source, len, &mut file)
            .and_then(|()| file.sync_all().map_err(CopyFault::Write))
            .and_then(|()| sync_dir(dir).map_err(CopyFault::Write));
        return match written {
            Ok(()) => Ok(path),
            Err(fault) => {
                drop(file);
                // Best effort: the error that matters is the fault.
                let _ = fs::remove_file(&path);
                Err(match fault {
                    CopyFault::Read(source) => OpenError::Io {
                        path: from.to_path_buf(),
                        source,
                    },
                    CopyFault::Write(source) => OpenError::Io { path, source },
                })
            }
        };
    }
}

/// Copies exactly `len` bytes of `source` to the start of the empty file
/// `out`, a chunk of at most `READ_BUFFER` at a time: a repair may move
/// gigabytes of garbage aside, and must not hold them in memory. A chunk
/// of zeros is skipped with a seek rather than written (the file's final
/// length fills it with zeros just the same), so that moving a sparse
/// tail aside costs no more disk than it did in the journal.
fn copy_exactly(source: &mut dyn Read, len: u64, out: &mut File) -> Result<(), CopyFault> {
    let mut buf = vec![0u8; usize::try_from(len).map_or(READ_BUFFER, |l| l.min(READ_BUFFER))];
    let mut left = len;
    while left > 0 {
        let want = usize::try_from(left).map_or(buf.len(), |l| l.min(buf.len()));
        let n = match source.read(&mut buf[..want]) {
            Ok(0) => {
                return Err(CopyFault::Read(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("ended {left} bytes early: shorter than when it was read"),
                )))
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CopyFault::Read(e)),
        };
        let chunk = &buf[..n];
        let done = if chunk.iter().all(|b| *b == 0) {
            // `n` is at most `READ_BUFFER`, which fits an `i64`.
            out.seek(SeekFrom::Current(n as i64)).map(drop)
        } else {
            out.write_all(chunk)
        };
        done.map_err(CopyFault::Write)?;
        left -= n as u64;
    }
    // Zeros skipped at the end are not in the file until its length is.
    out.set_len(len).map_err(CopyFault::Write)
}

/// Refuses a journal that exists and is not a regular file, before it is
/// opened (following a symlink): a FIFO would hang its reader, and a
/// device such as `/dev/zero` never ends, so a check would read it
/// forever (memory stays bounded: the journal is read as a stream). A
/// missing file is fine (it is created, or reported).
pub(crate) fn ensure_regular_path(path: &Path) -> io::Result<()> {
    match fs::metadata(path) {
        Ok(meta) if !meta.is_file() => Err(not_regular()),
        _ => Ok(()),
    }
}

/// The same check on the opened handle, for a file swapped in between.
pub(crate) fn ensure_regular_file(file: &File) -> io::Result<()> {
    if file.metadata()?.is_file() {
        Ok(())
    } else {
        Err(not_regular())
    }
}

fn not_regular() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "not a regular file (a FIFO, a device or a directory); refusing to read it",
    )
}

pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pet::{CategoryId, PetStatus};

    /// Checks one line and returns its pet (the general, allocating path).
    fn decode_line(line: &[u8]) -> Result<Pet, String> {
        parse_pet(checked_body(line)?)
    }

    fn pet(id: u64, name: &str) -> Pet {
        let new = NewPet::new(name, CategoryId::MIN)
            .unwrap()
            .with_status(PetStatus::Sold);
        new.into_pet(PetId::new(id).unwrap())
    }

    #[test]
    fn lines_round_trip_and_are_plain_json() {
        let mut out = Vec::new();
        encode_line(&pet(1, "R\"ex"), &mut out);
        assert_eq!(out.last(), Some(&b'\n'));
        let line = &out[..out.len() - 1];
        assert_eq!(decode_line(line), Ok(pet(1, "R\"ex")));
        let v: serde_json::Value = serde_json::from_slice(line).unwrap();
        assert_eq!(v["pet"]["name"], "R\"ex");
        assert_eq!(v["crc32"].as_str().map(str::len), Some(8));
    }

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
            fsync: FsyncPolicy::Always,
            identity: None,
            _lock: None,
            on_failure: OnceLock::new(),
            state: Mutex::new(CommitState {
                file: Some(Box::new(storage)),
                next_id: 1,
                pending: Vec::new(),
                pending_pets: Vec::new(),
                flushing: false,
                durable: 0,
                failed: None,
                stats: JournalStats::default(),
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
        let publish = |b: &[Pet]| published.lock().extend_from_slice(b);
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
    fn a_good_storage_publishes_in_order() {
        let written = std::sync::Arc::new(Mutex::new(Vec::new()));
        let journal = journal_over(Failing {
            written: written.clone(),
            fail_sync: false,
        });
        let published = Mutex::new(Vec::new());
        let publish = |b: &[Pet]| published.lock().extend(b.iter().map(|p| p.id().get()));
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
        let mut restored = Vec::new();
        let replayed = replay(
            &written.lock()[..],
            Path::new("x"),
            &mut |id: PetId, _, _: &[u8]| restored.push(id.get()),
        )
        .ok();
        assert_eq!(replayed.map(|r| (r.pets, r.torn_line)), Some((3, None)));
        assert_eq!(restored, [1, 2, 3]);
    }

    #[test]
    fn stats_count_each_batch_in_the_bucket_of_its_bounds() {
        let mut stats = JournalStats::default();
        // On a bound: that bucket (the bounds are inclusive).
        stats.record(1, Duration::from_micros(100));
        stats.record(2, Duration::from_micros(250));
        // Past every bound: the last, unbounded bucket.
        stats.record(300, Duration::from_secs(2));
        assert_eq!(&stats.fsync_buckets[..2], [1, 1]);
        assert_eq!(stats.fsync_buckets[FSYNC_BUCKETS.len()], 1);
        assert_eq!(stats.fsync_buckets.iter().sum::<u64>(), 3);
        assert_eq!(&stats.batch_buckets[..2], [1, 1]);
        assert_eq!(stats.batch_buckets[BATCH_BUCKETS.len()], 1);
        assert_eq!((stats.batches, stats.records), (3, 303));
        assert_eq!(stats.fsync_time, Duration::from_micros(2_000_350));
    }

    /// A fresh directory under the system's temporary one.
    fn scratch_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "petstore-journal-unit-{name}-{}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// The names `save_aside` tries first for `what`, for this second and
    /// the next two (so a test that runs across a second boundary still
    /// finds them taken).
    /// The clock reading of the tests of `save_aside_at`: a fixed one, so
    /// that the names they take are the names it tries, however long the
    /// test runs (a busy machine once took more than the three seconds an
    /// earlier version of this test covered with the real clock).
    const SECS: u64 = 1_800_000_000;

    fn take_names(dir: &Path, what: &str, suffixes: std::ops::Range<u32>) {
        for n in suffixes {
            let name = match n {
                0 => format!("{JOURNAL_FILE}.{what}-{SECS}"),
                _ => format!("{JOURNAL_FILE}.{what}-{SECS}-{n}"),
            };
            fs::write(dir.join(name), b"taken").unwrap();
        }
    }

    #[test]
    fn save_aside_never_overwrites_and_tries_at_most_a_thousand_names() {
        let dir = scratch_dir("aside");
        let from = dir.join(JOURNAL_FILE);
        // The plain name taken: the next free one, with the bytes.
        take_names(&dir, "torn", 0..1);
        let kept = save_aside_at(&dir, "torn", &mut &b"torn bytes"[..], 10, &from, SECS).unwrap();
        let name = kept.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.ends_with("-1"), "{name}");
        assert_eq!(fs::read(&kept).unwrap(), b"torn bytes");
        // The plain name and 1..=1000 taken: refused, naming the last try.
        take_names(&dir, "bad", 0..1001);
        match save_aside_at(&dir, "bad", &mut &b"x"[..], 1, &from, SECS) {
            Err(OpenError::Io { path, source }) => {
                assert_eq!(source.kind(), io::ErrorKind::AlreadyExists);
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                assert!(name.ends_with("-1000"), "{name}");
            }
            other => panic!("{other:?}"),
        }
        // Another error is not retried under other names.
        let missing = dir.join("missing");
        match save_aside_at(&missing, "torn", &mut &b"x"[..], 1, &from, SECS) {
            Err(OpenError::Io { path, source }) => {
                assert_eq!(source.kind(), io::ErrorKind::NotFound);
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                // `pets.journal.torn-SECS`: the first name, no `-N`.
                assert_eq!(name.matches('-').count(), 1, "{name}");
            }
            other => panic!("{other:?}"),
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn damaged_lines_are_refused() {
        let mut out = Vec::new();
        encode_line(&pet(7, "Rex"), &mut out);
        let line = out[..out.len() - 1].to_vec();
        // Flip one bit anywhere: always detected.
        for i in 0..line.len() {
            let mut bad = line.clone();
            bad[i] ^= 0x01;
            assert!(decode_line(&bad).is_err(), "flip at {i}");
        }
        for cut in 0..line.len() {
            assert!(decode_line(&line[..cut]).is_err(), "cut at {cut}");
        }
    }

    /// What `Lines` should give for `bytes`: a reference made the slow,
    /// obvious way, over the whole input in memory.
    #[derive(Debug, PartialEq, Eq)]
    enum Want {
        Complete(Vec<u8>),
        Unterminated(Vec<u8>),
        TooLong { terminated: bool },
    }

    fn reference(bytes: &[u8]) -> Vec<(u64, u64, Want)> {
        let mut out = Vec::new();
        let mut start = 0;
        while start < bytes.len() {
            let rest = &bytes[start..];
            let (line, terminated) = match rest.iter().position(|b| *b == b'\n') {
                Some(at) => (&rest[..at], true),
                None => (rest, false),
            };
            let end = start + line.len() + usize::from(terminated);
            let want = match (line.len() > MAX_RECORD_LEN, terminated) {
                (true, _) => Want::TooLong { terminated },
                (false, true) => Want::Complete(line.to_vec()),
                (false, false) => Want::Unterminated(line.to_vec()),
            };
            out.push((start as u64, end as u64, want));
            start = end;
        }
        out
    }

    fn read_lines(bytes: &[u8], capacity: usize) -> Vec<(u64, u64, Want)> {
        let mut lines = Lines::with_capacity(capacity, bytes);
        let mut out = Vec::new();
        loop {
            let want = match lines.next_line().unwrap() {
                None => break,
                Some(Line::Complete(l)) => Want::Complete(l.to_vec()),
                Some(Line::Unterminated(l)) => Want::Unterminated(l.to_vec()),
                Some(Line::TooLong) => Want::TooLong {
                    terminated: lines.skip_rest().unwrap(),
                },
            };
            out.push((lines.start(), lines.end(), want));
        }
        assert_eq!(lines.end(), bytes.len() as u64);
        out
    }

    #[test]
    fn lines_are_cut_at_the_bound_whatever_the_buffer() {
        let max = MAX_RECORD_LEN;
        let line = |n: usize, end: &[u8]| [vec![b'x'; n], end.to_vec()].concat();
        let inputs: Vec<Vec<u8>> = vec![
            Vec::new(),
            b"\n\n".to_vec(),
            b"a\nbc\nd".to_vec(),
            // On the bound: a record may be this long, terminated or not.
            line(max, b"\n"),
            line(max, b""),
            // One past it: too long, terminated or not, never torn.
            line(max + 1, b"\n"),
            line(max + 1, b""),
            [
                line(3, b"\n"),
                line(max + 1, b"\n"),
                line(5, b"\n"),
                line(2, b""),
            ]
            .concat(),
            [line(max, b"\n"), line(3 * max, b"")].concat(),
            [line(10, b"\n"), line(max - 1, b"\n"), line(max, b"")].concat(),
        ];
        for bytes in &inputs {
            let want = reference(bytes);
            // Buffers smaller than a line, around it, and larger than
            // everything: lines straddle refills in every way.
            for capacity in [1, 2, 7, 4096, max - 1, max, max + 1, max + 2, READ_BUFFER] {
                assert_eq!(read_lines(bytes, capacity), want, "capacity {capacity}");
            }
        }
    }

    #[test]
    fn the_longest_record_fits_well_within_the_bound() {
        // Every string escaped at its longest: keys and the status as
        // `\uXXXX` each, the name 100 surrogate pairs; the largest ids.
        let escape =
            |s: &str| -> String { s.chars().map(|c| format!("\\u{:04x}", c as u32)).collect() };
        let name = "\\ud83d\\ude00".repeat(crate::pet::MAX_NAME_CHARS);
        let max = i64::MAX;
        let body = format!(
            r#"{{"{}":{max},"{}":"{name}","{}":{max},"{}":"{}"}}"#,
            escape("id"),
            escape("name"),
            escape("categoryId"),
            escape("status"),
            escape("available"),
        );
        let line = format!(
            r#"{{"pet":{body},"crc32":"{:08x}"}}"#,
            crc32fast::hash(body.as_bytes())
        );
        let pet = decode_line(line.as_bytes()).unwrap();
        assert_eq!(pet.name().chars().count(), crate::pet::MAX_NAME_CHARS);
        assert_eq!(pet.status(), PetStatus::Available);
        // 20-digit numbers are out of range, hence the 2 bytes of slack.
        assert_eq!(line.len() + 2, LONGEST_COMPACT_RECORD);
        assert_eq!(LONGEST_COMPACT_RECORD, 1474);
        assert!(line.len() * 40 < MAX_RECORD_LEN);
    }

    #[test]
    fn save_aside_copies_exactly_holes_and_all_and_refuses_a_short_source() {
        let dir = scratch_dir("copy");
        let from = dir.join(JOURNAL_FILE);
        // Zeros at the start, in the middle, at the end, across chunks.
        let mut bytes = vec![0u8; 3 * READ_BUFFER + 10];
        bytes[READ_BUFFER + 5] = b'x';
        bytes[2 * READ_BUFFER..2 * READ_BUFFER + 3].copy_from_slice(b"abc");
        let len = bytes.len() as u64;
        let kept = save_aside_at(&dir, "removed", &mut &bytes[..], len, &from, SECS).unwrap();
        assert_eq!(fs::read(&kept).unwrap(), bytes);
        // Only `len` bytes, however long the source.
        let kept = save_aside_at(&dir, "removed", &mut &b"abcdef"[..], 4, &from, SECS).unwrap();
        assert_eq!(fs::read(&kept).unwrap(), b"abcd");
        // A source that ends early (the journal changed): an error naming
        // the journal, and no copy left behind.
        let before = fs::read_dir(&dir).unwrap().count();
        match save_aside_at(&dir, "torn", &mut &b"abc"[..], 4, &from, SECS) {
            Err(OpenError::Io { path, source }) => {
                assert_eq!(path, from);
                assert_eq!(source.kind(), io::ErrorKind::UnexpectedEof);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(fs::read_dir(&dir).unwrap().count(), before);
        fs::remove_dir_all(&dir).unwrap();
    }
}
