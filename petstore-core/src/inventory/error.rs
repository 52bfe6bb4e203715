//! The inventory's typed errors: why a create, a transition, an open or
//! an apply failed, and what a page size outside its bounds is. Each names what
//! was wrong, so a server can turn it into a clear message without
//! guessing.

use crate::order::{OrderId, OrderStatus};
use crate::pet::{PetId, PetStatus, Transition};

/// Why [`Inventory::create`](crate::Inventory::create) did not store a pet.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// Every id up to 2^63 - 1 has been given out.
    #[error("the inventory is full: no pet ids are left")]
    IdsExhausted,
    /// The journal could not be written or synced, or its file was
    /// deleted or replaced. The pet was not stored (or not durably), and
    /// the inventory refuses every later create until it is reopened;
    /// reads go on.
    #[error("the inventory cannot store pets: {0}")]
    Storage(StorageFailure),
}

/// Why [`Inventory::transition`](crate::Inventory::transition) did not
/// change a pet.
///
/// # Examples
///
/// ```
/// use petstore_core::{PetId, PetStatus, Transition, TransitionError};
/// let conflict = TransitionError::Conflict {
///     id: PetId::new(7).unwrap(),
///     current: PetStatus::Sold,
///     transition: Transition::Sell,
/// };
/// assert_eq!(conflict.to_string(), "pet 7 is sold; sell needs available or pending");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// No pet has this id.
    #[error("pet {0} not found")]
    NotFound(PetId),
    /// The pet's current status does not allow the transition (the same
    /// transition twice included: a sold pet cannot be sold again).
    #[error("pet {id} is {current}; {transition} needs {}", Needs(*transition))]
    Conflict {
        /// The pet.
        id: PetId,
        /// Its status now.
        current: PetStatus,
        /// The transition refused.
        transition: Transition,
    },
    /// The pet is held by a placed order of another key, and the caller
    /// may act on its own orders only.
    #[error("pet {id} is held by order {order}, which another key placed")]
    HeldByAnother {
        /// The pet.
        id: PetId,
        /// The order that holds it.
        order: OrderId,
    },
    /// The journal could not store the change (see
    /// [`CreateError::Storage`]): the pet was not changed, or not durably,
    /// and the inventory refuses every later change until it is reopened.
    #[error("the inventory cannot store changes: {0}")]
    Storage(StorageFailure),
}

/// Why an order step ([`Step`](crate::inventory::Step)) was not made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    /// No pet has this id.
    #[error("no pet with id {0}")]
    PetNotFound(PetId),
    /// No order has this id that the caller may see (another key's order
    /// is not found either, so its existence is not revealed).
    #[error("no order with id {0}")]
    OrderNotFound(OrderId),
    /// The pet's status does not allow the step: an order needs an
    /// `available` pet, and a pet transition its own statuses.
    #[error("pet {id} is {current}; {transition} needs {}", Needs(*transition))]
    PetConflict {
        /// The pet.
        id: PetId,
        /// Its status then.
        current: PetStatus,
        /// The step as a pet transition (`reserve` for placing an order).
        transition: Transition,
    },
    /// The order is no longer placed (its hold lapsed counts: `expired`).
    #[error("order {id} is {status}; only a placed order can be completed or cancelled")]
    OrderConflict {
        /// The order.
        id: OrderId,
        /// Its status then.
        status: OrderStatus,
    },
    /// See [`TransitionError::HeldByAnother`].
    #[error("pet {id} is held by order {order}, which another key placed")]
    HeldByAnother {
        /// The pet.
        id: PetId,
        /// The order that holds it.
        order: OrderId,
    },
    /// Every order id is taken.
    #[error("no order id is left")]
    IdsExhausted,
    /// The journal could not store the step: see [`TransitionError::Storage`].
    #[error("the inventory cannot store changes: {0}")]
    Storage(StorageFailure),
}

impl From<StepError> for TransitionError {
    fn from(error: StepError) -> TransitionError {
        match error {
            StepError::PetNotFound(id) => TransitionError::NotFound(id),
            StepError::PetConflict {
                id,
                current,
                transition,
            } => TransitionError::Conflict {
                id,
                current,
                transition,
            },
            StepError::HeldByAnother { id, order } => TransitionError::HeldByAnother { id, order },
            StepError::Storage(failure) => TransitionError::Storage(failure),
            // A pet transition names no order, and takes no new id unless
            // it places one.
            StepError::OrderNotFound(_)
            | StepError::OrderConflict { .. }
            | StepError::IdsExhausted => TransitionError::Storage(StorageFailure {
                fault: StorageFault::WriteFailed,
                detail: error.to_string(),
            }),
        }
    }
}

/// The statuses a transition needs, in words: "available or pending".
struct Needs(Transition);

