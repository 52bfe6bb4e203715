//! The queue-batch-reply pattern both durable backends share, for any
//! kind of write (a create, a transition): a write queues its item and
//! awaits a oneshot channel (no thread held); one committer task per kind
//! takes every pending item (up to a batch), hands them to its backend's
//! [`Commit`] in one go (one group commit, one transaction) and answers
//! each waiter. A waiter that gave up (its client gone, or a timeout)
//! before its batch was taken is left out: it was answered, or will
//! never be, so it must not be stored after all.
//!
//! Generic over the item ([`Item`]) so that every kind of write gets the
//! same batching and the same rule for waiters that gave up, from one
//! loop; the default item is a create, so a backend that only creates
//! names none.

use std::future::Future;
use std::sync::Arc;

use petstore_core::{NewPet, Pet, PetId, Transition};
use tokio::sync::{mpsc, oneshot};

use super::failed::{CreateFailed, TransitionFailed};

/// One kind of write a committer batches: what a waiter is answered when
/// its item was decided, and why it was not.
pub(super) trait Item: std::fmt::Debug + Send + 'static {
    /// The answer of an item its batch decided.
    type Done: std::fmt::Debug + Send + 'static;
    /// Why an item was not stored, or may not have been: the whole batch
    /// failed, or the queue was full.
    type Failed: Copy + std::fmt::Debug + Send + 'static;
    /// The answer of an item that never reached a batch (the queue was
    /// full, or the committer is gone).
    const NOT_STORED: Self::Failed;
}

/// A create: stored all or none with its batch.
impl Item for NewPet {
    type Done = Pet;
    type Failed = CreateFailed;
    const NOT_STORED: CreateFailed = CreateFailed;
}

/// A transition of one pet: each decided on its own within its batch
/// (a later one sees an earlier one's change), so each has its own
/// answer; the batch as a whole fails only when it could not be made
/// durable.
impl Item for (PetId, Transition) {
    type Done = Result<Pet, TransitionFailed>;
    type Failed = TransitionFailed;
    const NOT_STORED: TransitionFailed = TransitionFailed::Unavailable;
}

/// What a waiter of an item `I` is answered.
pub(super) type Answer<I> = Result<<I as Item>::Done, <I as Item>::Failed>;

/// A backend that stores a batch of items of one kind at once.
pub(super) trait Commit<I: Item = NewPet>: Send + Sync + 'static {
    /// Stores `batch` in order and returns each item's answer, in the
    /// same order; `Err` when none was stored (or the outcome is
    /// unknown).
    fn commit(
        self: &Arc<Self>,
        batch: Vec<I>,
    ) -> impl Future<Output = Result<Vec<I::Done>, I::Failed>> + Send;
}

/// An item waiting for the committer.
#[derive(Debug)]
pub(super) struct Waiting<I: Item> {
    item: I,
    reply: oneshot::Sender<Answer<I>>,
}

/// The committer's queue: where items wait.
#[derive(Debug)]
pub(super) struct Committer<I: Item = NewPet> {
    queue: mpsc::Sender<Waiting<I>>,
}

/// The committer task's end of the queue; [`run`] drains it.
pub(super) type Queue<I = NewPet> = mpsc::Receiver<Waiting<I>>;

impl<I: Item> Committer<I> {
    /// A committer whose queue holds at most `capacity` items; the task
    /// is started by handing the returned [`Queue`] to [`run`].
    pub(super) fn new(capacity: usize) -> (Committer<I>, Queue<I>) {
        let (queue, pending) = mpsc::channel(capacity);
        (Committer { queue }, pending)
    }

    /// Queues `item`; the receiver gets its outcome. `Err` at once when
    /// the queue is full (the backend is slower than the writes coming
    /// in).
    pub(super) fn submit(&self, item: I) -> Result<oneshot::Receiver<Answer<I>>, I::Failed> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .try_send(Waiting { item, reply })
            .map_err(|_| I::NOT_STORED)?;
        Ok(answer)
    }
}

/// The committer task: one [`Commit::commit`] per batch of at most
/// `max_batch` items, until every [`Committer`] is dropped.
pub(super) async fn run<I: Item, C: Commit<I>>(
    backend: Arc<C>,
    mut pending: Queue<I>,
    max_batch: usize,
) {
    let mut batch = Vec::with_capacity(max_batch);
    while pending.recv_many(&mut batch, max_batch).await > 0 {
        batch.retain(|p: &Waiting<I>| !p.reply.is_closed());
        let (items, replies): (Vec<I>, Vec<_>) = batch.drain(..).map(|p| (p.item, p.reply)).unzip();
        if items.is_empty() {
            continue;
        }
        match backend.commit(items).await {
            // A backend that answered fewer items than it was given
            // drops the rest's senders: their waiters read that as not
            // stored ([`Committer::submit`]'s callers).
            Ok(done) => {
                for (done, reply) in done.into_iter().zip(replies) {
                    let _ = reply.send(Ok(done));
                }
            }
            Err(failed) => {
                for reply in replies {
                    let _ = reply.send(Err(failed));
                }
            }
        }
    }
}
