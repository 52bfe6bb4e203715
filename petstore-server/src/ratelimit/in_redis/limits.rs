//! [`RedisLimits`]: the shared limiter's parts, its setup, and a
//! request's way in ([`RedisLimits::decide`]): queued for its shard's
//! next call, or decided by this replica's own limiter.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use petstore_core::{Clock, Decision, Outcome};
use prometheus_client::collector::Collector;
use tokio::sync::oneshot;

use super::anonymous;
use super::breaker::{Breakers, Shard, BREAKER};
use super::link::Link;
use super::metrics::{self, RedisStats};
use super::queue::{Queued, Queues};
use super::recent::Recent;
use super::script::{Params, CARRY, SCRIPT};
use crate::ratelimit::charge::Charge;

/// The shared limiter: a connection to Redis, the script, the breaker and
/// the requests waiting for their state's call.
///
/// One `Arc`: every request that Redis decides holds a clone while it
/// waits, and a clone of the connection, the scripts and the clock one by
/// one was a handful of atomic counts up and down again per request.
#[derive(Clone)]
pub struct RedisLimits {
    pub(super) inner: Arc<Inner>,
}

impl std::fmt::Debug for RedisLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLimits").finish_non_exhaustive()
    }
}

/// What the clones of one [`RedisLimits`] share. Its fields are the
/// room's: each file of it works on the ones its concern needs.
pub(super) struct Inner {
    pub(super) link: Link,
    /// The longest a call may take ([`TIMEOUT`](super::TIMEOUT) unless
    /// `--redis-timeout`).
    pub(super) timeout: Duration,
    pub(super) script: redis::Script,
    /// `carry.lua`, which reads a cluster state's previous form.
    pub(super) carry: Arc<redis::Script>,
    /// The clock of the fallback decisions (Redis decides on its own
    /// `TIME`).
    pub(super) clock: Arc<dyn Clock>,
    /// One circuit breaker per shard.
    pub(super) breakers: Breakers,
    /// The names of states whose trouble was logged (bounded).
    pub(super) troubled: Mutex<HashSet<Box<str>>>,
    pub(super) stats: Arc<RedisStats>,
    /// Per shard, the requests waiting for its next call, in arrival
    /// order, and whether the flusher runs. A plain mutex: held for a
    /// push or a round's taking, never across an await.
    pub(super) waiting: Mutex<Queues>,
    /// Bans this replica's own limiter started while Redis was away, per
    /// state: its parameters and the ban's end (ms). Each rides along in
    /// its shard's next call, so that every replica enforces it once
    /// Redis is back. Bounded by the keys file (anonymous states are
    /// never banned).
    pub(super) local_bans: Mutex<HashMap<Arc<str>, (Params, u64)>>,
    /// The states this replica's calls decided lately, which a call
    /// names alone ([`Previous::Unnamed`](super::Previous::Unnamed)).
    /// Only flushers take it, once per call.
    pub(super) recent: Mutex<Recent>,
}

impl RedisLimits {
    /// A limiter over the Redis at `url` (`redis://host:port/db`). It
    /// connects lazily, so a server starts while Redis is down (deciding
    /// alone until it is up); a malformed URL is an error.
    pub fn new(url: &str, clock: Arc<dyn Clock>, timeout: Duration) -> Result<RedisLimits, String> {
        Ok(RedisLimits::over(
            Link::single(url, timeout)?,
            clock,
            timeout,
        ))
    }

    /// A limiter over the Redis Cluster that the seed nodes `urls`
    /// (`redis://host:port`) belong to (`--redis-cluster`). Each state
    /// lives in its key's hash slot; a shard that fails sends only its
    /// keys to this replica's own limiter. Connects lazily, as [`new`](Self::new).
    pub fn cluster(
        urls: &[String],
        clock: Arc<dyn Clock>,
        timeout: Duration,
    ) -> Result<RedisLimits, String> {
        Ok(RedisLimits::over(
            Link::cluster(urls, timeout)?,
            clock,
            timeout,
        ))
    }

