//! The inventory's orders (beta): every step that changes a pet's hands
//! ([`Step`]: place, complete, cancel, and the pet transitions, which are
//! doors to the same orders), decided one batch at a time against what
//! is published, and the lapse of holds. The rules: docs/contract.md,
//! "Orders and holds (beta)".
//!
//! Why one lock for the decisions (`Inventory::steps`), held until the
//! batch is durable and published: a step reads a pet and its order and
//! changes both, so two racing steps must not decide against the same
//! state. A batch is decided whole under it (a later step sees an
//! earlier one's effect through [`Decider`]'s overlay), written in one
//! group commit, published, and only then is the lock let go: the next
//! batch decides against what readers see. One fsync per batch, not per
//! step.
//!
//! Why callers queue their batches: the lock is held across the fsync, so
//! threads that each call with one step would each wait for their own
//! fsync. Instead a caller queues its batch; when no thread is deciding,
//! it takes every batch queued by then, decides them in one commit and
//! leaves each caller its answer (flat combining), then wakes the others.
//! Threads that arrive during an fsync share the next one, as creates
//! share the journal's group commit, and a caller already answered never
//! waits behind the next batch's fsync.

use std::collections::HashMap;
use std::sync::Arc;

use super::error::StepError;
use super::journal::{
    encode_keyed_line, encode_order_line, encode_transition_line, Change, KeyedWrite, OrderStep,
    StepKind,
};
use super::records::Records;
use super::steps::{Queued, Step, StepRequest, Stepped};
use super::{Inventory, StorageFailure};
use crate::clock::Timestamp;
use crate::idempotency::{Answer, Claim, Keyed};
use crate::order::book::OrderBook;
use crate::order::{Actor, Hold, NewOrder, Order, OrderId, OrderStatus};
use crate::pet::json::decode;
use crate::pet::{Pet, PetId, PetStatus, Transition};

/// The most holds one commit expires: a lapse of many holds at once is
/// written in batches this big, each under the decision lock for one
/// fsync, so that requests interleave with it.
const EXPIRE_BATCH: usize = 1_024;

impl Inventory {
    /// Places an order for `actor`: in one step its pet becomes `pending`
    /// and the order `placed`, holding it until `at` plus the hold.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::*;
    /// use petstore_core::order::{Actor, NewOrder, OrderStatus};
    /// let inventory = Inventory::in_memory();
    /// let rex = inventory.create(NewPet::new("Rex", CategoryId::MIN).unwrap()).unwrap().id();
    /// let shop = Actor::new("shop");
    /// let at = Timestamp::from_unix_secs(1_000);
    /// let order = inventory.place_order(&shop, NewOrder::new(rex), at).unwrap();
    /// assert_eq!((order.id().get(), order.status()), (1, OrderStatus::Placed));
    /// assert_eq!(order.expires_at(), Timestamp::from_unix_secs(1_900));
    /// assert_eq!(inventory.get(rex).unwrap().status(), PetStatus::Pending);
    /// // The pet is held: a second order is refused.
    /// assert!(inventory.place_order(&shop, NewOrder::new(rex), at).is_err());
    /// let done = inventory.complete_order(&shop, order.id(), at).unwrap();
    /// assert_eq!(done.status(), OrderStatus::Completed);
    /// assert_eq!(inventory.get(rex).unwrap().status(), PetStatus::Sold);
    /// ```
    pub fn place_order(
        &self,
        actor: &Actor,
        new: NewOrder,
        at: Timestamp,
    ) -> Result<Order, StepError> {
        self.step(actor, Step::Place(new), at).map(order_of)
    }

    /// Completes a placed order of `actor`'s (or any, for one that sees
    /// all): the order `completed`, its pet `sold`. Past its hold, even
    /// before the lapse timer saw it, the hold lapses instead and this
    /// is a conflict naming `expired`.
    pub fn complete_order(
        &self,
        actor: &Actor,
        id: OrderId,
        at: Timestamp,
    ) -> Result<Order, StepError> {
        self.step(actor, Step::Complete(id), at).map(order_of)
    }

