//! Orders through the public API: random steps of several keys (places,
//! completes, cancels, pet transitions as doors, time passing and holds
//! lapsing) against a naive model, in memory and durable; a pet is
//! `pending` with an order exactly when that order is `placed`; a
//! reopened journal holds the same orders and pets, and a clean check;
//! holds that lapsed while closed lapse at open; racing steps on one pet
//! or one order have exactly one winner.

use std::collections::HashMap;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use proptest::prelude::*;

use petstore_core::{
    inventory::{OrderQuery, Step, StepError, StepRequest, Stepped},
    journal::check_journal,
    order::{Actor, Hold, NewOrder, Order, OrderId, OrderStatus},
    CategoryId, Inventory, JournalOptions, NewPet, PageSize, PetId, PetStatus, Timestamp,
    Transition,
};

const KEYS: [&str; 3] = ["a", "b", "c"];
const START: u64 = 1_000_000;

fn pet_id(n: u64) -> PetId {
    PetId::new(n).unwrap()
}

fn order_id(n: u64) -> OrderId {
    OrderId::new(n).unwrap()
}

fn actor(key: usize, all: bool) -> Actor {
    let actor = Actor::new(KEYS[key]);
    if all {
        actor.with_all_orders()
    } else {
        actor
    }
}

/// One step of a walk.
#[derive(Clone, Debug)]
enum Op {
    Create(PetStatus),
    Place {
        key: usize,
        pet: u64,
        hold: u64,
    },
    Complete {
        key: usize,
        order: u64,
        all: bool,
    },
    Cancel {
        key: usize,
        order: u64,
        all: bool,
    },
    Door {
        key: usize,
        pet: u64,
        t: Transition,
        all: bool,
    },
    /// Time passes by this many seconds, and the lapse timer runs or
    /// not (a step may come before it does).
    Wait(u64, bool),
}

fn arb_op() -> impl Strategy<Value = Op> {
    let status = prop_oneof![
        4 => Just(PetStatus::Available),
        1 => Just(PetStatus::Pending),
        1 => Just(PetStatus::Sold),
    ];
    let transition = prop_oneof![
        Just(Transition::Reserve),
        Just(Transition::Release),
        Just(Transition::Sell)
    ];
    prop_oneof![
        2 => status.prop_map(Op::Create),
        4 => (0..3usize, 1..10u64, 60..200u64).prop_map(|(key, pet, hold)| Op::Place { key, pet, hold }),
        2 => (0..3usize, 1..10u64, any::<bool>()).prop_map(|(key, order, all)| Op::Complete { key, order, all }),
        2 => (0..3usize, 1..10u64, any::<bool>()).prop_map(|(key, order, all)| Op::Cancel { key, order, all }),
        3 => (0..3usize, 1..10u64, transition, any::<bool>()).prop_map(|(key, pet, t, all)| Op::Door { key, pet, t, all }),
        1 => (0..150u64, any::<bool>()).prop_map(|(secs, timer)| Op::Wait(secs, timer)),
    ]
}

/// The model's order.
#[derive(Clone, Debug, PartialEq)]
struct ModelOrder {
    pet: u64,
    status: OrderStatus,
    by: usize,
    placed: u64,
    expires: u64,
    closed: Option<u64>,
}

/// What the contract says, naively: vectors and a map, every rule
/// spelled out again.
#[derive(Default)]
struct Model {
    pets: Vec<PetStatus>,
    orders: Vec<ModelOrder>,
    /// Each held pet's placed order (index into `orders`).
    open: HashMap<u64, usize>,
}

/// The model's answer to a step, to compare with the inventory's.
#[derive(Debug, PartialEq)]
enum Outcome {
    Order(u64, OrderStatus),
    Pet(u64, PetStatus),
    PetNotFound,
    OrderNotFound,
    PetConflict(PetStatus),
    OrderConflict(OrderStatus),
    HeldByAnother(u64),
}

