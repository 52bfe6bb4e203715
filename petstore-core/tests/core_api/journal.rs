//! The durable inventory's documented outcomes: recovery of torn tails,
//! refusal of corruption (the last complete line included), check and
//! repair, empty and missing directories, places that cannot be written,
//! one writer per directory, a journal deleted or replaced under a running
//! inventory, and group commit.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use petstore_core::{
    inventory::StorageFault,
    journal::{check_journal, repair_journal, JOURNAL_FILE, LOCK_FILE},
    CategoryId, CreateError, FsyncPolicy, Inventory, JournalOptions, ListQuery, NewPet, OpenError,
    Pet, PetId, PetStatus,
};

/// A fresh, empty directory path (not created) unique to this test.
fn scratch(name: &str) -> PathBuf {
    crate::scratch::scratch(&format!("journal-{name}"))
}

fn new_pet(i: usize) -> NewPet {
    NewPet::new(
        format!("pet \"{i}\""),
        CategoryId::new(i as u64 % 7 + 1).unwrap(),
    )
    .unwrap()
    .with_status(PetStatus::ALL[i % 3])
}

/// A journal of `n` pets, one line each (no time records).
fn fill(dir: &Path, n: usize) -> Vec<Pet> {
    let inventory = Inventory::open(dir, JournalOptions::default()).unwrap();
    let pets = (0..n)
        .map(|i| inventory.create(new_pet(i)).unwrap())
        .collect();
    drop(inventory);
    crate::scratch::strip_times(dir);
    pets
}

fn all(inventory: &Inventory) -> Vec<Pet> {
    (1..=inventory.len() as u64)
        .filter_map(|id| inventory.get(PetId::new(id)?))
        .collect()
}

