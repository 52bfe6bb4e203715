//! The steps path: an order's place, complete or cancel, or a pet
//! transition (a door to the same orders), queued for its committer
//! ([`Postgres::step`], [`Postgres::step_keyed`]), each batch decided and
//! written by PostgreSQL in one transaction (`petstore_steps`,
//! `schema.rs`), and shown by this replica's copy before any answer.
//!
//! The decision is PostgreSQL's alone, never the copy's: the copy may be
//! behind another replica's step, and two replicas deciding from their
//! copies could both sell one pet. The transaction first locks the change
//! counter, so steps from every replica run one after the other and read
//! the latest pet and order; of concurrent steps on one pet or one order,
//! whatever replica they reach, exactly one takes effect. A hold is
//! judged by PostgreSQL's clock, so every replica agrees on it.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use petstore_core::{
    idempotency::{Keyed, KeyedOutcome, RETENTION},
    inventory::{Step, StepRequest, Stepped},
    order::{Hold, Order, OrderId, OrderStatus},
    CategoryId, NewPet, PetId, PetStatus, Transition,
};
use tokio::time::timeout;

use super::copy::{order_of, Want};
use super::idempotency::{kept_row, wall};
use super::keyed::Claimed;
use super::stats::Op;
use super::Postgres;
use crate::store::committer::{Commit, Item};
use crate::store::failed::{keyed_step_done, KeyedFailed, StepFailed};

/// Most steps decided by one transaction.
pub const MAX_BATCH: usize = 512;
/// Steps waiting for the committer at most; one more answers 503 at once.
pub(super) const QUEUE: usize = 16 * 1024;
/// A step's whole wait, queue included: longer than a connection plus a
/// transaction, so the committer's own timeouts answer first.
const STEP_TIMEOUT: Duration = Duration::from_secs(6);
/// The longest a committed batch waits for the copy to show it: its
/// answers must come before the waiters' [`STEP_TIMEOUT`] turns them
/// into 503s. Past it, they go out without the copy's word.
const SHOW_WAIT: Duration = Duration::from_secs(1);
/// One row per step, in the batch's order.
/// A lost claim's kept row is in the columns from 13 on, as a key's
/// lookup reads it (`idempotency.rs`).
const STEPS: &str = "SELECT item, outcome, change, order_id, order_pet, order_status, order_by, \
     order_placed, order_expires, order_closed, pet_name, pet_category, pet_status, \
     kept_fingerprint, kept_answer, kept_pet, kept_name, kept_category, kept_status, \
     kept_transition, kept_order_status, order_id, order_pet, order_status, order_by, \
     order_placed, order_expires, order_closed, lapsed \
     FROM petstore_steps($1::text[], $2::int8[], $3::text[], $4::bool[], $5::int4[], \
     $6::text[], $7::text[], $8::bytea[], $9::timestamptz[], $10::int8) ORDER BY item";

/// A step waiting for the committer, with its idempotency key when it
/// has one (claimed in the step's own transaction).
#[derive(Debug)]
pub(super) struct Wanted {
    request: StepRequest,
    keyed: Option<Keyed>,
}

impl Item for Wanted {
    type Done = Claimed<Result<Stepped, StepFailed>>;
    type Failed = StepFailed;
    const NOT_STORED: StepFailed = StepFailed::Unavailable;
}

impl Postgres {
    /// Queues `request` for the committer and waits for its answer: what
    /// the step made, committed and shown by this replica's copy; or why
    /// not (not found, the status that refused it, held by another key,
    /// or not stored or not known to be).
    pub async fn step(&self, request: StepRequest) -> Result<Stepped, StepFailed> {
        // A committed row the copy cannot apply: the copy may then never
        // show this step. 503 until the row is fixed, as a create.
        if self.health.bad_row.lock().is_some() {
            return Err(StepFailed::Unavailable);
        }
        match self.submit(request, None).await {
            Ok(Claimed::Won(done)) => done,
            _ => Err(StepFailed::Unavailable),
        }
    }

