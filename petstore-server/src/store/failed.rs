//! Why a write was not made: [`CreateFailed`] for a create,
//! [`TransitionFailed`] for a transition, [`KeyedFailed`] for either with
//! an idempotency key (or a key's lookup).

use petstore_core::{
    idempotency::{Answer, KeyedOutcome},
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
            TransitionError::Storage(_) => TransitionFailed::Unavailable,
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
        Err(TransitionFailed::Unavailable) => Err(KeyedFailed::Unavailable),
    }
}
