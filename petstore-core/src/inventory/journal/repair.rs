//! Checking and repairing a damaged journal: the operator's way out when
//! [`Inventory::open`](crate::Inventory::open) refuses a journal with
//! [`OpenError::Corrupt`].
//!
//! [`check_journal`] reads the journal (the newest snapshot, the closed
//! segments after it, then the live file, as a start does) and lists
//! every line that does not check out; [`repair_journal`] moves the first
//! damaged line and every line after it, byte for byte, into a side file
//! (`pets.journal.removed-<unix-seconds>`), and every later segment whole
//! beside it, so that the journal opens again. A damaged snapshot is
//! found but not repaired: the history it replaced is gone. Both read the journal as a stream, memory bounded by the
//! file's pets (one byte each), whatever its bytes. What a repair removes
//! and why, and a line longer than any record: docs/durability.md,
//! "Repair".

use std::fs::OpenOptions;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::dir_lock::lock_dir;
use super::files::{
    ensure_regular_file, ensure_regular_path, open_regular, sync_dir, JOURNAL_FILE,
};
use super::layout::{segment_path, snapshot_path, Layout, MISSING_SEGMENT};
use super::lines::{Line, Lines};
use super::record::{decode_record, OrderStep, Record, StepKind, MAX_RECORD_LEN};
use super::save_aside::cut_aside;
use super::snapshot::{read_snapshot_file, Item, Restore, SnapshotHeader};
use crate::idempotency::Keyed;
use crate::inventory::error::{OpenError, TransitionError};
use crate::order::OrderStatus;
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
    /// What a start reads before this file: the newest snapshot and the
    /// closed segments after it, each checked the same way, in that
    /// order (empty before any compaction). Pets and transitions there
    /// are not counted in `kept` and `kept_transitions`.
    pub earlier: Vec<JournalCheck>,
}

impl JournalCheck {
    /// No bad line at all, in this file or an earlier one.
    pub fn is_clean(&self) -> bool {
        self.bad_total == 0 && self.earlier.iter().all(JournalCheck::is_clean)
    }

    /// Damage that stops a start (anything but a torn last line of the
    /// live journal), in this file or an earlier one.
    pub fn is_corrupt(&self) -> bool {
        self.bad.iter().any(|b| !b.torn) || self.earlier.iter().any(JournalCheck::is_corrupt)
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
    /// Files after the damaged one, moved aside whole (renamed, or for
    /// the live journal copied and emptied): what a start would have read
    /// after the removed lines.
    pub moved: Vec<PathBuf>,
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
    let dir = dir.as_ref();
    let path = dir.join(JOURNAL_FILE);
    let file = open_regular(&path)?;
    let mut statuses = Statuses::default();
    let earlier = check_closed(dir, &mut statuses)?;
    let mut report =
        scan(&file, path.clone(), &mut statuses, false).map_err(|source| OpenError::Io {
            path: path.clone(),
            source,
        })?;
    report.earlier = earlier;
    Ok(report)
}

/// Checks the newest snapshot and the closed segments after it, leaving
/// in `statuses` what they hold for the live journal's check.
fn check_closed(dir: &Path, statuses: &mut Statuses) -> Result<Vec<JournalCheck>, OpenError> {
    let layout = Layout::scan(dir).map_err(|source| OpenError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut checks = Vec::new();
    if let Some(n) = layout.newest_snapshot() {
        let mut check = JournalCheck::empty(snapshot_path(dir, n));
        match read_snapshot_file(dir, n, statuses) {
            Ok(read) => {
                check.lines = read.header.pets + read.header.orders;
                check.kept = read.header.pets;
            }
            Err(OpenError::Corrupt { line, reason, .. }) => {
                statuses.damaged = true;
                check.lines = line;
                check.bad_total = 1;
                check.bad.push(BadLine {
                    line,
                    offset: 0,
                    bytes: 0,
                    reason: format!("damaged snapshot: {reason}"),
                    torn: false,
                });
            }
            Err(other) => return Err(other),
        }
        checks.push(check);
    }
    let segments = match layout.segments_to_replay() {
        Ok(segments) => segments,
        Err(missing) => {
            statuses.damaged = true;
            let mut check = JournalCheck::empty(segment_path(dir, missing));
            check.bad_total = 1;
            check.bad.push(BadLine {
                line: 0,
                offset: 0,
                bytes: 0,
                reason: MISSING_SEGMENT.into(),
                torn: false,
            });
            checks.push(check);
            return Ok(checks);
        }
    };
    for n in segments {
        let path = segment_path(dir, n);
        let file = open_regular(&path)?;
        let check = scan(&file, path.clone(), statuses, true)
            .map_err(|source| OpenError::Io { path, source })?;
        checks.push(check);
    }
    Ok(checks)
}

impl JournalCheck {
    fn empty(path: PathBuf) -> Self {
        JournalCheck {
            path,
            lines: 0,
            kept: 0,
            kept_transitions: 0,
            bad: Vec::new(),
            bad_total: 0,
            intact_after_bad: 0,
            bytes_after_bad: 0,
            earlier: Vec::new(),
        }
    }
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
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| OpenError::Io { path, source }
    };
    ensure_regular_path(&path).map_err(io_err(&path))?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(io_err(&path))?;
    ensure_regular_file(&file).map_err(io_err(&path))?;
    let mut statuses = Statuses::default();
    let earlier = check_closed(dir, &mut statuses)?;
    // Read through the handle that will be cut, not the path again.
    let mut check = scan(&file, path.clone(), &mut statuses, false).map_err(io_err(&path))?;
    check.earlier = earlier;
    let damaged = check.earlier.iter().position(|c| !c.is_clean());
    let Some(at) = damaged else {
        let Some(first) = check.bad.first() else {
            return Ok(JournalRepair {
                check,
                side_file: None,
                moved: Vec::new(),
            });
        };
        let side_file = cut_aside(dir, &file, first.offset, check.bytes_after_bad, "removed")?;
        return Ok(JournalRepair {
            check,
            side_file: Some(side_file),
            moved: Vec::new(),
        });
    };
    let bad = &check.earlier[at];
    // What a start reads first, when there is a snapshot, is it.
    let snapshot = Layout::scan(dir)
        .map_err(io_err(dir))?
        .newest_snapshot()
        .is_some();
    if at == 0 && snapshot {
        return Err(OpenError::Corrupt {
            path: bad.path.clone(),
            line: bad.bad.first().map_or(0, |b| b.line),
            reason: "a damaged snapshot cannot be repaired: the history it replaced was removed \
                     once it was written; restore the data directory from a backup"
                .into(),
        });
    }
    let Some(first) = bad.bad.first().filter(|b| b.line > 0) else {
        return Err(OpenError::Corrupt {
            path: bad.path.clone(),
            line: 0,
            reason: "a closed segment is missing: restore it, or the data directory, from a \
                     backup"
                .into(),
        });
    };
    // The damaged segment is cut; every later one, and the live
    // journal, moved aside whole: each record holds only after those
    // before it.
    let segment = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&bad.path)
        .map_err(io_err(&bad.path))?;
    let side_file = cut_aside(dir, &segment, first.offset, bad.bytes_after_bad, "removed")?;
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut moved = Vec::new();
    for later in &check.earlier[at + 1..] {
        let aside = PathBuf::from(format!("{}.removed-{secs}", later.path.display()));
        std::fs::rename(&later.path, &aside).map_err(io_err(&later.path))?;
        moved.push(aside);
    }
    sync_dir(dir).map_err(io_err(dir))?;
    let len = file.metadata().map_err(io_err(&path))?.len();
    if len > 0 {
        moved.push(cut_aside(dir, &file, 0, len, "removed")?);
    }
    Ok(JournalRepair {
        check,
        side_file: Some(side_file),
        moved,
    })
}

