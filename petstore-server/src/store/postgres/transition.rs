//! The transition path: a transition queued for its committer
//! ([`Postgres::transition`]), each batch decided and written by
//! PostgreSQL in one transaction ([`Commit`] for [`Postgres`]), and shown
//! by this replica's copy before any 200.
//!
//! The decision is PostgreSQL's alone, never the copy's: the copy may be
//! behind another replica's change, and two replicas deciding from their
//! copies could both sell one pet. A conditional update
//! (`petstore_transition`, `schema.rs`) moves a pet only from a status the
//! transition allows; the transaction first locks the change counter, so
//! transitions from every replica run one transaction after the other and
//! a pet's status read in it is the latest. Of concurrent transitions of
//! one pet, whatever replica they reach, the first moves it and the others
//! find the status it left: exactly one 200, the rest 409.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool_postgres::Object;
use petstore_core::{CategoryId, NewPet, Pet, PetId, PetStatus, Transition};
use tokio::time::timeout;

use super::copy::Want;
use super::describe::{discard, pool_error};
use super::stats::Op;
use super::{Postgres, QUERY_TIMEOUT};
use crate::store::committer::Commit;
use crate::store::failed::TransitionFailed;

/// Most transitions decided by one transaction.
pub const MAX_BATCH: usize = 512;
/// Transitions waiting for the committer at most; one more answers 503 at
/// once.
pub(super) const QUEUE: usize = 16 * 1024;
/// A transition's whole wait, queue included: longer than a connection
/// plus a transaction, so the committer's own timeouts answer first.
const TRANSITION_TIMEOUT: Duration = Duration::from_secs(6);
/// As a create's (`write.rs`): PostgreSQL's own bounds, so a transaction
/// stuck behind a lock is rolled back by PostgreSQL itself and its 503
/// means "not stored". READ COMMITTED whatever the database's default:
/// each statement of `petstore_transition` must read the rows as they
/// are once the counter's lock is taken (a stricter level would fail
/// every transaction that waited for that lock instead).
const BEGIN: &str = "BEGIN ISOLATION LEVEL READ COMMITTED; \
                     SET LOCAL lock_timeout = '2s'; SET LOCAL statement_timeout = '2500ms'";
/// The longest each step of showing a committed batch in the copy may
/// wait (the tail's lock, the catch-up): the batch is committed, and its
/// 200s must come before the waiters' [`TRANSITION_TIMEOUT`] turns them
/// into 503s. Past it, the 200s go out without the copy's word.
const SHOW_WAIT: Duration = Duration::from_secs(1);
/// One row per transition, in the batch's order.
const DECIDE: &str = "SELECT item, change, pet_name, pet_category, pet_status \
                      FROM petstore_transition($1::int8[], $2::text[], $3::text[]) ORDER BY item";

/// A transition waiting for the committer: which pet, which transition.
pub(super) type Wanted = (PetId, Transition);

/// What PostgreSQL decided for one transition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Decided {
    /// The pet moved, as change number `change`.
    Moved { pet: Pet, change: u64 },
    /// The answer without a change: not found, or the status that
    /// refused it.
    Refused(TransitionFailed),
}

impl Postgres {
    /// Queues the transition `transition` of pet `id` for the committer
    /// and waits for its answer: the pet as the transition left it,
    /// committed and shown by this replica's copy; or why not (no such
    /// pet, the status that refused it, or not stored or not known to be).
    pub async fn transition(
        &self,
        id: PetId,
        transition: Transition,
    ) -> Result<Pet, TransitionFailed> {
        // A committed row the copy cannot apply: the copy may then never
        // show this change. 503 until the row is fixed, as a create.
        if self.health.bad_row.lock().is_some() {
            return Err(TransitionFailed::Unavailable);
        }
        let Ok(answer) = self.transitions.submit((id, transition)) else {
            self.stats.count_error(Op::Queue);
            return Err(TransitionFailed::Unavailable);
        };
        match timeout(TRANSITION_TIMEOUT, answer).await {
            // Decided (moved, or refused), or the batch failed.
            Ok(Ok(Ok(decided))) => decided,
            Ok(Ok(Err(failed))) => Err(failed),
            // The committer ended (it does not), or the wait was too long:
            // if the batch was already sent its outcome is unknown; 503.
            Ok(Err(_)) | Err(_) => Err(TransitionFailed::Unavailable),
        }
    }