fn outcome_of(result: Result<Stepped, StepError>) -> Outcome {
    match result {
        Ok(Stepped::Order(order)) => Outcome::Order(order.id().get(), order.status()),
        Ok(Stepped::Pet(pet)) => Outcome::Pet(pet.id().get(), pet.status()),
        Err(StepError::PetNotFound(_)) => Outcome::PetNotFound,
        Err(StepError::OrderNotFound(_)) => Outcome::OrderNotFound,
        Err(StepError::PetConflict { current, .. }) => Outcome::PetConflict(current),
        Err(StepError::OrderConflict { status, .. }) => Outcome::OrderConflict(status),
        Err(StepError::HeldByAnother { order, .. }) => Outcome::HeldByAnother(order.get()),
        Err(other) => panic!("an in-memory or healthy journal step failed: {other}"),
    }
}

impl Model {
    fn lapse(&mut self, index: usize, now: u64) {
        let order = &mut self.orders[index];
        if order.status == OrderStatus::Placed && now >= order.expires {
            order.status = OrderStatus::Expired;
            order.closed = Some(now);
            self.pets[(order.pet - 1) as usize] = PetStatus::Available;
            self.open.remove(&order.pet);
        }
    }

    fn lapse_pet(&mut self, pet: u64, now: u64) {
        if let Some(&index) = self.open.get(&pet) {
            self.lapse(index, now);
        }
    }

    fn new_order(&mut self, pet: u64, by: usize, now: u64, hold: u64) -> u64 {
        self.orders.push(ModelOrder {
            pet,
            status: OrderStatus::Placed,
            by,
            placed: now,
            expires: now + hold,
            closed: None,
        });
        self.open.insert(pet, self.orders.len() - 1);
        self.pets[(pet - 1) as usize] = PetStatus::Pending;
        self.orders.len() as u64
    }

    fn close(&mut self, index: usize, to: OrderStatus, now: u64) {
        let order = &mut self.orders[index];
        order.status = to;
        order.closed = Some(now);
        self.open.remove(&order.pet);
        self.pets[(order.pet - 1) as usize] = if to == OrderStatus::Completed {
            PetStatus::Sold
        } else {
            PetStatus::Available
        };
    }

    fn step(&mut self, op: &Op, now: u64) -> Option<Outcome> {
        let pet_of = |model: &Model, pet: u64| model.pets.get((pet - 1) as usize).copied();
        Some(match *op {
            Op::Create(_) | Op::Wait(..) => return None,
            Op::Place { key, pet, hold } => {
                self.lapse_pet(pet, now);
                match pet_of(self, pet) {
                    None => Outcome::PetNotFound,
                    Some(PetStatus::Available) => {
                        Outcome::Order(self.new_order(pet, key, now, hold), OrderStatus::Placed)
                    }
                    Some(current) => Outcome::PetConflict(current),
                }
            }
            Op::Complete { key, order, all } | Op::Cancel { key, order, all } => {
                let index = (order - 1) as usize;
                match self.orders.get(index) {
                    Some(o) if all || o.by == key => {}
                    _ => return Some(Outcome::OrderNotFound),
                }
                self.lapse(index, now);
                let status = self.orders[index].status;
                if status != OrderStatus::Placed {
                    return Some(Outcome::OrderConflict(status));
                }
                let to = match op {
                    Op::Complete { .. } => OrderStatus::Completed,
                    _ => OrderStatus::Cancelled,
                };
                self.close(index, to, now);
                Outcome::Order(order, to)
            }
            Op::Door { key, pet, t, all } => {
                self.lapse_pet(pet, now);
                let Some(current) = pet_of(self, pet) else {
                    return Some(Outcome::PetNotFound);
                };
                if !t.allows(current) {
                    return Some(Outcome::PetConflict(current));
                }
                match (t, self.open.get(&pet).copied()) {
                    (Transition::Reserve, _) => {
                        self.new_order(pet, key, now, u64::from(Hold::DEFAULT.secs()));
                    }
                    (_, Some(index)) => {
                        if !all && self.orders[index].by != key {
                            return Some(Outcome::HeldByAnother(index as u64 + 1));
                        }
                        let to = if t == Transition::Sell {
                            OrderStatus::Completed
                        } else {
                            OrderStatus::Cancelled
                        };
                        self.close(index, to, now);
                    }
                    (Transition::Release, None) => {
                        self.pets[(pet - 1) as usize] = PetStatus::Available;
                    }
                    (Transition::Sell, None) => {
                        self.orders.push(ModelOrder {
                            pet,
                            status: OrderStatus::Completed,
                            by: key,
                            placed: now,
                            expires: now,
                            closed: Some(now),
                        });
                        self.pets[(pet - 1) as usize] = PetStatus::Sold;
                    }
                }
                Outcome::Pet(pet, t.to_status())
            }
        })
    }

