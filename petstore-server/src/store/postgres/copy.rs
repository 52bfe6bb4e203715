//! The read copy: every committed pet in the core's in-memory
//! [`Inventory`], loaded at start ([`load`]) and kept current by tailing
//! the table ([`Postgres::catch_up_to`]), woken by the listener's
//! notifications and by a poll ([`POLL`]).

use std::future::poll_fn;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use deadpool_postgres::{Object, Pool};
use futures_util::future::join_all;
use petstore_core::{ApplyError, CategoryId, Inventory, NewPet, Pet, PetId, PetStatus};
use tokio::time::timeout;
use tokio_postgres::{AsyncMessage, Config, NoTls, Row};

use super::describe::{describe, discard, pool_error};
use super::stats::Op;
use super::{Postgres, CONNECT_TIMEOUT, MAX_BACKOFF, POLL, QUERY_TIMEOUT};

/// Pets per query when loading or tailing.
const PAGE: i64 = 10_000;
/// Load queries in flight at once: a few, which `join_all` polls in
/// their order (so they leave on the connection in order).
const LOAD_IN_FLIGHT: usize = 4;
/// The channel of `LISTEN`/`NOTIFY`.
const CHANNEL: &str = "petstore_pets";
const TAIL: &str = "SELECT id, name, category_id, status FROM petstore_pets \
                    WHERE id > $1 ORDER BY id LIMIT $2";
const RANGE: &str = "SELECT id, name, category_id, status FROM petstore_pets \
                     WHERE id BETWEEN $1 AND $2 ORDER BY id";
const LAST_ID: &str = "SELECT last_id FROM petstore_counter";

impl Postgres {
    /// Brings the copy up to `want` (0: whatever is committed). One tail
    /// query at most per caller, none when a query that started after
    /// this call has finished meanwhile. Returns whether PostgreSQL
    /// answered (or no query was needed).
    pub async fn catch_up_to(&self, want: u64) -> bool {
        let held = |pg: &Self| want != 0 && pg.copy.len() as u64 >= want;
        if held(self) {
            return true;
        }
        let asked = self.tails_started.load(Ordering::Acquire);
        let Ok(_one) = timeout(QUERY_TIMEOUT, self.tail.lock()).await else {
            return false;
        };
        if held(self) || (want != 0 && self.tails_started.load(Ordering::Acquire) > asked) {
            return true;
        }
        self.tails_started.fetch_add(1, Ordering::AcqRel);
        let started = Instant::now();
        let pulled = timeout(QUERY_TIMEOUT, self.pull()).await;
        self.stats.tail.observe(started.elapsed());
        match pulled {
            Ok(Ok(())) => {
                self.health.up(started);
                self.health.rows_apply();
                true
            }
            Ok(Err(PullFailed::Unreachable(cause))) => {
                self.stats.count_error(Op::Tail);
                self.health.down(&cause);
                false
            }
            Ok(Err(PullFailed::BadRow(cause))) => {
                self.stats.count_error(Op::Tail);
                // PostgreSQL answered: what fails is the row, and it
                // fails the same way on every poll until it is fixed.
                self.health.up(started);
                self.health.bad_row(&cause);
                false
            }
            Err(_) => {
                self.stats.count_error(Op::Tail);
                self.health.down("a query of new pets timed out");
                false
            }
        }
    }

    /// Applies every pet above the copy's maximum, a page at a time.
    async fn pull(&self) -> Result<(), PullFailed> {
        let client = self
            .pool
            .get()
            .await
            .map_err(|e| PullFailed::Unreachable(pool_error(&e)))?;
        let statement = client.prepare_cached(TAIL).await.map_err(|e| describe(&e));
        let statement = match statement {
            Ok(statement) => statement,
            Err(cause) => {
                drop(Object::take(client));
                return Err(PullFailed::Unreachable(cause));
            }
        };
        loop {
            let from = self.copy.len() as i64;
            let rows = match client.query(&statement, &[&from, &PAGE]).await {
                Ok(rows) => rows,
                Err(e) => return Err(PullFailed::Unreachable(discard(client, &e))),
            };
            let full = rows.len() as i64 == PAGE;
            let pets = pets_of(&rows).map_err(PullFailed::BadRow)?;
            if let Some(last) = pets.last() {
                self.latest.fetch_max(last.id().get(), Ordering::Relaxed);
            }
            self.copy.apply(&pets).map_err(|e| {
                PullFailed::BadRow(match e {
                    ApplyError::Gap { expected, found } => format!(
                        "the ids in petstore_pets skip from {} to {found} (a row written above \
                         the counter?); ids have no gap, so no replica can apply it: delete that row",
                        expected.saturating_sub(1)
                    ),
                    other => format!("the table does not follow on from the copy: {other}"),
                })
            })?;
            if !full {
                return Ok(());
            }
        }
    }

    /// The tail: woken by notifications, polling as a backup, backing off
    /// while PostgreSQL is down.
    pub(super) async fn tail_loop(self: Arc<Self>) {
        let mut wait = POLL;
        loop {
            let _ = timeout(wait, self.wake.notified()).await;
            wait = if self.catch_up_to(0).await {
                POLL
            } else {
                (wait * 2).min(MAX_BACKOFF)
            };
        }
    }

