//! The requests waiting for their shard's next call ([`Queues`]), and
//! each one's way back ([`Waiter`]).

use std::sync::Arc;

use petstore_core::Decision;
use tokio::sync::oneshot;

use super::breaker::Shard;
use super::script::{Params, MAX_CALL};

/// Where a waiting request's decision goes: `None` when Redis did not
/// decide it (the request falls back to this replica's limiter).
pub(super) type Waiter = oneshot::Sender<Option<Decision>>;

/// A request waiting for its shard's next call.
pub(super) struct Queued {
    pub(super) name: Arc<str>,
    pub(super) params: Params,
    pub(super) waiter: Waiter,
}

/// A part's waiters, in arrival order. The first is held apart: with
/// many keys most parts have one request, and a list of its own for
/// each was an allocation per request on top of the call's.
#[derive(Default)]
pub(super) struct Waiters {
    first: Option<Waiter>,
    more: Vec<Waiter>,
}

impl Waiters {
    pub(super) fn one(waiter: Waiter) -> Waiters {
        Waiters {
            first: Some(waiter),
            more: Vec::new(),
        }
    }

    pub(super) fn push(&mut self, waiter: Waiter) {
        match self.first {
            None => self.first = Some(waiter),
            Some(_) => self.more.push(waiter),
        }
    }

    pub(super) fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.more.len()
    }

    /// Takes them all, in order.
    pub(super) fn drain(&mut self) -> impl Iterator<Item = Waiter> + '_ {
        self.first.take().into_iter().chain(self.more.drain(..))
    }
}

impl std::fmt::Debug for Queued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queued").field("name", &self.name).finish()
    }
}

/// Per shard, the requests waiting for its next call, in arrival order,
/// and whether the flusher runs. A list, not a map: one shard on one
/// Redis, at most [`GROUPS`](super::GROUPS) in a cluster, and a look along a few costs
/// less than hashing the shard on every request.
#[derive(Debug, Default)]
pub(super) struct Queues {
    flushing: bool,
    queues: Vec<(Shard, Vec<Queued>)>,
    /// Lists a round emptied, given back for the next round to take
    /// requests in: a queue taken whole is replaced by one of them, so
    /// it does not grow again from nothing, an allocation at each
    /// doubling, every round. At most one per shard.
    spare: Vec<Vec<Queued>>,
}

impl Queues {
    /// Joins `shard`'s queue; true when no flusher runs, so the caller
    /// starts it.
    pub(super) fn join(&mut self, shard: Shard, queued: Queued) -> bool {
        match self.queues.iter_mut().find(|(s, _)| *s == shard) {
            Some((_, queue)) => queue.push(queued),
            None => self.queues.push((shard, vec![queued])),
        }
        !std::mem::replace(&mut self.flushing, true)
    }

    /// The next round: each shard's waiting requests, at most
    /// [`MAX_CALL`] of each. Empty when none wait; the flusher stops
    /// then, and the next request starts it again.
    pub(super) fn take_round(&mut self) -> Vec<(Shard, Vec<Queued>)> {
        let mut round = Vec::new();
        for (shard, queue) in &mut self.queues {
            if queue.is_empty() {
                continue;
            }
            let mut taken = self.spare.pop().unwrap_or_default();
            if queue.len() > MAX_CALL {
                taken.extend(queue.drain(..MAX_CALL));
            } else {
                std::mem::swap(queue, &mut taken);
            }
            round.push((*shard, taken));
        }
        if round.is_empty() {
            self.abandon();
        }
        round
    }

    /// The lists a round emptied, for the next rounds.
    pub(super) fn give_back(&mut self, emptied: Vec<Vec<Queued>>) {
        self.spare = emptied;
    }

    /// Every waiting request dropped (their channels close, so they fall
    /// back), and no flusher. (When the flusher stops, none is waiting.)
    pub(super) fn abandon(&mut self) {
        self.flushing = false;
        self.queues.clear();
        self.spare.clear();
    }
}

