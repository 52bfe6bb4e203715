//! Compaction through the public API: a compacted journal opens with the
//! same pets, and a start replays only what follows its snapshot; a
//! flipped byte in a snapshot (any byte, a property test), or a missing
//! segment, is found by
//! `journal check` and refused at start, never read as a wrong state;
//! a damaged closed segment is repaired like the live journal.

use std::fs;
use std::path::{Path, PathBuf};

use petstore_core::journal::{check_journal, repair_journal};
use petstore_core::{
    CategoryId, Inventory, JournalOptions, ListQuery, NewPet, OpenError, PageSize, PetId,
    Transition,
};

use crate::scratch::scratch;

fn pets(inventory: &Inventory) -> Vec<(u64, &'static str)> {
    let mut all = Vec::new();
    let mut query = ListQuery::new().limit(PageSize::MAX);
    loop {
        let page = inventory.list(&query);
        all.extend(
            page.pets
                .iter()
                .map(|p| (p.id().get(), p.status().as_str())),
        );
        match page.next_after {
            Some(after) => query = query.after(after),
            None => return all,
        }
    }
}

/// `n` pets, each sold and released `rounds` times: history many times
/// the state.
fn churn(inventory: &Inventory, n: usize, rounds: usize) {
    let news = (0..n)
        .map(|_| NewPet::new("Rex", CategoryId::MIN).unwrap())
        .collect();
    let created = inventory.create_many(news).unwrap();
    for _ in 0..rounds {
        let reserve: Vec<_> = created
            .iter()
            .map(|p| (p.id(), Transition::Reserve))
            .collect();
        for outcome in inventory.transition_many(&reserve).unwrap() {
            outcome.unwrap();
        }
        let release: Vec<_> = created
            .iter()
            .map(|p| (p.id(), Transition::Release))
            .collect();
        for outcome in inventory.transition_many(&release).unwrap() {
            outcome.unwrap();
        }
    }
}

fn only(dir: &Path, suffix: &str) -> PathBuf {
    let found: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found.into_iter().next().unwrap()
}

