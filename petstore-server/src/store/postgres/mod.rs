//! The PostgreSQL backend (`--postgres URL`): the table is the truth, and
//! every replica keeps the whole inventory in the core's in-memory
//! [`Inventory`] as a read copy of it, orders included. Creates and steps
//! (an order's, or a pet transition, its door) each go to a committer task
//! that writes a batch (at most [`MAX_BATCH`](write::MAX_BATCH)) in one
//! transaction, pipelined in one round trip; PostgreSQL decides each
//! step, never the copy, and lapses holds by its own clock. The
//! copy is loaded at start and kept current by a tail that `LISTEN` wakes
//! and a poll every [`POLL`] backs up; a batch shows in it before its
//! answers. A failure answers 503 (never retried when a commit's outcome
//! is unknown) while reads go on from the copy.
//!
//! What each guarantees and why, and the failures: docs/replicas.md, "The
//! inventory in PostgreSQL".
//!
//! | file | holds |
//! |---|---|
//! | `mod.rs` | [`Postgres`] and what the seam reads of it |
//! | `open.rs` | connecting, the pool, the start of the tasks ([`Postgres::open`]) |
//! | `connect.rs` | the hosts of the connection string, and the server each new connection reached (for the log) |
//! | `schema.rs` | the schema, created and migrated at start |
//! | `write.rs` | the write path: a create queued, one transaction per batch |
//! | `step.rs` | the steps path (orders, and pet transitions as their doors): decided by PostgreSQL per batch, shown by the copy before the answer |
//! | `expire.rs` | holds that lapsed, expired by whichever replica asks PostgreSQL first |
//! | `idempotency.rs` | keyed creates (and the kept answers of keyed steps): the key claimed in the write's transaction, the lookup, pruning |
//! | `keyed.rs` | a keyed write queued and what it comes to; the keys in flight |
//! | `copy.rs` | the read copy: loaded at start, kept current by the tail and the listener |
//! | `feed.rs` | the feed of events (beta): PostgreSQL's table of them followed into the copy's feed, pruned |
//! | `health.rs` | up, down, stuck or a bad row, each change logged once (`/healthz` reads it through [`Postgres::failure`]) |
//! | `describe.rs` | PostgreSQL's errors as text, a failed connection thrown away |
//! | `stats.rs`, `metrics.rs` | its counters and their `/metrics` |

mod connect;
mod copy;
mod describe;
mod expire;
mod feed;
mod health;
mod idempotency;
mod keyed;
mod metrics;
mod open;
mod schema;
mod stats;
mod step;
mod write;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::Pool;
use petstore_core::{order::OrderId, Inventory, PetId};
use tokio::sync::Notify;

use health::Health;
use stats::PostgresStats;

use super::committer::Committer;
use keyed::{InFlight, KeyedCreate, Lookup};

/// The tail's poll when no notification comes.
pub const POLL: Duration = Duration::from_millis(40);
/// One transaction or query.
const QUERY_TIMEOUT: Duration = Duration::from_secs(3);
/// The longest pause between two attempts while PostgreSQL is down.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// The PostgreSQL store and its read copy. Made by [`Postgres::open`],
/// which also starts its tasks (committer, tail, listener).
pub struct Postgres {
    copy: Arc<Inventory>,
    pool: Pool,
    queue: Committer,
    /// The steps' committer, keyed or not: its own queue and task, so a
    /// batch of creates and one of steps go to PostgreSQL side by side.
    steps: Committer<step::Wanted>,
    /// Keyed creates: a committer of their own, so that the unkeyed
    /// batches stay as they are (`idempotency.rs`).
    keyed_creates: Committer<KeyedCreate>,
    /// The idempotency keys this replica is writing now.
    inflight: InFlight,
    /// The lookups of idempotency keys: a batch of keys in one query.
    lookups: Committer<Lookup>,
    /// The connection idempotency lookups share (`idempotency.rs`).
    lookup: parking_lot::Mutex<Option<Arc<deadpool_postgres::Object>>>,
    health: Health,
    stats: PostgresStats,
    /// One tail query at a time; `tails_started` lets a waiter skip its
    /// own when one that started after it asked has finished.
    tail: tokio::sync::Mutex<()>,
    tails_started: AtomicU64,
    /// Wakes the tail task (a notification, a reconnected listener).
    wake: Notify,
    /// Wakes the task that follows the events (`feed.rs`), likewise.
    events_wake: Notify,
    /// The highest id known committed: notifications, own commits, tails.
    latest: AtomicU64,
    /// The copy has applied every change (of a pet's status, of an
    /// order) up to this number; moved only with `tail` held (`copy.rs`).
    changes_applied: AtomicU64,
    /// The highest change number known committed.
    latest_change: AtomicU64,
}

impl std::fmt::Debug for Postgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Postgres")
            .field("pets", &self.copy.len())
            .field("down", &self.health.is_down())
            .finish_non_exhaustive()
    }
}

impl Postgres {
    /// Whether pet `id` may exist although the read copy does not hold
    /// it yet (another replica created it a moment ago).
    pub fn may_catch_up(&self, id: PetId) -> bool {
        id.get() > self.copy.len() as u64
    }

    /// Whether order `id` may exist although the read copy does not hold
    /// it yet (another replica placed it a moment ago).
    pub fn may_catch_up_order(&self, id: OrderId) -> bool {
        id.get() > self.copy.orders_len()
    }

    /// Brings the copy up to order `id` (one tail query at most); whether
    /// PostgreSQL answered.
    pub async fn catch_up_order(&self, id: OrderId) -> bool {
        self.catch_up(copy::Want::Order(id.get())).await
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

    /// Whether PostgreSQL answered the last operation.
    pub fn is_up(&self) -> bool {
        !self.health.is_down()
    }

    /// The counters behind `/metrics`.
    pub fn stats(&self) -> &PostgresStats {
        &self.stats
    }

    /// How many committed pets the copy does not hold yet, as far as this
    /// replica knows (its notifications and its own commits).
    pub fn behind(&self) -> u64 {
        self.latest
            .load(Ordering::Relaxed)
            .saturating_sub(self.copy.len() as u64)
    }

    /// How many committed status changes the copy has not applied yet, as
    /// far as this replica knows. A change to a pet the copy does not hold
    /// yet counts until the tail has passed it.
    pub fn changes_behind(&self) -> u64 {
        self.latest_change
            .load(Ordering::Relaxed)
            .saturating_sub(self.changes_applied.load(Ordering::Relaxed))
    }
}