    /// Cancels a placed order: the order `cancelled`, its pet
    /// `available`. Past its hold, as [`complete_order`](Self::complete_order).
    pub fn cancel_order(
        &self,
        actor: &Actor,
        id: OrderId,
        at: Timestamp,
    ) -> Result<Order, StepError> {
        self.step(actor, Step::Cancel(id), at).map(order_of)
    }

    /// A pet transition made by `actor` at `at`: the door to orders
    /// ([`Step::Transition`]). Acting on a pet another key's order holds
    /// needs an actor that sees all orders.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::*;
    /// use petstore_core::order::Actor;
    /// let inventory = Inventory::in_memory();
    /// let rex = inventory.create(NewPet::new("Rex", CategoryId::MIN).unwrap()).unwrap().id();
    /// let at = Timestamp::from_unix_secs(1_000);
    /// let pet = inventory.transition_by(&Actor::new("a"), rex, Transition::Reserve, at).unwrap();
    /// assert_eq!(pet.status(), PetStatus::Pending);
    /// let other = inventory.transition_by(&Actor::new("b"), rex, Transition::Sell, at);
    /// assert!(matches!(other, Err(TransitionError::HeldByAnother { .. })));
    /// let boss = Actor::new("b").with_all_orders();
    /// assert!(inventory.transition_by(&boss, rex, Transition::Sell, at).is_ok());
    /// ```
    pub fn transition_by(
        &self,
        actor: &Actor,
        id: PetId,
        transition: Transition,
        at: Timestamp,
    ) -> Result<Pet, super::TransitionError> {
        match self.step(actor, Step::Transition(id, transition), at) {
            Ok(Stepped::Pet(pet)) => Ok(pet),
            Ok(Stepped::Order(_)) => Err(super::TransitionError::NotFound(id)),
            Err(error) => Err(error.into()),
        }
    }

    /// One step, as [`steps`](Self::steps) makes a batch of one.
    pub fn step(&self, actor: &Actor, step: Step, at: Timestamp) -> Result<Stepped, StepError> {
        let request = StepRequest {
            actor: actor.clone(),
            step,
            at,
            claim: None,
        };
        match self.steps(vec![request]) {
            Ok(mut outcomes) => outcomes.pop().unwrap_or(Err(StepError::IdsExhausted)),
            Err(failure) => Err(StepError::Storage(failure)),
        }
    }

    /// Several steps, decided in order (a later one sees an earlier one's
    /// effect), each with its own outcome; a durable inventory writes
    /// them in one group commit and returns once they are on disk and
    /// published. A step with a claimed key is written with it, and the
    /// key keeps its answer: the order or pet it made, or the conflict
    /// (a step not found, or held by another key, keeps nothing).
    ///
    /// `Err` when the journal failed: then none is acknowledged.
    pub fn steps(
        &self,
        batch: Vec<StepRequest>,
    ) -> Result<Vec<Result<Stepped, StepError>>, StorageFailure> {
        let answer = Arc::new(parking_lot::Mutex::new(None));
        let mut combine = self.combine.lock();
        combine.queue.push(Queued {
            requests: batch,
            answer: Arc::clone(&answer),
        });
        loop {
            // Answers are left before `busy` is cleared, under this lock.
            if let Some(answered) = answer.lock().take() {
                return answered;
            }
            if combine.busy {
                self.combined.wait(&mut combine);
                continue;
            }
            combine.busy = true;
            let queued = std::mem::take(&mut combine.queue);
            parking_lot::MutexGuard::unlocked(&mut combine, || {
                // Dropped before the closure's end re-locks `combine`.
                let deciding = Deciding(self);
                let _steps = self.steps.lock();
                self.decide_queued(queued);
                drop(deciding);
            });
            combine.busy = false;
            self.combined.notify_all();
        }
    }