#[test]
fn a_start_after_compaction_replays_only_what_follows_the_snapshot() {
    let dir = scratch("compact-start");
    let before = {
        let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
        churn(&inventory, 50, 10);
        inventory.transition(PetId::MIN, Transition::Sell).unwrap();
        pets(&inventory)
    };
    let journal = fs::metadata(dir.join("pets.journal")).unwrap().len();
    {
        let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
        assert_eq!(inventory.recovery().unwrap().transitions, 50 * 20 + 1);
        let done = inventory.compact().unwrap();
        assert_eq!(done.pets, 50);
        // Less than the history it replaced, though every order and every
        // event (all within their retention) is still there.
        assert!(done.bytes < journal, "{} of {journal}", done.bytes);
        // Transitions after the snapshot, of pets the snapshot holds.
        let two = PetId::new(2).unwrap();
        inventory.transition(two, Transition::Reserve).unwrap();
        inventory.transition(two, Transition::Release).unwrap();
    }
    let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
    let recovery = inventory.recovery().unwrap();
    assert_eq!((recovery.pets, recovery.transitions), (50, 2));
    assert!(recovery.snapshot.is_some());
    assert_eq!(pets(&inventory), before);
    drop(inventory);
    let check = check_journal(&dir).unwrap();
    assert!(check.is_clean(), "{check:?}");
    assert_eq!(check.earlier.len(), 1, "the snapshot, checked first");
    assert_eq!(check.kept_transitions, 2);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_flipped_byte_in_a_snapshot_is_found_and_refused() {
    let dir = scratch("compact-flip");
    {
        let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
        churn(&inventory, 20, 2);
        inventory.compact().unwrap();
    }
    let snapshot = only(&dir, ".snapshot");
    let mut bytes = fs::read(&snapshot).unwrap();
    // A digit in the middle of the file turned into another: still a
    // well-formed line, only its checksum tells.
    let at = bytes.len() / 2
        + bytes[bytes.len() / 2..]
            .iter()
            .position(u8::is_ascii_digit)
            .unwrap();
    bytes[at] = if bytes[at] == b'1' { b'2' } else { b'1' };
    fs::write(&snapshot, &bytes).unwrap();
    match Inventory::open(&dir, JournalOptions::default()) {
        Err(OpenError::Corrupt { path, reason, .. }) => {
            assert_eq!(path, snapshot);
            assert!(reason.contains("checksum"), "{reason}");
        }
        other => panic!("opened a damaged snapshot: {:?}", other.map(|i| i.len())),
    }
    let check = check_journal(&dir).unwrap();
    assert!(check.is_corrupt());
    assert_eq!(check.earlier[0].path, snapshot);
    // Not repaired: the history it replaced is gone. Nothing changes.
    assert!(matches!(
        repair_journal(&dir),
        Err(OpenError::Corrupt { .. })
    ));
    assert_eq!(fs::read(&snapshot).unwrap(), bytes);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_missing_segment_is_refused_and_a_damaged_one_is_repaired() {
    let dir = scratch("compact-segment");
    {
        let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
        churn(&inventory, 10, 1);
        inventory.compact().unwrap();
        churn(&inventory, 10, 1);
    }
    // Closed segments appear when a compaction stops half-way; made here
    // by hand: the live journal renamed as the next segment would be.
    let segment = dir.join("pets-00000002.journal");
    fs::rename(dir.join("pets.journal"), &segment).unwrap();
    let intact = Inventory::open(&dir, JournalOptions::default()).unwrap();
    assert_eq!(intact.len(), 20);
    assert_eq!(intact.recovery().unwrap().segments, 1);
    intact
        .create(NewPet::new("Tom", CategoryId::MIN).unwrap())
        .unwrap();
    drop(intact);

    let aside = dir.join("elsewhere");
    fs::rename(&segment, &aside).unwrap();
    // The last closed segment gone: the live journal's first pet does not
    // follow on from the snapshot's.
    match Inventory::open(&dir, JournalOptions::default()) {
        Err(OpenError::Corrupt { reason, .. }) => {
            assert!(reason.contains("expected pet id 11"), "{reason}")
        }
        other => panic!("opened without a segment: {:?}", other.map(|i| i.len())),
    }
    assert!(check_journal(&dir).unwrap().is_corrupt());
    fs::rename(&aside, &segment).unwrap();

    // A damaged line in the closed segment: it is cut there, and the live
    // journal after it (pet 21) moved aside whole.
    let mut bytes = fs::read(&segment).unwrap();
    let last = bytes.len() - 3;
    bytes[last] ^= 1;
    fs::write(&segment, &bytes).unwrap();
    assert!(Inventory::open(&dir, JournalOptions::default()).is_err());
    let repair = repair_journal(&dir).unwrap();
    assert!(repair.side_file.is_some());
    assert_eq!(repair.moved.len(), 1, "{repair:?}");
    let repaired = Inventory::open(&dir, JournalOptions::default()).unwrap();
    assert_eq!(repaired.len(), 20);
    drop(repaired);
    assert!(check_journal(&dir).unwrap().is_clean());
    fs::remove_dir_all(&dir).unwrap();
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

    /// Any one byte of a snapshot changed, anywhere (a record's body, its
    /// prefix, its checksum, a newline, the header, the end line): the
    /// start is refused, never a state read wrong.
    #[test]
    fn any_changed_byte_of_a_snapshot_is_refused(at in 0.0f64..1.0, flip in 1u8..=255) {
        let dir = scratch("compact-any-byte");
        {
            let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
            churn(&inventory, 3, 1);
            inventory.transition(PetId::MIN, Transition::Sell).unwrap();
            inventory.compact().unwrap();
        }
        let snapshot = only(&dir, ".snapshot");
        let mut bytes = fs::read(&snapshot).unwrap();
        let index = ((bytes.len() as f64) * at) as usize % bytes.len();
        bytes[index] ^= flip;
        fs::write(&snapshot, &bytes).unwrap();
        let opened = Inventory::open(&dir, JournalOptions::default());
        proptest::prop_assert!(
            matches!(opened, Err(OpenError::Corrupt { .. })),
            "byte {index} ^ {flip}: {:?}",
            opened.map(|i| i.len())
        );
        proptest::prop_assert!(check_journal(&dir).unwrap().is_corrupt());
        fs::remove_dir_all(&dir).unwrap();
    }
}
