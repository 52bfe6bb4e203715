//! The journal backend (`--data DIR`, the default): the core's durable
//! [`Inventory`] (its `Journal`), its creates fed by one committer task:
//! [`JournalStore`].
//!
//! Why a committer: the core's create blocks its caller until the group
//! commit's fsync, so each waiting create used to hold a thread of the
//! blocking pool (about 126 threads under 64 connections). Now a create
//! queues its pet and awaits a oneshot channel; the committer takes every
//! pending pet and hands them to [`Inventory::create_many`] on one blocking
//! thread: one thread and one fsync per batch, however many creates wait.

use std::sync::{Arc, OnceLock};

use petstore_core::{Inventory, NewPet, Pet};
use tokio::sync::{mpsc, oneshot};

use super::failed::CreateFailed;
use crate::log_error;

/// Most creates handed to one group commit.
const MAX_BATCH: usize = 1024;
/// Creates waiting for the committer at most; one more answers 503 at once.
const QUEUE: usize = 16 * 1024;

/// A create waiting for the committer.
struct Pending {
    new: NewPet,
    reply: oneshot::Sender<Result<Pet, CreateFailed>>,
}

/// A durable inventory and its committer.
#[derive(Debug)]
pub struct JournalStore {
    inventory: Arc<Inventory>,
    /// The committer's queue, started by the first create (which runs on
    /// the runtime, where the task can be spawned).
    queue: OnceLock<mpsc::Sender<Pending>>,
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
            let (queue, pending) = mpsc::channel(QUEUE);
            tokio::spawn(commit_loop(Arc::clone(&self.inventory), pending));
            queue
        });
        let (reply, answer) = oneshot::channel();
        if queue.try_send(Pending { new, reply }).is_err() {
            return Err(CreateFailed);
        }
        answer.await.unwrap_or(Err(CreateFailed))
    }
}

/// The committer: one `create_many` (one group commit) per batch.
async fn commit_loop(inventory: Arc<Inventory>, mut pending: mpsc::Receiver<Pending>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while pending.recv_many(&mut batch, MAX_BATCH).await > 0 {
        // A create whose client went away is not stored after all.
        batch.retain(|p: &Pending| !p.reply.is_closed());
        let (news, replies): (Vec<NewPet>, Vec<_>) =
            batch.drain(..).map(|p| (p.new, p.reply)).unzip();
        if news.is_empty() {
            continue;
        }
        let writer = Arc::clone(&inventory);
        match tokio::task::spawn_blocking(move || writer.create_many(news)).await {
            Ok(Ok(pets)) => {
                for (pet, reply) in pets.into_iter().zip(replies) {
                    let _ = reply.send(Ok(pet));
                }
            }
            // The cause is logged once, by the inventory's failure hook.
            Ok(Err(_)) => {
                for reply in replies {
                    let _ = reply.send(Err(CreateFailed));
                }
            }
            Err(_) => {
                log_error!("a journal group commit panicked; its creates answered 503");
                for reply in replies {
                    let _ = reply.send(Err(CreateFailed));
                }
            }
        }
    }
}
