//! A read copy (`Inventory::apply`, `Inventory::apply_statuses`), as a
//! replica keeps one of PostgreSQL, listed while it changes: a copy takes
//! pets with any status and statuses in any order (the database decided
//! them, not the copy), in batches that overlap, so its pages, its kept
//! first pages and its reads must hold whatever the sequence.
//!
//! - A property test: every sequence of batches leaves every page, kept
//!   first page and read equal to a naive model's.
//! - A race: readers list, poll first pages and read pets while a writer
//!   applies; every answer is well formed (ascending ids, at most a
//!   page, the filter's status, a body that parses) and nothing panics.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use petstore_core::{CategoryId, Inventory, ListQuery, NewPet, PageSize, Pet, PetId, PetStatus};
use proptest::prelude::*;

use crate::model::naive;

fn pet(id: u64, status: PetStatus) -> Pet {
    // Names of three lengths, one with characters JSON escapes, so that
    // pets' JSON differ in length as real ones do.
    let name = match id % 3 {
        0 => "Rex".to_owned(),
        1 => format!("Kitty \"{id}\""),
        _ => format!("a somewhat longer name {id}"),
    };
    NewPet::new(&name, CategoryId::new(id % 7 + 1).unwrap())
        .unwrap()
        .with_status(status)
        .into_pet(PetId::new(id).unwrap())
}

/// What a copy is told: new pets (from the first id it may not hold,
/// overlapping what it holds), or statuses of pets in commit order.
#[derive(Clone, Debug)]
enum Batch {
    Pets { from: u64, statuses: Vec<PetStatus> },
    Statuses(Vec<(u64, PetStatus)>),
}

fn arb_status() -> impl Strategy<Value = PetStatus> {
    prop::sample::select(PetStatus::ALL.to_vec())
}

fn arb_batch() -> impl Strategy<Value = Batch> {
    prop_oneof![
        (0..3u64, prop::collection::vec(arb_status(), 0..6)).prop_map(|(back, statuses)| {
            Batch::Pets {
                from: back,
                statuses,
            }
        }),
        prop::collection::vec((1..=24u64, arb_status()), 1..5).prop_map(Batch::Statuses),
    ]
}

fn arb_query() -> impl Strategy<Value = ListQuery> {
    (
        1..=5u64,
        prop::option::of(arb_status()),
        prop::option::of(1..=24u64),
    )
        .prop_map(|(limit, status, after)| ListQuery {
            limit: PageSize::new(limit).unwrap(),
            status,
            after: after.and_then(PetId::new),
        })
}

/// Applies `batch` to the copy and to the model, as a replica's tail
/// would: the pets follow on from `held - from`, the statuses of pets it
/// holds only (a change to a pet not yet in is refused whole).
fn apply(copy: &Inventory, model: &mut Vec<Pet>, batch: &Batch) {
    match batch {
        Batch::Pets { from, statuses } => {
            let first = (model.len() as u64).saturating_sub(*from) + 1;
            let pets: Vec<Pet> = statuses
                .iter()
                .zip(first..)
                .map(|(status, id)| pet(id, *status))
                .collect();
            let added = copy.apply(&pets).unwrap();
            let fresh: Vec<Pet> = pets
                .into_iter()
                .filter(|p| p.id().get() > model.len() as u64)
                .collect();
            assert_eq!(added, fresh.len());
            model.extend(fresh);
        }
        Batch::Statuses(changes) => {
            let changes: Vec<(PetId, PetStatus)> = changes
                .iter()
                .map(|(id, status)| (PetId::new(*id).unwrap(), *status))
                .collect();
            let held = changes.iter().all(|(id, _)| id.get() <= model.len() as u64);
            assert_eq!(copy.apply_statuses(&changes).is_ok(), held);
            if held {
                for (id, status) in changes {
                    let at = (id.get() - 1) as usize;
                    model[at] = pet(id.get(), status);
                }
            }
        }
    }
}

