//! The files' side of a compaction: reading what a snapshot and the
//! closed segments after it hold, and removing what a newer snapshot
//! has made redundant. The sequence (close the live journal into a
//! segment, build the state of the closed files, write the snapshot,
//! prune) and why a crash at any point loses nothing:
//! docs/durability.md, "Compaction".

use std::fs;
use std::io;
use std::path::Path;

use super::files::{open_regular, sync_dir};
use super::layout::{segment_path, snapshot_path, Layout};
use super::replay::replay;
use super::snapshot::{read_snapshot_file, Restore};
use crate::inventory::error::OpenError;

/// What [`read_closed`] read.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ClosedRead {
    /// Pets in all, by the end of the last segment.
    pub(crate) pets: u64,
    /// Transitions and order steps replayed from segments.
    pub(crate) transitions: u64,
    /// The snapshot's size in bytes (0 without one).
    pub(crate) snapshot_bytes: u64,
    /// The segments' sizes in bytes.
    pub(crate) segment_bytes: u64,
    /// Segments read.
    pub(crate) segments: u64,
}

/// Gives `restore` snapshot `base` (when there is one), then closed
/// segments `base + 1` to `upto` in order. A snapshot is read whole or
/// refused; a closed segment must end in a whole record (it was closed
/// between two batches), so a torn one is corruption too.
pub(crate) fn read_closed(
    dir: &Path,
    base: Option<u64>,
    upto: u64,
    restore: &mut dyn Restore,
) -> Result<ClosedRead, OpenError> {
    let mut read = ClosedRead::default();
    if let Some(n) = base {
        let snapshot = read_snapshot_file(dir, n, restore)?;
        read.pets = snapshot.header.pets;
        read.snapshot_bytes = snapshot.bytes;
    }
    for n in base.map_or(1, |b| b + 1)..=upto {
        let path = segment_path(dir, n);
        let file = open_regular(&path)?;
        let replayed = replay(&file, &path, read.pets, restore)?;
        if let Some(line) = replayed.torn_line {
            return Err(OpenError::Corrupt {
                path,
                line,
                reason: "an unterminated last line in a closed segment (it was closed between \
                         two whole batches)"
                    .into(),
            });
        }
        read.pets += replayed.pets;
        read.transitions += replayed.transitions;
        read.segment_bytes += replayed.len;
        read.segments += 1;
    }
    Ok(read)
}

/// Removes what snapshot `newest` (durable) makes redundant: the
/// segments it covers, and every snapshot but it and `previous` (one
/// previous is kept), and half-written snapshots. The directory is synced
/// first, so the snapshot's name is on disk before anything it replaces
/// goes, and after.
pub(crate) fn prune(dir: &Path, newest: u64, previous: Option<u64>) -> io::Result<()> {
    sync_dir(dir)?;
    let layout = Layout::scan(dir)?;
    for n in layout.segments.iter().filter(|&&n| n <= newest) {
        remove(&segment_path(dir, *n))?;
    }
    for n in &layout.snapshots {
        if *n != newest && Some(*n) != previous {
            remove(&snapshot_path(dir, *n))?;
        }
    }
    remove_temps(&layout)?;
    sync_dir(dir)
}

/// Removes the snapshots `layout` found half-written (a compaction
/// stopped by a crash, or failed).
pub(crate) fn remove_temps(layout: &Layout) -> io::Result<()> {
    layout.temps.iter().try_for_each(|temp| remove(temp))
}

/// Removes `path`; one already gone is fine.
fn remove(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
