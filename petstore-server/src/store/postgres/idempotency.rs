//! Keyed writes on PostgreSQL: a POST's `Idempotency-Key` claimed in the
//! same transaction as the create or the step it answers, its
//! answer kept in `petstore_idempotency` (schema version 4), looked up by
//! every replica, and the expired rows pruned in the background.
//!
//! The claim is the write's own, in `petstore_create_keyed` or
//! `petstore_steps` (`schema.rs`), so a key is kept exactly
//! when its answer commits and one of two replicas given it wins; a key
//! is also held in memory on its replica while in flight
//! ([`InFlight`](super::keyed::InFlight)). Why each, the lookup, and
//! retention: docs/replicas.md, "Idempotency keys across replicas".

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use deadpool_postgres::Object;
use petstore_core::{
    idempotency::{Answer, Fingerprint, Keyed, KeyedOutcome, Seen, RETENTION},
    order::{Order, OrderId, OrderStatus},
    CategoryId, NewPet, Pet, PetId, PetStatus, Timestamp, Transition,
};
use tokio::time::timeout;

use super::copy::order_of;
use super::describe::{discard, pool_error};
use super::keyed::{Claimed, KeptRow, KeyedCreate, Lookup};
use super::stats::Op;
use super::write::json_tail;
use super::{Postgres, QUERY_TIMEOUT};
use crate::log_error;
use crate::store::committer::Commit;
use crate::store::failed::{CreateFailed, KeyedFailed};

/// Most keyed writes in one transaction.
pub const MAX_BATCH: usize = 512;
/// Keyed writes waiting for their committer at most.
pub(super) const QUEUE: usize = 16 * 1024;
/// A keyed write's whole wait, queue included (as an unkeyed one's).
const KEYED_TIMEOUT: Duration = Duration::from_secs(6);
/// Rows deleted by one pruning statement at most.
pub const PRUNE_BATCH: i64 = 1000;
/// The pause between two passes of the prune task.
pub const PRUNE_EVERY: Duration = Duration::from_secs(60);
/// As the other writes' (`write.rs`, `transition.rs`): PostgreSQL's own
/// bounds, so a transaction stuck behind a lock is rolled back by
/// PostgreSQL and its 503 means "not stored"; READ COMMITTED, so that
/// each statement of the functions sees what the claims waited for.
const BEGIN: &str = "BEGIN ISOLATION LEVEL READ COMMITTED; \
                     SET LOCAL lock_timeout = '2s'; SET LOCAL statement_timeout = '2500ms'";
const CREATE: &str = "SELECT item, new_id, kept_fingerprint, kept_answer, kept_pet, kept_name, \
     kept_category, kept_status, kept_transition \
     FROM petstore_create_keyed($1::text[], $2::text[], $3::bytea[], $4::timestamptz[], \
     $5::text[], $6::int8[], $7::text[], $8::text[], $9::int8)";
/// A batch of keys: the kept rows found, each with its key's place, and
/// the order a kept order's answer names.
const LOOKUP: &str = "SELECT p.n, k.fingerprint, k.answer, k.pet_id, k.name, k.category_id, \
     k.status, k.transition, k.order_status, o.id, o.pet_id, o.status, o.placed_by, \
     extract(epoch FROM o.placed_at)::int8, extract(epoch FROM o.expires_at)::int8, \
     extract(epoch FROM o.closed_at)::int8 \
     FROM unnest($1::text[], $2::text[], $3::timestamptz[]) WITH ORDINALITY AS p(scope, key, at, n) \
     JOIN petstore_idempotency k ON k.scope = p.scope AND k.key = p.key \
     LEFT JOIN petstore_orders o ON o.id = k.order_id \
     WHERE k.answer <> 0 AND k.created_at > p.at - make_interval(secs => $4::int8)";
/// Expired rows, at most a batch, skipping the rows a writer holds: a
/// prune never holds up a write for long, and replicas pruning at once
/// do not wait for each other.
const PRUNE: &str = "DELETE FROM petstore_idempotency WHERE ctid IN ( \
     SELECT ctid FROM petstore_idempotency WHERE created_at <= $1::timestamptz \
     LIMIT $2::int8 FOR UPDATE SKIP LOCKED)";
const COUNT: &str = "SELECT count(*) FROM petstore_idempotency";