    /// [`step`](Self::step) under `keyed`'s key, claimed in the step's own
    /// transaction: what the step made or the conflict a status made
    /// (both kept), or what the key's holder answered. Not found, or held
    /// by another key, keeps nothing.
    pub async fn step_keyed(
        &self,
        request: StepRequest,
        keyed: Keyed,
    ) -> Result<KeyedOutcome, KeyedFailed> {
        let Some(_held) = self.inflight.hold(&keyed) else {
            return Ok(KeyedOutcome::InFlight);
        };
        if self.health.bad_row.lock().is_some() {
            return self.refused(&keyed).await;
        }
        let step = request.step;
        match self.submit(request, Some(keyed.clone())).await {
            Ok(Claimed::Won(done)) => keyed_step_done(step, done),
            Ok(Claimed::Lost(row)) => Ok(row.outcome(&keyed.fingerprint)),
            // The key's holder kept an answer that cannot be read from
            // the step's row (one written around the table's CHECKs):
            // the lookup says what it can.
            Ok(Claimed::Unread) => self.refused(&keyed).await,
            Err(_) => Err(KeyedFailed::Unavailable),
        }
    }

    async fn submit(
        &self,
        mut request: StepRequest,
        keyed: Option<Keyed>,
    ) -> Result<Claimed<Result<Stepped, StepFailed>>, StepFailed> {
        // PostgreSQL keeps the key; the core's claim is for local stores.
        request.claim = None;
        let Ok(answer) = self.steps.submit(Wanted { request, keyed }) else {
            self.stats.count_error(Op::Queue);
            return Err(StepFailed::Unavailable);
        };
        match timeout(STEP_TIMEOUT, answer).await {
            Ok(Ok(answer)) => answer,
            // The committer ended (it does not), or the wait was too long:
            // if the batch was already sent its outcome is unknown; 503.
            Ok(Err(_)) | Err(_) => Err(StepFailed::Unavailable),
        }
    }
}

/// The PostgreSQL side of the steps' committer: one transaction per
/// batch, shown by the copy before any answer.
impl Commit<Wanted> for Postgres {
    async fn commit(
        self: &Arc<Self>,
        batch: Vec<Wanted>,
    ) -> Result<Vec<<Wanted as Item>::Done>, StepFailed> {
        self.stats
            .transition_batch
            .observe_count(batch.len() as u64);
        let started = Instant::now();
        let kinds: Vec<&str> = batch.iter().map(|w| kind(w.request.step)).collect();
        let targets: Vec<i64> = batch.iter().map(|w| target(w.request.step)).collect();
        let actors: Vec<&str> = batch.iter().map(|w| w.request.actor.name()).collect();
        let sees_all: Vec<bool> = batch.iter().map(|w| w.request.actor.sees_all()).collect();
        let holds: Vec<i32> = batch.iter().map(|w| hold(w.request.step)).collect();
        fn keyed(w: &Wanted) -> Option<&Keyed> {
            w.keyed.as_ref()
        }
        let scopes: Vec<Option<&str>> = batch
            .iter()
            .map(|w| keyed(w).map(|k| k.scope.as_str()))
            .collect();
        let keys: Vec<Option<&str>> = batch
            .iter()
            .map(|w| keyed(w).map(|k| k.key.as_str()))
            .collect();
        let fingerprints: Vec<Option<&[u8]>> = batch
            .iter()
            .map(|w| keyed(w).map(|k| &k.fingerprint.as_bytes()[..]))
            .collect();
        let ats: Vec<Option<SystemTime>> =
            batch.iter().map(|w| keyed(w).map(|k| wall(k.at))).collect();
        let retention = RETENTION.as_secs() as i64;
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 10] = [
            &kinds,
            &targets,
            &actors,
            &sees_all,
            &holds,
            &scopes,
            &keys,
            &fingerprints,
            &ats,
            &retention,
        ];
        let Some(rows) = self
            .commit_batch(Op::Transition, started, STEPS, &params, batch.len())
            .await
        else {
            return Err(StepFailed::Unavailable);
        };
        let mut shown = Shown::default();
        let mut done = Vec::with_capacity(batch.len());
        for (wanted, row) in batch.iter().zip(&rows) {
            // The order a step made or closed, read once for both.
            let order = order_of(row, 3);
            let decided = decided(wanted.request.step, row, order.clone());
            shown.add(wanted.request.step, row, order);
            if wanted.keyed.is_some() && matches!(decided, Claimed::Won(_)) {
                self.stats.kept.fetch_add(1, Ordering::Relaxed);
            }
            done.push(decided);
        }
        self.show_steps(&shown).await;
        Ok(done)
    }
}

