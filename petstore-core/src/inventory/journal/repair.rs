//! Checking and repairing a damaged journal: the operator's way out when
//! [`Inventory::open`](crate::Inventory::open) refuses a journal with
//! [`OpenError::Corrupt`].
//!
//! [`check_journal`] reads the journal and lists every line that does not
//! check out; [`repair_journal`] moves the first damaged line and every
//! line after it, byte for byte, into a side file
//! (`pets.journal.removed-<unix-seconds>`) and cuts the journal so that it
//! opens again. Both read the journal as a stream, memory bounded by the
//! file's pets (one byte each), whatever its bytes. What a repair removes
//! and why, and a line longer than any record: docs/durability.md,
//! "Repair".

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::dir_lock::lock_dir;
use super::files::{ensure_regular_file, ensure_regular_path, JOURNAL_FILE};
use super::lines::{Line, Lines};
use super::record::{decode_record, OrderStep, Record, StepKind, MAX_RECORD_LEN};
use super::save_aside::cut_aside;
use crate::inventory::error::{OpenError, TransitionError};
use crate::pet::{PetId, PetStatus};

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
    /// Transitions before the first bad line: kept with those pets.
    pub kept_transitions: u64,
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
    scan(&file, path.clone()).map_err(io_err)
}

/// Repairs the journal in `dir`: the first bad line and everything after
/// it move to a side file, and the journal is cut before it, durably. The
/// intact lines after it move too because pet ids are dense and given in
/// file order and a transition holds only against the records before it:
/// removing one line from the middle would leave a gap in the ids,
/// renumber the later pets, or apply a later transition to a status it
/// was not decided against (docs/durability.md, "Repair"). Holds the
/// data directory's lock meanwhile, so it refuses to run beside a server.
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
    let check = scan(&file, path.clone()).map_err(io_err)?;
    let Some(first) = check.bad.first() else {
        return Ok(JournalRepair {
            check,
            side_file: None,
        });
    };
    let side_file = cut_aside(dir, &file, first.offset, check.bytes_after_bad, "removed")?;
    Ok(JournalRepair {
        check,
        side_file: Some(side_file),
    })
}

/// Checks every line: each must be a record whose checksum holds; a pet
/// must have the next id, a transition must name a pet created before it
/// and be allowed by that pet's status then. Reads `journal` as a stream (see
/// `Lines`): a line too long to be a record is reported without being
/// held.
fn scan(journal: impl Read, path: PathBuf) -> io::Result<JournalCheck> {
    let mut report = JournalCheck {
        path,
        lines: 0,
        kept: 0,
        kept_transitions: 0,
        bad: Vec::new(),
        bad_total: 0,
        intact_after_bad: 0,
        bytes_after_bad: 0,
    };
    let mut lines = Lines::new(journal);
    let mut first_bad = None;
    let mut json = Vec::with_capacity(512);
    let mut statuses = Statuses::default();
    loop {
        let line_no = report.lines + 1;
        let problem = match lines.next_line()? {
            None => break,
            Some(Line::Complete(line)) => statuses
                .check(line, &mut json)
                .err()
                .map(|reason| (reason, false)),
            Some(Line::Unterminated(line)) => match statuses.check(line, &mut json) {
                Ok(()) => Some(("unterminated last line (no newline)".to_owned(), true)),
                Err(reason) => Some((format!("unterminated last line ({reason})"), true)),
            },
            // Never a torn write, even unterminated: no write of a record
            // leaves it. Its length is counted, its bytes not kept.
            Some(Line::TooLong) => {
                let terminated = lines.skip_rest()?;
                let len = lines.end() - lines.start();
                let what = if terminated {
                    "line"
                } else {
                    "unterminated last line"
                };
                Some((
                    format!(
                        "{what} of {len} bytes, longer than {MAX_RECORD_LEN}, the most a \
                         record can be: not a record, and not a torn write"
                    ),
                    false,
                ))
            }
        };
        report.lines = line_no;
        match problem {
            None if report.bad_total == 0 => match statuses.last_was_pet {
                true => report.kept += 1,
                false => report.kept_transitions += 1,
            },
            None => report.intact_after_bad += 1,
            Some((reason, torn)) => {
                statuses.damaged = true;
                first_bad.get_or_insert(lines.start());
                report.bad_total += 1;
                if report.bad.len() < MAX_LISTED {
                    report.bad.push(BadLine {
                        line: line_no,
                        offset: lines.start(),
                        bytes: lines.end() - lines.start(),
                        reason,
                        torn,
                    });
                }
            }
        }
    }
    if let Some(first_bad) = first_bad {
        report.bytes_after_bad = lines.end() - first_bad;
    }
    Ok(report)
}

/// What the check knows of each pet so far, to check the next record.
#[derive(Default)]
struct Statuses {
    /// Each pet's status by the current line, in id order up to the
    /// first gap (after damage: pets lost with a damaged line).
    of: Vec<PetStatus>,
    /// The largest pet id seen.
    last_id: u64,
    /// A bad line came before: later pets may follow a lost one.
    damaged: bool,
    /// The last record checked was a pet (else a transition).
    last_was_pet: bool,
    /// Each order's pet and whether it is still placed, in id order up
    /// to the first gap.
    orders: Vec<(PetId, bool)>,
    /// The largest order id seen.
    last_order: u64,
}