    /// Decides every queued batch in one commit, under the steps' lock,
    /// and leaves each its answer.
    fn decide_queued(&self, queued: Vec<Queued>) {
        let mut claims = Vec::new();
        let mut sizes = Vec::with_capacity(queued.len());
        let answers = Unanswered(queued.iter().map(|q| Arc::clone(&q.answer)).collect());
        let (mut outcomes, written) = {
            let records = self.records.read();
            let book = self.orders.read();
            let mut decider = Decider::new(&records, &book, self.journal.is_some());
            let mut outcomes = Vec::new();
            for batch in queued {
                sizes.push(batch.requests.len());
                for request in batch.requests {
                    let keyed = request.claim.as_ref().map(Claim::keyed);
                    outcomes.push(decider.decide(&request.actor, request.step, request.at, keyed));
                    claims.push(request.claim);
                }
            }
            (outcomes, decider.written())
        };
        if let Err(failure) = self.commit(written) {
            // Nothing acknowledged; every claim is let go as it drops.
            for answer in &answers.0 {
                *answer.lock() = Some(Err(failure.clone()));
            }
            return;
        }
        for (outcome, claim) in outcomes.iter().zip(claims) {
            let Some(claim) = claim else { continue };
            if let Some(answer) = answer_of(outcome) {
                claim.keep(answer);
            }
        }
        for (size, answer) in sizes.into_iter().zip(&answers.0).rev() {
            let mine = outcomes.split_off(outcomes.len() - size);
            *answer.lock() = Some(Ok(mine));
        }
    }

    /// Expires every placed order whose hold has lapsed at `now`, in
    /// batches of 1,024 (one fsync each), each order exactly once whatever
    /// races it: its pet `available` again. Returns how many it expired.
    /// Driven by the deadlines' heap: it touches only what is due.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use petstore_core::*;
    /// use petstore_core::order::{Actor, NewOrder, OrderStatus};
    /// let inventory = Inventory::in_memory();
    /// let rex = inventory.create(NewPet::new("Rex", CategoryId::MIN).unwrap()).unwrap().id();
    /// let at = Timestamp::from_unix_secs(1_000);
    /// let order = inventory.place_order(&Actor::new("shop"), NewOrder::new(rex), at).unwrap();
    /// assert_eq!(inventory.next_deadline(), Some(order.expires_at()));
    /// assert_eq!(inventory.expire_due(at + Duration::from_secs(899)), Ok(0));
    /// assert_eq!(inventory.expire_due(order.expires_at()), Ok(1));
    /// assert_eq!(inventory.get(rex).unwrap().status(), PetStatus::Available);
    /// let all = order::Actor::store();
    /// assert_eq!(inventory.order(&all, order.id()).unwrap().status(), OrderStatus::Expired);
    /// assert_eq!(inventory.expire_due(order.expires_at()), Ok(0));
    /// ```
    pub fn expire_due(&self, now: Timestamp) -> Result<usize, StorageFailure> {
        let mut expired = 0;
        loop {
            let _deciding = self.steps.lock();
            let due = self.orders.write().take_due(now, EXPIRE_BATCH);
            if due.is_empty() {
                return Ok(expired);
            }
            let written = {
                let records = self.records.read();
                let book = self.orders.read();
                let mut decider = Decider::new(&records, &book, self.journal.is_some());
                for id in due {
                    decider.lapse(id, now);
                }
                decider.written()
            };
            expired += written.expired;
            self.commit(written)?;
        }
    }

