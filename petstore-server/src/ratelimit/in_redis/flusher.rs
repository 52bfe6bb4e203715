//! The flusher: rounds of one call per shard that has requests waiting,
//! each call's reply sent to its waiters, until nothing waits.

use std::time::Instant;

use futures_util::future::join_all;

use super::breaker::Shard;
use super::limits::RedisLimits;
use super::part::Part;
use super::queue::Queued;
use super::script::{Previous, StateReply};

impl RedisLimits {
    /// The flusher: rounds of one call per shard that has requests
    /// waiting (each taking at most [`MAX_CALL`](super::MAX_CALL) of them), the calls of a
    /// round sent together, until nothing waits.
    ///
    /// Why together: a Redis spends about as much on an event-loop turn
    /// (reading a connection, writing its replies, the append-only file)
    /// as on deciding several states, and a cluster's group calls each
    /// carry a twelfth of the queue. Sent from one task in one go, the
    /// calls of the groups one master holds reach it in one read and are
    /// answered in one turn; each group's flusher on its own sent them
    /// at moments of their own, a turn each (`scripts/bench/redis-cost` measures
    /// both: several calls a turn cost Redis much less a state than one).
    /// The price: a round lasts as long as its slowest
    /// call, so a master that stops answering holds the others' next
    /// round for one timeout, until its breaker opens (and once per probe
    /// after that). One Redis is one shard: a round is one call.
    pub(super) async fn flush(self) {
        let mut guard = Flushing {
            limits: &self,
            running: true,
        };
        loop {
            let round = self.inner.waiting.lock().take_round();
            if round.is_empty() {
                guard.running = false;
                return;
            }
            let emptied = join_all(
                round
                    .into_iter()
                    .map(|(shard, taken)| self.settle(shard, taken)),
            )
            .await;
            self.inner.waiting.lock().give_back(emptied);
        }
    }

    /// `shard`'s part of a round: one call deciding `taken`, and when
    /// states come back unread, the calls that read them. Returns
    /// `taken`, emptied, its room kept for a later round.
    async fn settle(&self, shard: Shard, mut taken: Vec<Queued>) -> Vec<Queued> {
        let parts = self.parts(shard, &mut taken);
        self.settle_parts(shard, parts).await;
        taken
    }

    /// [`settle`](Self::settle) once `parts` are made.
    async fn settle_parts(&self, shard: Shard, parts: Vec<Part>) {
        let Some(mut unread) = self.decide_parts(shard, parts).await else {
            return;
        };
        // A state this replica decided lately, so not named, but gone
        // after all (its TTL ran out) comes back unread: it goes once
        // more, named with its previous forms.
        if unread.iter().any(|p| p.previous == Previous::Unnamed) {
            let (renamed, rest): (Vec<Part>, Vec<Part>) = unread
                .into_iter()
                .partition(|p| p.previous == Previous::Unnamed);
            unread = rest;
            let renamed = renamed
                .into_iter()
                .map(|part| Part {
                    previous: self.inner.link.previous(),
                    ..part
                })
                .collect();
            if let Some(still) = self.decide_parts(shard, renamed).await {
                unread.extend(still);
            }
        }
        if unread.is_empty() {
            return;
        }
        // A cluster state missing under its group comes back unread:
        // its previous form is read, and it goes once more with it.
        let read = self.read_previous(unread).await;
        if read.is_empty() {
            return;
        }
        if let Some(still) = self.decide_parts(shard, read).await {
            // Unread with their previous form given: not the script's
            // answer. They fall back.
            self.give_back_bans(&still);
        }
    }

    /// One call of `shard` deciding `parts`, its decisions sent to their
    /// waiters: the parts left unread ([`StateReply::Unread`]), or `None`
    /// when Redis decided nothing (the breaker open, or the call failed:
    /// the waiters' channels close, so they fall back, and the bans the
    /// parts carried go back for the next call).
    async fn decide_parts(&self, shard: Shard, parts: Vec<Part>) -> Option<Vec<Part>> {
        let replied = if self.inner.breakers.may_try(shard) {
            self.call(shard, &parts).await
        } else {
            None
        };
        match replied {
            Some((reply, replies)) => Some(self.answer(parts, &reply, replies)),
            None => {
                self.give_back_bans(&parts);
                None
            }
        }
    }

    /// Sends each part's decisions, read from `reply`, to its waiters;
    /// returns the parts left undecided because their previous form is
    /// unread.
    fn answer(&self, parts: Vec<Part>, reply: &[u8], replies: Vec<StateReply>) -> Vec<Part> {
        let mut unread = Vec::new();
        let now = Instant::now();
        let mut recent = self.inner.recent.lock();
        for (mut part, state_reply) in parts.into_iter().zip(replies) {
            if matches!(state_reply, StateReply::Decided(_) | StateReply::Reset(_)) {
                recent.add(&part.name, now);
            }
            let requests = match state_reply {
                StateReply::Decided(requests) => requests,
                StateReply::Reset(requests) => {
                    self.state_trouble(
                        &part.name,
                        "it held something that is not a limiter state; it was reset",
                    );
                    requests
                }
                StateReply::NotStored => {
                    self.state_trouble(&part.name, "Redis could not store it");
                    continue;
                }
                StateReply::Unread => {
                    unread.push(part);
                    continue;
                }
            };
            let decisions = requests.decisions(reply, &part.params);
            for (waiter, decision) in part.waiters.drain().zip(decisions) {
                // A waiter gone (its connection closed) was charged
                // all the same, as a request the client abandoned.
                let _ = waiter.send(decision);
            }
        }
        unread
    }
}

/// The running flusher's claim on the queues. Dropped while it runs (the
/// task cancelled at shutdown, or a panic), it drops every waiting
/// request, so their channels close (they fall back to this replica's
/// limiter) and the next request starts a new flusher instead of waiting
/// behind one that is gone.
struct Flushing<'a> {
    limits: &'a RedisLimits,
    running: bool,
}

impl Drop for Flushing<'_> {
    fn drop(&mut self) {
        if self.running {
            self.limits.inner.waiting.lock().abandon();
        }
    }
}