impl Postgres {
    /// What is known of `keyed`'s key, on this replica (in flight) or in
    /// PostgreSQL (kept by any replica), for a request that will not
    /// claim it (its body is invalid). `Err` when PostgreSQL did not
    /// answer in time: 503, as a write.
    pub async fn seen(&self, keyed: &Keyed) -> Result<Seen, KeyedFailed> {
        if self.inflight.holds(keyed) {
            return Ok(Seen::InFlight);
        }
        self.lookup(keyed).await
    }

    /// What PostgreSQL keeps for `keyed`'s key, through the lookups'
    /// committer.
    async fn lookup(&self, keyed: &Keyed) -> Result<Seen, KeyedFailed> {
        let Ok(answer) = self.lookups.submit(Lookup(keyed.clone())) else {
            self.stats.count_error(Op::Queue);
            return Err(KeyedFailed::Unavailable);
        };
        match timeout(KEYED_TIMEOUT, answer).await {
            Ok(Ok(Ok(Some(row)))) if row.fingerprint == keyed.fingerprint => {
                Ok(Seen::Replay(row.answer))
            }
            Ok(Ok(Ok(Some(_)))) => Ok(Seen::Reused),
            Ok(Ok(Ok(None))) => Ok(Seen::New),
            Ok(Ok(Err(_))) | Ok(Err(_)) | Err(_) => Err(KeyedFailed::Unavailable),
        }
    }

    /// A keyed write refused before it reached PostgreSQL (the copy
    /// cannot apply a row): the kept answer of its key when there is one,
    /// so that a retry of a request already answered is still answered
    /// as it was; 503 otherwise.
    pub(super) async fn refused(&self, keyed: &Keyed) -> Result<KeyedOutcome, KeyedFailed> {
        KeyedOutcome::of_seen(self.lookup(keyed).await?).ok_or(KeyedFailed::Unavailable)
    }

    /// What is kept for each key of `batch`, in one query on the shared
    /// lookup connection.
    async fn read_kept(&self, batch: &[Lookup]) -> Result<Vec<Option<KeptRow>>, String> {
        let scopes: Vec<&str> = batch.iter().map(|l| l.0.scope.as_str()).collect();
        let keys: Vec<&str> = batch.iter().map(|l| l.0.key.as_str()).collect();
        let ats: Vec<SystemTime> = batch.iter().map(|l| wall(l.0.at)).collect();
        let retention = retention_secs();
        let mut used = None;
        let work = async {
            let client = self.lookup_client().await?;
            used = Some(Arc::clone(&client));
            let statement = client
                .prepare_cached(LOOKUP)
                .await
                .map_err(|e| super::describe::describe(&e))?;
            client
                .query(&statement, &[&scopes, &keys, &ats, &retention])
                .await
                .map_err(|e| super::describe::describe(&e))
        };
        let failed = match timeout(QUERY_TIMEOUT, work).await {
            Ok(Ok(rows)) => {
                let mut found = vec![None; batch.len()];
                for row in &rows {
                    let slot = row
                        .try_get::<_, i64>(0)
                        .ok()
                        .and_then(|n| usize::try_from(n).ok())
                        .and_then(|n| n.checked_sub(1))
                        .and_then(|i| found.get_mut(i));
                    let (Some(slot), Some(kept)) = (slot, kept_row(row, 1)) else {
                        return Err("a kept answer in petstore_idempotency cannot be read".into());
                    };
                    *slot = Some(kept);
                }
                return Ok(found);
            }
            Ok(Err(cause)) => cause,
            Err(_) => "looking up idempotency keys timed out".to_owned(),
        };
        // The shared connection failed or hung: the next lookup takes a
        // new one (this one goes back to the pool with its last user,
        // whose check throws it away if it is broken).
        if let Some(used) = used {
            let mut shared = self.lookup.lock();
            if shared.as_ref().is_some_and(|c| Arc::ptr_eq(c, &used)) {
                *shared = None;
            }
        }
        Err(failed)
    }

    /// The connection the lookups' batches use, taken from the pool when
    /// there is none: no checkout, and no check query, per batch.
    async fn lookup_client(&self) -> Result<Arc<Object>, String> {
        if let Some(client) = self.lookup.lock().clone() {
            return Ok(client);
        }
        let client = self.pool.get().await.map_err(|e| pool_error(&e))?;
        // A plan for each batch, made for the table as it is: a cached
        // plan made while the table was small joins by scanning it all.
        client
            .batch_execute("SET plan_cache_mode = force_custom_plan")
            .await
            .map_err(|e| super::describe::describe(&e))?;
        let client = Arc::new(client);
        *self.lookup.lock() = Some(Arc::clone(&client));
        Ok(client)
    }

