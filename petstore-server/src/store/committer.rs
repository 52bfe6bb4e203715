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

use petstore_core::inventory::{StepRequest, Stepped};
use petstore_core::{idempotency::Claim, NewPet, Pet};
use tokio::sync::{mpsc, oneshot};

use super::failed::{CreateFailed, StepFailed};

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

/// A create that may hold a claimed idempotency key (the journal's
/// item): stored all or none with its batch, the key with it. A waiter
/// that gave up drops the claim with the item, which lets the key go.
impl Item for (NewPet, Option<Claim>) {
    type Done = Pet;
    type Failed = CreateFailed;
    const NOT_STORED: CreateFailed = CreateFailed;
}

/// An order's step or a pet transition, by its actor, that may hold a
/// claimed idempotency key (the journal's item): each decided on its own
/// within its batch, as a transition is.
impl Item for StepRequest {
    type Done = Result<Stepped, StepFailed>;
    type Failed = StepFailed;
    const NOT_STORED: StepFailed = StepFailed::Unavailable;
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// A test write: a number, answered with its double.
    impl Item for u32 {
        type Done = u32;
        type Failed = &'static str;
        const NOT_STORED: &'static str = "not stored";
    }

    /// A backend that records its batches and answers as told.
    #[derive(Default)]
    struct Fake {
        batches: Mutex<Vec<Vec<u32>>>,
        /// Fail every batch.
        fail: bool,
        /// Answer only the first this many items of a batch.
        answer_only: Option<usize>,
    }

    impl Commit<u32> for Fake {
        async fn commit(self: &Arc<Self>, batch: Vec<u32>) -> Result<Vec<u32>, &'static str> {
            self.batches.lock().unwrap().push(batch.clone());
            if self.fail {
                return Err("failed");
            }
            let n = self.answer_only.unwrap_or(batch.len());
            Ok(batch.into_iter().take(n).map(|x| 2 * x).collect())
        }
    }

    /// A waiter's item and what it received: its answer, or `Err` when
    /// its sender was dropped unanswered.
    type Received = (u32, Result<Answer<u32>, ()>);

    /// Submits `items` before the task runs (so they are one batch), lets
    /// the waiters of `gave_up` go, runs the committer to its end and
    /// returns each remaining waiter's answer and the batches committed.
    fn run_with(fake: Fake, items: &[u32], gave_up: &[u32]) -> (Vec<Received>, Vec<Vec<u32>>) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            let fake = Arc::new(fake);
            let (committer, queue) = Committer::new(16);
            let mut waiting = Vec::new();
            for &item in items {
                let answer = committer.submit(item).unwrap();
                if !gave_up.contains(&item) {
                    waiting.push((item, answer));
                }
            }
            drop(committer);
            run(Arc::clone(&fake), queue, 8).await;
            let mut answers = Vec::new();
            for (item, answer) in waiting {
                answers.push((item, answer.await.map_err(|_| ())));
            }
            let batches = fake.batches.lock().unwrap().clone();
            (answers, batches)
        })
    }

    #[test]
    fn one_commit_per_batch_each_waiter_answered_in_order() {
        let (answers, batches) = run_with(Fake::default(), &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], &[]);
        // At most `max_batch` (8) a batch, in the order queued.
        assert_eq!(batches, vec![vec![1, 2, 3, 4, 5, 6, 7, 8], vec![9, 10]]);
        for (item, answer) in answers {
            assert_eq!(answer, Ok(Ok(2 * item)));
        }
    }

    #[test]
    fn a_waiter_that_gave_up_is_left_out_of_its_batch() {
        let (answers, batches) = run_with(Fake::default(), &[1, 2, 3], &[2]);
        assert_eq!(batches, vec![vec![1, 3]]);
        assert_eq!(answers, vec![(1, Ok(Ok(2))), (3, Ok(Ok(6)))]);
    }

    #[test]
    fn a_failed_batch_fails_every_waiter_and_an_unanswered_item_is_never_ok() {
        let fail = Fake {
            fail: true,
            ..Fake::default()
        };
        let (answers, _) = run_with(fail, &[1, 2], &[]);
        assert_eq!(
            answers,
            vec![(1, Ok(Err("failed"))), (2, Ok(Err("failed")))]
        );
        let short = Fake {
            answer_only: Some(1),
            ..Fake::default()
        };
        let (answers, _) = run_with(short, &[1, 2], &[]);
        // The waiter without an answer sees its sender gone.
        assert_eq!(answers, vec![(1, Ok(Ok(2))), (2, Err(()))]);
    }

    #[test]
    fn a_full_queue_refuses_at_once() {
        let (committer, _queue) = Committer::<u32>::new(1);
        assert!(committer.submit(1).is_ok());
        assert_eq!(committer.submit(2).err(), Some("not stored"));
    }
}