    /// Decides and writes `batch` in one transaction; each transition's
    /// outcome, in order. `Err` when nothing was committed, or it is not
    /// known whether it was.
    async fn decide(&self, batch: &[Wanted]) -> Result<Vec<Decided>, String> {
        let client = self.pool.get().await.map_err(|e| pool_error(&e))?;
        let statement = match timeout(QUERY_TIMEOUT, client.prepare_cached(DECIDE)).await {
            Ok(Ok(statement)) => statement,
            Ok(Err(e)) => return Err(discard(client, &e)),
            Err(_) => {
                drop(Object::take(client));
                return Err("preparing the transition timed out".into());
            }
        };
        let ids: Vec<i64> = batch.iter().map(|(id, _)| id.get() as i64).collect();
        let tos: Vec<&str> = batch
            .iter()
            .map(|(_, transition)| transition.to_status().as_str())
            .collect();
        let froms: Vec<String> = batch
            .iter()
            .map(|&(_, transition)| froms(transition))
            .collect();
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] = [&ids, &tos, &froms];
        // Pipelined, as a create's batch: one round trip.
        let work = async {
            tokio::join!(
                client.batch_execute(BEGIN),
                client.query(&statement, &params),
                client.batch_execute("COMMIT"),
            )
        };
        match timeout(QUERY_TIMEOUT, work).await {
            Ok((Ok(()), Ok(rows), Ok(()))) => {
                if rows.len() != batch.len() {
                    return Err(format!(
                        "PostgreSQL decided {} of {} transitions",
                        rows.len(),
                        batch.len()
                    ));
                }
                Ok(batch
                    .iter()
                    .zip(&rows)
                    .map(|(wanted, row)| decided(wanted, row))
                    .collect())
            }
            // PostgreSQL refused the statement: it turned the COMMIT into
            // a rollback, nothing was changed.
            Ok((Ok(()), Err(e), _)) if e.as_db_error().is_some() => Err(discard(client, &e)),
            // The connection broke, or BEGIN or COMMIT failed: the
            // outcome is unknown.
            Ok((Err(e), _, _)) | Ok((_, Err(e), _)) | Ok((_, _, Err(e))) => Err(format!(
                "a transition's commit outcome is unknown (answered 503, not retried): {}",
                discard(client, &e)
            )),
            Err(_) => {
                drop(Object::take(client));
                Err("a transition's commit timed out; its outcome is unknown \
                     (answered 503, not retried)"
                    .into())
            }
        }
    }

    /// Makes this replica's copy show `moved` (committed, in change
    /// order), so that the 200s read their own writes here. When the copy
    /// has applied every change before them, they are applied at once;
    /// otherwise the copy catches up (it applies other replicas' earlier
    /// changes first, in order). Should PostgreSQL not answer that, the
    /// changes the copy has not seen are applied all the same, the mark of
    /// what it applied left where it is, so the tail reads them again.
    /// Every wait is bounded by [`SHOW_WAIT`].
    pub(super) async fn show(&self, moved: &[(PetId, PetStatus, u64)]) {
        let (Some(&(_, _, first)), Some(&(_, _, last))) = (moved.first(), moved.last()) else {
            return;
        };
        self.latest_change.fetch_max(last, Ordering::Relaxed);
        let statuses = |after: u64| -> Vec<(PetId, PetStatus)> {
            let held = self.copy.len() as u64;
            moved
                .iter()
                .filter(|(id, _, change)| *change > after && id.get() <= held)
                .map(|&(id, status, _)| (id, status))
                .collect()
        };
        if let Ok(_one) = timeout(SHOW_WAIT, self.tail.lock()).await {
            let applied = self.changes_applied.load(Ordering::Acquire);
            if applied >= last {
                return;
            }
            // Every change before ours applied, and every pet ours moved
            // in the copy: ours are exactly the next ones.
            let ours = statuses(applied);
            if applied + 1 == first
                && ours.len() == moved.len()
                && self.copy.apply_statuses(&ours).is_ok()
            {
                self.changes_applied.store(last, Ordering::Release);
                return;
            }
        }
        if let Ok(true) = timeout(SHOW_WAIT, self.catch_up(Want::Change(last))).await {
            return;
        }
        if let Ok(_one) = timeout(SHOW_WAIT, self.tail.lock()).await {
            let applied = self.changes_applied.load(Ordering::Acquire);
            let _ = self.copy.apply_statuses(&statuses(applied));
        }
    }
}