/// Checks every line: each must be a record whose checksum holds; a pet
/// must have the next id, a transition must name a pet created before it
/// and be allowed by that pet's status then. Reads `journal` as a stream (see
/// `Lines`): a line too long to be a record is reported without being
/// held.
fn scan(
    journal: impl Read,
    path: PathBuf,
    statuses: &mut Statuses,
    closed: bool,
) -> io::Result<JournalCheck> {
    let mut report = JournalCheck::empty(path);
    let mut lines = Lines::new(journal);
    let mut first_bad = None;
    let mut json = Vec::with_capacity(512);
    loop {
        let line_no = report.lines + 1;
        let problem = match lines.next_line()? {
            None => break,
            Some(Line::Complete(line)) => statuses
                .check(line, &mut json)
                .err()
                .map(|reason| (reason, false)),
            // Torn only in the live journal: a closed segment was closed
            // between two whole batches.
            Some(Line::Unterminated(line)) => match statuses.check(line, &mut json) {
                Ok(()) => Some(("unterminated last line (no newline)".to_owned(), !closed)),
                Err(reason) => Some((format!("unterminated last line ({reason})"), !closed)),
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
            // A time record is neither.
            None if statuses.last_was_time => {}
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
#[derive(Debug, Default)]
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
    /// The last record checked was a time record.
    last_was_time: bool,
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
        let record = decode_record(line, json)?.0;
        self.last_was_time = matches!(record, Record::Time(_));
        match record {
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

/// A snapshot's pets and orders are what the segments after it build on.
impl Restore for Statuses {
    fn record(&mut self, _: Record, _: &[u8], _: Option<Keyed>) -> Result<(), String> {
        Err("a journal record inside a snapshot".into())
    }

    fn header(&mut self, _: &SnapshotHeader) -> Result<(), String> {
        Ok(())
    }

    fn item(&mut self, item: Item, _: &[u8]) -> Result<(), String> {
        match item {
            Item::Pet(id, status) => {
                self.of.push(status);
                self.last_id = id.get();
            }
            Item::Orders(orders) => {
                for order in orders {
                    self.orders
                        .push((order.pet(), order.status() == OrderStatus::Placed));
                    self.last_order = order.id().get();
                }
            }
            Item::Kept(..) | Item::Events(_) => {}
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
        let report = scan(
            bytes.as_bytes(),
            PathBuf::from("j"),
            &mut Statuses::default(),
            false,
        )
        .unwrap();
        assert_eq!(report.bad.len(), MAX_LISTED);
        assert_eq!(report.bad_total, MAX_LISTED as u64 + 5);
        assert_eq!((report.kept, report.intact_after_bad), (0, 0));
        assert_eq!(report.bytes_after_bad, bytes.len() as u64);
        assert!(report.is_corrupt());
    }
}