    /// The earliest deadline of a placed order, if any: when
    /// [`expire_due`](Self::expire_due) next has work (perhaps none, if
    /// that order was closed since).
    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.orders.read().next_deadline()
    }

    /// The order with this id, if `actor` may see it.
    pub fn order(&self, actor: &Actor, id: OrderId) -> Option<Order> {
        self.orders
            .read()
            .get(id)
            .filter(|order| actor.sees(order.placed_by()))
    }

    /// One page of the orders `actor` sees, ascending by id. A key's own
    /// orders are read through its index: the page costs its own size,
    /// not the number of other keys' orders.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::*;
    /// use petstore_core::inventory::OrderQuery;
    /// use petstore_core::order::{Actor, NewOrder};
    /// let inventory = Inventory::in_memory();
    /// let at = Timestamp::from_unix_secs(1_000);
    /// for (name, key) in [("Rex", "a"), ("Tom", "b"), ("Kitty", "a")] {
    ///     let pet = inventory.create(NewPet::new(name, CategoryId::MIN).unwrap()).unwrap();
    ///     inventory.place_order(&Actor::new(key), NewOrder::new(pet.id()), at).unwrap();
    /// }
    /// let page = inventory.list_orders(&Actor::new("a"), &OrderQuery::new());
    /// assert_eq!(page.orders.iter().map(|o| o.id().get()).collect::<Vec<_>>(), [1, 3]);
    /// assert_eq!(inventory.list_orders(&Actor::store(), &OrderQuery::new()).orders.len(), 3);
    /// ```
    pub fn list_orders(&self, actor: &Actor, query: &super::OrderQuery) -> super::OrderPage {
        let (orders, next_after) =
            self.orders
                .read()
                .list(actor, query.after, query.status, query.limit.get());
        super::OrderPage { orders, next_after }
    }

    /// [`list_orders`](Self::list_orders)'s page already encoded as the
    /// JSON response body (a bare array of Order), byte for byte
    /// `page.to_json()`, written from the compact rows without building
    /// an order; and where the next page starts.
    pub fn list_orders_json(
        &self,
        actor: &Actor,
        query: &super::OrderQuery,
    ) -> (Vec<u8>, Option<OrderId>) {
        let mut body = Vec::with_capacity(256 * query.limit.get());
        let next = self.orders.read().encode_page(
            actor,
            query.after,
            query.status,
            query.limit.get(),
            &mut body,
        );
        (body, next)
    }

    /// Applies orders a read copy fetched from the store that decides
    /// them (PostgreSQL): each new one (the next id) is added, each it
    /// holds takes the given state. `orders` must be in ascending id
    /// order; an order id beyond the next is a gap, and then nothing is
    /// applied. Their pets' statuses are applied apart, by
    /// [`apply_statuses`](Self::apply_statuses). A durable inventory
    /// refuses, as [`apply`](Self::apply) does.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::{PetId, Timestamp, Inventory, inventory::ApplyError};
    /// use petstore_core::order::{Actor, Order, OrderId, OrderStatus};
    /// let at = Timestamp::from_unix_secs(1_000);
    /// let order = |id, status, closed| {
    ///     let id = OrderId::new(id).unwrap();
    ///     Order::from_parts(id, PetId::MIN, status, "shop", at, at, closed).unwrap()
    /// };
    /// let copy = Inventory::in_memory();
    /// assert_eq!(copy.apply_orders(&[order(1, OrderStatus::Placed, None)]), Ok(1));
    /// assert_eq!(copy.apply_orders(&[order(1, OrderStatus::Expired, Some(at))]), Ok(1));
    /// assert_eq!(copy.order(&Actor::new("shop"), OrderId::MIN).unwrap().status(), OrderStatus::Expired);
    /// assert_eq!(
    ///     copy.apply_orders(&[order(3, OrderStatus::Placed, None)]),
    ///     Err(ApplyError::OrderGap { expected: 2, found: 3 })
    /// );
    /// ```
    pub fn apply_orders(&self, orders: &[Order]) -> Result<usize, super::ApplyError> {
        if self.journal.is_some() {
            return Err(super::ApplyError::Durable);
        }
        let mut book = self.orders.write();
        let mut next = book.len() + 1;
        for order in orders {
            let id = order.id().get();
            if id > next {
                return Err(super::ApplyError::OrderGap {
                    expected: next,
                    found: id,
                });
            }
            next = next.max(id + 1);
        }
        for order in orders {
            // A name the book holds already is shared, not copied.
            let order = match book.name(order.placed_by()) {
                Some(name) => Order {
                    placed_by: name,
                    ..order.clone()
                },
                None => order.clone(),
            };
            book.put(&order);
        }
        Ok(orders.len())
    }

    /// How many orders there are, of every key (the last order id).
    pub fn orders_len(&self) -> u64 {
        self.orders.read().len()
    }

    /// Writes and publishes what a decider decided.
    fn commit(&self, written: Written) -> Result<(), StorageFailure> {
        match &self.journal {
            Some(journal) => journal.append_records(
                &written.lines,
                written.count,
                written.changes,
                &|changes, at| self.publish(changes, at),
            ),
            None => {
                self.publish(&written.changes, super::unix_secs_now());
                Ok(())
            }
        }
    }
}

