//! The seam between the HTTP contract and where pets are kept: a
//! [`Store`], with its backends.
//!
//! | backend | flag | creates and steps (orders, transitions) | reads |
//! |---|---|---|---|
//! | in memory | `--in-memory` | the core's [`Inventory::create`] and [`Inventory::steps`], at once | the inventory |
//! | journal | `--data DIR` (default) | a committer task for each: a group commit per batch, on one blocking thread ([`journal`]) | the inventory |
//! | PostgreSQL | `--postgres URL` | a committer task for each: a transaction per batch, decided by PostgreSQL ([`postgres`]) | an in-memory read copy of the tables |
//!
//! Reads always come from the core's in-memory [`Inventory`], whatever
//! the backend, with no await; only a create, a transition, or a get the
//! PostgreSQL copy may not hold yet waits, when [`Store::create_now`],
//! [`Store::step_now`] or [`Store::may_catch_up`] say it must. Why:
//! docs/architecture.md, "The walk", step 7.
//!
//! | file | holds |
//! |---|---|
//! | `mod.rs` | the seam: [`Store`] |
//! | `failed.rs` | [`CreateFailed`], [`StepFailed`], [`KeyedFailed`]: why a write was not made |
//! | `feed.rs` | [`Feed`]: the requests waiting for events (beta), woken by one watch channel, bounded |
//! | `committer.rs` | the queue-batch-reply loop both durable backends share, for any kind of write |
//! | `journal.rs` | [`JournalStore`]: the journal's committer tasks |
//! | `lapse.rs` | the timer that expires lapsed holds of a local store |
//! | `compaction.rs` | the task that compacts the journal once it has outgrown its last snapshot |
//! | `metrics.rs` | pets, writability, the journal's commits and compactions in `/metrics` |
//! | `postgres/` | [`Postgres`]: committer, read copy, schema, its metrics |
//!
//! May use: `util`, `telemetry`.
//! From outside only this file is visible (and [`Postgres`] to the
//! start-up wiring).
//! Each backend registers its own metrics ([`Store::collectors`]).

mod committer;
mod compaction;
mod failed;
mod feed;
mod journal;
mod lapse;
mod metrics;
mod postgres;

use std::sync::Arc;

use petstore_core::inventory::{StepRequest, Stepped};
use petstore_core::{order::OrderId, Inventory, NewPet, Pet, PetId};
use prometheus_client::collector::Collector;

pub use failed::{CreateFailed, KeyedFailed, StepFailed};
pub use feed::{Feed, StreamSource, WaitRefused};
pub use journal::JournalStore;
pub use petstore_core::idempotency::{Answer, Keyed, KeyedOutcome, Seen};
pub use postgres::Postgres;

/// Where the pets live. Cheap to clone (an `Arc`).
#[derive(Clone, Debug)]
pub enum Store {
    /// The core's inventory in memory only.
    Memory(Arc<Inventory>),
    /// The core's durable inventory, fed by a committer.
    Journal(Arc<JournalStore>),
    /// PostgreSQL, read through an in-memory copy.
    Postgres(Arc<Postgres>),
}

impl Store {
    /// The store of the core's `inventory`: in memory, or its journal
    /// (whose committer starts with the first create).
    pub fn local(inventory: Arc<Inventory>) -> Store {
        match inventory.journal_path() {
            None => Store::Memory(inventory),
            Some(_) => Store::Journal(Arc::new(JournalStore::new(inventory))),
        }
    }

    /// The in-memory inventory every read is answered from: the store
    /// itself for a local backend, the read copy for PostgreSQL.
    pub fn inventory(&self) -> &Arc<Inventory> {
        match self {
            Store::Memory(inventory) => inventory,
            Store::Journal(journal) => journal.inventory(),
            Store::Postgres(pg) => pg.copy(),
        }
    }

    /// Creates `new` at once when the backend can without waiting (in
    /// memory: a push under a lock); otherwise hands it back, to be given
    /// to [`create`](Self::create) from an async context.
    pub fn create_now(&self, new: NewPet) -> Result<Result<Pet, CreateFailed>, NewPet> {
        match self {
            Store::Memory(inventory) => Ok(inventory.create(new).map_err(|_| CreateFailed)),
            _ => Err(new),
        }
    }

