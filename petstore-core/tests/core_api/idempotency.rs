//! Idempotency keys through the public API: a keyed write runs once and
//! its answer is kept, as durably as the write; replay rebuilds the kept
//! answers and skips the expired ones; a key claimed is in flight; many
//! threads with one key make one pet. Time is a [`FakeClock`]'s.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use petstore_core::idempotency::*;
use petstore_core::journal::check_journal;
use petstore_core::*;

use crate::scratch::scratch;

const T0: u64 = 1_700_000_000;

fn keyed(key: &str, fingerprint: u8, at: Timestamp) -> Keyed {
    Keyed {
        scope: Scope::new("shop").unwrap(),
        key: IdempotencyKey::parse_header(key.as_bytes()).unwrap(),
        fingerprint: Fingerprint::from_bytes([fingerprint; 32]),
        at,
    }
}

fn rex() -> NewPet {
    NewPet::new("Rex", CategoryId::MIN).unwrap()
}

fn open(dir: &std::path::Path, clock: &FakeClock) -> Inventory {
    Inventory::open_with_clock(dir, JournalOptions::default(), clock).unwrap()
}

#[test]
fn kept_answers_survive_a_reopen_with_the_write_they_answered() {
    let dir = scratch("idem-reopen");
    let clock = FakeClock::new(Timestamp::from_unix_secs(T0));
    let (created, sold, conflict) = {
        let inventory = open(&dir, &clock);
        let created = inventory
            .create_keyed(rex(), keyed("c", 1, clock.now()))
            .unwrap();
        let KeyedOutcome::Done(Answer::Created(pet)) = created.clone() else {
            panic!("{created:?}")
        };
        let sold = inventory
            .transition_keyed(pet.id(), Transition::Sell, keyed("t", 2, clock.now()))
            .unwrap();
        let conflict = inventory
            .transition_keyed(pet.id(), Transition::Reserve, keyed("x", 3, clock.now()))
            .unwrap();
        assert_eq!(inventory.kept_keys(), 3);
        (created, sold, conflict)
    };
    let done = |outcome: KeyedOutcome| match outcome {
        KeyedOutcome::Done(answer) => answer,
        other => panic!("{other:?}"),
    };
    let (created, sold, conflict) = (done(created), done(sold), done(conflict));
    assert!(matches!(
        conflict,
        Answer::Conflict {
            status: PetStatus::Sold,
            ..
        }
    ));
    clock.advance(Duration::from_secs(60));
    let inventory = open(&dir, &clock);
    assert_eq!(inventory.kept_keys(), 3);
    assert_eq!(inventory.len(), 1);
    let later = clock.now();
    assert_eq!(
        inventory.seen(&keyed("c", 1, later)),
        Seen::Replay(created.clone())
    );
    assert_eq!(inventory.seen(&keyed("t", 2, later)), Seen::Replay(sold));
    assert_eq!(
        inventory.seen(&keyed("x", 3, later)),
        Seen::Replay(conflict)
    );
    assert_eq!(inventory.seen(&keyed("c", 9, later)), Seen::Reused);
    // A retry after the reopen creates nothing.
    assert_eq!(
        inventory.create_keyed(rex(), keyed("c", 1, later)).unwrap(),
        KeyedOutcome::Replay(created)
    );
    assert_eq!(inventory.len(), 1);
    // The kept conflict's record is a check's and a repair's too.
    drop(inventory);
    let check = check_journal(&dir).unwrap();
    assert!(!check.is_corrupt(), "{check:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn replay_skips_the_keys_expired_by_the_time_of_the_reopen() {
    let dir = scratch("idem-expired");
    let clock = FakeClock::new(Timestamp::from_unix_secs(T0));
    {
        let inventory = open(&dir, &clock);
        inventory
            .create_keyed(rex(), keyed("old", 1, clock.now()))
            .unwrap();
        clock.advance(Duration::from_secs(3600));
        inventory
            .create_keyed(rex(), keyed("new", 1, clock.now()))
            .unwrap();
    }
    // 24 hours after the first key, an hour before the second expires.
    clock.advance(RETENTION - Duration::from_secs(3600));
    let inventory = open(&dir, &clock);
    assert_eq!(inventory.len(), 2, "the pets stay");
    assert_eq!(inventory.kept_keys(), 1, "the expired key is not kept");
    assert_eq!(inventory.seen(&keyed("old", 2, clock.now())), Seen::New);
    assert!(matches!(
        inventory.seen(&keyed("new", 1, clock.now())),
        Seen::Replay(Answer::Created(_))
    ));
    // And the kept one goes when its own day is over.
    clock.advance(Duration::from_secs(3600));
    assert_eq!(inventory.seen(&keyed("new", 1, clock.now())), Seen::New);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_claimed_key_is_in_flight_until_kept_or_let_go() {
    let inventory = Inventory::in_memory();
    let at = Timestamp::from_unix_secs(T0);
    let claim = inventory.claim(keyed("k", 1, at)).unwrap();
    assert_eq!(inventory.seen(&keyed("k", 1, at)), Seen::InFlight);
    assert_eq!(
        inventory.create_keyed(rex(), keyed("k", 1, at)).unwrap(),
        KeyedOutcome::InFlight
    );
    // Another request with the key in flight: in flight too (what a
    // replica answers), not reused.
    assert_eq!(inventory.seen(&keyed("k", 2, at)), Seen::InFlight);
    assert!(inventory.is_empty());
    drop(claim);
    assert_eq!(inventory.seen(&keyed("k", 1, at)), Seen::New);
    // Claimed, then kept by a batch of creates.
    let claim = inventory.claim(keyed("k", 1, at)).unwrap();
    let pets = inventory
        .create_many_claimed(vec![(rex(), Some(claim)), (rex(), None)])
        .unwrap();
    assert_eq!(
        inventory.seen(&keyed("k", 1, at)),
        Seen::Replay(Answer::Created(pets[0].clone()))
    );
    assert_eq!(inventory.kept_keys(), 1);
}

#[test]
fn a_transition_of_no_pet_keeps_nothing() {
    let inventory = Inventory::in_memory();
    let at = Timestamp::from_unix_secs(T0);
    let id = PetId::new(1).unwrap();
    assert_eq!(
        inventory.transition_keyed(id, Transition::Sell, keyed("n", 1, at)),
        Err(TransitionError::NotFound(id))
    );
    assert_eq!(inventory.seen(&keyed("n", 1, at)), Seen::New);
    assert_eq!(inventory.kept_keys(), 0);
}

#[test]
fn many_threads_with_one_key_make_one_pet_and_one_answer() {
    let dir = scratch("idem-race");
    let clock = FakeClock::new(Timestamp::from_unix_secs(T0));
    for inventory in [Inventory::in_memory(), open(&dir, &clock)] {
        let inventory = Arc::new(inventory);
        let threads = 8;
        let barrier = Arc::new(Barrier::new(threads));
        let at = clock.now();
        let outcomes: Vec<KeyedOutcome> = (0..threads)
            .map(|_| {
                let (inventory, barrier) = (inventory.clone(), barrier.clone());
                thread::spawn(move || {
                    barrier.wait();
                    inventory
                        .create_keyed(rex(), keyed("storm", 1, at))
                        .unwrap()
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        assert_eq!(inventory.len(), 1, "{outcomes:?}");
        let done: Vec<&Answer> = outcomes
            .iter()
            .filter_map(|o| match o {
                KeyedOutcome::Done(answer) => Some(answer),
                _ => None,
            })
            .collect();
        assert_eq!(done.len(), 1, "{outcomes:?}");
        for outcome in &outcomes {
            match outcome {
                KeyedOutcome::Done(_) | KeyedOutcome::InFlight => {}
                KeyedOutcome::Replay(answer) => assert_eq!(answer, done[0]),
                KeyedOutcome::Reused => panic!("{outcomes:?}"),
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
