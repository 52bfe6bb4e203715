//! The limiter state file, `DIR/limits.state`: the local backend's
//! [`Snapshot`] on disk, so that a restart goes on where the last process
//! was (docs/contract.md, "Rate limits": written at shutdown and at least every second, so a
//! crash forgets at most the last second).
//!
//! - **Format:** JSON, version 1. A key is named by its SHA-256 in hex and
//!   its quota's fingerprint (a [`StateId`]), never by the key. Every time
//!   is absolute (nanoseconds since the Unix epoch; a TAT is that times
//!   the bucket's capacity), so the numbers mean the same in the next
//!   process. The 128-bit numbers are decimal strings (JSON readers
//!   often keep numbers as doubles).
//! - **Atomic:** written to `limits.state.tmp`, fsynced, renamed over the
//!   file, and the directory fsynced: a crash leaves the old file or the
//!   new one, never a mix.
//! - **Off the request path:** [`Writer`] is a thread of its own that
//!   takes a snapshot every [`INTERVAL`] and writes only when it changed.
//! - **A damaged file** does not stop the server: it is moved aside to
//!   `limits.state.corrupt`, a warning names it, and the limits start
//!   fresh (docs/operating.md, "Operating it": the worst case is the behaviour of a
//!   server without the file, and refusing to start over limiter state
//!   would turn a damaged cache into an outage).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use petstore_core::{
    limit::{AnonymousState, KeyLimiterState},
    Clock, Quota, Timestamp,
};
use serde::{Deserialize, Serialize};

use super::snapshot::Snapshot;
use super::snapshot_take_restore;
use crate::keys::{Keys, StateId};
use crate::util::file_read::read_regular_file;
use crate::util::hex::{hex, parse_lowercase_digest};
use crate::{log_error, log_info};

/// The file's name in the data directory.
pub const FILE_NAME: &str = "limits.state";

/// How often the writer looks for a change: under a second, so a crash
/// forgets at most the last second even with the write's own time.
pub const INTERVAL: Duration = Duration::from_millis(500);

/// The largest state file read back: 100,000 client addresses (the
/// anonymous limiter's default capacity) take about 8 MB.
const FILE_CAP: u64 = 256 << 20;

const VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileV1 {
    version: u32,
    /// When it was written (informative).
    saved_at_unix_nanos: u64,
    keys: Vec<KeyRecord>,
    anonymous: AnonymousRecord,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct KeyRecord {
    sha256: String,
    /// `m{perMinute}/d{perDay}`.
    quota: String,
    minute_tat: String,
    day_tat: String,
    refusals: Vec<u64>,
    banned_until: Option<u64>,
    retry_at: Option<u64>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct AnonymousRecord {
    per_minute: u32,
    /// `[client, tat]`, both decimal.
    clients: Vec<[String; 2]>,
}

/// The file's bytes for `snapshot`, taken at `now`.
pub fn encode(snapshot: &Snapshot, now: Timestamp) -> Vec<u8> {
    let keys = snapshot
        .keys
        .iter()
        .map(|(id, s)| KeyRecord {
            sha256: hex(&id.digest),
            quota: StateId::quota_fingerprint(id.quota),
            minute_tat: s.minute_tat.to_string(),
            day_tat: s.day_tat.to_string(),
            refusals: s.refusals.iter().map(|t| t.as_unix_nanos()).collect(),
            banned_until: s.banned_until.map(Timestamp::as_unix_nanos),
            retry_at: s.retry_at.map(Timestamp::as_unix_nanos),
        })
        .collect();
    let file = FileV1 {
        version: VERSION,
        saved_at_unix_nanos: now.as_unix_nanos(),
        keys,
        anonymous: AnonymousRecord {
            per_minute: snapshot.anonymous.per_minute,
            clients: snapshot
                .anonymous
                .clients
                .iter()
                .map(|(client, tat)| [client.to_string(), tat.to_string()])
                .collect(),
        },
    };
    // Plain structs of strings and integers: serialising cannot fail.
    serde_json::to_vec(&file).unwrap_or_default()
}

fn parse_quota(s: &str) -> Option<Quota> {
    let (m, d) = s.strip_prefix('m')?.split_once("/d")?;
    Quota::new(m.parse().ok()?, d.parse().ok()?).ok()
}

/// The snapshot in a file's bytes. The error says what is wrong, naming
/// the record by its position (the file holds no secret, but a position
/// is all an operator needs).
pub fn decode(bytes: &[u8]) -> Result<Snapshot, String> {
    let file: FileV1 = serde_json::from_slice(bytes).map_err(|e| {
        format!(
            "not a version {VERSION} state file (line {} column {})",
            e.line(),
            e.column()
        )
    })?;
    if file.version != VERSION {
        return Err(format!(
            "version {} (this server reads version {VERSION})",
            file.version
        ));
    }
    let number = |s: &str, what: &str, i: usize| {
        s.parse::<u128>()
            .map_err(|_| format!("keys[{i}].{what} is not a whole number"))
    };
    let mut keys = Vec::with_capacity(file.keys.len());
    for (i, k) in file.keys.into_iter().enumerate() {
        let digest = parse_lowercase_digest(&k.sha256)
            .ok_or(format!("keys[{i}].sha256 is not 64 hex digits"))?;
        let quota = parse_quota(&k.quota).ok_or(format!("keys[{i}].quota is not m<n>/d<n>"))?;
        let state = KeyLimiterState {
            minute_tat: number(&k.minute_tat, "minuteTat", i)?,
            day_tat: number(&k.day_tat, "dayTat", i)?,
            refusals: k
                .refusals
                .into_iter()
                .map(Timestamp::from_unix_nanos)
                .collect(),
            banned_until: k.banned_until.map(Timestamp::from_unix_nanos),
            retry_at: k.retry_at.map(Timestamp::from_unix_nanos),
        };
        keys.push((StateId { digest, quota }, state));
    }
    let mut clients = Vec::with_capacity(file.anonymous.clients.len());
    for (i, [client, tat]) in file.anonymous.clients.iter().enumerate() {
        let pair = client.parse::<u128>().ok().zip(tat.parse::<u128>().ok());
        clients.push(pair.ok_or(format!("anonymous.clients[{i}] is not two whole numbers"))?);
    }
    Ok(Snapshot {
        keys,
        anonymous: AnonymousState {
            per_minute: file.anonymous.per_minute,
            clients,
        },
    })
}

/// Writes `bytes` to `path` atomically: a temporary file beside it,
/// fsynced, renamed over it, and the directory fsynced so the rename
/// itself is durable.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("state.tmp");
    // Whatever is at the temporary name (a crash's leftover, or a symlink
    // planted to make the server overwrite another file of its user,
    // CWE-59) is removed, never written through: `create_new` is
    // O_CREAT|O_EXCL, which follows no symlink, so one that reappears
    // there meanwhile fails the write instead.
    match std::fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, path)?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

/// Reads the state file at `path`: `Ok(None)` when there is none; on a
/// damaged or unreadable file, a warning naming it, the file moved aside
/// (when it exists) and `Ok(None)`: the limits start fresh.
pub fn load(path: &Path) -> Option<Snapshot> {
    let problem = match read_regular_file(path, FILE_CAP) {
        Ok((bytes, _)) => match decode(&bytes) {
            Ok(snapshot) => return Some(snapshot),
            Err(e) => e,
        },
        Err(e) if e.is_not_found() => return None,
        Err(e) => e.to_string(),
    };
    let aside = path.with_extension("state.corrupt");
    let moved = match std::fs::rename(path, &aside) {
        Ok(()) => format!("it was moved to {}", aside.display()),
        Err(e) => format!("it could not be moved aside ({e}) and will be overwritten"),
    };
    log_error!(
        "WARNING: limiter state file {} is unreadable: {problem}; {moved}. \
         Every key's limits start fresh (full buckets, no bans)",
        path.display()
    );
    None
}

/// At start: gives the keys of `keys` (and its client addresses) the
/// state saved in `path`, logging what was restored; returns the saved
/// snapshot (what the file holds, for [`Writer::spawn`]).
pub fn restore(path: &Path, keys: &Keys, now: Timestamp) -> Option<Snapshot> {
    let snapshot = load(path)?;
    let r = snapshot_take_restore::restore(keys, snapshot.clone(), now);
    log_info!(
        "limits: restored {} key(s) and {} client address(es) from {} ({} saved key(s) gone or with a new quota start fresh)",
        r.keys,
        r.clients,
        path.display(),
        r.dropped
    );
    Some(snapshot)
}

/// The background writer of the state file.
#[derive(Debug)]
pub struct Writer {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<()>,
}

impl Writer {
    /// Starts writing the state of the limiters of the key table that
    /// `keys` gives (the one in force, which a reload replaces) to `path`
    /// every [`INTERVAL`] when it changed, at the time `clock` tells.
    /// `last` is what the file holds now (the snapshot restored at
    /// start), so an unchanged state is not rewritten.
    pub fn spawn(
        keys: impl Fn() -> Arc<Keys> + Send + 'static,
        clock: Arc<dyn Clock>,
        path: PathBuf,
        last: Option<Snapshot>,
    ) -> std::io::Result<Writer> {
        let (stop, stopped) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("limits-state".into())
            .spawn(move || run(&keys, &*clock, &path, last, &stopped))?;
        Ok(Writer { stop, thread })
    }

    /// Writes the state one last time and stops (at shutdown, after the
    /// last request).
    pub fn finish(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

fn run(
    keys: &dyn Fn() -> Arc<Keys>,
    clock: &dyn Clock,
    path: &Path,
    mut last: Option<Snapshot>,
    stopped: &mpsc::Receiver<()>,
) {
    let mut failing: Option<String> = None;
    let mut next = Instant::now() + INTERVAL;
    loop {
        let stop = match stopped.recv_timeout(next.saturating_duration_since(Instant::now())) {
            Err(mpsc::RecvTimeoutError::Timeout) => false,
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => true,
        };
        next += INTERVAL;
        let now = clock.now();
        let keys = keys();
        let snapshot = snapshot_take_restore::snapshot(&keys, now);
        drop(keys);
        if last.as_ref() != Some(&snapshot) {
            match write_atomic(path, &encode(&snapshot, now)) {
                Ok(()) => {
                    if failing.take().is_some() {
                        log_info!("limiter state file {} written again", path.display());
                    }
                    last = Some(snapshot);
                }
                // Logged once per kind of failure, not twice a second.
                Err(e) => {
                    let message = e.to_string();
                    if failing.as_ref() != Some(&message) {
                        log_error!(
                            "cannot write limiter state file {}: {message}; limits go on in memory, and a restart would refill them",
                            path.display()
                        );
                        failing = Some(message);
                    }
                }
            }
        }
        if stop {
            return;
        }
        if next < Instant::now() {
            next = Instant::now() + INTERVAL;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use petstore_core::{BanPolicy, KeyLimiter};

    #[test]
    fn round_trips_and_never_holds_a_key() {
        let quota = Quota::new(60, 10).unwrap();
        let limiter = KeyLimiter::new(quota, BanPolicy::default());
        let t = Timestamp::from_unix_secs(1_700_000_000);
        for _ in 0..4 {
            limiter.check(t);
        }
        let digest = crate::keys::digest("sk-live-secret");
        let snapshot = Snapshot {
            keys: vec![(StateId { digest, quota }, limiter.state())],
            anonymous: AnonymousState {
                per_minute: 60,
                clients: vec![(u128::from(u32::MAX), u128::MAX)],
            },
        };
        let bytes = encode(&snapshot, t);
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(!text.contains("sk-live"));
        assert!(text.contains(&hex(&digest)));
        assert_eq!(decode(&bytes).unwrap(), snapshot);
    }

    #[test]
    fn refuses_damaged_files_saying_where() {
        for (bytes, want) in [
            (&b"{"[..], "line 1 column 1"),
            (br#"{"version":2,"savedAtUnixNanos":0,"keys":[],"anonymous":{"perMinute":1,"clients":[]}}"#, "version 2"),
            (br#"{"version":1,"savedAtUnixNanos":0,"keys":[{"sha256":"x","quota":"m1/d1","minuteTat":"0","dayTat":"0","refusals":[],"bannedUntil":null,"retryAt":null}],"anonymous":{"perMinute":1,"clients":[]}}"#, "keys[0].sha256"),
            (br#"{"version":1,"savedAtUnixNanos":0,"keys":[],"anonymous":{"perMinute":1,"clients":[["1","x"]]}}"#, "anonymous.clients[0]"),
        ] {
            let err = decode(bytes).unwrap_err();
            assert!(err.contains(want), "{err}");
        }
    }

    #[test]
    fn writes_atomically_and_moves_a_damaged_file_aside() {
        let dir = std::env::temp_dir().join(format!("petstore-state-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(FILE_NAME);
        assert_eq!(load(&path), None);
        let snapshot = Snapshot::default();
        write_atomic(&path, &encode(&snapshot, Timestamp::default())).unwrap();
        assert!(!path.with_extension("state.tmp").exists());
        assert_eq!(load(&path), Some(snapshot));
        std::fs::write(&path, b"garbage").unwrap();
        assert_eq!(load(&path), None);
        assert!(!path.exists());
        assert_eq!(
            std::fs::read(path.with_extension("state.corrupt")).unwrap(),
            b"garbage"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
