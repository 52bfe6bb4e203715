//! The queue-batch-reply pattern both durable backends share: a create
//! queues its pet and awaits a oneshot channel (no thread held); one
//! committer task takes every pending create (up to a batch), hands them
//! to its backend's [`Commit`] in one go (one group commit, one
//! transaction) and answers each waiter. A waiter that gave up (its
//! client gone, or a timeout) before its batch was taken is left out:
//! it was answered, or will never be, so it must not be stored after all.

use std::future::Future;
use std::sync::Arc;

use petstore_core::{NewPet, Pet};
use tokio::sync::{mpsc, oneshot};

use super::failed::CreateFailed;

/// A backend that stores a batch of pets at once.
pub(super) trait Commit: Send + Sync + 'static {
    /// Stores `batch` in order and returns the stored pets, in the same
    /// order; `Err` when none was stored (or the outcome is unknown).
    fn commit(
        self: &Arc<Self>,
        batch: Vec<NewPet>,
    ) -> impl Future<Output = Result<Vec<Pet>, CreateFailed>> + Send;
}

/// A create waiting for the committer.
#[derive(Debug)]
pub(super) struct WaitingCreate {
    new: NewPet,
    reply: oneshot::Sender<Result<Pet, CreateFailed>>,
}

/// The committer's queue: where creates wait.
#[derive(Debug)]
pub(super) struct Committer {
    queue: mpsc::Sender<WaitingCreate>,
}

/// The committer task's end of the queue; [`run`] drains it.
pub(super) type Queue = mpsc::Receiver<WaitingCreate>;

impl Committer {
    /// A committer whose queue holds at most `capacity` creates; the
    /// task is started by handing the returned [`Queue`] to [`run`].
    pub(super) fn new(capacity: usize) -> (Committer, Queue) {
        let (queue, pending) = mpsc::channel(capacity);
        (Committer { queue }, pending)
    }

    /// Queues `new`; the receiver gets its outcome. `Err` at once when
    /// the queue is full (the backend is slower than the creates coming
    /// in).
    pub(super) fn submit(
        &self,
        new: NewPet,
    ) -> Result<oneshot::Receiver<Result<Pet, CreateFailed>>, CreateFailed> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .try_send(WaitingCreate { new, reply })
            .map_err(|_| CreateFailed)?;
        Ok(answer)
    }
}

/// The committer task: one [`Commit::commit`] per batch of at most
/// `max_batch` creates, until every [`Committer`] is dropped.
pub(super) async fn run<C: Commit>(backend: Arc<C>, mut pending: Queue, max_batch: usize) {
    let mut batch = Vec::with_capacity(max_batch);
    while pending.recv_many(&mut batch, max_batch).await > 0 {
        batch.retain(|p: &WaitingCreate| !p.reply.is_closed());
        let (news, replies): (Vec<NewPet>, Vec<_>) =
            batch.drain(..).map(|p| (p.new, p.reply)).unzip();
        if news.is_empty() {
            continue;
        }
        match backend.commit(news).await {
            Ok(pets) => {
                for (pet, reply) in pets.into_iter().zip(replies) {
                    let _ = reply.send(Ok(pet));
                }
            }
            Err(CreateFailed) => {
                for reply in replies {
                    let _ = reply.send(Err(CreateFailed));
                }
            }
        }
    }
}
