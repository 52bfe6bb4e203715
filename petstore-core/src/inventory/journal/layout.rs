//! The data directory's files after compactions: the live journal
//! ([`JOURNAL_FILE`](super::JOURNAL_FILE)), the closed segments before it, and the snapshots
//! that replace them. Their names, and what a directory holds.
//!
//! Segment `n` (`pets-0000000n.journal`) is the live journal as it stood
//! when the `n`th compaction closed it; snapshot `n`
//! (`pets-0000000n.snapshot`) is the state after every record up to the
//! end of segment `n`. A start reads the newest snapshot, then the
//! segments after it in order, then the live journal. Names sort as
//! their numbers do (zero-padded), so a listing reads in order too.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

const PREFIX: &str = "pets-";
const SEGMENT_SUFFIX: &str = ".journal";
const SNAPSHOT_SUFFIX: &str = ".snapshot";
/// A snapshot being written: renamed into place once whole and synced.
const TEMP_SUFFIX: &str = ".snapshot.tmp";

/// Why a start, a check or a repair refuses a directory whose closed
/// segments do not follow on.
pub(crate) const MISSING_SEGMENT: &str = "this closed segment is missing: the snapshot before \
     it and the segments after it do not join up";

/// Closed segment `n`'s path.
pub(crate) fn segment_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{PREFIX}{n:08}{SEGMENT_SUFFIX}"))
}

/// Snapshot `n`'s path.
pub(crate) fn snapshot_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{PREFIX}{n:08}{SNAPSHOT_SUFFIX}"))
}

/// Snapshot `n`'s path while it is written.
pub(crate) fn temp_snapshot_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{PREFIX}{n:08}{TEMP_SUFFIX}"))
}

/// What a data directory holds besides the live journal.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Snapshot numbers, ascending.
    pub(crate) snapshots: Vec<u64>,
    /// Closed segment numbers, ascending.
    pub(crate) segments: Vec<u64>,
    /// Snapshots a crash left half-written.
    pub(crate) temps: Vec<PathBuf>,
}

impl Layout {
    /// Reads `dir`'s listing (a missing directory holds nothing).
    pub(crate) fn scan(dir: &Path) -> io::Result<Layout> {
        let mut layout = Layout::default();
        let entries = match fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(layout),
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if numbered(name, TEMP_SUFFIX).is_some() {
                layout.temps.push(entry.path());
            } else if let Some(n) = numbered(name, SNAPSHOT_SUFFIX) {
                layout.snapshots.push(n);
            } else if let Some(n) = numbered(name, SEGMENT_SUFFIX) {
                layout.segments.push(n);
            }
        }
        layout.snapshots.sort_unstable();
        layout.segments.sort_unstable();
        Ok(layout)
    }

    /// The newest snapshot's number, if there is one.
    pub(crate) fn newest_snapshot(&self) -> Option<u64> {
        self.snapshots.last().copied()
    }

    /// The closed segments a start replays after the newest snapshot, in
    /// order; `Err` names the first one missing (segments are numbered
    /// without gaps from the snapshot's, or from 1 with none).
    pub(crate) fn segments_to_replay(&self) -> Result<Vec<u64>, u64> {
        let base = self.newest_snapshot().unwrap_or(0);
        let after: Vec<u64> = self
            .segments
            .iter()
            .copied()
            .filter(|&n| n > base)
            .collect();
        for (i, &n) in after.iter().enumerate() {
            let expected = base + 1 + i as u64;
            if n != expected {
                return Err(expected);
            }
        }
        Ok(after)
    }

    /// The number the next closed segment takes.
    pub(crate) fn next_segment(&self) -> u64 {
        let newest = self.segments.last().copied().unwrap_or(0);
        newest.max(self.newest_snapshot().unwrap_or(0)) + 1
    }
}

/// `n` when `name` is `pets-<digits><suffix>`.
fn numbered(name: &str, suffix: &str) -> Option<u64> {
    let digits = name.strip_prefix(PREFIX)?.strip_suffix(suffix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_others_are_ignored() {
        let dir = std::env::temp_dir().join(format!("petstore-layout-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        for path in [
            segment_path(&dir, 2),
            segment_path(&dir, 3),
            snapshot_path(&dir, 1),
            snapshot_path(&dir, 2),
            temp_snapshot_path(&dir, 3),
            dir.join("pets.journal.torn-17"),
            dir.join("pets-x.journal"),
            dir.join("pets-.snapshot"),
        ] {
            fs::write(path, b"").unwrap();
        }
        let layout = Layout::scan(&dir).unwrap();
        assert_eq!(layout.snapshots, [1, 2]);
        assert_eq!(layout.segments, [2, 3]);
        assert_eq!(layout.temps, [temp_snapshot_path(&dir, 3)]);
        // Segment 2 is covered by snapshot 2: only 3 is replayed.
        assert_eq!(layout.segments_to_replay(), Ok(vec![3]));
        assert_eq!(layout.next_segment(), 4);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_segment_is_named() {
        let layout = Layout {
            snapshots: vec![1],
            segments: vec![3],
            temps: Vec::new(),
        };
        assert_eq!(layout.segments_to_replay(), Err(2));
        let none = Layout {
            segments: vec![2],
            ..Layout::default()
        };
        assert_eq!(none.segments_to_replay(), Err(1));
    }
}
