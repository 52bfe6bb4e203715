//! Why a write was not made: [`CreateFailed`] for a create,
//! [`TransitionFailed`] for a transition, [`StepFailed`] for an order's
//! step, [`KeyedFailed`] for any with an idempotency key (or a key's
//! lookup).

use petstore_core::{
    idempotency::{Answer, KeyedOutcome},
    inventory::{Step, StepError, Stepped},
    order::{OrderId, OrderStatus},
    Pet, PetId, PetStatus, Transition, TransitionError,
};

/// Why a create was not stored (or may not have been: a commit whose
/// outcome is unknown). Every cause answers the same 503; the cause is
/// logged once by the backend, when it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the pet could not be stored")]
pub struct CreateFailed;

/// Why a transition was not made: what the contract answers, whichever
/// store decided (the pet's id and the transition are the request's, so
/// they are not repeated here).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransitionFailed {
    /// No pet has the id: 404 `not_found`.
    NotFound,
    /// The pet's current status does not allow the transition: 409
    /// `status_conflict`, with that status.
    Conflict(PetStatus),
    /// Another key's placed order holds the pet, and the caller acts on
    /// its own orders only: 403 `insufficient_scope` (`orders:all`).
    HeldByAnother(OrderId),
    /// The change could not be made durable, or its outcome is unknown:
    /// 503, as a create's [`CreateFailed`] (the cause is logged once, by
    /// the backend).
    Unavailable,
}

impl From<TransitionError> for TransitionFailed {
    fn from(error: TransitionError) -> Self {
        match error {
            TransitionError::NotFound(_) => TransitionFailed::NotFound,
            TransitionError::Conflict { current, .. } => TransitionFailed::Conflict(current),
            TransitionError::HeldByAnother { order, .. } => TransitionFailed::HeldByAnother(order),
            TransitionError::Storage(_) => TransitionFailed::Unavailable,
        }
    }
}

/// Why an order's step (or a pet transition, its door) was not made:
/// what the contract answers, whichever store decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepFailed {
    /// No such pet: 404.
    PetNotFound,
    /// No such order that the caller may see: 404.
    OrderNotFound,
    /// The pet's status does not allow it: 409, with that status.
    PetConflict(PetStatus),
    /// The order is no longer placed: 409, with its status.
    OrderConflict(OrderStatus),
    /// Another key's order holds the pet: 403 (`orders:all`).
    HeldByAnother(OrderId),
    /// This backend keeps no orders yet (replicas): 501.
    NotServed,
    /// Not made durable, or not known to be: 503.
    Unavailable,
}

impl From<StepError> for StepFailed {
    fn from(error: StepError) -> Self {
        match error {
            StepError::PetNotFound(_) => StepFailed::PetNotFound,
            StepError::OrderNotFound(_) => StepFailed::OrderNotFound,
            StepError::PetConflict { current, .. } => StepFailed::PetConflict(current),
            StepError::OrderConflict { status, .. } => StepFailed::OrderConflict(status),
            StepError::HeldByAnother { order, .. } => StepFailed::HeldByAnother(order),
            StepError::IdsExhausted | StepError::Storage(_) => StepFailed::Unavailable,
        }
    }
}

impl From<TransitionFailed> for StepFailed {
    fn from(failed: TransitionFailed) -> Self {
        match failed {
            TransitionFailed::NotFound => StepFailed::PetNotFound,
            TransitionFailed::Conflict(status) => StepFailed::PetConflict(status),
            TransitionFailed::HeldByAnother(order) => StepFailed::HeldByAnother(order),
            TransitionFailed::Unavailable => StepFailed::Unavailable,
        }
    }
}

/// Why a keyed write (or the lookup of its key) gave no outcome. Nothing
/// is kept for the key: the client may retry with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyedFailed {
    /// A transition of a pet that does not exist: 404 `not_found`.
    #[error("no such pet")]
    NotFound,
    /// A step of an order that does not exist, or is another key's: 404.
    #[error("no such order")]
    OrderNotFound,
    /// Another key's order holds the pet: 403 (`orders:all`).
    #[error("the pet is held by another key's order")]
    HeldByAnother,
    /// This backend keeps no orders yet: 501.
    #[error("orders are not served by this backend")]
    NotServed,
    /// Not stored, or not known to be; or the key could not be looked
    /// up: 503, as [`CreateFailed`].
    #[error("the write could not be stored")]
    Unavailable,
}

impl From<CreateFailed> for KeyedFailed {
    fn from(_: CreateFailed) -> Self {
        KeyedFailed::Unavailable
    }
}

/// What a keyed transition that won its key answers, from what the
/// transition did: the pet changed and the conflict its status made are
/// both kept ([`KeyedOutcome::Done`]); a pet not found keeps nothing.
/// Every backend's keyed transition ends here.
pub(super) fn keyed_transition_done(
    id: PetId,
    transition: Transition,
    done: Result<Pet, TransitionFailed>,
) -> Result<KeyedOutcome, KeyedFailed> {
    match done {
        Ok(pet) => Ok(KeyedOutcome::Done(Answer::Transitioned(pet))),
        Err(TransitionFailed::Conflict(status)) => Ok(KeyedOutcome::Done(Answer::Conflict {
            id,
            status,
            transition,
        })),
        Err(TransitionFailed::NotFound) => Err(KeyedFailed::NotFound),
        Err(TransitionFailed::HeldByAnother(_)) => Err(KeyedFailed::HeldByAnother),
        Err(TransitionFailed::Unavailable) => Err(KeyedFailed::Unavailable),
    }
}

impl From<StepFailed> for KeyedFailed {
    fn from(failed: StepFailed) -> Self {
        match failed {
            StepFailed::PetNotFound => KeyedFailed::NotFound,
            StepFailed::OrderNotFound => KeyedFailed::OrderNotFound,
            StepFailed::HeldByAnother(_) => KeyedFailed::HeldByAnother,
            StepFailed::NotServed => KeyedFailed::NotServed,
            // Conflicts are kept answers, never failures of a keyed step.
            StepFailed::PetConflict(_) | StepFailed::OrderConflict(_) | StepFailed::Unavailable => {
                KeyedFailed::Unavailable
            }
        }
    }
}

/// What a keyed `step` that won its key answers, from what it did: what
/// it made and the conflict a status made are both kept
/// ([`KeyedOutcome::Done`]; the core kept the same); anything else keeps
/// nothing. Every local backend's keyed step ends here.
pub(super) fn keyed_step_done(
    step: Step,
    done: Result<Stepped, StepFailed>,
) -> Result<KeyedOutcome, KeyedFailed> {
    let answer = match (done, step) {
        (Ok(Stepped::Pet(pet)), _) => Answer::Transitioned(pet),
        (Ok(Stepped::Order(order)), _) => Answer::Order(Box::new(order)),
        (Err(StepFailed::PetConflict(status)), Step::Place(new)) => Answer::Conflict {
            id: new.pet,
            status,
            transition: Transition::Reserve,
        },
        (Err(StepFailed::PetConflict(status)), Step::Transition(id, transition)) => {
            Answer::Conflict {
                id,
                status,
                transition,
            }
        }
        (Err(StepFailed::OrderConflict(status)), Step::Complete(id) | Step::Cancel(id)) => {
            Answer::OrderConflict { id, status }
        }
        (Err(failed), _) => return Err(failed.into()),
    };
    Ok(KeyedOutcome::Done(answer))
}
