//! Checking and repairing a damaged journal: the operator's way out when
//! [`Inventory::open`](crate::Inventory::open) refuses a journal with
//! [`OpenError::Corrupt`].
//!
//! [`check_journal`] reads the journal and lists every line that does not
//! check out; [`repair_journal`] moves the damaged part into a side file
//! (`pets.journal.removed-<unix-seconds>`) and cuts the journal so that it
//! opens again.
//!
//! # What a repair removes, and why
//!
//! Pet ids are dense and are the line numbers: line *n* holds pet *n*, and
//! an acknowledged id must never come to name another pet. Removing one
//! damaged line from the middle would either leave a gap (which the
//! inventory does not have) or renumber every later pet. So a repair cuts
//! the journal at the first damaged line: that line and every line after
//! it, damaged or not, go to the side file, byte for byte, and the report
//! says how many of the moved lines were intact. When the damage is the
//! last line (the common case: a bad sector, a torn write), exactly that
//! line moves.

use std::fs::{File, OpenOptions};
use std::io::Read as _;
use std::path::{Path, PathBuf};

use crate::error::OpenError;
use crate::journal::{
    cut_aside, decode_record, ensure_regular_file, ensure_regular_path, lock_dir, JOURNAL_FILE,
};

/// At most this many damaged lines are described one by one; the rest
/// are only counted (a journal of garbage must not make a huge report).
pub const MAX_LISTED: usize = 1000;

/// One line of the journal that does not check out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadLine {
    /// Its line number, 1-based.
    pub line: u64,
    /// Its byte offset in the journal.
    pub offset: u64,
    /// Its length in bytes, newline included.
    pub bytes: u64,
    /// What is wrong with it.
    pub reason: String,
    /// An unterminated last line: a torn write, which a start cuts off by
    /// itself (keeping its bytes aside), not corruption.
    pub torn: bool,
}

/// What [`check_journal`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalCheck {
    /// The journal file.
    pub path: PathBuf,
    /// Lines in the journal (a last, unterminated one included).
    pub lines: u64,
    /// Pets before the first bad line: what a start, or a repair, keeps.
    pub kept: u64,
    /// The bad lines, in order; at most [`MAX_LISTED`] of them.
    pub bad: Vec<BadLine>,
    /// How many lines are bad in all.
    pub bad_total: u64,
    /// Intact lines after the first bad one: pets that a repair moves to
    /// the side file with the damage, because ids must stay dense.
    pub intact_after_bad: u64,
    /// Bytes from the first bad line to the end: what a repair moves.
    pub bytes_after_bad: u64,
}

impl JournalCheck {
    /// No bad line at all.
    pub fn is_clean(&self) -> bool {
        self.bad_total == 0
    }

    /// Damage that stops a start (anything but a torn last line).
    pub fn is_corrupt(&self) -> bool {
        self.bad.iter().any(|b| !b.torn)
    }
}

/// What [`repair_journal`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalRepair {
    /// What the journal held before the repair.
    pub check: JournalCheck,
    /// The side file that now holds the removed lines, byte for byte;
    /// `None` when there was nothing to remove.
    pub side_file: Option<PathBuf>,
}

/// Reads the journal in `dir` and reports every line that does not check
/// out, without changing anything. It takes no lock, so it can run beside
/// a server (whose last line may then be caught half-written).
///
/// # Errors
///
/// [`OpenError::Io`] if the journal cannot be read (a missing one
/// included).
pub fn check_journal(dir: impl AsRef<Path>) -> Result<JournalCheck, OpenError> {
    let path = dir.as_ref().join(JOURNAL_FILE);
    let io_err = |source| OpenError::Io {
        path: path.clone(),
        source,
    };
    ensure_regular_path(&path).map_err(io_err)?;
    let file = File::open(&path).map_err(io_err)?;
    ensure_regular_file(&file).map_err(io_err)?;
    let mut bytes = Vec::new();
    (&file).read_to_end(&mut bytes).map_err(io_err)?;
    Ok(scan(&bytes, path))
}

