//! Why a write was not made: [`CreateFailed`] for a create,
//! [`StepFailed`] for an order's step or a pet transition, [`KeyedFailed`]
//! for any with an idempotency key (or a key's lookup).

use petstore_core::{
    idempotency::{Answer, KeyedOutcome},
    inventory::{Step, StepError, Stepped},
    order::{OrderId, OrderStatus},
    PetStatus, Transition,
};

/// Why a create was not stored (or may not have been: a commit whose
/// outcome is unknown). Every cause answers the same 503; the cause is
/// logged once by the backend, when it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the pet could not be stored")]
pub struct CreateFailed;

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

impl From<StepFailed> for KeyedFailed {
    fn from(failed: StepFailed) -> Self {
        match failed {
            StepFailed::PetNotFound => KeyedFailed::NotFound,
            StepFailed::OrderNotFound => KeyedFailed::OrderNotFound,
            StepFailed::HeldByAnother(_) => KeyedFailed::HeldByAnother,
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