/// The answers of the batches one thread decides. Should the decision
/// panic (a bug), each caller still gets an answer, a failure, rather
/// than waiting for ever.
struct Unanswered(Vec<Arc<parking_lot::Mutex<Option<super::steps::Answered>>>>);

impl Drop for Unanswered {
    fn drop(&mut self) {
        for answer in &self.0 {
            let mut answer = answer.lock();
            if answer.is_none() {
                *answer = Some(Err(StorageFailure {
                    fault: super::StorageFault::WriteFailed,
                    detail: "deciding the batch of steps panicked; nothing of it was acknowledged"
                        .into(),
                }));
            }
        }
    }
}

/// Clears `busy` and wakes the waiters if the thread deciding unwinds, so
/// that the next caller decides instead of waiting for ever.
struct Deciding<'a>(&'a Inventory);

impl Drop for Deciding<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.combine.lock().busy = false;
            self.0.combined.notify_all();
        }
    }
}

/// The order a place, complete or cancel made.
fn order_of(stepped: Stepped) -> Order {
    match stepped {
        Stepped::Order(order) => order,
        // `decide` answers an order step with its order.
        Stepped::Pet(_) => unreachable!("an order step answered with a pet"),
    }
}

/// What a key keeps for a step's outcome, if anything.
fn answer_of(outcome: &Result<Stepped, StepError>) -> Option<Answer> {
    match outcome {
        Ok(Stepped::Order(order)) => Some(Answer::Order(Box::new(order.clone()))),
        Ok(Stepped::Pet(pet)) => Some(Answer::Transitioned(pet.clone())),
        Err(StepError::PetConflict {
            id,
            current,
            transition,
        }) => Some(Answer::Conflict {
            id: *id,
            status: *current,
            transition: *transition,
        }),
        Err(StepError::OrderConflict { id, status }) => Some(Answer::OrderConflict {
            id: *id,
            status: *status,
        }),
        Err(_) => None,
    }
}

/// What a batch of decisions writes: its records, and the changes
/// readers see once they are durable.
struct Written {
    lines: Vec<u8>,
    count: u64,
    changes: Vec<Change>,
    expired: usize,
}

/// Decides steps against what is published plus what this batch already
/// decided (its overlay), and writes down each decision.
struct Decider<'a> {
    records: &'a Records,
    book: &'a OrderBook,
    pets: HashMap<PetId, PetStatus>,
    orders: HashMap<OrderId, Order>,
    open: HashMap<PetId, Option<OrderId>>,
    next_order: u64,
    /// Whether records are encoded (a durable inventory).
    durable: bool,
    written: Written,
}

impl<'a> Decider<'a> {
    fn new(records: &'a Records, book: &'a OrderBook, durable: bool) -> Self {
        Decider {
            records,
            book,
            pets: HashMap::new(),
            orders: HashMap::new(),
            open: HashMap::new(),
            next_order: book.len(),
            durable,
            written: Written {
                lines: Vec::new(),
                count: 0,
                changes: Vec::new(),
                expired: 0,
            },
        }
    }

    fn written(self) -> Written {
        self.written
    }

    fn pet_status(&self, id: PetId) -> Option<PetStatus> {
        match self.pets.get(&id) {
            Some(status) => Some(*status),
            None => self
                .records
                .index_of(id)
                .map(|index| self.records.statuses[index]),
        }
    }

    fn order(&self, id: OrderId) -> Option<Order> {
        match self.orders.get(&id) {
            Some(order) => Some(order.clone()),
            None => self.book.get(id),
        }
    }

    fn open_order(&self, pet: PetId) -> Option<OrderId> {
        match self.open.get(&pet) {
            Some(open) => *open,
            None => self.book.open_order(pet),
        }
    }

    /// The pet with the status this batch gave it (its JSON, published,
    /// still holds the one before).
    fn pet(&self, id: PetId, status: PetStatus) -> Option<Pet> {
        let index = self.records.index_of(id)?;
        decode(id, self.records.statuses[index], self.records.json(index))
            .map(|pet| pet.with_status(status))
    }

