//! Transitions through the public API: durable ones survive a reopen in
//! order, a torn last transition is cut like a torn create, a transition
//! record that could not have been written is corruption, and racing
//! threads get exactly one winner per allowed step.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};

use petstore_core::{
    check_journal, repair_journal, CategoryId, Inventory, JournalOptions, Limit, ListQuery, NewPet,
    OpenError, Pet, PetId, PetStatus, Transition, TransitionError, JOURNAL_FILE,
};

fn scratch(name: &str) -> PathBuf {
    crate::scratch::scratch(&format!("transitions-{name}"))
}

fn new_pet(i: usize) -> NewPet {
    NewPet::new(format!("pet {i}"), CategoryId::MIN).unwrap()
}

fn id(n: u64) -> PetId {
    PetId::new(n).unwrap()
}

fn all(inventory: &Inventory) -> Vec<Pet> {
    (1..=inventory.len() as u64)
        .filter_map(|n| inventory.get(PetId::new(n)?))
        .collect()
}

/// Every page a client can see, for comparing two inventories.
fn pages(inventory: &Inventory) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for status in [
        None,
        Some(PetStatus::Available),
        Some(PetStatus::Pending),
        Some(PetStatus::Sold),
    ] {
        let mut query = ListQuery {
            limit: Limit::new(3).unwrap(),
            status,
            after: None,
        };
        loop {
            let page = inventory.list_json(&query);
            out.push(page.body);
            match page.next_after {
                Some(after) => query.after = Some(after),
                None => break,
            }
        }
    }
    out
}

fn open(dir: &Path) -> Inventory {
    Inventory::open(dir, JournalOptions::default()).unwrap()
}

