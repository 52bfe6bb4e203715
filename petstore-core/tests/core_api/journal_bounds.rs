//! A journal line longer than any record can be (the journal is read with
//! bounded memory): a huge file of garbage with no newline, or a
//! sparse one, is corruption at its line, for a start, a check and a
//! repair alike. It is never taken for a torn write: a start does not
//! copy it aside (gigabytes of disk) and does not read it whole (gigabytes
//! of memory; not measured here, but the file below is 64 MiB of zeros
//! that an old start read whole and then copied aside, which the absence
//! of a `torn` file shows).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use petstore_core::{
    journal::{check_journal, repair_journal, JOURNAL_FILE},
    CategoryId, Inventory, JournalOptions, NewPet, OpenError,
};

/// Far beyond any record (64 KiB at most), and cheap: a sparse file.
const HUGE: u64 = 64 << 20;

/// A fresh, empty directory path (not created) unique to this test.
fn scratch(name: &str) -> PathBuf {
    crate::scratch::scratch(&format!("journal-bounds-{name}"))
}

/// A journal of `n` pets in `dir`; returns its bytes.
fn fill(dir: &Path, n: usize) -> Vec<u8> {
    let inventory = Inventory::open(dir, JournalOptions::default()).unwrap();
    for i in 0..n {
        inventory
            .create(NewPet::new(format!("pet {i}"), CategoryId::MIN).unwrap())
            .unwrap();
    }
    drop(inventory);
    crate::scratch::strip_times(dir);
    fs::read(dir.join(JOURNAL_FILE)).unwrap()
}

/// Appends the start of a record, then extends the journal to `HUGE`
/// bytes with a hole: one unterminated line of `HUGE - len` bytes.
fn append_huge_unterminated_line(dir: &Path) {
    let path = dir.join(JOURNAL_FILE);
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(br#"{"pet":{"id":4,"name":""#).unwrap();
    file.set_len(HUGE).unwrap();
}

/// Names in `dir` other than the journal and its lock.
fn side_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != JOURNAL_FILE && n != ".lock")
        .collect();
    names.sort();
    names
}

/// Bytes of disk allocated to a file, where that is known.
fn blocks(path: &Path) -> Option<u64> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some(fs::metadata(path).unwrap().blocks() * 512)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

fn assert_too_long(err: &OpenError, line: u64) {
    match err {
        OpenError::Corrupt {
            line: at, reason, ..
        } => {
            assert_eq!(*at, line, "{err}");
            assert!(reason.contains("longer than 65536 bytes"), "{err}");
            assert!(reason.contains("not a torn write"), "{err}");
        }
        other => panic!("expected corruption at line {line}, got {other:?}"),
    }
}

