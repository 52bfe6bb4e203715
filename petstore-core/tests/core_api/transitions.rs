//! Transitions through the public API: the list model (list equals the
//! naive filter, sort and take) with transitions mixed in; durable ones
//! survive a reopen in order and a reopen equals what was before; a torn
//! last transition is cut like a torn create; a transition record that
//! could not have been written is corruption; and racing threads get
//! exactly one winner per allowed step.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};

use proptest::prelude::*;

use crate::model::naive;

use petstore_core::{
    journal::{check_journal, repair_journal, JOURNAL_FILE},
    CategoryId, Inventory, JournalOptions, ListQuery, NewPet, OpenError, PageSize, Pet, PetId,
    PetStatus, Transition, TransitionError,
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
            limit: PageSize::new(3).unwrap(),
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
    crate::scratch::strip_times(&dir);
    let inventory = open(&dir);
    assert_eq!(all(&inventory), before);
    assert_eq!(pages(&inventory), pages_before);
    let recovery = inventory.recovery().unwrap();
    assert_eq!((recovery.pets, recovery.transitions), (11, 4));
    // Ids go on after the last pet, not after the last record.
    assert_eq!(inventory.create(new_pet(11)).unwrap().id(), id(12));
    drop(inventory);
    crate::scratch::strip_times(&dir);
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
        drop(inventory);
        crate::scratch::strip_times(&dir);
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
        crate::scratch::strip_times(&dir);
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

/// A step of the durable model: a create, or a batch of transitions of
/// pets by position (ids beyond the last included).
#[derive(Clone, Debug)]
enum Step {
    Create(PetStatus),
    Batch(Vec<(u64, Transition)>),
}

fn arb_step() -> impl Strategy<Value = Step> {
    let status = prop::sample::select(PetStatus::ALL.to_vec());
    let transition = prop::sample::select(Transition::ALL.to_vec());
    prop_oneof![
        2 => status.prop_map(Step::Create),
        3 => prop::collection::vec((1..=12u64, transition), 1..4).prop_map(Step::Batch),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Whatever mix of creates and transitions a durable inventory took,
    /// every outcome equals an in-memory inventory's, and reopening it
    /// gives the same pets and the same pages.
    #[test]
    fn reopen_after_creates_and_transitions_equals_before(steps in prop::collection::vec(arb_step(), 1..40)) {
        let dir = scratch("reopen-model");
        let memory = Inventory::in_memory();
        let before = {
            let durable = open(&dir);
            for (i, step) in steps.iter().enumerate() {
                match step {
                    Step::Create(status) => {
                        let new = new_pet(i).with_status(*status);
                        prop_assert_eq!(durable.create(new.clone()).ok(), memory.create(new).ok());
                    }
                    Step::Batch(batch) => {
                        let batch: Vec<(PetId, Transition)> =
                            batch.iter().map(|&(n, t)| (id(n), t)).collect();
                        prop_assert_eq!(
                            durable.transition_many(&batch).ok(),
                            memory.transition_many(&batch).ok()
                        );
                    }
                }
            }
            prop_assert_eq!(pages(&durable), pages(&memory));
            all(&durable)
        };
        let reopened = open(&dir);
        prop_assert_eq!(all(&reopened), before);
        prop_assert_eq!(pages(&reopened), pages(&memory));
        drop(reopened);
        fs::remove_dir_all(&dir).map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
}

/// A look at a page: limit, status filter, cursor.
fn arb_query() -> impl Strategy<Value = ListQuery> {
    (
        1..=6u64,
        prop::option::of(prop::sample::select(PetStatus::ALL.to_vec())),
        prop::option::of(1..=30u64),
    )
        .prop_map(|(limit, status, after)| ListQuery {
            limit: PageSize::new(limit).unwrap(),
            status,
            after: after.and_then(PetId::new),
        })
}

proptest! {
    /// The public model: creates, transitions (allowed or not, of pets
    /// that exist or not) and lists interleaved; every list, every first
    /// page kept for polling and every transition's outcome equals the
    /// naive model's.
    #[test]
    fn list_equals_naive_filter_sort_take_with_transitions_mixed_in(
        steps in prop::collection::vec(
            prop_oneof![
                2 => prop::sample::select(PetStatus::ALL.to_vec()).prop_map(|s| (Some(s), None, None)),
                3 => (1..=30u64, prop::sample::select(Transition::ALL.to_vec())).prop_map(|c| (None, Some(c), None)),
                2 => arb_query().prop_map(|q| (None, None, Some(q))),
            ],
            1..150,
        ),
    ) {
        let inventory = Inventory::in_memory();
        let mut model: Vec<Pet> = Vec::new();
        for step in steps {
            match step {
                (Some(status), _, _) => {
                    let new = new_pet(model.len()).with_status(status);
                    let pet = new.clone().into_pet(id(model.len() as u64 + 1));
                    prop_assert_eq!(inventory.create(new).ok(), Some(pet.clone()));
                    model.push(pet);
                }
                (_, Some((n, t)), _) => {
                    let want = match model.get(n as usize - 1) {
                        None => Err(TransitionError::NotFound(id(n))),
                        Some(pet) if !t.allows(pet.status()) => Err(TransitionError::Conflict {
                            id: id(n),
                            current: pet.status(),
                            transition: t,
                        }),
                        Some(pet) => {
                            let changed = NewPet::new(pet.name(), pet.category_id())
                                .unwrap()
                                .with_status(t.to_status())
                                .into_pet(pet.id());
                            model[n as usize - 1] = changed.clone();
                            Ok(changed)
                        }
                    };
                    prop_assert_eq!(inventory.transition(id(n), t), want);
                }
                (_, _, Some(query)) => {
                    let (pets, next) = naive(&model, &query);
                    let page = inventory.list(&query);
                    prop_assert_eq!(&page.pets, &pets);
                    prop_assert_eq!(page.next_after, next);
                    let json = inventory.list_json(&query);
                    prop_assert_eq!(Some(json.body), serde_json::to_vec(&pets).ok());
                    let first = ListQuery { after: None, ..query };
                    if let Some(kept) = inventory.final_page(&first) {
                        let (pets, next) = naive(&model, &first);
                        prop_assert_eq!(Some(kept.body.to_vec()), serde_json::to_vec(&pets).ok());
                        prop_assert_eq!(Some(kept.next_after), next);
                    }
                }
                _ => {}
            }
        }
    }
}

/// Readers page through every filter while writers reserve, release and
/// sell: each page is well formed (ascending, every pet of the page's
/// status, its JSON the pets' own) and a pet once seen sold is never seen
/// otherwise again (sold is final, and no reader sees a change undone).
fn pages_stay_consistent_while_pets_change(inventory: &Arc<Inventory>) {
    const PETS: u64 = 300;
    const WRITERS: usize = 3;
    const READERS: usize = 2;
    for i in 0..PETS {
        inventory.create(new_pet(i as usize)).unwrap();
    }
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (inventory, done) = (inventory.clone(), done.clone());
            std::thread::spawn(move || {
                // Each writer walks the pets in its own order, taking
                // every step it can; every pet ends sold.
                for round in 0..4 {
                    for k in 0..PETS {
                        let pet = id((k * (w as u64 * 2 + 1) + round) % PETS + 1);
                        let step = Transition::ALL[(k as usize + w + round as usize) % 3];
                        let _ = inventory.transition(pet, step);
                    }
                }
                for k in 1..=PETS {
                    let _ = inventory.transition(id(k), Transition::Sell);
                }
                done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            })
        })
        .collect();
    let readers: Vec<_> = (0..READERS)
        .map(|r| {
            let (inventory, done) = (inventory.clone(), done.clone());
            std::thread::spawn(move || {
                let mut sold = std::collections::HashSet::new();
                let mut looks = 0u64;
                // At least one full look after every writer is done.
                loop {
                    let finished = done.load(std::sync::atomic::Ordering::SeqCst) == WRITERS;
                    for status in [
                        None,
                        Some(PetStatus::Available),
                        Some(PetStatus::Pending),
                        Some(PetStatus::Sold),
                    ] {
                        let limit = PageSize::new(7 + r as u64).unwrap();
                        let mut query = ListQuery {
                            limit,
                            status,
                            after: None,
                        };
                        loop {
                            let page = inventory.list(&query);
                            let json = inventory.list_json(&query);
                            assert!(page.pets.windows(2).all(|w| w[0].id() < w[1].id()));
                            assert!(page.pets.len() <= limit.get());
                            for pet in &page.pets {
                                assert!(
                                    status.is_none_or(|s| pet.status() == s),
                                    "{pet:?} on {status:?}"
                                );
                                assert!(query.after.is_none_or(|a| pet.id() > a));
                                if pet.status() == PetStatus::Sold {
                                    sold.insert(pet.id());
                                } else {
                                    assert!(!sold.contains(&pet.id()), "{pet:?} was sold");
                                }
                            }
                            // A page read twice may differ by a change
                            // between the reads; its form never does.
                            let parsed: Vec<Pet> = serde_json::from_slice(&json.body).unwrap();
                            assert!(parsed
                                .iter()
                                .all(|p| status.is_none_or(|s| p.status() == s)));
                            if let Some(kept) = inventory.final_page(&ListQuery {
                                after: None,
                                ..query
                            }) {
                                let parsed: Vec<Pet> = serde_json::from_slice(&kept.body).unwrap();
                                assert_eq!(parsed.len(), limit.get());
                                assert!(parsed
                                    .iter()
                                    .all(|p| status.is_none_or(|s| p.status() == s)));
                            }
                            looks += 1;
                            match page.next_after {
                                Some(after) => query.after = Some(after),
                                None => break,
                            }
                        }
                    }
                    if finished {
                        break;
                    }
                }
                looks
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    for reader in readers {
        assert!(reader.join().unwrap() > 0);
    }
    // Every pet ends sold, and the pages say so.
    let sold = ListQuery::new()
        .status(PetStatus::Sold)
        .limit(PageSize::MAX);
    let mut seen = 0;
    let mut query = sold;
    loop {
        let page = inventory.list(&query);
        seen += page.pets.len() as u64;
        match page.next_after {
            Some(after) => query.after = Some(after),
            None => break,
        }
    }
    assert_eq!(seen, PETS);
    assert!(inventory
        .list(&ListQuery::new().status(PetStatus::Available))
        .pets
        .is_empty());
    assert!(inventory
        .list(&ListQuery::new().status(PetStatus::Pending))
        .pets
        .is_empty());
}

#[test]
fn pages_stay_consistent_while_pets_change_in_memory_and_durable() {
    pages_stay_consistent_while_pets_change(&Arc::new(Inventory::in_memory()));
    let dir = scratch("consistent");
    pages_stay_consistent_while_pets_change(&Arc::new(open(&dir)));
    fs::remove_dir_all(&dir).unwrap();
}
