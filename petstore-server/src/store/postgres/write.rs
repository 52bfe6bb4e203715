//! The write path: a create queued for the committer
//! ([`Postgres::create`]), and each batch written in one transaction
//! ([`Commit`] for [`Postgres`]), into the read copy before any 201.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool_postgres::Object;
use petstore_core::{NewPet, Pet, PetId};
use tokio::time::timeout;

use super::describe::{discard, pool_error};
use super::stats::Op;
use super::{Postgres, QUERY_TIMEOUT};
use crate::store::committer::Commit;
use crate::store::failed::CreateFailed;

/// Most creates written by one transaction.
pub const MAX_BATCH: usize = 512;
/// Creates waiting for the committer at most; one more answers 503 at once.
pub(super) const QUEUE: usize = 16 * 1024;
/// A create's whole wait, queue included: longer than a connection plus a
/// transaction, so the committer's own timeouts answer first.
const CREATE_TIMEOUT: Duration = Duration::from_secs(6);
/// A create's transaction starts with PostgreSQL's own bounds, below
/// [`QUERY_TIMEOUT`] (3 s): a create stuck behind a lock (another
/// session's, an operator's `LOCK TABLE`) is rolled back by PostgreSQL
/// itself, so its 503 means "not stored". Without them the statements,
/// already sent, waited for the lock after the server gave up and
/// committed once it was released: pets answered 503 and stored all the
/// same. `SET LOCAL`: they end with the transaction.
const BEGIN: &str = "BEGIN; SET LOCAL lock_timeout = '2s'; SET LOCAL statement_timeout = '2500ms'";

/// One statement: the counter, the rows, the notification. `$1` is the
/// batch's size; each pet's JSON is `{"id":` and its id, then the tail
/// the core encoded after the id (`$5`), so the JSON stored is exactly
/// the bytes the copy serves.
const INSERT: &str = r#"
WITH counter AS (
    UPDATE petstore_counter SET last_id = last_id + $1::int8 RETURNING last_id - $1::int8 AS base
), inserted AS (
    INSERT INTO petstore_pets (id, name, category_id, status, json)
    SELECT counter.base + p.n, p.name, p.category_id, p.status, '{"id":' || (counter.base + p.n) || p.tail
    FROM counter, unnest($2::text[], $3::int8[], $4::text[], $5::text[])
        WITH ORDINALITY AS p(name, category_id, status, tail, n)
)
SELECT base, pg_notify('petstore_pets', (base + $1::int8)::text)::text FROM counter
"#;

impl Postgres {
    /// Queues `new` for the committer and waits for its answer: the pet,
    /// committed and in the copy, or `Err` (not stored, or not known to be).
    pub async fn create(&self, new: NewPet) -> Result<Pet, CreateFailed> {
        // A committed row the copy cannot apply: a pet created now would
        // be stored but never readable here. 503 until the row is fixed.
        if self.health.bad_row.lock().is_some() {
            return Err(CreateFailed);
        }
        let Ok(answer) = self.queue.submit(new) else {
            // Full: PostgreSQL is slower than the creates coming in.
            self.stats.count_error(Op::Queue);
            return Err(CreateFailed);
        };
        match timeout(CREATE_TIMEOUT, answer).await {
            Ok(Ok(answer)) => answer,
            // The committer ended (it does not), or the wait was too long:
            // if the batch was already sent its outcome is unknown; 503.
            Ok(Err(_)) | Err(_) => Err(CreateFailed),
        }
    }

    /// Writes `batch` in one transaction; returns the id before the
    /// batch's first. `Err` when not committed, or not known to be.
    async fn write(&self, batch: &[NewPet]) -> Result<u64, WriteFailed> {
        let client = self.pool.get().await.map_err(|e| pool_error(&e))?;
        let statement = match timeout(QUERY_TIMEOUT, client.prepare_cached(INSERT)).await {
            Ok(Ok(statement)) => statement,
            Ok(Err(e)) => return Err(discard(client, &e).into()),
            Err(_) => {
                drop(Object::take(client));
                return Err("preparing the insert timed out".into());
            }
        };
        let count = batch.len() as i64;
        let names: Vec<&str> = batch.iter().map(NewPet::name).collect();
        let categories: Vec<i64> = batch
            .iter()
            .map(|new| new.category_id().get() as i64)
            .collect();
        let statuses: Vec<&str> = batch.iter().map(|new| new.status().as_str()).collect();
        let tails: Vec<String> = batch.iter().map(json_tail).collect();
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
            [&count, &names, &categories, &statuses, &tails];
        // Pipelined: the three requests leave in this order when first
        // polled, and PostgreSQL answers them in order; one round trip.
        let work = async {
            tokio::join!(
                client.batch_execute(BEGIN),
                client.query_one(&statement, &params),
                client.batch_execute("COMMIT"),
            )
        };
        match timeout(QUERY_TIMEOUT, work).await {
            Ok((Ok(()), Ok(row), Ok(()))) => match row.try_get::<_, i64>(0) {
                Ok(base) if base >= 0 => Ok(base as u64),
                _ => Err("the insert returned no valid first id".into()),
            },
            // PostgreSQL refused the insert: it turned the COMMIT into a
            // rollback, nothing was stored.
            Ok((Ok(()), Err(e), _)) if e.as_db_error().is_some() => {
                if counter_behind(&e) {
                    let _ = discard(client, &e);
                    return Err(WriteFailed::Stuck(COUNTER_BEHIND.into()));
                }
                Err(discard(client, &e).into())
            }
            // The connection broke, or BEGIN or COMMIT failed: the
            // outcome is unknown.
            Ok((Err(e), _, _)) | Ok((_, Err(e), _)) | Ok((_, _, Err(e))) => Err(format!(
                "a commit's outcome is unknown (answered 503, not retried): {}",
                discard(client, &e)
            )
            .into()),
            Err(_) => {
                drop(Object::take(client));
                Err("a commit timed out; its outcome is unknown (answered 503, not retried)".into())
            }
        }
    }
}