    /// Creates `new` under `keyed`'s key, claimed in the pet's own
    /// transaction: the pet (committed, in the copy), or what the key's
    /// holder answered (a replay, or a reuse by another request).
    pub async fn create_keyed(
        &self,
        new: NewPet,
        keyed: Keyed,
    ) -> Result<KeyedOutcome, KeyedFailed> {
        let Some(_held) = self.inflight.hold(&keyed) else {
            return Ok(KeyedOutcome::InFlight);
        };
        if self.health.bad_row.lock().is_some() {
            return self.refused(&keyed).await;
        }
        let fingerprint = keyed.fingerprint;
        let keyed_again = keyed.clone();
        let Ok(answer) = self.keyed_creates.submit(KeyedCreate { new, keyed }) else {
            self.stats.count_error(Op::Queue);
            return Err(KeyedFailed::Unavailable);
        };
        match timeout(KEYED_TIMEOUT, answer).await {
            Ok(Ok(Ok(Ok(Claimed::Won(pet))))) => Ok(KeyedOutcome::Done(Answer::Created(pet))),
            Ok(Ok(Ok(Ok(Claimed::Lost(row))))) => Ok(row.outcome(&fingerprint)),
            Ok(Ok(Ok(Ok(Claimed::Unread)))) => self.refused(&keyed_again).await,
            Ok(Ok(Ok(Err(_)) | Err(_))) | Ok(Err(_)) | Err(_) => Err(KeyedFailed::Unavailable),
        }
    }

    /// One batch of keyed creates or steps written: the
    /// transaction run ([`Self::run_batch`]), its time recorded under
    /// `op` (a create's [`Op::Commit`] or [`Op::Transition`]) from
    /// `started`, when the batch began to be made, and the
    /// backend's health told either way. `None` when nothing is known
    /// stored; the failure is counted and logged by the health.
    pub(super) async fn commit_batch(
        &self,
        op: Op,
        started: Instant,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
        expected: usize,
    ) -> Option<Vec<tokio_postgres::Row>> {
        let rows = self.run_batch(sql, params, expected).await;
        let timing = match op {
            Op::Transition => &self.stats.transition,
            _ => &self.stats.commit,
        };
        timing.observe(started.elapsed());
        match rows {
            Ok(rows) => {
                self.health.up(started);
                Some(rows)
            }
            Err(cause) => {
                self.stats.count_error(op);
                self.health.down(&cause);
                None
            }
        }
    }

    /// One pipelined transaction around `statement` (as a batch of
    /// creates or transitions): its rows, or why not.
    async fn run_batch(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
        expected: usize,
    ) -> Result<Vec<tokio_postgres::Row>, String> {
        let client = self.pool.get().await.map_err(|e| pool_error(&e))?;
        let statement = match timeout(QUERY_TIMEOUT, client.prepare_cached(sql)).await {
            Ok(Ok(statement)) => statement,
            Ok(Err(e)) => return Err(discard(client, &e)),
            Err(_) => {
                drop(Object::take(client));
                return Err("preparing a keyed write timed out".into());
            }
        };
        let work = async {
            tokio::join!(
                client.batch_execute(BEGIN),
                client.query(&statement, params),
                client.batch_execute("COMMIT"),
            )
        };
        match timeout(QUERY_TIMEOUT, work).await {
            Ok((Ok(()), Ok(rows), Ok(()))) if rows.len() == expected => Ok(rows),
            Ok((Ok(()), Ok(rows), Ok(()))) => Err(format!(
                "PostgreSQL answered {} of {expected} keyed writes",
                rows.len()
            )),
            // Refused: the COMMIT became a rollback, nothing was stored.
            Ok((Ok(()), Err(e), _)) if e.as_db_error().is_some() => Err(discard(client, &e)),
            Ok((Err(e), _, _)) | Ok((_, Err(e), _)) | Ok((_, _, Err(e))) => Err(format!(
                "a keyed write's commit outcome is unknown (answered 503, not retried): {}",
                discard(client, &e)
            )),
            Err(_) => {
                drop(Object::take(client));
                Err("a keyed write's commit timed out; its outcome is unknown \
                     (answered 503, not retried)"
                    .into())
            }
        }
    }

    /// The prune task: a pass at start, then one every [`PRUNE_EVERY`],
    /// by the wall clock `clock`.
    pub(super) async fn prune_loop(self: Arc<Self>, clock: Arc<dyn petstore_core::Clock>) {
        loop {
            self.prune(wall(clock.now())).await;
            tokio::time::sleep(PRUNE_EVERY).await;
        }
    }