#[test]
fn reopen_replays_every_pet_and_ids_continue() {
    let dir = scratch("reopen");
    let created = fill(&dir, 50);
    let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
    assert_eq!(all(&inventory), created);
    let recovery = inventory.recovery().unwrap();
    assert_eq!((recovery.pets, recovery.torn_tail.clone()), (50, None));
    assert_eq!(recovery.path, dir.join(JOURNAL_FILE));
    let next = inventory.create(new_pet(99)).unwrap();
    assert_eq!(next.id().get(), 51);
    // The journal is plain JSON lines.
    let text = fs::read_to_string(dir.join(JOURNAL_FILE)).unwrap();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(v["pet"]["id"].is_u64() || v["time"].is_u64(), "{line}");
        assert!(v["crc32"].is_string());
    }
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn batches_and_single_creates_share_one_id_sequence_and_survive_reopen() {
    let dir = scratch("batches");
    let created = {
        let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
        let mut created = vec![inventory.create(new_pet(0)).unwrap()];
        created.extend(
            inventory
                .create_many((1..6).map(new_pet).collect())
                .unwrap(),
        );
        assert!(inventory.create_many(Vec::new()).unwrap().is_empty());
        created.push(inventory.create(new_pet(6)).unwrap());
        assert_eq!(
            created.iter().map(|p| p.id().get()).collect::<Vec<_>>(),
            (1..=7).collect::<Vec<_>>()
        );
        // Readable as soon as the call returns.
        assert_eq!(all(&inventory), created);
        created
    };
    let reopened = Inventory::open(&dir, JournalOptions::default()).unwrap();
    assert_eq!(all(&reopened), created);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_torn_tail_is_cut_at_every_offset_after_keeping_a_copy() {
    let dir = scratch("torn");
    let created = fill(&dir, 5);
    let path = dir.join(JOURNAL_FILE);
    let full = fs::read(&path).unwrap();
    let last_start = full[..full.len() - 1]
        .iter()
        .rposition(|b| *b == b'\n')
        .unwrap()
        + 1;
    // Every cut inside the last record (including only its newline missing).
    for cut in last_start + 1..full.len() {
        for entry in fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap().path();
            if entry != path {
                fs::remove_file(entry).unwrap();
            }
        }
        fs::write(&path, &full[..cut]).unwrap();
        let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
        let torn = inventory
            .recovery()
            .unwrap()
            .torn_tail
            .clone()
            .expect("torn tail reported");
        assert_eq!(torn.line, 5, "cut at {cut}");
        assert_eq!(torn.bytes_dropped, (cut - last_start) as u64);
        assert_eq!(
            fs::read(&torn.copy).unwrap(),
            &full[last_start..cut],
            "the copy keeps the torn bytes, and only those"
        );
        assert_eq!(all(&inventory), created[..4]);
        assert_eq!(
            fs::read(&path).unwrap(),
            &full[..last_start],
            "the tail is cut off on disk"
        );
        // Ids continue after the highest recovered id.
        assert_eq!(inventory.create(new_pet(5)).unwrap().id().get(), 5);
        drop(inventory);
        fs::write(&path, &full[..cut]).unwrap();
    }
    // A cut exactly at a record boundary is no damage at all.
    fs::write(&path, &full[..last_start]).unwrap();
    let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
    assert_eq!(inventory.recovery().unwrap().torn_tail, None);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_damaged_middle_record_refuses_to_open_naming_file_and_line() {
    let dir = scratch("corrupt");
    fill(&dir, 5);
    let path = dir.join(JOURNAL_FILE);
    let original = fs::read(&path).unwrap();
    let third = original
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .nth(1)
        .unwrap()
        .0
        + 1;
    for (what, damage) in [
        ("flipped bit", {
            let mut bytes = original.clone();
            bytes[third + 20] ^= 0x02;
            bytes
        }),
        ("garbage line", {
            let mut bytes = original[..third].to_vec();
            bytes.extend_from_slice(b"hello\n");
            bytes.extend_from_slice(&original[third..]);
            bytes
        }),
    ] {
        fs::write(&path, &damage).unwrap();
        match Inventory::open(&dir, JournalOptions::default()) {
            Err(OpenError::Corrupt { path: p, line, .. }) => {
                assert_eq!((p, line), (path.clone(), 3), "{what}");
            }
            other => panic!("{what}: expected Corrupt, got {other:?}"),
        }
        // Refusing changed nothing on disk.
        assert_eq!(fs::read(&path).unwrap(), damage, "{what}");
    }
    // Records out of order are corruption too.
    let lines: Vec<&[u8]> = original.split_inclusive(|b| *b == b'\n').collect();
    let swapped = [lines[1], lines[0], lines[2]].concat();
    fs::write(&path, swapped).unwrap();
    let err = Inventory::open(&dir, JournalOptions::default()).unwrap_err();
    assert!(
        err.to_string().contains("line 1") && err.to_string().contains("expected pet id 1"),
        "{err}"
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn empty_file_and_missing_directory_open_empty() {
    let dir = scratch("empty");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join(JOURNAL_FILE), b"").unwrap();
    let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
    assert!(inventory.is_empty());
    drop(inventory);

    let root = scratch("missing");
    let missing = root.join("a").join("b");
    let inventory = Inventory::open(&missing, JournalOptions::default()).unwrap();
    assert!(missing.join(JOURNAL_FILE).is_file());
    assert_eq!(inventory.create(new_pet(0)).unwrap().id(), PetId::MIN);
    fs::remove_dir_all(&dir).unwrap();
    fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_place_that_cannot_be_written_is_an_error_naming_it() {
    // /proc is read-only for everyone, root included (CI runs as root,
    // which ignores permission bits, so a chmod-ed directory proves
    // nothing there).
    let err =
        Inventory::open("/proc/petstore-cannot-exist", JournalOptions::default()).unwrap_err();
    assert!(matches!(err, OpenError::Io { .. }), "{err:?}");
    assert!(
        err.to_string().contains("/proc/petstore-cannot-exist"),
        "{err}"
    );
    // A data directory that is a file.
    let file = scratch("file");
    fs::write(&file, b"x").unwrap();
    assert!(matches!(
        Inventory::open(&file, JournalOptions::default()),
        Err(OpenError::Io { .. })
    ));
    fs::remove_file(&file).unwrap();
}

#[test]
fn a_second_writer_is_refused() {
    let dir = scratch("locked");
    let first = Inventory::open(&dir, JournalOptions::default()).unwrap();
    let second = Inventory::open(&dir, JournalOptions::default());
    assert!(
        matches!(second, Err(OpenError::Locked { .. })),
        "{second:?}"
    );
    drop(first);
    assert!(Inventory::open(&dir, JournalOptions::default()).is_ok());
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn group_commit_many_threads_each_pet_durable_before_create_returns() {
    let dir = scratch("group");
    let inventory = Arc::new(Inventory::open(&dir, JournalOptions::default()).unwrap());
    let path = dir.join(JOURNAL_FILE);
    let threads = 32;
    let per_thread = 20;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let inventory = inventory.clone();
            let path = path.clone();
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                for i in 0..per_thread {
                    let pet = inventory.create(new_pet(t * 100 + i)).unwrap();
                    // Once create returns, the record is in the file and the
                    // pet is visible.
                    let on_disk = fs::read_to_string(&path).unwrap();
                    let id_field = format!("{{\"pet\":{{\"id\":{},", pet.id());
                    assert!(on_disk.contains(&id_field), "pet {} not on disk", pet.id());
                    assert_eq!(inventory.get(pet.id()).as_ref(), Some(&pet));
                    mine.push(pet);
                }
                mine
            })
        })
        .collect();
    let mut created: Vec<Pet> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    created.sort_by_key(Pet::id);
    let n = threads * per_thread;
    assert_eq!(
        created.iter().map(|p| p.id().get()).collect::<Vec<_>>(),
        (1..=n as u64).collect::<Vec<_>>()
    );
    let stats = inventory.journal_stats().unwrap();
    assert_eq!(stats.records, n as u64);
    // Concurrent creates shared fsyncs.
    assert!(stats.batches < stats.records, "{stats:?}");
    drop(inventory);
    let reopened = Inventory::open(&dir, JournalOptions::default()).unwrap();
    assert_eq!(all(&reopened), created);
    assert_eq!(reopened.list(&ListQuery::new()).pets, created[..20]);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn fsync_never_still_writes_every_pet() {
    let dir = scratch("never");
    let options = JournalOptions {
        fsync: FsyncPolicy::Never,
        ..JournalOptions::default()
    };
    let inventory = Inventory::open(&dir, options).unwrap();
    let created: Vec<Pet> = (0..10)
        .map(|i| inventory.create(new_pet(i)).unwrap())
        .collect();
    drop(inventory);
    assert_eq!(all(&Inventory::open(&dir, options).unwrap()), created);
    fs::remove_dir_all(&dir).unwrap();
}

/// The journal's lines, each with its newline.
fn lines_of(bytes: &[u8]) -> Vec<Vec<u8>> {
    bytes
        .split_inclusive(|b| *b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

/// The journal with one byte of line `n` (1-based) changed, its newline
/// kept: a complete line whose checksum fails.
fn damage_line(bytes: &[u8], n: usize) -> Vec<u8> {
    let mut lines = lines_of(bytes);
    lines[n - 1][12] ^= 0x01;
    lines.concat()
}

#[test]
fn a_complete_last_line_with_a_bad_checksum_is_corruption_not_a_torn_write() {
    let dir = scratch("last-corrupt");
    fill(&dir, 5);
    let path = dir.join(JOURNAL_FILE);
    let damaged = damage_line(&fs::read(&path).unwrap(), 5);
    assert_eq!(damaged.last(), Some(&b'\n'), "the line is complete");
    fs::write(&path, &damaged).unwrap();
    match Inventory::open(&dir, JournalOptions::default()) {
        Err(OpenError::Corrupt {
            path: p,
            line,
            reason,
        }) => {
            assert_eq!((p, line), (path.clone(), 5));
            assert!(reason.contains("checksum mismatch"), "{reason}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // Nothing was cut and nothing was kept aside.
    assert_eq!(fs::read(&path).unwrap(), damaged);
    let entries: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("pets.journal."))
        .collect();
    assert!(entries.is_empty(), "{entries:?}");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn check_lists_bad_lines_and_changes_nothing() {
    let dir = scratch("check");
    fill(&dir, 5);
    let path = dir.join(JOURNAL_FILE);
    let clean = fs::read(&path).unwrap();
    let report = check_journal(&dir).unwrap();
    assert!(report.is_clean() && !report.is_corrupt(), "{report:?}");
    assert_eq!((report.lines, report.kept), (5, 5));

    // Line 2 damaged, line 4 damaged, and a torn last line.
    let mut damaged = damage_line(&damage_line(&clean, 2), 4);
    damaged.extend_from_slice(br#"{"pet":{"id":6,"na"#);
    fs::write(&path, &damaged).unwrap();
    let report = check_journal(&dir).unwrap();
    let listed: Vec<(u64, bool)> = report.bad.iter().map(|b| (b.line, b.torn)).collect();
    assert_eq!(listed, [(2, false), (4, false), (6, true)]);
    assert!(report.bad[0].reason.contains("checksum mismatch"));
    assert_eq!(report.bad[0].offset, lines_of(&clean)[0].len() as u64);
    assert_eq!(
        (report.kept, report.intact_after_bad, report.bad_total),
        (1, 2, 3)
    );
    assert!(report.is_corrupt());
    assert_eq!(fs::read(&path).unwrap(), damaged, "check changes nothing");

    // A torn last line alone is not corruption: a start cuts it.
    let mut torn = clean.clone();
    torn.extend_from_slice(b"{\"pet\"");
    fs::write(&path, &torn).unwrap();
    let report = check_journal(&dir).unwrap();
    assert!(!report.is_clean() && !report.is_corrupt(), "{report:?}");

    // No journal: an error naming it.
    fs::remove_file(&path).unwrap();
    let err = check_journal(&dir).unwrap_err();
    assert!(err.to_string().contains(JOURNAL_FILE), "{err}");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn repair_moves_the_damage_aside_and_the_journal_opens_again() {
    let dir = scratch("repair");
    let created = fill(&dir, 5);
    let path = dir.join(JOURNAL_FILE);
    let clean = fs::read(&path).unwrap();
    let lines = lines_of(&clean);

    // A clean journal: nothing to do, no side file.
    let repair = repair_journal(&dir).unwrap();
    assert_eq!(repair.side_file, None);
    assert_eq!(fs::read(&path).unwrap(), clean);

    // The last complete line damaged: exactly that line moves.
    let damaged = damage_line(&clean, 5);
    fs::write(&path, &damaged).unwrap();
    let repair = repair_journal(&dir).unwrap();
    let side = repair.side_file.clone().expect("a side file");
    assert_eq!(fs::read(&side).unwrap(), lines_of(&damaged)[4]);
    assert_eq!(repair.check.intact_after_bad, 0);
    assert_eq!(fs::read(&path).unwrap(), lines[..4].concat());
    let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
    assert_eq!(all(&inventory), created[..4]);
    // Refused while the directory is in use.
    assert!(matches!(
        repair_journal(&dir),
        Err(OpenError::Locked { .. })
    ));
    drop(inventory);
    fs::remove_file(&side).unwrap();

    // A damaged middle line: it and every line after it move, byte for
    // byte, because pet n must stay on line n.
    let damaged = damage_line(&clean, 3);
    fs::write(&path, &damaged).unwrap();
    let repair = repair_journal(&dir).unwrap();
    let side = repair.side_file.clone().expect("a side file");
    assert_eq!(fs::read(&side).unwrap(), lines_of(&damaged)[2..].concat());
    assert_eq!((repair.check.kept, repair.check.intact_after_bad), (2, 2));
    let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
    assert_eq!(all(&inventory), created[..2]);
    assert_eq!(inventory.recovery().unwrap().torn_tail, None);
    drop(inventory);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_second_inventory_on_the_directory_is_refused_even_after_the_journal_is_deleted() {
    let dir = scratch("dir-lock");
    let first = Inventory::open(&dir, JournalOptions::default()).unwrap();
    assert!(dir.join(LOCK_FILE).is_file());
    fs::remove_file(dir.join(JOURNAL_FILE)).unwrap();
    match Inventory::open(&dir, JournalOptions::default()) {
        Err(e @ OpenError::Locked { .. }) => {
            assert!(e.to_string().contains("in use by another process"), "{e}");
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    drop(first);
    assert!(Inventory::open(&dir, JournalOptions::default()).is_ok());
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_journal_deleted_or_replaced_under_the_inventory_stops_creates_not_reads() {
    for replace in [false, true] {
        let dir = scratch(&format!("deleted-{replace}"));
        let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
        let reports = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = reports.clone();
        inventory.on_storage_failure(move |f| seen.lock().unwrap().push(f.clone()));
        let rex = inventory.create(new_pet(0)).unwrap();
        assert_eq!(inventory.storage_failure(), None);
        let path = dir.join(JOURNAL_FILE);
        if replace {
            let other = dir.join("other");
            fs::write(&other, b"").unwrap();
            fs::rename(&other, &path).unwrap();
        } else {
            fs::remove_file(&path).unwrap();
        }
        for _ in 0..3 {
            match inventory.create(new_pet(1)) {
                Err(CreateError::Storage(f)) => {
                    assert_eq!(f.fault, StorageFault::JournalReplaced);
                    assert!(f.detail.contains(JOURNAL_FILE), "{}", f.detail);
                }
                other => panic!("expected Storage, got {other:?}"),
            }
        }
        // Reads go on; the refused pet was never published.
        assert_eq!(inventory.get(rex.id()), Some(rex));
        assert_eq!(inventory.len(), 1);
        let failure = inventory.storage_failure().expect("failed");
        assert_eq!(
            failure.fault.to_string(),
            "the journal file was deleted or replaced"
        );
        // Reported once, however many creates were refused.
        assert_eq!(*reports.lock().unwrap(), [failure]);
        drop(inventory);
        fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn a_health_check_notices_a_deleted_journal_before_any_create() {
    let dir = scratch("deleted-health");
    let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = count.clone();
    inventory.on_storage_failure(move |_| {
        seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    });
    fs::remove_file(dir.join(JOURNAL_FILE)).unwrap();
    for _ in 0..3 {
        let failure = inventory.storage_failure().expect("noticed");
        assert_eq!(failure.fault, StorageFault::JournalReplaced);
    }
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert!(matches!(
        inventory.create(new_pet(0)),
        Err(CreateError::Storage(_))
    ));
    assert_eq!(Inventory::in_memory().storage_failure(), None);
    drop(inventory);
    fs::remove_dir_all(&dir).unwrap();
}