    fn expire_due(&mut self, now: u64) -> usize {
        let due: Vec<usize> = self
            .open
            .values()
            .copied()
            .filter(|&i| now >= self.orders[i].expires)
            .collect();
        for &index in &due {
            self.lapse(index, now);
        }
        due.len()
    }
}

/// Runs `op` on the inventory at `now` (seconds).
fn run(inventory: &Inventory, op: &Op, now: u64) -> Option<Outcome> {
    let at = Timestamp::from_unix_secs(now);
    let step = match *op {
        Op::Create(status) => {
            let new = NewPet::new("pet", CategoryId::MIN)
                .unwrap()
                .with_status(status);
            inventory.create(new).unwrap();
            return None;
        }
        Op::Wait(..) => return None,
        Op::Place { key, pet, hold } => {
            let new = NewOrder {
                pet: pet_id(pet),
                hold: Hold::from_secs(hold).unwrap(),
            };
            (actor(key, false), Step::Place(new))
        }
        Op::Complete { key, order, all } => (actor(key, all), Step::Complete(order_id(order))),
        Op::Cancel { key, order, all } => (actor(key, all), Step::Cancel(order_id(order))),
        Op::Door { key, pet, t, all } => (actor(key, all), Step::Transition(pet_id(pet), t)),
    };
    Some(outcome_of(inventory.step(&step.0, step.1, at)))
}

/// The inventory's orders and pets equal the model's, and the rule holds:
/// a pet with a placed order is `pending`, and each key lists its own.
fn assert_same(inventory: &Inventory, model: &Model) {
    let everyone = Actor::store();
    assert_eq!(inventory.orders_len(), model.orders.len() as u64);
    for (i, want) in model.orders.iter().enumerate() {
        let got = inventory.order(&everyone, order_id(i as u64 + 1)).unwrap();
        let got_model = ModelOrder {
            pet: got.pet().get(),
            status: got.status(),
            by: KEYS.iter().position(|k| *k == got.placed_by()).unwrap(),
            placed: got.placed_at().unix_secs(),
            expires: got.expires_at().unix_secs(),
            closed: got.closed_at().map(Timestamp::unix_secs),
        };
        assert_eq!(&got_model, want, "order {}", i + 1);
        if want.status == OrderStatus::Placed {
            assert_eq!(model.pets[(want.pet - 1) as usize], PetStatus::Pending);
        }
    }
    for (i, want) in model.pets.iter().enumerate() {
        assert_eq!(inventory.get(pet_id(i as u64 + 1)).unwrap().status(), *want);
    }
    for (key, name) in KEYS.iter().enumerate() {
        let mut query = OrderQuery::new().limit(PageSize::new(2).unwrap());
        let mut listed = Vec::new();
        loop {
            let page = inventory.list_orders(&Actor::new(name), &query);
            listed.extend(page.orders.iter().map(|o| o.id().get()));
            match page.next_after {
                Some(after) => query = query.after(after),
                None => break,
            }
        }
        let want: Vec<u64> = (1..=model.orders.len() as u64)
            .filter(|&n| model.orders[(n - 1) as usize].by == key)
            .collect();
        assert_eq!(listed, want, "key {name}'s orders");
    }
}

fn walk(inventory: &Inventory, ops: &[Op]) -> Model {
    let mut model = Model::default();
    walk_on(inventory, ops, &mut model, &mut START.clone());
    model
}