    /// Deletes the rows expired at `now`, [`PRUNE_BATCH`] a statement,
    /// then counts the rows kept (the gauge). A failure ends the pass; the
    /// next one tries again.
    pub(super) async fn prune(&self, now: SystemTime) {
        let Some(cutoff) = now.checked_sub(RETENTION) else {
            return;
        };
        loop {
            let deleted = self.pool_execute(PRUNE, &[&cutoff, &PRUNE_BATCH]).await;
            match deleted {
                Ok(n) => {
                    self.stats.pruned.fetch_add(n, Ordering::Relaxed);
                    if n < PRUNE_BATCH as u64 {
                        break;
                    }
                }
                Err(cause) => {
                    self.stats.count_error(Op::Prune);
                    log_error!("PostgreSQL: pruning expired idempotency keys failed: {cause}");
                    return;
                }
            }
        }
        let counted = async {
            let client = self.pool.get().await.map_err(|e| pool_error(&e))?;
            let row = client
                .query_one(COUNT, &[])
                .await
                .map_err(|e| super::describe::describe(&e))?;
            row.try_get::<_, i64>(0)
                .map_err(|e| super::describe::describe(&e))
        };
        if let Ok(Ok(n)) = timeout(QUERY_TIMEOUT, counted).await {
            self.stats
                .kept_keys
                .store(u64::try_from(n).unwrap_or(0), Ordering::Relaxed);
        }
    }

    async fn pool_execute(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<u64, String> {
        let work = async {
            let client = self.pool.get().await.map_err(|e| pool_error(&e))?;
            client
                .execute(sql, params)
                .await
                .map_err(|e| super::describe::describe(&e))
        };
        timeout(QUERY_TIMEOUT, work)
            .await
            .unwrap_or_else(|_| Err("timed out".into()))
    }
}

/// The retention in whole seconds, as the SQL takes it.
fn retention_secs() -> i64 {
    RETENTION.as_secs() as i64
}

/// A core timestamp as PostgreSQL's `timestamptz` takes it.
pub(super) fn wall(at: Timestamp) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(at.as_unix_nanos())
}

/// The lookups' committer: a batch of keys in one query.
impl Commit<Lookup> for Postgres {
    async fn commit(
        self: &Arc<Self>,
        batch: Vec<Lookup>,
    ) -> Result<Vec<Option<KeptRow>>, CreateFailed> {
        let started = Instant::now();
        let found = self.read_kept(&batch).await;
        self.stats.lookup.observe(started.elapsed());
        found.map_err(|cause| {
            self.stats.count_error(Op::Lookup);
            self.health.down(&cause);
            CreateFailed
        })
    }
}

/// The keyed creates' committer: one transaction per batch, the created
/// pets into the copy before any 201.
impl Commit<KeyedCreate> for Postgres {
    async fn commit(
        self: &Arc<Self>,
        batch: Vec<KeyedCreate>,
    ) -> Result<Vec<Result<Claimed<Pet>, CreateFailed>>, CreateFailed> {
        self.stats.batch.observe_count(batch.len() as u64);
        let started = Instant::now();
        let scopes: Vec<&str> = batch.iter().map(|b| b.keyed.scope.as_str()).collect();
        let keys: Vec<&str> = batch.iter().map(|b| b.keyed.key.as_str()).collect();
        let fingerprints: Vec<&[u8]> = batch
            .iter()
            .map(|b| &b.keyed.fingerprint.as_bytes()[..])
            .collect();
        let ats: Vec<SystemTime> = batch.iter().map(|b| wall(b.keyed.at)).collect();
        let names: Vec<&str> = batch.iter().map(|b| b.new.name()).collect();
        let categories: Vec<i64> = batch
            .iter()
            .map(|b| b.new.category_id().get() as i64)
            .collect();
        let statuses: Vec<&str> = batch.iter().map(|b| b.new.status().as_str()).collect();
        let tails: Vec<String> = batch.iter().map(|b| json_tail(&b.new)).collect();
        let retention = retention_secs();
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 9] = [
            &scopes,
            &keys,
            &fingerprints,
            &ats,
            &names,
            &categories,
            &statuses,
            &tails,
            &retention,
        ];
        let Some(rows) = self
            .commit_batch(Op::Commit, started, CREATE, &params, batch.len())
            .await
        else {
            return Err(CreateFailed);
        };
        let mut done = Vec::with_capacity(batch.len());
        let mut made = Vec::new();
        for (item, row) in batch.into_iter().zip(&rows) {
            match row.try_get::<_, Option<i64>>(1).ok().flatten() {
                Some(id) => {
                    let id = u64::try_from(id).ok().and_then(PetId::new);
                    match id {
                        Some(id) => {
                            let pet = item.new.into_pet(id);
                            made.push(pet.clone());
                            self.stats.kept.fetch_add(1, Ordering::Relaxed);
                            done.push(Ok(Claimed::Won(pet)));
                        }
                        None => done.push(Err(CreateFailed)),
                    }
                }
                // An order's answer is not among the create's columns:
                // looked up.
                None => done.push(Ok(kept_row(row, 2).map_or(Claimed::Unread, Claimed::Lost))),
            }
        }
        if let Some(last) = made.last().map(|pet| pet.id().get()) {
            self.latest.fetch_max(last, Ordering::Relaxed);
            // Into the copy before any 201, as unkeyed creates.
            if self.copy.apply(&made).is_err() {
                self.catch_up_to(last).await;
            }
        }
        Ok(done)
    }
}