#[test]
fn durable_transitions_survive_reopen_in_order_and_creates_interleave() {
    let dir = scratch("reopen");
    let (before, pages_before) = {
        let inventory = open(&dir);
        for i in 0..10 {
            inventory.create(new_pet(i)).unwrap();
        }
        assert_eq!(
            inventory
                .transition(id(3), Transition::Reserve)
                .unwrap()
                .status(),
            PetStatus::Pending
        );
        inventory.create(new_pet(10)).unwrap();
        let outcomes = inventory
            .transition_many(&[
                (id(3), Transition::Release),
                (id(3), Transition::Release),
                (id(11), Transition::Sell),
                (id(12), Transition::Sell),
                (id(5), Transition::Reserve),
            ])
            .unwrap();
        assert_eq!(
            outcomes[0].as_ref().map(Pet::status),
            Ok(PetStatus::Available)
        );
        assert_eq!(
            outcomes[1],
            Err(TransitionError::Conflict {
                id: id(3),
                current: PetStatus::Available,
                transition: Transition::Release
            })
        );
        assert_eq!(outcomes[2].as_ref().map(Pet::status), Ok(PetStatus::Sold));
        assert_eq!(outcomes[3], Err(TransitionError::NotFound(id(12))));
        assert_eq!(
            outcomes[4].as_ref().map(Pet::status),
            Ok(PetStatus::Pending)
        );
        // A batch of transitions is one group commit.
        let stats = inventory.journal_stats().unwrap();
        assert_eq!((stats.batches, stats.records), (13, 15));
        (all(&inventory), pages(&inventory))
    };
    let inventory = open(&dir);
    assert_eq!(all(&inventory), before);
    assert_eq!(pages(&inventory), pages_before);
    let recovery = inventory.recovery().unwrap();
    assert_eq!((recovery.pets, recovery.transitions), (11, 4));
    // Ids go on after the last pet, not after the last record.
    assert_eq!(inventory.create(new_pet(11)).unwrap().id(), id(12));
    drop(inventory);
    let check = check_journal(&dir).unwrap();
    assert!(check.is_clean());
    assert_eq!(
        (check.kept, check.kept_transitions, check.lines),
        (12, 4, 16)
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_torn_last_transition_is_cut_like_a_torn_create() {
    let dir = scratch("torn");
    let whole = {
        let inventory = open(&dir);
        inventory.create(new_pet(0)).unwrap();
        inventory.transition(id(1), Transition::Sell).unwrap();
        fs::read(dir.join(JOURNAL_FILE)).unwrap()
    };
    let first_line = whole.iter().position(|b| *b == b'\n').unwrap() + 1;
    for cut in first_line + 1..whole.len() {
        fs::write(dir.join(JOURNAL_FILE), &whole[..cut]).unwrap();
        let inventory = open(&dir);
        let recovery = inventory.recovery().unwrap();
        let torn = recovery.torn_tail.clone().unwrap();
        assert_eq!(
            (torn.line, torn.bytes_dropped),
            (2, (cut - first_line) as u64),
            "cut at {cut}"
        );
        assert_eq!(fs::read(&torn.copy).unwrap(), &whole[first_line..cut]);
        fs::remove_file(&torn.copy).unwrap();
        // The sale never happened: the pet is as created.
        assert_eq!(inventory.get(id(1)).unwrap().status(), PetStatus::Available);
        assert_eq!(
            fs::read(dir.join(JOURNAL_FILE)).unwrap(),
            &whole[..first_line]
        );
    }
    fs::remove_dir_all(&dir).unwrap();
}

/// A journal line for a transition, with its checksum: what no write of
/// this inventory would leave when the pet cannot take it.
fn transition_line(body: &str) -> String {
    format!(
        "{{\"transition\":{body},\"crc32\":\"{:08x}\"}}\n",
        crc32fast_hash(body.as_bytes())
    )
}

/// CRC-32 (IEEE), bit by bit: the tests do not depend on the core's crate.
fn crc32fast_hash(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn a_transition_of_an_unknown_pet_or_not_allowed_is_corruption() {
    for (name, body, reason) in [
        (
            "unknown",
            r#"{"id":2,"action":"sell"}"#,
            "no record before it created",
        ),
        (
            "sold-twice",
            r#"{"id":1,"action":"sell"}"#,
            "pet 1 is sold; sell needs available or pending",
        ),
        (
            "bad-action",
            r#"{"id":1,"action":"steal"}"#,
            "bad transition",
        ),
    ] {
        let dir = scratch(name);
        {
            let inventory = open(&dir);
            inventory.create(new_pet(0)).unwrap();
            inventory.transition(id(1), Transition::Sell).unwrap();
            inventory.create(new_pet(1)).unwrap();
        }
        let path = dir.join(JOURNAL_FILE);
        let good = fs::read(&path).unwrap();
        // The bad record goes before the last create: line 3 of 4.
        let lines: Vec<&[u8]> = good.split_inclusive(|b| *b == b'\n').collect();
        let bad = [
            lines[0],
            lines[1],
            transition_line(body).as_bytes(),
            lines[2],
        ]
        .concat();
        fs::write(&path, &bad).unwrap();
        match Inventory::open(&dir, JournalOptions::default()) {
            Err(OpenError::Corrupt {
                line: 3,
                reason: got,
                ..
            }) => assert!(got.contains(reason), "{name}: {got}"),
            other => panic!("{name}: {other:?}"),
        }
        let check = check_journal(&dir).unwrap();
        assert!(check.is_corrupt());
        assert_eq!(
            (check.kept, check.kept_transitions, check.bad[0].line),
            (1, 1, 3),
            "{name}"
        );
        assert!(check.bad[0].reason.contains(reason), "{name}");
        // The create after it is intact, and moves aside with it.
        assert_eq!(check.intact_after_bad, 1);
        let repair = repair_journal(&dir).unwrap();
        assert!(repair.side_file.is_some());
        let inventory = open(&dir);
        assert_eq!(inventory.len(), 1);
        assert_eq!(inventory.get(id(1)).unwrap().status(), PetStatus::Sold);
        drop(inventory);
        fs::remove_dir_all(&dir).unwrap();
    }
}

/// Many threads race every step of the same pets: each allowed step has
/// exactly one winner, whoever it is, and the others see the conflict.
fn race(inventory: &Arc<Inventory>) {
    const PETS: u64 = 20;
    const THREADS: usize = 8;
    let first = inventory.len() as u64 + 1;
    for i in 0..PETS {
        inventory.create(new_pet(i as usize)).unwrap();
    }
    let ids: Vec<PetId> = (first..first + PETS).map(id).collect();
    // Reserve, release, reserve, sell: four allowed steps a pet, each
    // tried by every thread at once.
    for step in [
        Transition::Reserve,
        Transition::Release,
        Transition::Reserve,
        Transition::Sell,
    ] {
        let barrier = Arc::new(Barrier::new(THREADS));
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let inventory = inventory.clone();
                let barrier = barrier.clone();
                let ids = ids.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    ids.iter()
                        .map(|&pet| inventory.transition(pet, step))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let outcomes: Vec<Vec<_>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        for (n, &pet) in ids.iter().enumerate() {
            let wins = outcomes.iter().filter(|o| o[n].is_ok()).count();
            assert_eq!(wins, 1, "{step} of pet {pet}");
            for o in &outcomes {
                if let Err(e) = &o[n] {
                    assert_eq!(
                        *e,
                        TransitionError::Conflict {
                            id: pet,
                            current: step.to_status(),
                            transition: step
                        }
                    );
                }
            }
            assert_eq!(inventory.get(pet).unwrap().status(), step.to_status());
        }
    }
}

#[test]
fn racing_threads_get_exactly_one_winner_per_step_in_memory_and_durable() {
    race(&Arc::new(Inventory::in_memory()));
    let dir = scratch("race");
    let before = {
        let inventory = Arc::new(open(&dir));
        race(&inventory);
        all(&inventory)
    };
    assert_eq!(all(&open(&dir)), before);
    fs::remove_dir_all(&dir).unwrap();
}