#[test]
fn a_huge_unterminated_last_line_is_corruption_not_a_torn_tail() {
    let dir = scratch("open-huge");
    fill(&dir, 3);
    append_huge_unterminated_line(&dir);
    let err = Inventory::open(&dir, JournalOptions::default()).unwrap_err();
    assert_too_long(&err, 4);
    assert!(err.to_string().contains(JOURNAL_FILE), "{err}");
    assert_eq!(
        side_files(&dir),
        Vec::<String>::new(),
        "nothing copied aside"
    );
    assert_eq!(
        fs::metadata(dir.join(JOURNAL_FILE)).unwrap().len(),
        HUGE,
        "nothing cut"
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_too_long_line_is_corruption_wherever_it_is_and_a_short_tail_is_still_torn() {
    let dir = scratch("open-long");
    let clean = fill(&dir, 4);
    let lines: Vec<&[u8]> = clean.split_inclusive(|b| *b == b'\n').collect();
    let path = dir.join(JOURNAL_FILE);

    // A complete line of 100,000 bytes in the middle.
    let mut long = vec![b' '; 100_000];
    long.push(b'\n');
    let damaged = [lines[0], &long, lines[2], lines[3]].concat();
    fs::write(&path, &damaged).unwrap();
    let err = Inventory::open(&dir, JournalOptions::default()).unwrap_err();
    assert_too_long(&err, 2);
    assert_eq!(fs::read(&path).unwrap(), damaged);

    // The same bytes unterminated at the end: still too long.
    let damaged = [lines[0], &long[..long.len() - 1]].concat();
    fs::write(&path, &damaged).unwrap();
    let err = Inventory::open(&dir, JournalOptions::default()).unwrap_err();
    assert_too_long(&err, 2);
    assert_eq!(side_files(&dir), Vec::<String>::new());
    assert_eq!(fs::read(&path).unwrap(), damaged);

    // A short unterminated last line is what it always was: a torn write,
    // cut and kept aside.
    let torn = [lines[0], lines[1], &lines[2][..10]].concat();
    fs::write(&path, &torn).unwrap();
    let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
    let tail = inventory.recovery().unwrap().torn_tail.clone().unwrap();
    assert_eq!((tail.line, tail.bytes_dropped), (3, 10));
    assert_eq!(fs::read(&tail.copy).unwrap(), &lines[2][..10]);
    assert_eq!(inventory.len(), 2);
    drop(inventory);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn check_reports_a_huge_line_as_corruption_and_changes_nothing() {
    let dir = scratch("check-huge");
    let clean = fill(&dir, 3);
    append_huge_unterminated_line(&dir);
    let report = check_journal(&dir).unwrap();
    assert_eq!((report.lines, report.kept, report.bad_total), (4, 3, 1));
    let bad = &report.bad[0];
    assert_eq!((bad.line, bad.torn), (4, false), "{bad:?}");
    assert_eq!(bad.offset, clean.len() as u64);
    assert_eq!(bad.bytes, HUGE - clean.len() as u64);
    assert!(
        bad.reason.contains("unterminated") && bad.reason.contains("longer than 65536"),
        "{bad:?}"
    );
    assert!(report.is_corrupt());
    assert_eq!(report.bytes_after_bad, HUGE - clean.len() as u64);
    assert_eq!(side_files(&dir), Vec::<String>::new());
    assert_eq!(fs::metadata(dir.join(JOURNAL_FILE)).unwrap().len(), HUGE);

    // A complete too-long line in the middle: the lines after it are
    // still read, and counted.
    let lines: Vec<&[u8]> = clean.split_inclusive(|b| *b == b'\n').collect();
    let mut long = vec![b'x'; 70_000];
    long.push(b'\n');
    fs::write(dir.join(JOURNAL_FILE), [lines[0], &long, lines[2]].concat()).unwrap();
    let report = check_journal(&dir).unwrap();
    assert_eq!((report.lines, report.kept), (3, 1));
    assert_eq!((report.bad_total, report.intact_after_bad), (1, 1));
    let bad = &report.bad[0];
    assert_eq!(
        (bad.line, bad.torn, bad.bytes),
        (2, false, 70_001),
        "{bad:?}"
    );
    assert!(!bad.reason.contains("unterminated"), "{bad:?}");
    assert_eq!(report.bytes_after_bad, 70_001 + lines[2].len() as u64);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn repair_moves_a_huge_line_aside_byte_for_byte_and_the_journal_opens_again() {
    let dir = scratch("repair-huge");
    let clean = fill(&dir, 3);
    append_huge_unterminated_line(&dir);
    let journal_blocks = blocks(&dir.join(JOURNAL_FILE));
    let repair = repair_journal(&dir).unwrap();
    assert_eq!(repair.check.bad[0].line, 4);
    let side = repair.side_file.clone().expect("a side file");
    assert!(side
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("pets.journal.removed-"));
    // The side file holds the moved bytes exactly: the record's start,
    // then zeros (compared a chunk at a time, not read whole).
    assert_eq!(
        fs::metadata(&side).unwrap().len(),
        HUGE - clean.len() as u64
    );
    let mut moved = fs::File::open(&side).unwrap();
    let mut head = vec![0u8; 23];
    moved.read_exact(&mut head).unwrap();
    assert_eq!(head, br#"{"pet":{"id":4,"name":""#);
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        let n = moved.read(&mut chunk).unwrap();
        if n == 0 {
            break;
        }
        assert!(chunk[..n].iter().all(|b| *b == 0));
    }
    // Where the file system keeps the journal's hole a hole, the copy's
    // zeros are a hole too (but for the 1 MiB chunk holding the record's
    // start): moving garbage aside costs about the disk it did in the
    // journal, not 64 MiB.
    if let (Some(journal), Some(copy)) = (journal_blocks, blocks(&side)) {
        if journal < 1 << 20 {
            assert!(copy <= 2 << 20, "{copy} bytes allocated for the copy");
        }
    }
    assert_eq!(fs::read(dir.join(JOURNAL_FILE)).unwrap(), clean);
    let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
    assert_eq!(inventory.len(), 3);
    assert_eq!(inventory.recovery().unwrap().torn_tail, None);
    drop(inventory);
    fs::remove_dir_all(&dir).unwrap();
}