/// The PostgreSQL side of the committer: one transaction per batch, the
/// batch into the read copy before any 201.
impl Commit for Postgres {
    async fn commit(self: &Arc<Self>, batch: Vec<NewPet>) -> Result<Vec<Pet>, CreateFailed> {
        self.stats.batch.observe_count(batch.len() as u64);
        let started = Instant::now();
        let committed = self.write(&batch).await;
        self.stats.commit.observe(started.elapsed());
        match committed {
            Ok(base) => {
                self.health.up(started);
                self.health.unstuck();
                let pets: Vec<Pet> = batch
                    .into_iter()
                    .enumerate()
                    .map(|(i, new)| {
                        let id = PetId::new(base + 1 + i as u64).unwrap_or(PetId::MAX);
                        new.into_pet(id)
                    })
                    .collect();
                let last = base + pets.len() as u64;
                self.latest.fetch_max(last, Ordering::Relaxed);
                // Into the copy before any 201. When other replicas'
                // pets come below ours and the copy lacks them, the
                // tail fetches them, ours included. Should that fail,
                // the pets are committed all the same: 201, and the
                // copy catches up on the next tail.
                if self.copy.apply(&pets).is_err() {
                    self.catch_up_to(last).await;
                }
                Ok(pets)
            }
            Err(WriteFailed::Unreachable(cause)) => {
                self.stats.count_error(Op::Commit);
                self.health.down(&cause);
                Err(CreateFailed)
            }
            Err(WriteFailed::Stuck(cause)) => {
                self.stats.count_error(Op::Commit);
                self.health.stuck(&cause);
                Err(CreateFailed)
            }
        }
    }
}

/// Why a batch was not stored.
#[derive(Debug)]
enum WriteFailed {
    /// PostgreSQL failed, could not be reached, or the outcome is unknown:
    /// it may answer again by itself.
    Unreachable(String),
    /// PostgreSQL answers, but no create can succeed until an operator
    /// acts (the counter behind the table's ids).
    Stuck(String),
}

impl From<String> for WriteFailed {
    fn from(cause: String) -> WriteFailed {
        WriteFailed::Unreachable(cause)
    }
}

impl From<&str> for WriteFailed {
    fn from(cause: &str) -> WriteFailed {
        WriteFailed::Unreachable(cause.to_owned())
    }
}

/// The cause of a create refused because the next id is taken, as logged
/// and as `/healthz` says it: a row inserted by hand above the counter
/// makes every create meet it, and the operator needs the fix spelled out.
const COUNTER_BEHIND: &str = "the counter and the table disagree: petstore_counter.last_id \
     is behind the ids in petstore_pets (a row written by hand?), so every create takes an id \
     that exists; set last_id to SELECT max(id) FROM petstore_pets";

/// Whether `e` is the insert's primary key taken: the counter is behind
/// the table, and every create would meet the same row again (a failed
/// transaction rolls the counter's update back too).
fn counter_behind(e: &tokio_postgres::Error) -> bool {
    e.as_db_error().is_some_and(|db| {
        *db.code() == tokio_postgres::error::SqlState::UNIQUE_VIOLATION
            && db.table() == Some("petstore_pets")
    })
}

/// What the core encodes after `{"id":N` for this pet: the JSON the
/// insert completes with the id it gives.
pub(super) fn json_tail(new: &NewPet) -> String {
    let json = new.clone().into_pet(PetId::MIN).to_json();
    // `{"id":1` is 7 bytes, then `,"name":...`; the encoder's output is
    // ASCII up to there and UTF-8 throughout.
    String::from_utf8(json.get(7..).map(<[u8]>::to_vec).unwrap_or_default()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use petstore_core::{CategoryId, PetStatus};

    #[test]
    fn the_stored_json_is_the_cores_encoding() {
        for name in ["Rex", "a\"b\\c", "é€😀 x", " tab\u{2003}"] {
            let new = NewPet::new(name, CategoryId::MAX)
                .unwrap()
                .with_status(PetStatus::Sold);
            for id in [1, 42, PetId::MAX.get()] {
                // What the insert stores: `{"id":`, the id, the tail.
                let stored = format!("{{\"id\":{id}{}", json_tail(&new));
                let pet = new.clone().into_pet(PetId::new(id).unwrap());
                assert_eq!(stored.as_bytes(), &pet.to_json()[..], "{name} {id}");
            }
        }
    }
}