    /// The actor's name, shared with its earlier orders' when it has any.
    fn name(&self, actor: &Actor) -> Arc<str> {
        self.book
            .name(actor.name())
            .unwrap_or_else(|| Arc::from(actor.name()))
    }

    /// Decides one step.
    fn decide(
        &mut self,
        actor: &Actor,
        step: Step,
        at: Timestamp,
        keyed: Option<&Keyed>,
    ) -> Result<Stepped, StepError> {
        let at = Timestamp::from_unix_secs(at.unix_secs());
        match step {
            Step::Place(new) => {
                self.lapse_pet(new.pet, at);
                let current = self
                    .pet_status(new.pet)
                    .ok_or(StepError::PetNotFound(new.pet))?;
                if current != PetStatus::Available {
                    return Err(self.pet_conflict(new.pet, current, Transition::Reserve, keyed));
                }
                self.place(actor, new, at, None, keyed).map(Stepped::Order)
            }
            Step::Complete(id) | Step::Cancel(id) => {
                let order = self
                    .order(id)
                    .filter(|order| actor.sees(order.placed_by()))
                    .ok_or(StepError::OrderNotFound(id))?;
                let mut status = order.status;
                if order.lapsed_at(at) {
                    self.lapse(id, at);
                    status = OrderStatus::Expired;
                }
                if status != OrderStatus::Placed {
                    if let Some(keyed) = keyed {
                        self.emit_keyed_conflict(keyed, KeyedWrite::OrderConflict(id, status));
                    }
                    return Err(StepError::OrderConflict { id, status });
                }
                let to = match step {
                    Step::Complete(_) => OrderStatus::Completed,
                    _ => OrderStatus::Cancelled,
                };
                let step = OrderStep {
                    id,
                    kind: StepKind::Close(to),
                    at: at.unix_secs(),
                    door: None,
                };
                Ok(Stepped::Order(self.emit(step, keyed)))
            }
            Step::Transition(pet, transition) => self.door(actor, pet, transition, at, keyed),
        }
    }

    /// A pet transition, as a door to orders.
    fn door(
        &mut self,
        actor: &Actor,
        pet: PetId,
        transition: Transition,
        at: Timestamp,
        keyed: Option<&Keyed>,
    ) -> Result<Stepped, StepError> {
        self.lapse_pet(pet, at);
        let current = self.pet_status(pet).ok_or(StepError::PetNotFound(pet))?;
        if !transition.allows(current) {
            return Err(self.pet_conflict(pet, current, transition, keyed));
        }
        let door = Some(transition);
        match (transition, self.open_order(pet)) {
            (Transition::Reserve, _) => {
                self.place(actor, NewOrder::new(pet), at, door, keyed)?;
            }
            (_, Some(id)) => {
                let held_by_another = self
                    .order(id)
                    .is_some_and(|order| !actor.sees(order.placed_by()));
                if held_by_another {
                    return Err(StepError::HeldByAnother { id: pet, order: id });
                }
                let to = match transition {
                    Transition::Sell => OrderStatus::Completed,
                    _ => OrderStatus::Cancelled,
                };
                let step = OrderStep {
                    id,
                    kind: StepKind::Close(to),
                    at: at.unix_secs(),
                    door,
                };
                self.emit(step, keyed);
            }
            (Transition::Release, None) => {
                // A pet created pending has no order: the transition alone.
                self.emit_transition(pet, transition, keyed);
            }
            (Transition::Sell, None) => {
                let id = self.next_id()?;
                let step = OrderStep {
                    id,
                    kind: StepKind::Sale {
                        pet,
                        by: self.name(actor),
                    },
                    at: at.unix_secs(),
                    door,
                };
                self.emit(step, keyed);
            }
        }
        self.pet(pet, transition.to_status())
            .map(Stepped::Pet)
            .ok_or(StepError::PetNotFound(pet))
    }

    fn next_id(&self) -> Result<OrderId, StepError> {
        OrderId::new(self.next_order + 1).ok_or(StepError::IdsExhausted)
    }