impl Statuses {
    /// Whether `line` is a record that may come next, and if not, why;
    /// a good one is taken into account.
    fn check(&mut self, line: &[u8], json: &mut Vec<u8>) -> Result<(), String> {
        match decode_record(line, json)?.0 {
            Record::Pet(id, status) => {
                let expected = self.last_id + 1;
                // After damage, a pet beyond the next id may follow pets
                // lost with it: intact, as far as a check can tell.
                let fits = id.get() == expected || (self.damaged && id.get() > expected);
                if !fits {
                    return Err(format!(
                        "expected pet id {expected}, found {id} (pets are in id order, 1, 2, 3, ...)"
                    ));
                }
                if id.get() == self.of.len() as u64 + 1 {
                    self.of.push(status);
                }
                self.last_id = id.get();
                self.last_was_pet = true;
            }
            Record::Transition(id, transition) => {
                if id.get() > self.last_id {
                    return Err(format!(
                        "{transition} of pet {id}, which no record before it created"
                    ));
                }
                // Beyond `of`: a pet after a gap, whose status is unknown.
                let index = usize::try_from(id.get() - 1).ok();
                if let Some(current) = index.and_then(|i| self.of.get_mut(i)) {
                    if !transition.allows(*current) {
                        let refused = TransitionError::Conflict {
                            id,
                            current: *current,
                            transition,
                        };
                        return Err(format!("a transition its pet could not take: {refused}"));
                    }
                    *current = transition.to_status();
                }
                self.last_was_pet = false;
            }
            Record::Order(step) => {
                self.check_step(&step)?;
                self.last_was_pet = false;
            }
            Record::OrderConflict(id, _) => {
                if id.get() > self.last_order {
                    return Err(format!(
                        "a kept conflict of order {id}, which no record before it placed"
                    ));
                }
                self.last_was_pet = false;
            }
            // A time changes nothing and may stand anywhere.
            Record::Time(_) => {}
            // A kept conflict changes nothing; it names a pet before it.
            Record::Conflict(id, _, transition) => {
                if id.get() > self.last_id {
                    return Err(format!(
                        "a kept conflict of {transition} of pet {id}, which no record before it created"
                    ));
                }
                self.last_was_pet = false;
            }
        }
        Ok(())
    }
}

impl Statuses {
    /// Whether an order's step may come next: a new order takes the next
    /// id and a pet that exists and is free; a close names a placed one.
    fn check_step(&mut self, step: &OrderStep) -> Result<(), String> {
        let id = step.id.get();
        let pet_status = |pet: PetId| {
            usize::try_from(pet.get() - 1)
                .ok()
                .and_then(|i| self.of.get(i).copied())
        };
        match &step.kind {
            StepKind::Place { pet, .. } | StepKind::Sale { pet, .. } => {
                let expected = self.last_order + 1;
                let fits = id == expected || (self.damaged && id > expected);
                if !fits {
                    return Err(format!(
                        "expected order id {expected}, found {id} (orders are in id order)"
                    ));
                }
                if pet.get() > self.last_id {
                    return Err(format!(
                        "order {id} of pet {pet}, which no record before it created"
                    ));
                }
                let placing = matches!(step.kind, StepKind::Place { .. });
                let free = match pet_status(*pet) {
                    Some(PetStatus::Available) => true,
                    Some(PetStatus::Pending) => !placing,
                    Some(PetStatus::Sold) => false,
                    None => true,
                };
                if !free {
                    return Err(format!(
                        "order {id} of pet {pet}, which was not free to take"
                    ));
                }
                let status = if placing {
                    PetStatus::Pending
                } else {
                    PetStatus::Sold
                };
                if let Some(i) = usize::try_from(pet.get() - 1)
                    .ok()
                    .filter(|&i| i < self.of.len())
                {
                    self.of[i] = status;
                }
                if id == self.orders.len() as u64 + 1 {
                    self.orders.push((*pet, placing));
                }
                self.last_order = id;
            }
            StepKind::Close(status) => {
                if id > self.last_order {
                    return Err(format!(
                        "a step of order {id}, which no record before it placed"
                    ));
                }
                let index = usize::try_from(id - 1).ok();
                if let Some((pet, placed)) = index.and_then(|i| self.orders.get_mut(i)) {
                    if !*placed {
                        return Err(format!("a step of order {id}, which was no longer placed"));
                    }
                    *placed = false;
                    let to = status.pet_status();
                    if let Some(i) = usize::try_from(pet.get() - 1)
                        .ok()
                        .filter(|&i| i < self.of.len())
                    {
                        self.of[i] = to;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_counted_past_the_listed_lines() {
        let bytes = "x\n".repeat(MAX_LISTED + 5);
        let report = scan(bytes.as_bytes(), PathBuf::from("j")).unwrap();
        assert_eq!(report.bad.len(), MAX_LISTED);
        assert_eq!(report.bad_total, MAX_LISTED as u64 + 5);
        assert_eq!((report.kept, report.intact_after_bad), (0, 0));
        assert_eq!(report.bytes_after_bad, bytes.len() as u64);
        assert!(report.is_corrupt());
    }
}