/// Repairs the journal in `dir`: the first bad line and everything after
/// it move to a side file (see the module documentation for why the
/// intact lines after it move too), and the journal is cut before it,
/// durably. Holds the data directory's lock meanwhile, so it refuses to
/// run beside a server.
///
/// # Errors
///
/// [`OpenError::Locked`] while a server uses the directory;
/// [`OpenError::Io`] if the journal cannot be read, the side file cannot
/// be written (a half-written one is removed), or the cut fails.
pub fn repair_journal(dir: impl AsRef<Path>) -> Result<JournalRepair, OpenError> {
    let dir = dir.as_ref();
    let _lock = lock_dir(dir)?;
    let path = dir.join(JOURNAL_FILE);
    let io_err = |source| OpenError::Io {
        path: path.clone(),
        source,
    };
    ensure_regular_path(&path).map_err(io_err)?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(io_err)?;
    ensure_regular_file(&file).map_err(io_err)?;
    // Read through the handle that will be cut, not the path again.
    let mut bytes = Vec::new();
    (&file).read_to_end(&mut bytes).map_err(io_err)?;
    let check = scan(&bytes, path.clone());
    let Some(first) = check.bad.first() else {
        return Ok(JournalRepair {
            check,
            side_file: None,
        });
    };
    let cut = usize::try_from(first.offset).unwrap_or(bytes.len());
    let side_file = cut_aside(dir, &file, &bytes, cut, "removed")?;
    Ok(JournalRepair {
        check,
        side_file: Some(side_file),
    })
}

/// Checks every line: each must be a record whose checksum holds and
/// whose pet id is its line number.
fn scan(bytes: &[u8], path: PathBuf) -> JournalCheck {
    let mut report = JournalCheck {
        path,
        lines: 0,
        kept: 0,
        bad: Vec::new(),
        bad_total: 0,
        intact_after_bad: 0,
        bytes_after_bad: 0,
    };
    let mut offset = 0usize;
    let mut json = Vec::with_capacity(512);
    while offset < bytes.len() {
        report.lines += 1;
        let line_no = report.lines;
        let rest = &bytes[offset..];
        let (line, complete) = match rest.iter().position(|b| *b == b'\n') {
            Some(end) => (&rest[..end], true),
            None => (rest, false),
        };
        let len = line.len() + usize::from(complete);
        let checked = match decode_record(line, &mut json) {
            Ok((id, _)) if id.get() == line_no => Ok(()),
            Ok((id, _)) => Err(format!(
                "expected pet id {line_no}, found {id} (line n holds pet n)"
            )),
            Err(reason) => Err(reason),
        };
        let problem = match (complete, checked) {
            (true, Ok(())) => None,
            (true, Err(reason)) => Some((reason, false)),
            (false, Ok(())) => Some(("unterminated last line (no newline)".to_owned(), true)),
            (false, Err(reason)) => Some((format!("unterminated last line ({reason})"), true)),
        };
        match problem {
            None if report.bad_total == 0 => report.kept += 1,
            None => report.intact_after_bad += 1,
            Some((reason, torn)) => {
                if report.bad_total == 0 {
                    report.bytes_after_bad = (bytes.len() - offset) as u64;
                }
                report.bad_total += 1;
                if report.bad.len() < MAX_LISTED {
                    report.bad.push(BadLine {
                        line: line_no,
                        offset: offset as u64,
                        bytes: len as u64,
                        reason,
                        torn,
                    });
                }
            }
        }
        offset += len;
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_counted_past_the_listed_lines() {
        let bytes = "x\n".repeat(MAX_LISTED + 5);
        let report = scan(bytes.as_bytes(), PathBuf::from("j"));
        assert_eq!(report.bad.len(), MAX_LISTED);
        assert_eq!(report.bad_total, MAX_LISTED as u64 + 5);
        assert_eq!((report.kept, report.intact_after_bad), (0, 0));
        assert_eq!(report.bytes_after_bad, bytes.len() as u64);
        assert!(report.is_corrupt());
    }
}