    /// Keeps a `LISTEN` connection open, reconnecting with backoff; each
    /// notification wakes the tail.
    pub(super) async fn listen_loop(self: Arc<Self>, config: Config) {
        let mut backoff = POLL;
        loop {
            if let Ok(Ok((client, mut connection))) =
                timeout(CONNECT_TIMEOUT, config.connect(NoTls)).await
            {
                let command = format!("LISTEN {CHANNEL}");
                let listen = client.batch_execute(&command);
                tokio::pin!(listen);
                let mut listening = false;
                loop {
                    tokio::select! {
                        done = &mut listen, if !listening => {
                            if done.is_err() { break; }
                            listening = true;
                            backoff = POLL;
                            // Whatever was committed while not listening.
                            self.wake.notify_one();
                        }
                        message = poll_fn(|cx| connection.poll_message(cx)) => match message {
                            Some(Ok(AsyncMessage::Notification(n))) => {
                                if let Ok(last) = n.payload().parse::<u64>() {
                                    self.latest.fetch_max(last, Ordering::Relaxed);
                                }
                                self.wake.notify_one();
                            }
                            Some(Ok(_)) => {}
                            Some(Err(_)) | None => break,
                        },
                    }
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
}

/// Loads every committed pet into `copy`: the counter first (every id up
/// to it is committed), then ranges of ids, a few queries in flight.
pub(super) async fn load(pool: &Pool, copy: &Inventory) -> Result<(), String> {
    let client = pool.get().await.map_err(|e| pool_error(&e))?;
    let last: i64 = client
        .query_one(LAST_ID, &[])
        .await
        .and_then(|row| row.try_get(0))
        .map_err(|e| describe(&e))?;
    let statement = client.prepare(RANGE).await.map_err(|e| describe(&e))?;
    let mut from = 1i64;
    while from <= last {
        let ranges: Vec<(i64, i64)> = (0..LOAD_IN_FLIGHT as i64)
            .map(|i| from.saturating_add(i.saturating_mul(PAGE)))
            .filter(|start| *start <= last)
            .map(|start| (start, start.saturating_add(PAGE - 1).min(last)))
            .collect();
        // Every query is sent before the first answer is awaited
        // (tokio-postgres pipelines requests on one connection). A query
        // leaves when first polled, and `join_all` polls a few futures in
        // their order, so the ranges leave in order.
        let params: Vec<[&(dyn tokio_postgres::types::ToSql + Sync); 2]> =
            ranges.iter().map(|(a, b)| [a as _, b as _]).collect();
        let queries = params.iter().map(|params| client.query(&statement, params));
        let mut results = Vec::with_capacity(ranges.len());
        for rows in join_all(queries).await {
            results.push(rows.map_err(|e| describe(&e))?);
        }
        for rows in results {
            copy.apply(&pets_of(&rows)?)
                .map_err(|e| format!("the table has a hole in its ids: {e}"))?;
        }
        from = ranges.last().map_or(last, |r| r.1).saturating_add(1);
    }
    if (copy.len() as i64) < last {
        return Err(format!(
            "the counter says {last} pets, the table has {}",
            copy.len()
        ));
    }
    Ok(())
}

/// Pets out of `id, name, category_id, status` rows, checked as the core
/// checks a create (the table's CHECKs hold the same rules).
fn pets_of(rows: &[Row]) -> Result<Vec<Pet>, String> {
    rows.iter().map(pet_of).collect()
}

fn pet_of(row: &Row) -> Result<Pet, String> {
    let bad = |what: &str| format!("a row of petstore_pets has {what}");
    let id = row.try_get::<_, i64>(0).map_err(|_| bad("no id"))?;
    let id = u64::try_from(id)
        .ok()
        .and_then(PetId::new)
        .ok_or_else(|| bad("an invalid id"))?;
    let bad = |what: &str| format!("the row of petstore_pets with id {id} has {what}");
    let name = row.try_get::<_, &str>(1).map_err(|_| bad("no name"))?;
    let category = row
        .try_get::<_, i64>(2)
        .ok()
        .and_then(|c| u64::try_from(c).ok())
        .and_then(CategoryId::new)
        .ok_or_else(|| bad("an invalid category"))?;
    let status = row
        .try_get::<_, &str>(3)
        .ok()
        .and_then(|s| s.parse::<PetStatus>().ok())
        .ok_or_else(|| bad("an invalid status"))?;
    let new = NewPet::new(name, category).map_err(|e| bad(&format!("an invalid name ({e})")))?;
    Ok(new.with_status(status).into_pet(id))
}

/// Why the copy could not catch up.
#[derive(Debug)]
enum PullFailed {
    /// PostgreSQL failed or could not be reached.
    Unreachable(String),
    /// A committed row the copy cannot apply (it breaks the contract's
    /// rules, or leaves a gap): the same on every try, until fixed.
    BadRow(String),
}