/// The PostgreSQL side of the transitions' committer: one transaction per
/// batch, the changes shown by the copy before any 200.
impl Commit<Wanted> for Postgres {
    async fn commit(
        self: &Arc<Self>,
        batch: Vec<Wanted>,
    ) -> Result<Vec<Result<Pet, TransitionFailed>>, TransitionFailed> {
        self.stats
            .transition_batch
            .observe_count(batch.len() as u64);
        let started = Instant::now();
        let decided = self.decide(&batch).await;
        self.stats.transition.observe(started.elapsed());
        match decided {
            Ok(decided) => {
                self.health.up(started);
                let moved: Vec<(PetId, PetStatus, u64)> = decided
                    .iter()
                    .filter_map(|d| match d {
                        Decided::Moved { pet, change } => Some((pet.id(), pet.status(), *change)),
                        Decided::Refused(_) => None,
                    })
                    .collect();
                self.show(&moved).await;
                Ok(decided
                    .into_iter()
                    .map(|d| match d {
                        Decided::Moved { pet, .. } => Ok(pet),
                        Decided::Refused(failed) => Err(failed),
                    })
                    .collect())
            }
            Err(cause) => {
                self.stats.count_error(Op::Transition);
                self.health.down(&cause);
                Err(TransitionFailed::Unavailable)
            }
        }
    }
}

/// The statuses `transition` moves a pet from, as `petstore_transition`
/// takes them: comma-separated.
pub(super) fn froms(transition: Transition) -> String {
    transition
        .from_statuses()
        .iter()
        .map(|status| status.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// One transition's outcome out of its row: moved (a change number, the
/// pet's name and category), refused by a status, or no such pet.
pub(super) fn decided(&(id, transition): &Wanted, row: &tokio_postgres::Row) -> Decided {
    let unavailable = Decided::Refused(TransitionFailed::Unavailable);
    let change = row.try_get::<_, Option<i64>>(1).ok().flatten();
    let status = row.try_get::<_, Option<&str>>(4).ok().flatten();
    match (change, status) {
        (Some(change), _) => {
            let name = row.try_get::<_, Option<&str>>(2).ok().flatten();
            let category = row
                .try_get::<_, Option<i64>>(3)
                .ok()
                .flatten()
                .and_then(|c| u64::try_from(c).ok())
                .and_then(CategoryId::new);
            let (Some(name), Some(category), Ok(change)) = (name, category, u64::try_from(change))
            else {
                return unavailable;
            };
            // The row passed the table's CHECKs, which hold the core's
            // rules; a row written around them is committed all the same
            // but cannot be answered (the tail names it).
            match NewPet::new(name, category) {
                Ok(new) => Decided::Moved {
                    pet: new.with_status(transition.to_status()).into_pet(id),
                    change,
                },
                Err(_) => unavailable,
            }
        }
        (None, Some(status)) => match status.parse::<PetStatus>() {
            Ok(current) => Decided::Refused(TransitionFailed::Conflict(current)),
            Err(_) => unavailable,
        },
        (None, None) => Decided::Refused(TransitionFailed::NotFound),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_transition_hands_postgresql_the_statuses_it_moves_from() {
        // `petstore_transition` splits these on commas and compares them
        // with the status column: the core's spellings, in its order.
        assert_eq!(froms(Transition::Reserve), "available");
        assert_eq!(froms(Transition::Release), "pending");
        assert_eq!(froms(Transition::Sell), "available,pending");
        for transition in Transition::ALL {
            let listed: Vec<PetStatus> = froms(transition)
                .split(',')
                .map(|s| s.parse().unwrap())
                .collect();
            assert_eq!(listed, transition.from_statuses());
        }
    }
}
