//! The PostgreSQL backend (`--postgres URL`): the table is the truth, and
//! every replica keeps the whole inventory in the core's in-memory
//! [`Inventory`] as a read copy of it.
//!
//! - **Creates** go to one committer task through a bounded queue; each
//!   waits on a oneshot channel (no thread held). The committer takes
//!   every pending create (up to [`MAX_BATCH`]) and writes them in one
//!   transaction, pipelined in one round trip: `BEGIN`, one statement in
//!   which the counter's `UPDATE ... RETURNING` feeds an
//!   `INSERT ... SELECT ... FROM unnest(...)` and `pg_notify` tells the
//!   other replicas, then `COMMIT`. The counter row serialises the
//!   replicas' commits, so ids commit in order with no gap; the batch is
//!   what makes that fast. The batch enters the copy before its 201s.
//! - **The copy** is loaded at start (id ranges, several queries in
//!   flight), then kept current by tailing `WHERE id > local_max ORDER BY
//!   id`: exact, because ids commit in order and a pet never changes. A
//!   `LISTEN` connection wakes the tail on every other replica's commit,
//!   and a poll every [`POLL`] backs it up (a lost connection, a missed
//!   notification), so lists show another replica's pet within 100 ms. A
//!   get of an id above the copy's maximum first catches up (one query),
//!   so a 201's `Location` answers 200 on every replica at once.
//! - **Failures:** any failed operation marks PostgreSQL down (logged once,
//!   and once when it ends); creates then answer 503 and `/healthz` 503,
//!   reads go on from the copy. The pool hands out only connections that
//!   answered a query just now (deadpool's `Verified` recycling), and a
//!   connection that failed or timed out mid-transaction is thrown away,
//!   never put back. A batch whose `COMMIT` outcome is unknown (an error
//!   or a timeout after it was sent) is answered 503 and never retried:
//!   retrying could store the pets twice. The tail retries with backoff,
//!   which is also how a recovery is noticed. Every wait has a timeout.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use parking_lot::Mutex;
use petstore_core::{ApplyError, CategoryId, Inventory, NewPet, Pet, PetId, PetStatus};
use tokio::sync::Notify;
use tokio::time::timeout;
use tokio_postgres::{AsyncMessage, Config, NoTls, Row};

mod describe;
mod metrics;
mod schema;
mod stats;

use describe::describe;
use stats::{Op, Stats};

use super::committer::{self, Commit, Committer};
use super::failed::CreateFailed;
use crate::{log_error, log_info};

/// Most creates written by one transaction.
pub const MAX_BATCH: usize = 512;
/// Creates waiting for the committer at most; one more answers 503 at once.
const QUEUE: usize = 16 * 1024;
/// The tail's poll when no notification comes.
pub const POLL: Duration = Duration::from_millis(40);
/// The longest pause between two attempts while PostgreSQL is down.
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// Connecting, or taking a connection from the pool.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// One transaction or query.
const QUERY_TIMEOUT: Duration = Duration::from_secs(3);
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
/// Pets per query when loading or tailing.
const PAGE: i64 = 10_000;
/// Load queries in flight at once.
const LOAD_IN_FLIGHT: usize = 4;
/// Connections in the pool: the committer, the tail, catch-ups, the load.
const POOL_SIZE: usize = 8;
/// The channel of `LISTEN`/`NOTIFY`.
const CHANNEL: &str = "petstore_pets";

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
const TAIL: &str = "SELECT id, name, category_id, status FROM petstore_pets \
                    WHERE id > $1 ORDER BY id LIMIT $2";
const RANGE: &str = "SELECT id, name, category_id, status FROM petstore_pets \
                     WHERE id BETWEEN $1 AND $2 ORDER BY id";
const LAST_ID: &str = "SELECT last_id FROM petstore_counter";

/// The PostgreSQL store and its read copy. Made by [`Postgres::open`],
/// which also starts its tasks (committer, tail, listener).
pub struct Postgres {
    copy: Arc<Inventory>,
    pool: Pool,
    queue: Committer,
    health: Health,
    stats: Stats,
    /// One tail query at a time; `tails_started` lets a waiter skip its
    /// own when one that started after it asked has finished.
    tail: tokio::sync::Mutex<()>,
    tails_started: AtomicU64,
    /// Wakes the tail task (a notification, a reconnected listener).
    wake: Notify,
    /// The highest id known committed: notifications, own commits, tails.
    latest: AtomicU64,
}

impl std::fmt::Debug for Postgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Postgres")
            .field("pets", &self.copy.len())
            .field("down", &self.health.is_down())
            .finish_non_exhaustive()
    }
}

/// Why the PostgreSQL store could not start.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The URL does not parse.
    #[error("--postgres: not a valid PostgreSQL URL or connection string: {0}")]
    Url(String),
    /// No connection could be made.
    #[error("cannot connect to PostgreSQL at {target}: {cause}")]
    Connect {
        /// Host, port and database (never the password).
        target: String,
        /// Why.
        cause: String,
    },
    /// The schema could not be made ready, or is too new.
    #[error(transparent)]
    Schema(#[from] schema::SchemaError),
    /// Loading the read copy failed.
    #[error("cannot load the pets from PostgreSQL: {0}")]
    Load(String),
}