/// A request for `name` with `params`, and where its decision arrives.
#[cfg(test)]
pub(super) fn queued(
    name: &Arc<str>,
    params: Params,
) -> (Queued, oneshot::Receiver<Option<Decision>>) {
    let (waiter, rx) = oneshot::channel();
    let queued = Queued {
        name: name.clone(),
        params,
        waiter,
    };
    (queued, rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_takes_each_shards_waiting_requests_and_one_flusher_runs() {
        let p = Params::anonymous(60);
        let (a, b): (Arc<str>, Arc<str>) = ("{aa}:m60".into(), "{bb}:m60".into());
        let (seven, nine): (Shard, Shard) = (
            Some(redis::cluster_routing::Slot::for_key("seven")),
            Some(redis::cluster_routing::Slot::for_key("nine")),
        );
        assert_ne!(seven, nine);
        let mut queues = Queues::default();
        let mut receivers = Vec::new();
        let mut leads = Vec::new();
        // One shard gets one more than a call takes; another two; the
        // first request starts the flusher, no later one does.
        for (shard, name) in
            std::iter::repeat_n((seven, &a), MAX_CALL + 1).chain(std::iter::repeat_n((nine, &b), 2))
        {
            let (q, rx) = queued(name, p);
            leads.push(queues.join(shard, q));
            receivers.push(rx);
        }
        assert_eq!(leads.iter().filter(|lead| **lead).count(), 1);
        assert!(leads[0]);

        let round = queues.take_round();
        let sizes: Vec<(Shard, usize)> = round.iter().map(|(s, q)| (*s, q.len())).collect();
        assert_eq!(sizes, [(seven, MAX_CALL), (nine, 2)]);
        // What a call could not take goes in the next round, alone.
        let next = queues.take_round();
        assert_eq!(next.len(), 1);
        assert_eq!((next[0].0, next[0].1.len()), (seven, 1));
        // A list a round emptied takes the place of a queue taken whole,
        // its room kept for the requests that come next.
        queues.give_back(vec![Vec::with_capacity(50)]);
        let (q, _rx) = queued(&a, p);
        assert!(!queues.join(seven, q));
        let again = queues.take_round();
        assert_eq!((again[0].0, again[0].1.len()), (seven, 1));
        let room = |queues: &Queues| {
            queues
                .queues
                .iter()
                .find(|(s, _)| *s == seven)
                .map(|(_, q)| q.capacity())
        };
        assert!(room(&queues).is_some_and(|room| room >= 50));
        // Nothing waits: the flusher stops, and the next request starts it.
        assert!(queues.take_round().is_empty());
        let (q, _rx) = queued(&a, p);
        assert!(queues.join(nine, q));

        // Abandoned (the flusher gone): the waiting request's channel
        // closes, so it falls back; the next request starts a flusher.
        let (q, mut rx) = queued(&b, p);
        assert!(!queues.join(nine, q));
        queues.abandon();
        assert!(matches!(
            rx.try_recv(),
            Err(oneshot::error::TryRecvError::Closed)
        ));
        let (q, _rx) = queued(&b, p);
        assert!(queues.join(None, q));
    }

    #[test]
    fn waiters_keep_their_order() {
        let mut waiters = Waiters::default();
        let mut receivers = Vec::new();
        for _ in 0..3 {
            let (tx, rx) = oneshot::channel();
            waiters.push(tx);
            receivers.push(rx);
        }
        assert_eq!(waiters.len(), 3);
        for (i, waiter) in waiters.drain().enumerate() {
            let _ = waiter.send(Some(decision_with(i as u32)));
        }
        assert_eq!(waiters.len(), 0);
        for (i, mut rx) in receivers.into_iter().enumerate() {
            let got = rx.try_recv().unwrap().unwrap();
            assert_eq!(got.minute.remaining, i as u32);
        }
    }

    fn decision_with(remaining: u32) -> Decision {
        let per_minute = std::num::NonZeroU32::new(60).unwrap();
        let mut decision = petstore_core::limit::AnonymousLimiter::new(per_minute, 16).check(
            "192.0.2.1".parse().unwrap(),
            petstore_core::Timestamp::from_unix_nanos(0),
        );
        decision.minute.remaining = remaining;
        decision
    }
}