proptest! {
    #[test]
    fn a_copy_lists_what_it_was_told_whatever_the_order(
        steps in prop::collection::vec((arb_batch(), prop::collection::vec(arb_query(), 1..4)), 1..30),
    ) {
        let copy = Inventory::in_memory();
        let mut model = Vec::new();
        for (batch, queries) in steps {
            apply(&copy, &mut model, &batch);
            prop_assert_eq!(copy.len(), model.len());
            for query in queries {
                let (want, next) = naive(&model, &query);
                let page = copy.list(&query);
                prop_assert_eq!(&page.pets, &want);
                prop_assert_eq!(page.next_after, next);
                let json = copy.list_json(&query);
                prop_assert_eq!(&json.body, &serde_json::to_vec(&want).unwrap());
                let first = ListQuery { after: None, ..query };
                if let Some(kept) = copy.final_page(&first) {
                    let (want, next) = naive(&model, &first);
                    prop_assert_eq!(&*kept.body, &serde_json::to_vec(&want).unwrap()[..]);
                    prop_assert_eq!(Some(kept.next_after), next);
                }
            }
            for pet in &model {
                prop_assert_eq!(copy.get(pet.id()), Some(pet.clone()));
            }
        }
    }
}

/// One answer of a reader, checked for what holds at any moment.
fn check_page(body: &[u8], query: &ListQuery) {
    let pets: Vec<Pet> = serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("a page that does not parse ({e}): {body:?}"));
    assert!(pets.len() <= query.limit.get());
    assert!(pets.windows(2).all(|w| w[0].id() < w[1].id()), "{pets:?}");
    if let Some(status) = query.status {
        assert!(pets.iter().all(|p| p.status() == status), "{pets:?}");
    }
    if let Some(after) = query.after {
        assert!(pets.iter().all(|p| p.id() > after), "{pets:?}");
    }
}

#[test]
fn readers_of_a_copy_that_changes_get_well_formed_pages() {
    const PETS: u64 = 3_000;
    let copy = Arc::new(Inventory::in_memory());
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3u64)
        .map(|reader| {
            let (copy, done) = (copy.clone(), done.clone());
            thread::spawn(move || {
                let mut round = 0u64;
                // Bounded in count; the writer ends it first.
                while !done.load(Ordering::Relaxed) && round < 5_000_000 {
                    round += 1;
                    let limit = PageSize::new(1 + (round * 7 + reader) % 100).unwrap();
                    let status = match round % 4 {
                        0 => None,
                        n => Some(PetStatus::ALL[(n - 1) as usize]),
                    };
                    let after = round
                        .is_multiple_of(3)
                        .then(|| PetId::new(1 + round % PETS).unwrap());
                    let query = ListQuery {
                        limit,
                        status,
                        after,
                    };
                    check_page(&copy.list_json(&query).body, &query);
                    let first = ListQuery {
                        after: None,
                        ..query
                    };
                    if let Some(kept) = copy.final_page(&first) {
                        check_page(&kept.body, &first);
                    }
                    let id = PetId::new(1 + round % PETS).unwrap();
                    if let Some(pet) = copy.get(id) {
                        assert_eq!(pet.id(), id);
                    }
                }
            })
        })
        .collect();
    // The writer: pets in overlapping batches of mixed statuses, and after
    // each batch a run of status changes to pets it holds, some of them
    // jumps no transition makes (a copy applies what was decided).
    let mut held = 0u64;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    while held < PETS {
        let from = held.saturating_sub(next() % 3) + 1;
        let batch: Vec<Pet> = (from..from + 1 + next() % 40)
            .map(|id| pet(id, PetStatus::ALL[(next() % 3) as usize]))
            .collect();
        held += copy.apply(&batch).unwrap() as u64;
        let changes: Vec<(PetId, PetStatus)> = (0..next() % 20)
            .map(|_| {
                let id = 1 + next() % held.max(1);
                (
                    PetId::new(id).unwrap(),
                    PetStatus::ALL[(next() % 3) as usize],
                )
            })
            .collect();
        copy.apply_statuses(&changes).unwrap();
    }
    done.store(true, Ordering::Relaxed);
    for reader in readers {
        reader.join().unwrap();
    }
    assert_eq!(copy.len() as u64, held);
}