impl Postgres {
    /// Connects to `url`, creates or migrates the schema, loads the read
    /// copy, and starts the committer, the tail and the listener. Call
    /// from inside the tokio runtime.
    pub async fn open(url: &str) -> Result<Arc<Postgres>, OpenError> {
        let mut config = Config::from_str(url).map_err(|e| OpenError::Url(describe(&e)))?;
        config.connect_timeout(CONNECT_TIMEOUT);
        if config.get_application_name().is_none() {
            config.application_name("petstore-server");
        }
        let target = target(&config);
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                // A connection is checked with a query each time it is
                // taken: one that died with a PostgreSQL restart is
                // replaced, never handed to a create to fail.
                recycling_method: RecyclingMethod::Verified,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(CONNECT_TIMEOUT))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .recycle_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| OpenError::Connect {
                target: target.clone(),
                cause: e.to_string(),
            })?;
        let mut client = pool.get().await.map_err(|e| OpenError::Connect {
            target: target.clone(),
            cause: pool_error(&e),
        })?;
        let was = schema::migrate(&mut client).await?;
        if was < schema::VERSION {
            log_info!(
                "PostgreSQL {target}: schema migrated from version {was} to {}",
                schema::VERSION
            );
        }
        drop(client);

        let copy = Arc::new(Inventory::in_memory());
        let started = Instant::now();
        load(&pool, &copy).await.map_err(OpenError::Load)?;
        log_info!(
            "inventory: PostgreSQL {target}, {} pet(s) loaded into the read copy in {} ms",
            copy.len(),
            started.elapsed().as_millis()
        );

        let (queue, pending) = Committer::new(QUEUE);
        let pg = Arc::new(Postgres {
            latest: AtomicU64::new(copy.len() as u64),
            copy,
            pool,
            queue,
            health: Health::default(),
            stats: Stats::default(),
            tail: tokio::sync::Mutex::new(()),
            tails_started: AtomicU64::new(0),
            wake: Notify::new(),
        });
        tokio::spawn(committer::run(Arc::clone(&pg), pending, MAX_BATCH));
        tokio::spawn(Arc::clone(&pg).tail_loop());
        tokio::spawn(Arc::clone(&pg).listen_loop(config));
        Ok(pg)
    }

    /// Whether pet `id` may exist although the read copy does not hold
    /// it yet (another replica created it a moment ago).
    pub fn may_catch_up(&self, id: PetId) -> bool {
        id.get() > self.copy.len() as u64
    }

    /// The collector of its metrics, for `/metrics`.
    pub fn collector(self: &Arc<Self>) -> Box<dyn prometheus_client::collector::Collector> {
        Box::new(metrics::PostgresCollector(self.clone()))
    }

    /// The read copy every read is answered from.
    pub fn copy(&self) -> &Arc<Inventory> {
        &self.copy
    }

    /// What `/healthz` says while PostgreSQL is down; the cause itself is
    /// in the log.
    pub fn failure(&self) -> Option<String> {
        if let Some(row) = self.health.bad_row.lock().as_ref() {
            return Some(row.clone());
        }
        if let Some(stuck) = self.health.stuck.lock().as_ref() {
            return Some(stuck.clone());
        }
        self.health
            .is_down()
            .then(|| "PostgreSQL cannot be reached".to_owned())
    }

    /// The counters behind `/metrics`.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Whether PostgreSQL answered the last operation.
    pub fn is_up(&self) -> bool {
        !self.health.is_down()
    }

    /// How many committed pets the copy does not hold yet, as far as this
    /// replica knows (its notifications and its own commits).
    pub fn behind(&self) -> u64 {
        self.latest
            .load(Ordering::Relaxed)
            .saturating_sub(self.copy.len() as u64)
    }

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

    /// The tail: woken by notifications, polling as a backup, backing off
    /// while PostgreSQL is down.
    async fn tail_loop(self: Arc<Self>) {
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
    async fn listen_loop(self: Arc<Self>, config: Config) {
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
async fn load(pool: &Pool, copy: &Inventory) -> Result<(), String> {
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
        // (tokio-postgres pipelines requests on one connection).
        let params: Vec<[&(dyn tokio_postgres::types::ToSql + Sync); 2]> =
            ranges.iter().map(|(a, b)| [a as _, b as _]).collect();
        let queries = params
            .iter()
            .map(|params| client.query(&statement, params))
            .collect();
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

/// Runs `futures` together, polled in their order (so that requests on
/// one connection leave in that order); their outputs in the same order.
async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => *output = Some(value),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
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

/// Why the copy could not catch up.
#[derive(Debug)]
enum PullFailed {
    /// PostgreSQL failed or could not be reached.
    Unreachable(String),
    /// A committed row the copy cannot apply (it breaks the contract's
    /// rules, or leaves a gap): the same on every try, until fixed.
    BadRow(String),
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
/// and as `/healthz` says it (attack run F3c).
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
fn json_tail(new: &NewPet) -> String {
    let json = new.clone().into_pet(PetId::MIN).to_json();
    // `{"id":1` is 7 bytes, then `,"name":...`; the encoder's output is
    // ASCII up to there and UTF-8 throughout.
    String::from_utf8(json.get(7..).map(<[u8]>::to_vec).unwrap_or_default()).unwrap_or_default()
}

/// Throws a connection away (it may sit in a failed or open
/// transaction): it is never handed out again. Returns the error's text.
fn discard(client: Object, e: &tokio_postgres::Error) -> String {
    drop(Object::take(client));
    describe(e)
}

fn pool_error(e: &deadpool_postgres::PoolError) -> String {
    match e {
        deadpool_postgres::PoolError::Backend(e) => describe(e),
        other => other.to_string(),
    }
}

/// `host:port/dbname`, for messages: never the password.
fn target(config: &Config) -> String {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("{host}:{port}/{db}")
}

/// Up or down, with the cause logged once when it goes down and once when
/// it comes back.
#[derive(Debug, Default)]
struct Health {
    down: AtomicBool,
    /// Why and since when it is down.
    cause: Mutex<Option<(String, Instant)>>,
    /// Why creates cannot succeed although PostgreSQL answers; cleared
    /// only by a create that commits (a successful read shows nothing).
    stuck: Mutex<Option<String>>,
    /// A committed row the copy cannot apply; cleared by a catch-up that
    /// applies every row. Meanwhile creates are refused (503).
    bad_row: Mutex<Option<String>>,
}

impl Health {
    fn is_down(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }

    fn down(&self, cause: &str) {
        let mut current = self.cause.lock();
        if current.is_none() {
            log_error!(
                "PostgreSQL failed: {cause}. Creates answer 503, reads go on from this replica's copy, \
                 /healthz answers 503; retrying with backoff"
            );
            *current = Some((cause.to_owned(), Instant::now()));
            self.down.store(true, Ordering::Relaxed);
        }
    }

    /// Creates cannot succeed for `cause` (logged once, until a commit
    /// succeeds again).
    fn stuck(&self, cause: &str) {
        let mut stuck = self.stuck.lock();
        if stuck.as_deref() != Some(cause) {
            log_error!(
                "PostgreSQL refuses every create: {cause}. Creates answer 503, reads go on, \
                 /healthz answers 503, until a create commits again"
            );
            *stuck = Some(cause.to_owned());
        }
    }

    /// The copy cannot apply a committed row, for `cause` (logged once,
    /// until every row applies again).
    fn bad_row(&self, cause: &str) {
        let mut bad = self.bad_row.lock();
        if bad.as_deref() != Some(cause) {
            log_error!(
                "the read copy cannot apply a committed row: {cause}. Creates answer 503 \
                 (a pet stored now could not be read here), reads of what the copy holds go on, \
                 /healthz answers 503, until the row is fixed in PostgreSQL"
            );
            *bad = Some(cause.to_owned());
        }
    }

    /// Every committed row applies again.
    fn rows_apply(&self) {
        if let Some(cause) = self.bad_row.lock().take() {
            log_info!(
                "the read copy applies every row again (it could not: {cause}); creates work again"
            );
        }
    }

    /// A create committed: whatever made creates fail is over.
    fn unstuck(&self) {
        if let Some(cause) = self.stuck.lock().take() {
            log_info!("PostgreSQL stores creates again (they had failed: {cause})");
        }
    }

    /// An operation that `started` then succeeded. Only one that started
    /// after the failure shows PostgreSQL answering again: while it shuts
    /// down, a query already under way may still finish after another
    /// failed, and would otherwise end an outage that goes on.
    fn up(&self, started: Instant) {
        if !self.is_down() {
            return;
        }
        let mut current = self.cause.lock();
        match current.as_ref() {
            Some((_, since)) if started < *since => return,
            Some((cause, _)) => {
                log_info!("PostgreSQL answers again (it had failed: {cause}); creates work again")
            }
            None => {}
        }
        *current = None;
        self.down.store(false, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_operation_started_after_the_failure_ends_an_outage() {
        let health = Health::default();
        let before = Instant::now();
        health.up(before);
        assert!(!health.is_down());
        health.down("reset by peer");
        // A query under way when PostgreSQL went down, finishing now.
        health.up(before);
        assert!(health.is_down());
        // A second failure of the same outage keeps its first cause.
        health.down("connection refused");
        assert_eq!(
            health.cause.lock().as_ref().map(|(c, _)| c.as_str()),
            Some("reset by peer")
        );
        health.up(Instant::now());
        assert!(!health.is_down());
        assert!(health.cause.lock().is_none());
    }

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