    fn over(link: Link, clock: Arc<dyn Clock>, timeout: Duration) -> RedisLimits {
        RedisLimits {
            inner: Arc::new(Inner {
                link,
                timeout,
                script: redis::Script::new(SCRIPT),
                carry: Arc::new(redis::Script::new(CARRY)),
                clock,
                breakers: Breakers::new(BREAKER),
                troubled: Mutex::new(HashSet::new()),
                stats: Arc::new(RedisStats::default()),
                waiting: Mutex::new(Queues::default()),
                local_bans: Mutex::new(HashMap::new()),
                recent: Mutex::new(Recent::default()),
            }),
        }
    }

    /// Latency and fallback counts.
    pub fn stats(&self) -> Arc<RedisStats> {
        self.inner.stats.clone()
    }

    /// The collector of its metrics, for `/metrics`.
    pub fn collector(&self) -> Box<dyn Collector> {
        let inner = self.inner.clone();
        Box::new(metrics::RedisCollector {
            stats: self.stats(),
            open_breakers: Box::new(move || inner.breakers.open_count()),
        })
    }

    /// Decides one request of `charge` in Redis, or in this replica's own
    /// limiter when Redis does not answer within [`TIMEOUT`](super::TIMEOUT) (or the
    /// breaker is open). Never fails.
    pub async fn decide(&self, charge: &Charge) -> Decision {
        let (name, params) = match charge {
            Charge::Key(entry) => (
                entry.state_name(),
                Params::key(entry.limiter.quota(), entry.limiter.ban_policy()),
            ),
            Charge::Anonymous(ip, anonymous) => {
                let per_minute = anonymous.per_minute();
                (
                    anonymous::state_name(*ip, per_minute),
                    Params::anonymous(per_minute),
                )
            }
        };
        let shard = self.inner.link.shard(&name);
        let decided = if self.inner.breakers.is_open(shard) {
            None
        } else {
            self.batched(shard, name.clone(), params).await
        };
        match decided {
            Some(decision) => {
                // A ban Redis reports is remembered by the key's own
                // limiter too: should Redis go away, this replica's
                // fallback keeps enforcing it instead of lifting it.
                if let (Charge::Key(entry), Outcome::Banned { retry_after }) =
                    (charge, decision.outcome)
                {
                    entry
                        .limiter
                        .remember_ban(decision.at + retry_after, decision.at);
                }
                decision
            }
            None => {
                self.inner.stats.fallbacks.fetch_add(1, Ordering::Relaxed);
                let decision = charge.decide_here(self.inner.clock.now());
                // A ban this replica starts alone is written to Redis by
                // the shard's next call, so the other replicas enforce it
                // too once Redis is back.
                if let (true, Outcome::Banned { retry_after }) =
                    (decision.ban_started, decision.outcome)
                {
                    let end = decision.at + retry_after;
                    let ms = end.as_unix_nanos().div_ceil(1_000_000);
                    self.inner.local_bans.lock().insert(name, (params, ms));
                }
                decision
            }
        }
    }

    /// Joins the requests waiting for `shard`'s next call, or, when no
    /// flusher runs, starts it with this request first. The flusher is a
    /// task of its own, so a request dropped while it waits (its client
    /// gone) never strands the others.
    pub(super) async fn batched(
        &self,
        shard: Shard,
        name: Arc<str>,
        params: Params,
    ) -> Option<Decision> {
        let (waiter, rx) = oneshot::channel();
        let queued = Queued {
            name,
            params,
            waiter,
        };
        let lead = self.inner.waiting.lock().join(shard, queued);
        if lead {
            tokio::spawn(self.clone().flush());
        }
        // The flusher answers every waiter or drops it (its guard), and
        // each of its calls is bounded by the timeout: this wait is bounded too.
        rx.await.ok().flatten()
    }
}