/// What a batch changed, for this replica's copy to show before the
/// answers: each change's number, pet and status, and the order it made
/// or closed.
#[derive(Debug, Default)]
struct Shown {
    changes: Vec<(u64, PetId, PetStatus)>,
    orders: Vec<Order>,
    /// A step lapsed a hold first (a change the rows do not describe), or
    /// a row could not be read: the copy catches up instead.
    incomplete: bool,
}

impl Shown {
    fn add(&mut self, step: Step, row: &tokio_postgres::Row, order: Option<Order>) {
        let Some(change) = row
            .try_get::<_, Option<i64>>(2)
            .ok()
            .flatten()
            .and_then(|c| u64::try_from(c).ok())
        else {
            return;
        };
        let pet = match (step, &order) {
            (Step::Transition(pet, _), _) => Some(pet),
            (_, Some(order)) => Some(order.pet()),
            _ => None,
        };
        let status = row
            .try_get::<_, Option<&str>>(12)
            .ok()
            .flatten()
            .and_then(|s| s.parse::<PetStatus>().ok());
        let lapsed = row.try_get::<_, Option<bool>>(28).ok().flatten() != Some(false);
        match (pet, status) {
            (Some(pet), Some(status)) if !lapsed => {
                self.changes.push((change, pet, status));
                self.orders.extend(order);
            }
            _ => self.incomplete = true,
        }
    }

    /// The batch's last change number, if it made any.
    fn last(&self) -> Option<u64> {
        self.changes.iter().map(|c| c.0).max()
    }
}

impl Postgres {
    /// Makes this replica's copy show a committed batch (and every
    /// change before it), so that its answers read their own writes here.
    /// When the copy has applied every change before the batch, and the
    /// rows describe each of its changes, they are applied at once;
    /// otherwise the copy catches up (one tail query). Bounded by
    /// [`SHOW_WAIT`]: should PostgreSQL not answer in time, the steps are
    /// committed all the same, and the tail brings them.
    async fn show_steps(&self, shown: &Shown) {
        let Some(last) = shown.last() else {
            if shown.incomplete {
                let _ = timeout(SHOW_WAIT, self.catch_up(Want::Everything)).await;
            }
            return;
        };
        self.latest_change.fetch_max(last, Ordering::Relaxed);
        if !shown.incomplete {
            if let Ok(_one) = timeout(SHOW_WAIT, self.tail.lock()).await {
                let applied = self.changes_applied.load(Ordering::Acquire);
                if applied >= last {
                    return;
                }
                // Every change before the batch applied, and the batch's
                // numbers the next ones, each described by its row: the
                // orders first (they check their ids), then the statuses.
                let next = shown.changes.first().map(|c| c.0);
                let contiguous =
                    next == Some(applied + 1) && last - applied == shown.changes.len() as u64;
                let statuses: Vec<(PetId, PetStatus)> = shown
                    .changes
                    .iter()
                    .map(|&(_, pet, status)| (pet, status))
                    .collect();
                if contiguous
                    && statuses
                        .iter()
                        .all(|(pet, _)| pet.get() <= self.copy.len() as u64)
                    && self.copy.apply_orders(&shown.orders).is_ok()
                    && self.copy.apply_statuses(&statuses).is_ok()
                {
                    self.changes_applied.store(last, Ordering::Release);
                    return;
                }
            }
        }
        let _ = timeout(SHOW_WAIT, self.catch_up(Want::Change(last))).await;
    }
}

/// The kind of a step as `petstore_steps` takes it.
fn kind(step: Step) -> &'static str {
    match step {
        Step::Place(_) => "place",
        Step::Complete(_) => "complete",
        Step::Cancel(_) => "cancel",
        Step::Transition(_, transition) => transition.as_str(),
    }
}

/// The order or the pet a step names.
fn target(step: Step) -> i64 {
    let id = match step {
        Step::Place(new) => new.pet.get(),
        Step::Complete(id) | Step::Cancel(id) => id.get(),
        Step::Transition(pet, _) => pet.get(),
    };
    i64::try_from(id).unwrap_or(i64::MAX)
}

