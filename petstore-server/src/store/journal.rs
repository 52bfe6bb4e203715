//! The journal backend (`--data DIR`, the default): the core's durable
//! [`Inventory`] (its `Journal`), its creates and its steps (order steps
//! and pet transitions) each fed by one committer task: [`JournalStore`].
//!
//! Why a committer: the core's create and transition block their caller
//! until the group commit's fsync, so each waiting write would hold a
//! thread of the blocking pool. Instead a write queues its item and
//! awaits a oneshot channel (`committer.rs`); the committer takes every
//! pending item and hands them to [`Inventory::create_many`] or
//! [`Inventory::steps`] on one blocking thread: one thread and one fsync
//! per batch, however many writes wait.
//!
//! A keyed write claims its key before it is queued (a request with the
//! key then finds it in flight); the claim rides with the item, so the
//! core writes the key into the write's own record and keeps the answer
//! once the batch is durable, and a write that fails, or whose waiter
//! gave up before its batch, drops the claim and lets the key go.
//!
//! Why two committers, not one: the core makes a batch of creates and a
//! batch of steps in two calls, each its own group commit; one
//! queue of both would take turns and make either kind wait for the
//! other's fsync. Two batches in flight at once share the journal's
//! group commit as any two writers do.

use std::sync::{Arc, OnceLock};

use petstore_core::{
    idempotency::{Answer, Claim, Keyed, KeyedOutcome},
    inventory::{StepRequest, Stepped},
    Inventory, NewPet, Pet,
};

use super::committer::{self, Commit, Committer, Item};
use super::failed::{keyed_step_done, CreateFailed, KeyedFailed, StepFailed};
use crate::log_error;

/// Most writes of one kind handed to one group commit.
const MAX_BATCH: usize = 1024;
/// Writes of one kind waiting for their committer at most; one more
/// answers 503 at once.
const QUEUE: usize = 16 * 1024;

/// A durable inventory and its committers.
#[derive(Debug)]
pub struct JournalStore {
    inventory: Arc<Inventory>,
    /// The committers' queues, each started by its first write (which
    /// runs on the runtime, where the task can be spawned).
    creates: OnceLock<Committer<(NewPet, Option<Claim>)>>,
    steps: OnceLock<Committer<StepRequest>>,
}

impl JournalStore {
    /// The store over a durable `inventory`.
    pub fn new(inventory: Arc<Inventory>) -> Self {
        JournalStore {
            inventory,
            creates: OnceLock::new(),
            steps: OnceLock::new(),
        }
    }

    /// The inventory, for reads.
    pub fn inventory(&self) -> &Arc<Inventory> {
        &self.inventory
    }

    /// Queues `new` for the committer and waits for it to be durable (or
    /// refused: the journal failed, or the queue is full). Call from
    /// inside the tokio runtime.
    pub async fn create(&self, new: NewPet) -> Result<Pet, CreateFailed> {
        self.write(&self.creates, (new, None)).await
    }

    /// [`create`](Self::create) with an idempotency key, claimed before
    /// the pet is queued: the outcome the key had instead when it was
    /// taken meanwhile.
    pub async fn create_keyed(
        &self,
        new: NewPet,
        keyed: Keyed,
    ) -> Result<KeyedOutcome, KeyedFailed> {
        let claim = match self.inventory.claim(keyed) {
            Ok(claim) => claim,
            Err(seen) => return Ok(taken(seen)),
        };
        let pet = self.write(&self.creates, (new, Some(claim))).await?;
        Ok(KeyedOutcome::Done(Answer::Created(pet)))
    }

    /// Queues a step (an order's, or a pet transition) for its committer
    /// and waits for its outcome: made and durable, or why not. Call
    /// from inside the tokio runtime.
    pub async fn step(&self, request: StepRequest) -> Result<Stepped, StepFailed> {
        self.write(&self.steps, request).await.and_then(|done| done)
    }

    /// [`step`](Self::step) with an idempotency key, claimed before the
    /// step is queued; a conflict is kept and answered as the key's.
    pub async fn step_keyed(
        &self,
        mut request: StepRequest,
        keyed: Keyed,
    ) -> Result<KeyedOutcome, KeyedFailed> {
        request.claim = match self.inventory.claim(keyed) {
            Ok(claim) => Some(claim),
            Err(seen) => return Ok(taken(seen)),
        };
        let step = request.step;
        let done = self.write(&self.steps, request).await;
        keyed_step_done(step, done.and_then(|done| done))
    }

    /// Queues `item` on `queue`'s committer (started on first use) and
    /// waits for its answer.
    async fn write<I: Item>(&self, queue: &OnceLock<Committer<I>>, item: I) -> committer::Answer<I>
    where
        Writer: Commit<I>,
    {
        let queue = queue.get_or_init(|| {
            let (committer, pending) = Committer::new(QUEUE);
            let writer = Arc::new(Writer(Arc::clone(&self.inventory)));
            tokio::spawn(committer::run(writer, pending, MAX_BATCH));
            committer
        });
        let answer = queue.submit(item)?;
        answer.await.unwrap_or(Err(I::NOT_STORED))
    }
}

/// The journal's side of the committers: one `create_many` or
/// `transition_many` (one group commit, one fsync) per batch, on one
/// blocking thread.
#[derive(Debug)]
struct Writer(Arc<Inventory>);

impl Commit<(NewPet, Option<Claim>)> for Writer {
    async fn commit(
        self: &Arc<Self>,
        batch: Vec<(NewPet, Option<Claim>)>,
    ) -> Result<Vec<Pet>, CreateFailed> {
        let writer = Arc::clone(self);
        match tokio::task::spawn_blocking(move || writer.0.create_many_claimed(batch)).await {
            Ok(Ok(pets)) => Ok(pets),
            // The cause is logged once, by the inventory's failure hook.
            Ok(Err(_)) => Err(CreateFailed),
            Err(_) => {
                log_error!("a journal group commit panicked; its creates answered 503");
                Err(CreateFailed)
            }
        }
    }
}

impl Commit<StepRequest> for Writer {
    async fn commit(
        self: &Arc<Self>,
        batch: Vec<StepRequest>,
    ) -> Result<Vec<Result<Stepped, StepFailed>>, StepFailed> {
        let writer = Arc::clone(self);
        match tokio::task::spawn_blocking(move || writer.0.steps(batch)).await {
            Ok(Ok(outcomes)) => Ok(outcomes
                .into_iter()
                .map(|outcome| outcome.map_err(StepFailed::from))
                .collect()),
            // Nothing of the batch acknowledged; the cause is logged once,
            // by the inventory's failure hook.
            Ok(Err(_)) => Err(StepFailed::Unavailable),
            Err(_) => {
                log_error!("a journal group commit panicked; its steps answered 503");
                Err(StepFailed::Unavailable)
            }
        }
    }
}

/// The outcome of a keyed write whose key was taken when it came to claim
/// it (never [`Seen::New`](petstore_core::idempotency::Seen::New): a claim that failed
/// found something).
fn taken(seen: petstore_core::idempotency::Seen) -> KeyedOutcome {
    KeyedOutcome::of_seen(seen).unwrap_or(KeyedOutcome::InFlight)
}
