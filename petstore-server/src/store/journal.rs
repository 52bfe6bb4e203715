//! The journal backend (`--data DIR`, the default): the core's durable
//! [`Inventory`] (its `Journal`), its creates fed by one committer task:
//! [`JournalStore`].
//!
//! Why a committer: the core's create blocks its caller until the group
//! commit's fsync, so each waiting create would hold a thread of the
//! blocking pool. Instead a
//! create queues its pet and awaits a oneshot channel (`committer.rs`);
//! the committer takes every pending pet and hands them to
//! [`Inventory::create_many`] on one blocking thread: one thread and one
//! fsync per batch, however many creates wait.

use std::sync::{Arc, OnceLock};

use petstore_core::{Inventory, NewPet, Pet};

use super::committer::{self, Commit, Committer};
use super::failed::CreateFailed;
use crate::log_error;

/// Most creates handed to one group commit.
const MAX_BATCH: usize = 1024;
/// Creates waiting for the committer at most; one more answers 503 at once.
const QUEUE: usize = 16 * 1024;

/// A durable inventory and its committer.
#[derive(Debug)]
pub struct JournalStore {
    inventory: Arc<Inventory>,
    /// The committer's queue, started by the first create (which runs on
    /// the runtime, where the task can be spawned).
    queue: OnceLock<Committer>,
}

impl JournalStore {
    /// The store over a durable `inventory`.
    pub fn new(inventory: Arc<Inventory>) -> Self {
        JournalStore {
            inventory,
            queue: OnceLock::new(),
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
        let queue = self.queue.get_or_init(|| {
            let (committer, pending) = Committer::new(QUEUE);
            let writer = Arc::new(Writer(Arc::clone(&self.inventory)));
            tokio::spawn(committer::run(writer, pending, MAX_BATCH));
            committer
        });
        let answer = queue.submit(new)?;
        answer.await.unwrap_or(Err(CreateFailed))
    }
}

/// The journal's side of the committer: one `create_many` (one group
/// commit, one fsync) per batch, on one blocking thread.
#[derive(Debug)]
struct Writer(Arc<Inventory>);

impl Commit for Writer {
    async fn commit(self: &Arc<Self>, batch: Vec<NewPet>) -> Result<Vec<Pet>, CreateFailed> {
        let writer = Arc::clone(self);
        match tokio::task::spawn_blocking(move || writer.0.create_many(batch)).await {
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