    /// Stores `new` under the next id and returns it; once this returns
    /// `Ok`, the pet is durable (fsynced, or committed) and readable from
    /// [`inventory`](Self::inventory). Bounded in time: a backend that
    /// cannot answer in time answers `Err`.
    pub async fn create(&self, new: NewPet) -> Result<Pet, CreateFailed> {
        match self {
            Store::Memory(inventory) => inventory.create(new).map_err(|_| CreateFailed),
            Store::Journal(journal) => journal.create(new).await,
            Store::Postgres(pg) => pg.create(new).await,
        }
    }

    /// Makes a step (an order's, or a pet transition, its door) at once
    /// when the backend can without waiting (in memory: a change under a
    /// lock); otherwise hands it back, for [`step`](Self::step) from an
    /// async context.
    pub fn step_now(
        &self,
        request: StepRequest,
    ) -> Result<Result<Stepped, StepFailed>, Box<StepRequest>> {
        match self {
            Store::Memory(inventory) => Ok(memory_step(inventory, request)),
            Store::Journal(_) | Store::Postgres(_) => Err(Box::new(request)),
        }
    }

    /// Decides a step where the truth lives and makes it; once this
    /// returns `Ok`, the change is as durable as a created pet and
    /// readable from [`inventory`](Self::inventory). Bounded in time like
    /// [`create`](Self::create).
    pub async fn step(&self, request: StepRequest) -> Result<Stepped, StepFailed> {
        match self {
            Store::Memory(inventory) => memory_step(inventory, request),
            Store::Journal(journal) => journal.step(request).await,
            Store::Postgres(pg) => pg.step(request).await,
        }
    }

    /// Whether reads come from a read copy of a store other servers write
    /// too (PostgreSQL): then a cursor of the feed beyond the copy's
    /// newest event is another replica's, a moment ahead (`postgres/feed.rs`).
    pub fn is_replica(&self) -> bool {
        matches!(self, Store::Postgres(_))
    }

    /// The waiters of this store's feed of events (beta): its
    /// inventory's, which a PostgreSQL read copy keeps too (`postgres/feed.rs`).
    pub fn feed(&self) -> Feed {
        Feed::new(self.inventory())
    }