/// The hold a step places with, in seconds (`reserve` the default's).
fn hold(step: Step) -> i32 {
    let secs = match step {
        Step::Place(new) => new.hold.secs(),
        Step::Transition(_, Transition::Reserve) => Hold::DEFAULT.secs(),
        _ => 0,
    };
    i32::try_from(secs).unwrap_or(i32::MAX)
}

/// One step's outcome out of its row (`petstore_steps`'s columns) and the
/// order read from it.
fn decided(
    step: Step,
    row: &tokio_postgres::Row,
    order: Option<Order>,
) -> Claimed<Result<Stepped, StepFailed>> {
    let outcome = row.try_get::<_, Option<&str>>(1).ok().flatten();
    let text = |i: usize| row.try_get::<_, Option<&str>>(i).ok().flatten();
    let unavailable = Err(StepFailed::Unavailable);
    let done = match outcome {
        Some("kept") => return kept_row(row, 13).map_or(Claimed::Unread, Claimed::Lost),
        Some("order") => order.map_or(unavailable, |order| Ok(Stepped::Order(order))),
        Some("pet") => pet(step, row).map_or(unavailable, |pet| Ok(Stepped::Pet(pet))),
        Some("pet_missing") => Err(StepFailed::PetNotFound),
        Some("order_missing") => Err(StepFailed::OrderNotFound),
        Some("pet_conflict") => match text(12).and_then(|s| s.parse::<PetStatus>().ok()) {
            Some(status) => Err(StepFailed::PetConflict(status)),
            None => unavailable,
        },
        Some("order_conflict") => match text(5).and_then(|s| s.parse::<OrderStatus>().ok()) {
            Some(status) => Err(StepFailed::OrderConflict(status)),
            None => unavailable,
        },
        Some("held") => match row
            .try_get::<_, Option<i64>>(3)
            .ok()
            .flatten()
            .and_then(|id| u64::try_from(id).ok())
            .and_then(OrderId::new)
        {
            Some(order) => Err(StepFailed::HeldByAnother(order)),
            None => unavailable,
        },
        _ => unavailable,
    };
    Claimed::Won(done)
}

/// The pet a transition left, out of its row: the step's pet with the
/// name, category and status PostgreSQL returned. The row passed the
/// table's CHECKs, which hold the core's rules; one written around them
/// is committed all the same but cannot be answered (the tail names it).
fn pet(step: Step, row: &tokio_postgres::Row) -> Option<petstore_core::Pet> {
    let Step::Transition(id, _) = step else {
        return None;
    };
    let name = row.try_get::<_, Option<&str>>(10).ok().flatten()?;
    let category = row
        .try_get::<_, Option<i64>>(11)
        .ok()
        .flatten()
        .and_then(|c| u64::try_from(c).ok())
        .and_then(CategoryId::new)?;
    let status = row
        .try_get::<_, Option<&str>>(12)
        .ok()
        .flatten()?
        .parse::<PetStatus>()
        .ok()?;
    Some(
        NewPet::new(name, category)
            .ok()?
            .with_status(status)
            .into_pet(PetId::new(id.get())?),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use petstore_core::order::NewOrder;

    #[test]
    fn each_step_names_its_kind_target_and_hold_as_the_function_takes_them() {
        let pet = PetId::new(7).unwrap();
        let order = OrderId::new(9).unwrap();
        let new = NewOrder {
            pet,
            hold: Hold::from_secs(120).unwrap(),
        };
        assert_eq!(
            (
                kind(Step::Place(new)),
                target(Step::Place(new)),
                hold(Step::Place(new))
            ),
            ("place", 7, 120)
        );
        assert_eq!(
            (kind(Step::Complete(order)), target(Step::Complete(order))),
            ("complete", 9)
        );
        assert_eq!(
            (kind(Step::Cancel(order)), target(Step::Cancel(order))),
            ("cancel", 9)
        );
        for transition in Transition::ALL {
            let step = Step::Transition(pet, transition);
            // `petstore_steps` tells the doors apart by these spellings.
            assert!(["reserve", "release", "sell"].contains(&kind(step)));
            assert_eq!(target(step), 7);
            let expected = if transition == Transition::Reserve {
                900
            } else {
                0
            };
            assert_eq!(hold(step), expected);
        }
    }
}
