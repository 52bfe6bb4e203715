//! `petstore-server journal check`, `journal repair` and `journal
//! compact`: the operator's way out when the server refuses to start on
//! a damaged journal, and a compaction of a stopped server's directory.
//! The work is [`petstore_core::journal::check_journal`],
//! [`petstore_core::journal::repair_journal`] and
//! [`Inventory::compact`]; this module prints what they found and did,
//! and picks the exit status.

use std::path::Path;
use std::process::ExitCode;

use petstore_core::{
    journal::{check_journal, repair_journal, BadLine, JournalCheck},
    Inventory, JournalOptions, OpenError,
};

use super::flags::JournalAction;

/// Runs one `journal` subcommand, printing its report on stdout and
/// errors on stderr. Exit status: 0 when the server can start on the
/// journal (after a repair: when the repair succeeded), 1 when `check`
/// found damage, 2 when the journal could not be read or repaired.
pub fn run(action: &JournalAction) -> ExitCode {
    match action {
        JournalAction::Check { data } => check(data),
        JournalAction::Repair { data } => repair(data),
        JournalAction::Compact { data } => compact(data),
    }
}

fn compact(data: &Path) -> ExitCode {
    // Opened as a server opens it (a torn last line cut aside, lapsed
    // holds expired and written), then compacted.
    // Flat out: nothing else runs on a stopped server's directory.
    let mut options = JournalOptions::default();
    options.compaction.rest = 0;
    let inventory = match Inventory::open(data, options) {
        Ok(inventory) => inventory,
        Err(e @ OpenError::Locked { .. }) => {
            eprintln!("journal compact: {e}; a running server compacts by itself");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("journal compact: {e}; nothing was changed");
            return ExitCode::from(2);
        }
    };
    match inventory.compact() {
        Ok(done) => {
            println!(
                "compacted: {} ({} bytes, {} pet(s)) replaces {} bytes of journal, in {} ms",
                done.snapshot.display(),
                done.bytes,
                done.pets,
                done.replaced_bytes,
                done.took.as_millis()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("journal compact: {e}; the journal keeps every change");
            ExitCode::from(2)
        }
    }
}

fn check(data: &Path) -> ExitCode {
    let report = match check_journal(data) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("journal check: {e}");
            return ExitCode::from(2);
        }
    };
    print_lines(&report);
    let repair = format!("petstore-server journal repair --data {}", data.display());
    if report.is_clean() {
        println!(
            "clean: {} pet(s), {} transition(s), every line checks out",
            report.kept, report.kept_transitions
        );
        ExitCode::SUCCESS
    } else if !report.is_corrupt() {
        println!(
            "torn last line: the server cuts it off at start (keeping its bytes aside) and loads {} pet(s)",
            report.kept
        );
        ExitCode::SUCCESS
    } else {
        println!(
            "damaged: {} bad line(s); the server refuses to start on this journal. \
             {} pet(s) before the first bad line are intact; {} intact record(s) after it \
             would move to the side file with it, because pet ids stay dense and each \
             transition holds only after the records before it. \
             To move them aside: {repair}",
            report.bad_total, report.kept, report.intact_after_bad
        );
        ExitCode::from(1)
    }
}

fn repair(data: &Path) -> ExitCode {
    let repair = match repair_journal(data) {
        Ok(repair) => repair,
        Err(e @ OpenError::Locked { .. }) => {
            eprintln!("journal repair: {e}; stop the server first");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("journal repair: {e}; the journal was not changed");
            return ExitCode::from(2);
        }
    };
    let report = &repair.check;
    let Some(side) = &repair.side_file else {
        println!(
            "nothing to repair: {} has {} pet(s), every line checks out",
            report.path.display(),
            report.kept
        );
        return ExitCode::SUCCESS;
    };
    print_bad(report, "removed ", "removed");
    let first_removed = report.bad.first().map_or(report.lines, |bad| bad.line);
    if report.intact_after_bad > 0 {
        println!(
            "removed {} intact record(s) after line {}: pet ids stay dense and each transition holds only after the records before it, so no record after a removed line can stay",
            report.intact_after_bad,
            first_removed
        );
    }
    println!(
        "moved {} byte(s), lines {} to {}, to {} (byte for byte)",
        report.bytes_after_bad,
        first_removed,
        report.lines,
        side.display()
    );
    for whole in &repair.moved {
        println!(
            "moved a later file aside whole, to {}: its records held only after the removed ones",
            whole.display()
        );
    }
    println!(
        "kept {} pet(s) in {}; the server can start",
        report.kept,
        report.path.display()
    );
    ExitCode::SUCCESS
}

fn print_lines(report: &JournalCheck) {
    for earlier in &report.earlier {
        println!(
            "read first: {}, {} line(s)",
            earlier.path.display(),
            earlier.lines
        );
        print_bad(earlier, "", "... and");
    }
    println!(
        "journal: {}, {} line(s)",
        report.path.display(),
        report.lines
    );
    print_bad(report, "", "... and");
}

/// The bad lines the report describes, each after `prefix`, then how many
/// more it only counted, after `more`.
fn print_bad(report: &JournalCheck, prefix: &str, more: &str) {
    for bad in &report.bad {
        println!("{prefix}{}", describe(bad));
    }
    if report.bad_total > report.bad.len() as u64 {
        println!(
            "{more} {} more bad line(s)",
            report.bad_total - report.bad.len() as u64
        );
    }
}

fn describe(bad: &BadLine) -> String {
    format!(
        "line {} (byte {}, {} bytes): {}: {}",
        bad.line,
        bad.offset,
        bad.bytes,
        if bad.torn { "torn" } else { "damaged" },
        bad.reason
    )
}