    /// The timer that expires lapsed holds ([`lapse`]), for a backend
    /// whose inventory decides its orders itself: spawn it once.
    /// PostgreSQL's replicas run their own, by PostgreSQL's clock, from
    /// [`Postgres::open`].
    pub fn lapses(
        &self,
        clock: Arc<dyn petstore_core::Clock>,
    ) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
        match self {
            Store::Memory(_) | Store::Journal(_) => {
                Some(lapse::run(Arc::clone(self.inventory()), clock))
            }
            Store::Postgres(_) => None,
        }
    }

    /// The task that compacts the journal when it has outgrown its last
    /// snapshot ([`compaction`]), for the journal backend: spawn it once.
    pub fn compactions(&self) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
        match self {
            Store::Journal(_) => Some(compaction::run(Arc::clone(self.inventory()))),
            Store::Memory(_) | Store::Postgres(_) => None,
        }
    }

    /// What idempotency key `keyed` holds, for a request that will not
    /// claim it (`http/finish.rs` asks only when the body is invalid: a
    /// valid one goes to [`create_keyed`](Self::create_keyed) or
    /// [`step_keyed`](Self::step_keyed), whose claim finds
    /// the same): [`Seen::New`] (nothing: the body's 400 stands), the
    /// kept answer of the same request ([`Seen::Replay`]), the key used
    /// with another request ([`Seen::Reused`]), or its first request
    /// still running ([`Seen::InFlight`]). Keys are kept
    /// [`RETENTION`](petstore_core::idempotency::RETENTION) from their first request.
    pub async fn seen(&self, keyed: &Keyed) -> Result<Seen, KeyedFailed> {
        match self {
            Store::Memory(inventory) => Ok(inventory.seen(keyed)),
            Store::Journal(journal) => Ok(journal.inventory().seen(keyed)),
            Store::Postgres(pg) => pg.seen(keyed).await,
        }
    }

    /// [`create`](Self::create) with an idempotency key: claims the key
    /// atomically with the write and keeps the answer as durably as the
    /// pet. A key that is not new (kept, or another request's in flight)
    /// comes back as [`KeyedOutcome::Replay`], [`KeyedOutcome::Reused`]
    /// or [`KeyedOutcome::InFlight`], never a second write: the claim is
    /// the only question a valid keyed request asks. A failure keeps
    /// nothing for the key.
    pub async fn create_keyed(
        &self,
        new: NewPet,
        keyed: Keyed,
    ) -> Result<KeyedOutcome, KeyedFailed> {
        match self {
            Store::Memory(inventory) => inventory
                .create_keyed(new, keyed)
                .map_err(|_| KeyedFailed::Unavailable),
            Store::Journal(journal) => journal.create_keyed(new, keyed).await,
            Store::Postgres(pg) => pg.create_keyed(new, keyed).await,
        }
    }

    /// [`step`](Self::step) with an idempotency key, as
    /// [`create_keyed`](Self::create_keyed): what the step made, and the
    /// conflict a status made, are both kept and both
    /// [`KeyedOutcome::Done`]; a pet or order not found, or held by
    /// another key, keeps nothing.
    pub async fn step_keyed(
        &self,
        request: StepRequest,
        keyed: Keyed,
    ) -> Result<KeyedOutcome, KeyedFailed> {
        match self {
            Store::Memory(inventory) => {
                let mut request = request;
                request.claim = match inventory.claim(keyed) {
                    Ok(claim) => Some(claim),
                    Err(seen) => {
                        return Ok(KeyedOutcome::of_seen(seen).unwrap_or(KeyedOutcome::InFlight))
                    }
                };
                let step = request.step;
                failed::keyed_step_done(step, memory_step(inventory, request))
            }
            Store::Journal(journal) => journal.step_keyed(request, keyed).await,
            Store::Postgres(pg) => pg.step_keyed(request, keyed).await,
        }
    }

    /// How many idempotency keys the store keeps in memory with their
    /// answers, for `/metrics`; `None` for a backend that keeps none here.
    pub fn kept_keys(&self) -> Option<usize> {
        match self {
            Store::Memory(inventory) => Some(inventory.kept_keys()),
            Store::Journal(journal) => Some(journal.inventory().kept_keys()),
            Store::Postgres(_) => None,
        }
    }

    /// Whether pet `id` may exist although the read copy does not hold it
    /// yet (PostgreSQL: another replica created it a moment ago): then
    /// [`catch_up`](Self::catch_up) before answering 404. Always false for
    /// a local backend, whose inventory is the whole truth.
    pub fn may_catch_up(&self, id: PetId) -> bool {
        match self {
            Store::Memory(_) | Store::Journal(_) => false,
            Store::Postgres(pg) => pg.may_catch_up(id),
        }
    }

    /// Brings the read copy up to date, so that it holds `id` if the
    /// store does (one query, bounded by a timeout; on failure the copy
    /// stays as it is and reads go on from it).
    /// Returns whether the store answered: when it did not, the copy's
    /// word on `id` is not the store's (and a miss is not a 404).
    pub async fn catch_up(&self, id: PetId) -> bool {
        match self {
            Store::Postgres(pg) => pg.catch_up_to(id.get()).await,
            Store::Memory(_) | Store::Journal(_) => true,
        }
    }

    /// [`may_catch_up`](Self::may_catch_up) for an order: one another
    /// replica may have just placed.
    pub fn may_catch_up_order(&self, id: OrderId) -> bool {
        match self {
            Store::Memory(_) | Store::Journal(_) => false,
            Store::Postgres(pg) => pg.may_catch_up_order(id),
        }
    }

    /// [`catch_up`](Self::catch_up) for an order.
    pub async fn catch_up_order(&self, id: OrderId) -> bool {
        match self {
            Store::Postgres(pg) => pg.catch_up_order(id).await,
            Store::Memory(_) | Store::Journal(_) => true,
        }
    }

    /// Why pets cannot be stored now (for `/healthz`), or `None`.
    pub fn failure(&self) -> Option<String> {
        match self {
            Store::Memory(_) => None,
            Store::Journal(journal) => journal
                .inventory()
                .storage_failure()
                .map(|failure| failure.fault.to_string()),
            Store::Postgres(pg) => pg.failure(),
        }
    }

    /// The collectors of the store's metrics and its backend's own, for
    /// `/metrics`.
    pub fn collectors(&self) -> Vec<Box<dyn Collector>> {
        let mut collectors: Vec<Box<dyn Collector>> = vec![Box::new(metrics::InventoryCollector {
            store: self.clone(),
        })];
        if let Store::Postgres(pg) = self {
            collectors.push(pg.collector());
        }
        collectors
    }
}

/// A step on an in-memory inventory: made at once, under its lock.
fn memory_step(inventory: &Inventory, request: StepRequest) -> Result<Stepped, StepFailed> {
    match inventory.steps(vec![request]) {
        Ok(mut outcomes) => outcomes
            .pop()
            .unwrap_or(Err(petstore_core::inventory::StepError::IdsExhausted))
            .map_err(StepFailed::from),
        Err(_) => Err(StepFailed::Unavailable),
    }
}
