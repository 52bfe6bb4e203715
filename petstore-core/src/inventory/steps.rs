//! What a step of the orders is ([`Step`], asked in a [`StepRequest`],
//! answered with [`Stepped`]), and how a step's journal record replays
//! onto the records and the book ([`restore_step`]).

use std::sync::Arc;

use parking_lot::Mutex;

use super::error::StepError;
use super::error::StorageFailure;
use super::journal::{OrderStep, StepKind};
use super::records::Records;
use crate::clock::Timestamp;
use crate::idempotency::Claim;
use crate::order::book::OrderBook;
use crate::order::{Actor, NewOrder, Order, OrderId, OrderStatus};
use crate::pet::{Pet, PetId, PetStatus, Transition};

/// One step asked of the orders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Place an order: its pet must be `available`, and becomes
    /// `pending`, held until the order's hold lapses.
    Place(NewOrder),
    /// Complete a placed order (paid): its pet `sold`.
    Complete(OrderId),
    /// Cancel a placed order: its pet `available`.
    Cancel(OrderId),
    /// A pet transition, the door to the same orders: `reserve` places
    /// an order with the default hold; `release` cancels the pet's placed
    /// order (or, for a pet pending without one, makes it available);
    /// `sell` completes it (or records a sale placed and completed at
    /// once).
    Transition(PetId, Transition),
}

/// What a step made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stepped {
    /// The order as it now stands (place, complete, cancel).
    Order(Order),
    /// The pet as it now stands (a pet transition).
    Pet(Pet),
}

/// A step asked by `actor` at `at` (its time: an order's `placedAt`,
/// `closedAt`, and what "past its hold" is judged by), with the claimed
/// idempotency key it is written with, when it has one.
#[derive(Debug)]
pub struct StepRequest {
    /// Who asks.
    pub actor: Actor,
    /// What.
    pub step: Step,
    /// When.
    pub at: Timestamp,
    /// Its claimed key (see [`Inventory::claim`](crate::Inventory::claim)), kept with its answer.
    pub claim: Option<Claim>,
}

/// What a batch of steps is answered: each step's outcome, or the
/// journal's failure.
pub(super) type Answered = Result<Vec<Result<Stepped, StepError>>, StorageFailure>;

/// A batch of steps waiting for the thread that decides next, and where
/// that thread leaves its answer (`orders.rs`, on why).
#[derive(Debug)]
pub(super) struct Queued {
    pub(super) requests: Vec<StepRequest>,
    pub(super) answer: Arc<Mutex<Option<Answered>>>,
}

/// The batches waiting to be decided, and whether a thread is deciding
/// some now (`orders.rs`, on why).
#[derive(Debug, Default)]
pub(super) struct Combine {
    pub(super) queue: Vec<Queued>,
    pub(super) busy: bool,
}

/// Replays an order's step of the journal onto the records and the
/// book, checked as it was decided: a new order takes the next id and a
/// free pet; a close names a placed order. Returns the order after it,
/// or why the record cannot be.
pub(super) fn restore_step(
    records: &mut Records,
    book: &mut OrderBook,
    step: &OrderStep,
) -> Result<Order, String> {
    let before = match &step.kind {
        StepKind::Place { pet, .. } | StepKind::Sale { pet, .. } => {
            if step.id.get() != book.len() + 1 {
                let expected = book.len() + 1;
                return Err(format!("expected order id {expected}, found {}", step.id));
            }
            let Some(index) = records.index_of(*pet) else {
                return Err(format!(
                    "order {} of pet {pet}, which no record before it created",
                    step.id
                ));
            };
            let current = records.statuses[index];
            // A place takes an available pet; a sale one that is
            // available, or pending without an order (created pending).
            let sale = matches!(step.kind, StepKind::Sale { .. });
            let free = current == PetStatus::Available
                || (sale && current == PetStatus::Pending && book.open_order(*pet).is_none());
            if !free {
                return Err(format!(
                    "order {} of pet {pet}, which was {current}",
                    step.id
                ));
            }
            None
        }
        StepKind::Close(_) => {
            let Some(order) = book.get(step.id) else {
                return Err(format!(
                    "a step of order {}, which no record before it placed",
                    step.id
                ));
            };
            if order.status != OrderStatus::Placed {
                return Err(format!(
                    "a step of order {}, which was {} already",
                    step.id, order.status
                ));
            }
            Some(order)
        }
    };
    let by = |name: &Arc<str>| book.name(name).unwrap_or_else(|| name.clone());
    let Some(order) = step.order_after(before, by) else {
        return Err(format!("a step of order {} that makes no order", step.id));
    };
    let pet_status = order.status.pet_status();
    if let Some(index) = records.index_of(order.pet) {
        records.set_status(index, pet_status);
    }
    book.put(&order);
    Ok(order)
}