impl std::fmt::Display for Needs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, status) in self.0.from_statuses().iter().enumerate() {
            if i > 0 {
                f.write_str(" or ")?;
            }
            f.write_str(status.as_str())?;
        }
        Ok(())
    }
}

/// Why a durable inventory cannot store pets any more, in words fit for a
/// client or a health check: never a path or an error number (those are
/// in [`StorageFailure::detail`], for the log).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum StorageFault {
    /// A write or fsync found the disk full.
    #[error("the data disk is full")]
    NoSpace,
    /// Writing the journal failed.
    #[error("the journal could not be written")]
    WriteFailed,
    /// Syncing the journal to disk failed.
    #[error("the journal could not be synced to disk")]
    SyncFailed,
    /// The journal's path no longer names the file the inventory writes:
    /// it was deleted, or replaced by another file. Pets written now would
    /// be lost at the next start.
    #[error("the journal file was deleted or replaced")]
    JournalReplaced,
}

/// A durable inventory's storage failure: what kind ([`StorageFault`], for
/// clients and health checks) and the details (for the operator's log).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{fault}: {detail}")]
pub struct StorageFailure {
    /// What went wrong, without paths.
    pub fault: StorageFault,
    /// The details: the journal's path and the operating system's error.
    pub detail: String,
}

/// Why [`Inventory::open`](crate::Inventory::open) failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The directory or journal could not be created, read or written.
    #[error("cannot use {path}: {source}")]
    Io {
        /// The path at fault.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A complete record (one ending in a newline, the last included) is
    /// damaged: that is corruption, not a torn write, and dropping it
    /// could drop an acknowledged pet.
    #[error("{path} line {line} is damaged ({reason}); refusing to open rather than drop an acknowledged pet")]
    Corrupt {
        /// The journal file.
        path: std::path::PathBuf,
        /// The line (1-based).
        line: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// Another process (a server, or a `journal repair`) holds the data
    /// directory's lock file.
    #[error("the data directory {dir} is in use by another process (it holds the lock on {lock})")]
    Locked {
        /// The data directory.
        dir: std::path::PathBuf,
        /// Its lock file.
        lock: std::path::PathBuf,
    },
}

/// Why [`Inventory::compact`](crate::Inventory::compact) failed. The
/// journal is as it was, or its live file was closed into a segment that
/// the next compaction takes in: either way it opens with every
/// acknowledged change, and writes go on.
#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    /// An in-memory inventory has no journal.
    #[error("an in-memory inventory has no journal to compact")]
    InMemory,
    /// The live journal could not be closed into a segment (or has failed).
    #[error("cannot close the journal into a segment: {0}")]
    Storage(StorageFailure),
    /// The closed files could not be read back.
    #[error("cannot read the closed journal back: {0}")]
    Read(OpenError),
    /// The snapshot could not be written, or what it replaced removed.
    #[error("cannot write the snapshot in {dir}: {source}")]
    Write {
        /// The data directory.
        dir: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Why [`Inventory::apply`](crate::Inventory::apply) or
/// [`Inventory::apply_statuses`](crate::Inventory::apply_statuses)
/// refused what it was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// The pets do not follow on from the inventory's last id: the next id
    /// it can take is `expected`, and `found` came (a gap, or pets out of
    /// order). Nothing was applied.
    #[error("pet ids must follow on: expected id {expected}, found {found}")]
    Gap {
        /// The next id the inventory can take.
        expected: u64,
        /// The id that came instead.
        found: u64,
    },
    /// The orders do not follow on from the copy's last order id
    /// ([`Inventory::apply_orders`](crate::Inventory::apply_orders)).
    /// Nothing was applied.
    #[error("order ids must follow on: expected order {expected}, found {found}")]
    OrderGap {
        /// The next order id the copy can take.
        expected: u64,
        /// The id that came instead.
        found: u64,
    },
    /// The events do not follow on from the copy's newest position
    /// ([`Inventory::apply_events`](crate::Inventory::apply_events)).
    /// Nothing was applied.
    #[error("event positions must follow on: expected {expected}, found {found}")]
    EventGap {
        /// The next position the copy can take.
        expected: u64,
        /// The position that came instead.
        found: u64,
    },
    /// The inventory is durable: its pets come from its journal alone, and
    /// pets applied only in memory would be lost at the next start.
    #[error("pets can be applied only to an in-memory inventory")]
    Durable,
    /// A status change names a pet the copy does not hold yet
    /// ([`Inventory::apply_statuses`](crate::Inventory::apply_statuses)):
    /// the pet must be applied first. Nothing was applied.
    #[error("pet {id} is not in the copy yet: apply it before its status changes")]
    Unknown {
        /// The pet the copy does not hold.
        id: PetId,
    },
}

/// A page size outside 1 to 100: why [`PageSize::new`](crate::PageSize::new)
/// refused a number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("limit must be an integer from 1 to 100")]
pub struct PageSizeError;
