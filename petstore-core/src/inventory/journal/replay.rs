//! Replay: the journal read back on open, record by record, and what it
//! found ([`Recovery`], with a [`TornTail`] when a torn final record was
//! cut off). Transitions are applied in file order, each checked against
//! the status its pet has by then.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::lines::{too_long_reason, Line, Lines};
use super::record::{decode_record, Record};
use super::snapshot::Restore;
use crate::inventory::error::OpenError;

/// What opening the journal found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovery {
    /// The journal file.
    pub path: PathBuf,
    /// Pets recovered, from the snapshot and the records after it.
    pub pets: u64,
    /// Transitions and order steps replayed after the snapshot, in file
    /// order.
    pub transitions: u64,
    /// The snapshot read first, when a compaction left one.
    pub snapshot: Option<PathBuf>,
    /// Closed segments replayed between the snapshot and the journal.
    pub segments: u64,
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

/// What [`replay`] read.
pub(super) struct Replayed {
    /// Pets replayed.
    pub(super) pets: u64,
    /// Transitions replayed.
    pub(super) transitions: u64,
    /// Length of the valid prefix of the file.
    pub(super) good_len: u64,
    /// Bytes read in all: the file's length.
    pub(super) len: u64,
    /// The line of a torn final record, if there is one.
    pub(super) torn_line: Option<u64>,
}

/// Reads every record of `file` and gives it to `restore` (a pet with its
/// canonical JSON; a transition with no bytes; either, or a kept
/// conflict, with its idempotency key), which refuses a transition
/// its pet's status does not allow, or of a pet not created yet, by
/// returning why: that is corruption like a bad checksum. `pets_before`
/// pets came before the file (in a snapshot or earlier segments).
pub(super) fn replay(
    file: impl Read,
    path: &Path,
    pets_before: u64,
    restore: &mut dyn Restore,
) -> Result<Replayed, OpenError> {
    let corrupt = |line: u64, reason: String| OpenError::Corrupt {
        path: path.to_path_buf(),
        line,
        reason,
    };
    let mut lines = Lines::new(file);
    let mut pets = 0u64;
    let mut transitions = 0u64;
    let mut line_no = 0u64;
    let mut json = Vec::with_capacity(512);
    loop {
        line_no += 1;
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
                    transitions,
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
        let (record, keyed) = checked.map_err(|reason| corrupt(line_no, reason))?;
        match &record {
            Record::Pet(id, _) if id.get() != pets_before + pets + 1 => {
                return Err(corrupt(
                    line_no,
                    format!("expected pet id {}, found {id}", pets_before + pets + 1),
                ));
            }
            Record::Pet(..) => pets += 1,
            Record::Transition(..) | Record::Order(_) => transitions += 1,
            Record::Conflict(..) | Record::OrderConflict(..) | Record::Time(_) => {}
        }
        restore
            .record(record, &json, keyed)
            .map_err(|reason| corrupt(line_no, reason))?;
    }
    Ok(Replayed {
        pets,
        transitions,
        good_len: lines.end(),
        len: lines.end(),
        torn_line: None,
    })
}