    fn place(
        &mut self,
        actor: &Actor,
        new: NewOrder,
        at: Timestamp,
        door: Option<Transition>,
        keyed: Option<&Keyed>,
    ) -> Result<Order, StepError> {
        let id = self.next_id()?;
        let hold: Hold = new.hold;
        let step = OrderStep {
            id,
            kind: StepKind::Place {
                pet: new.pet,
                by: self.name(actor),
                expires: at.unix_secs().saturating_add(u64::from(hold.secs())),
            },
            at: at.unix_secs(),
            door,
        };
        Ok(self.emit(step, keyed))
    }

    /// Refuses a step for its pet's status, keeping the conflict for its key.
    fn pet_conflict(
        &mut self,
        id: PetId,
        current: PetStatus,
        transition: Transition,
        keyed: Option<&Keyed>,
    ) -> StepError {
        if let Some(keyed) = keyed {
            self.emit_keyed_conflict(keyed, KeyedWrite::Conflict(id, current, transition));
        }
        StepError::PetConflict {
            id,
            current,
            transition,
        }
    }

    /// Expires the pet's placed order if its hold has lapsed at `at`.
    fn lapse_pet(&mut self, pet: PetId, at: Timestamp) {
        if let Some(id) = self.open_order(pet) {
            self.lapse(id, at);
        }
    }

    /// Expires order `id` if it is placed and its hold has lapsed at `at`.
    fn lapse(&mut self, id: OrderId, at: Timestamp) {
        if !self.order(id).is_some_and(|order| order.lapsed_at(at)) {
            return;
        }
        let step = OrderStep {
            id,
            kind: StepKind::Close(OrderStatus::Expired),
            at: at.unix_secs(),
            door: None,
        };
        self.emit(step, None);
        self.written.expired += 1;
    }

    /// Writes a step down and applies it to the overlay; returns the
    /// order as it now stands.
    fn emit(&mut self, step: OrderStep, keyed: Option<&Keyed>) -> Order {
        let before = match step.kind {
            StepKind::Close(_) => self.order(step.id),
            StepKind::Place { .. } | StepKind::Sale { .. } => {
                self.next_order += 1;
                None
            }
        };
        let at = Timestamp::from_unix_secs(step.at);
        let order = step
            .order_after(before, Arc::clone)
            .unwrap_or_else(|| Order {
                // `decide` closes only an order it found.
                id: step.id,
                pet: PetId::MIN,
                status: match step.kind {
                    StepKind::Close(status) => status,
                    _ => OrderStatus::Placed,
                },
                placed_by: Arc::from(""),
                placed_at: at,
                expires_at: at,
                closed_at: Some(at),
            });
        let placed = order.status == OrderStatus::Placed;
        self.open.insert(order.pet, placed.then_some(order.id));
        let pet_status = order.status.pet_status();
        if self.durable {
            match keyed {
                Some(keyed) => {
                    encode_keyed_line(keyed, KeyedWrite::Order(&step), &mut self.written.lines)
                }
                None => encode_order_line(&step, &mut self.written.lines),
            }
        }
        self.written.count += 1;
        self.pets.insert(order.pet, pet_status);
        self.orders.insert(order.id, order.clone());
        // The order first, then its pet: the order of a step's two events
        // in the feed, as PostgreSQL's replicas write them too.
        self.written.changes.push(Change::Order(order.clone()));
        self.written
            .changes
            .push(Change::Changed(order.pet, pet_status));
        order
    }

    /// Writes down a pet transition that touches no order.
    fn emit_transition(&mut self, pet: PetId, transition: Transition, keyed: Option<&Keyed>) {
        if self.durable {
            match keyed {
                Some(keyed) => encode_keyed_line(
                    keyed,
                    KeyedWrite::Transition(pet, transition),
                    &mut self.written.lines,
                ),
                None => encode_transition_line(pet, transition, &mut self.written.lines),
            }
        }
        self.written.count += 1;
        let status = transition.to_status();
        self.pets.insert(pet, status);
        self.written.changes.push(Change::Changed(pet, status));
    }

    /// Writes down a refusal kept for its key: it changes nothing.
    fn emit_keyed_conflict(&mut self, keyed: &Keyed, conflict: KeyedWrite<'_>) {
        if self.durable {
            encode_keyed_line(keyed, conflict, &mut self.written.lines);
            self.written.count += 1;
        }
    }
}
