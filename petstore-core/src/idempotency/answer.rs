//! [`Answer`]: what a keyed write answered, kept to be given again.

use crate::order::{Order, OrderId, OrderStatus};
use crate::pet::{Pet, PetId, PetStatus, Transition};

/// The answer a keyed write gave, as kept for its key: enough to give the
/// same status, body and `Location` again, byte for byte (the pet's JSON
/// is its canonical encoding, [`Pet::to_json`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The pet a create stored (`201`, with its `Location`).
    Created(Pet),
    /// The pet as a transition left it (`200`).
    Transitioned(Pet),
    /// A transition the pet's status did not allow (`409
    /// status_conflict`): the pet, the status it had then, the transition.
    Conflict {
        /// The pet.
        id: PetId,
        /// Its status when the transition was refused.
        status: PetStatus,
        /// The transition refused.
        transition: Transition,
    },
    /// An order placed, completed or cancelled, as it then stood (a
    /// place's is `201` with its `Location`, the others `200`). Boxed: a
    /// kept key's entry stays the size a pet's answer makes it.
    Order(Box<Order>),
    /// An order step refused for the order's status then (`409`).
    OrderConflict {
        /// The order.
        id: OrderId,
        /// Its status then.
        status: OrderStatus,
    },
}

/// What a key's lookup found, before its request is validated or run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Not kept: the request runs, and claims the key as it does.
    New,
    /// The same request was answered: its kept answer, to be given again.
    Replay(Answer),
    /// The key was used with another request (`422 idempotency_key_reused`).
    Reused,
    /// The key's first request is still running, whatever this request
    /// is (`409 idempotency_key_in_use`).
    InFlight,
}

/// What a keyed write did: ran and answered, or found the key taken (a
/// race lost between a lookup and the write's claim).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyedOutcome {
    /// It ran: this answer is now kept for the key.
    Done(Answer),
    /// The same request was answered before: its kept answer; nothing
    /// changed.
    Replay(Answer),
    /// The key was used with another request; nothing changed.
    Reused,
    /// The same request is still running; nothing changed.
    InFlight,
}

impl KeyedOutcome {
    /// The outcome of a key found taken: `None` for [`Seen::New`].
    pub fn of_seen(seen: Seen) -> Option<Self> {
        match seen {
            Seen::New => None,
            Seen::Replay(answer) => Some(KeyedOutcome::Replay(answer)),
            Seen::Reused => Some(KeyedOutcome::Reused),
            Seen::InFlight => Some(KeyedOutcome::InFlight),
        }
    }
}