/// Runs `ops` on from `model` at `now`, checking each answer, then the
/// whole state.
fn walk_on(inventory: &Inventory, ops: &[Op], model: &mut Model, now: &mut u64) {
    for op in ops {
        if let Op::Create(status) = op {
            model.pets.push(*status);
        }
        if let Op::Wait(secs, timer) = *op {
            *now += secs;
            if timer {
                let expired = inventory
                    .expire_due(Timestamp::from_unix_secs(*now))
                    .unwrap();
                assert_eq!(expired, model.expire_due(*now), "holds lapsed at {now}");
            }
        }
        let want = model.step(op, *now);
        let got = run(inventory, op, *now);
        assert_eq!(got, want, "{op:?} at {now}");
    }
    assert_same(inventory, model);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random steps of three keys in memory: every answer, every order,
    /// every pet's status and every key's list equal the model's.
    #[test]
    fn in_memory_every_step_equals_the_model(ops in prop::collection::vec(arb_op(), 1..120)) {
        walk(&Inventory::in_memory(), &ops);
    }

    /// The same, durable; then the reopened journal holds the same, and
    /// checks clean.
    #[test]
    fn durable_every_step_equals_the_model_and_survives_a_reopen(
        ops in prop::collection::vec(arb_op(), 1..60)
    ) {
        let dir = crate::scratch::scratch("orders-walk");
        let model = {
            let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
            walk(&inventory, &ops)
        };
        // Reopened at a time no hold has reached: nothing lapses at open.
        let clock = petstore_core::FakeClock::new(Timestamp::from_unix_secs(START));
        let reopened = Inventory::open_with_clock(&dir, JournalOptions::default(), &clock).unwrap();
        assert_same(&reopened, &model);
        drop(reopened);
        let check = check_journal(&dir).unwrap();
        prop_assert!(check.is_clean(), "{check:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The same, with compactions at random points, each reopened from
    /// what it left: the snapshot and the records after it hold every
    /// order, every pet and every key's list, and more steps follow on.
    #[test]
    fn durable_steps_survive_compactions_at_random_points(
        ops in prop::collection::vec(arb_op(), 1..60),
        cuts in prop::collection::vec(0..60usize, 1..4),
    ) {
        let dir = crate::scratch::scratch("orders-compacted");
        let clock = petstore_core::FakeClock::new(Timestamp::from_unix_secs(START));
        let mut model = Model::default();
        let mut now = START;
        let mut cuts = cuts;
        cuts.push(ops.len());
        cuts.sort_unstable();
        let mut from = 0;
        for cut in cuts.into_iter().map(|c| c.min(ops.len())) {
            let inventory = Inventory::open_with_clock(&dir, JournalOptions::default(), &clock).unwrap();
            assert_same(&inventory, &model);
            walk_on(&inventory, &ops[from..cut], &mut model, &mut now);
            inventory.compact().unwrap();
            from = cut;
        }
        let reopened = Inventory::open_with_clock(&dir, JournalOptions::default(), &clock).unwrap();
        prop_assert!(reopened.recovery().unwrap().snapshot.is_some());
        assert_same(&reopened, &model);
        drop(reopened);
        let check = check_journal(&dir).unwrap();
        prop_assert!(check.is_clean(), "{check:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn holds_that_lapse_while_closed_lapse_at_open_and_are_written() {
    let dir = crate::scratch::scratch("orders-lapse-closed");
    let at = Timestamp::from_unix_secs(START);
    {
        let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
        for _ in 0..3 {
            inventory
                .create(NewPet::new("Rex", CategoryId::MIN).unwrap())
                .unwrap();
        }
        let shop = Actor::new("shop");
        for (pet, hold) in [(1, 60), (2, 600)] {
            let new = NewOrder {
                pet: pet_id(pet),
                hold: Hold::from_secs(hold).unwrap(),
            };
            inventory.place_order(&shop, new, at).unwrap();
        }
    }
    // Opened 2 minutes later: the first hold lapsed, the second holds.
    let later = petstore_core::FakeClock::new(at + Duration::from_secs(120));
    {
        let inventory =
            Inventory::open_with_clock(&dir, JournalOptions::default(), &later).unwrap();
        let all = Actor::store();
        let first = inventory.order(&all, order_id(1)).unwrap();
        assert_eq!(first.status(), OrderStatus::Expired);
        assert_eq!(first.closed_at(), Some(at + Duration::from_secs(120)));
        assert_eq!(
            inventory.get(pet_id(1)).unwrap().status(),
            PetStatus::Available
        );
        let second = inventory.order(&all, order_id(2)).unwrap();
        assert_eq!(second.status(), OrderStatus::Placed);
        assert_eq!(inventory.next_deadline(), Some(second.expires_at()));
    }
    // Written: opened again at the first time, the lapse is still there.
    let early = petstore_core::FakeClock::new(at);
    let inventory = Inventory::open_with_clock(&dir, JournalOptions::default(), &early).unwrap();
    let first = inventory.order(&Actor::store(), order_id(1)).unwrap();
    assert_eq!(first.status(), OrderStatus::Expired);
    drop(inventory);
    assert!(check_journal(&dir).unwrap().is_clean());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn many_holds_lapsing_at_once_lapse_in_batches_each_once() {
    let inventory = Inventory::in_memory();
    let at = Timestamp::from_unix_secs(START);
    let shop = Actor::new("shop");
    let n = 3_000;
    for _ in 0..n {
        let pet = inventory
            .create(NewPet::new("Rex", CategoryId::MIN).unwrap())
            .unwrap();
        inventory
            .place_order(&shop, NewOrder::new(pet.id()), at)
            .unwrap();
    }
    // One cancelled meanwhile: it must not lapse.
    inventory.cancel_order(&shop, order_id(7), at).unwrap();
    let due = at + Hold::DEFAULT.duration();
    let before = at + (Hold::DEFAULT.duration() - Duration::from_secs(1));
    assert_eq!(inventory.expire_due(before), Ok(0));
    assert_eq!(inventory.expire_due(due), Ok(n - 1));
    assert_eq!(inventory.expire_due(due), Ok(0));
    let expired = inventory.list_orders(
        &Actor::store(),
        &OrderQuery::new()
            .status(OrderStatus::Expired)
            .limit(PageSize::MAX),
    );
    assert_eq!(expired.orders.len(), 100);
    assert_eq!(inventory.next_deadline(), None);
}

/// Sixteen threads place an order for one pet at once: one wins.
#[test]
fn sixteen_racing_places_on_one_pet_have_one_winner() {
    for durable in [false, true] {
        let dir = crate::scratch::scratch("orders-race-place");
        let inventory = Arc::new(if durable {
            Inventory::open(&dir, JournalOptions::default()).unwrap()
        } else {
            Inventory::in_memory()
        });
        let pet = inventory
            .create(NewPet::new("Rex", CategoryId::MIN).unwrap())
            .unwrap()
            .id();
        let barrier = Arc::new(Barrier::new(16));
        let threads: Vec<_> = (0..16)
            .map(|i| {
                let (inventory, barrier) = (inventory.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    let shop = Actor::new(&format!("key-{i}"));
                    inventory.place_order(
                        &shop,
                        NewOrder::new(pet),
                        Timestamp::from_unix_secs(START),
                    )
                })
            })
            .collect();
        let outcomes: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let won: Vec<&Order> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
        assert_eq!(won.len(), 1, "durable {durable}: {outcomes:?}");
        for lost in outcomes.iter().filter_map(|o| o.as_ref().err()) {
            assert!(matches!(
                lost,
                StepError::PetConflict {
                    current: PetStatus::Pending,
                    ..
                }
            ));
        }
        assert_eq!(inventory.orders_len(), 1);
        drop(inventory);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A complete, a cancel and the lapse timer race on one order whose hold
/// has just lapsed or not: exactly one of them changes it.
#[test]
fn complete_cancel_and_lapse_racing_on_one_order_have_one_winner() {
    for lapsed in [false, true] {
        for round in 0..20 {
            let inventory = Arc::new(Inventory::in_memory());
            let pet = inventory
                .create(NewPet::new("Rex", CategoryId::MIN).unwrap())
                .unwrap()
                .id();
            let at = Timestamp::from_unix_secs(START);
            let shop = Actor::new("shop");
            let order = inventory
                .place_order(&shop, NewOrder::new(pet), at)
                .unwrap()
                .id();
            let when = if lapsed {
                at + Hold::DEFAULT.duration()
            } else {
                at + Duration::from_secs(1)
            };
            let barrier = Arc::new(Barrier::new(3));
            let spawn = |which: u8| {
                let (inventory, barrier, shop) = (inventory.clone(), barrier.clone(), shop.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    match which {
                        0 => inventory
                            .steps(vec![StepRequest {
                                actor: shop,
                                step: Step::Complete(order),
                                at: when,
                                claim: None,
                            }])
                            .unwrap()
                            .pop()
                            .unwrap()
                            .is_ok(),
                        1 => inventory.cancel_order(&shop, order, when).is_ok(),
                        _ => inventory.expire_due(when).unwrap() == 1,
                    }
                })
            };
            let threads: Vec<_> = (0..3).map(spawn).collect();
            let wins: Vec<bool> = threads.into_iter().map(|t| t.join().unwrap()).collect();
            let status = inventory.order(&shop, order).unwrap().status();
            if lapsed {
                // The lapse wins whoever runs first: as if the timer had.
                assert_eq!(status, OrderStatus::Expired, "round {round}");
                assert!(!wins[0] && !wins[1], "round {round}: {wins:?}");
            } else {
                assert_eq!(
                    wins.iter().filter(|w| **w).count(),
                    1,
                    "round {round}: {wins:?}"
                );
                assert!(!wins[2]);
            }
            let pet_status = inventory.get(pet).unwrap().status();
            let want = match status {
                OrderStatus::Completed => PetStatus::Sold,
                _ => PetStatus::Available,
            };
            assert_eq!(pet_status, want);
        }
    }
}

/// Many threads each stepping their own pets at once: the steps queued
/// while one thread decides are decided together by the next; every
/// caller gets its own answers, in its order, and a reopen holds them.
#[test]
fn threads_stepping_at_once_each_get_their_own_answers() {
    let dir = crate::scratch::scratch("orders-combined");
    let threads = 32u64;
    let rounds = 20u64;
    {
        let inventory = Arc::new(Inventory::open(&dir, JournalOptions::default()).unwrap());
        for _ in 0..threads {
            inventory
                .create(NewPet::new("Rex", CategoryId::MIN).unwrap())
                .unwrap();
        }
        let barrier = Arc::new(Barrier::new(threads as usize));
        let handles: Vec<_> = (1..=threads)
            .map(|pet| {
                let (inventory, barrier) = (inventory.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    let actor = Actor::new(&format!("key-{pet}"));
                    let at = Timestamp::from_unix_secs(START);
                    for _ in 0..rounds {
                        let batch = [Transition::Reserve, Transition::Release]
                            .map(|t| StepRequest {
                                actor: actor.clone(),
                                step: Step::Transition(pet_id(pet), t),
                                at,
                                claim: None,
                            })
                            .into();
                        let outcomes = inventory.steps(batch).unwrap();
                        let statuses: Vec<Outcome> = outcomes.into_iter().map(outcome_of).collect();
                        assert_eq!(
                            statuses,
                            [
                                Outcome::Pet(pet, PetStatus::Pending),
                                Outcome::Pet(pet, PetStatus::Available)
                            ]
                        );
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        assert_eq!(inventory.orders_len(), threads * rounds);
    }
    let reopened = Inventory::open(&dir, JournalOptions::default()).unwrap();
    assert_eq!(reopened.orders_len(), threads * rounds);
    let cancelled = reopened.list_orders(
        &Actor::store(),
        &OrderQuery::new()
            .status(OrderStatus::Cancelled)
            .limit(PageSize::MAX),
    );
    assert_eq!(cancelled.orders.len(), 100);
    drop(reopened);
    assert!(check_journal(&dir).unwrap().is_clean());
    std::fs::remove_dir_all(&dir).unwrap();
}