/// A kept row out of `row`'s columns from `first` on: fingerprint,
/// answer, pet id, name, category, status, transition; for an order's
/// answer (codes 1200, 1201, 1409) then the kept order status and the
/// order's row ([`order_of`]). `None` when the columns do not make one
/// (no row was found, one written around the table's CHECKs, or an
/// order's answer without the order's columns).
pub(super) fn kept_row(row: &tokio_postgres::Row, first: usize) -> Option<KeptRow> {
    let fingerprint: Vec<u8> = row.try_get(first).ok()?;
    let fingerprint = Fingerprint::from_bytes(fingerprint.try_into().ok()?);
    let answer: i16 = row.try_get(first + 1).ok()?;
    if answer >= 1000 {
        return Some(KeptRow {
            fingerprint,
            answer: kept_order(row, answer, first + 7)?,
        });
    }
    let id = row
        .try_get::<_, i64>(first + 2)
        .ok()
        .and_then(|id| u64::try_from(id).ok())
        .and_then(PetId::new)?;
    let status: PetStatus = row.try_get::<_, &str>(first + 5).ok()?.parse().ok()?;
    let pet = || -> Option<Pet> {
        let name: &str = row.try_get(first + 3).ok()?;
        let category = row
            .try_get::<_, i64>(first + 4)
            .ok()
            .and_then(|c| u64::try_from(c).ok())
            .and_then(CategoryId::new)?;
        Some(
            NewPet::new(name, category)
                .ok()?
                .with_status(status)
                .into_pet(id),
        )
    };
    let transition =
        || -> Option<Transition> { row.try_get::<_, &str>(first + 6).ok()?.parse().ok() };
    let answer = match answer {
        201 => Answer::Created(pet()?),
        200 => Answer::Transitioned(pet()?),
        409 => Answer::Conflict {
            id,
            status,
            transition: transition()?,
        },
        _ => return None,
    };
    Some(KeptRow {
        fingerprint,
        answer,
    })
}

/// A kept order answer: `answer`'s code, then the kept order status and
/// the order's row from `first` on. A place keeps the order as it was
/// placed, a complete or cancel the order as it closed (final), a
/// conflict the status it met.
fn kept_order(row: &tokio_postgres::Row, answer: i16, first: usize) -> Option<Answer> {
    let status: OrderStatus = row.try_get::<_, &str>(first).ok()?.parse().ok()?;
    let order = order_of(row, first + 1);
    Some(match answer {
        1201 => {
            let order = order?;
            Answer::Order(Box::new(
                Order::from_parts(
                    order.id(),
                    order.pet(),
                    OrderStatus::Placed,
                    order.placed_by(),
                    order.placed_at(),
                    order.expires_at(),
                    None,
                )
                .ok()?,
            ))
        }
        1200 => Answer::Order(Box::new(order?)),
        1409 => Answer::OrderConflict {
            id: OrderId::new(u64::try_from(row.try_get::<_, i64>(first + 1).ok()?).ok()?)?,
            status,
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_reach_postgresql_as_the_same_instant() {
        let at = Timestamp::from_unix_nanos(1_800_000_000_123_456_789);
        assert_eq!(
            wall(at).duration_since(UNIX_EPOCH).unwrap(),
            Duration::from_nanos(1_800_000_000_123_456_789)
        );
    }
}
