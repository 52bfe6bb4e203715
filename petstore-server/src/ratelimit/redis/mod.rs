//! The Redis backend: one rate limit across replicas (`--redis URL`).
//!
//! - **One script decides** ([`SCRIPT`], `limit.lua`): one EVALSHA
//!   decides and charges both windows, counts the strike, starts the ban
//!   and returns every number the headers need, atomically in Redis. The
//!   server never reads and then writes (two replicas doing that lose
//!   each other's updates). redis-rs's `Script` sends EVALSHA and loads
//!   the script on `NOSCRIPT` (a restarted or flushed Redis).
//! - **Batches of one state:** at most one call per limiter state is in
//!   flight from a replica; the requests of that state that arrive
//!   meanwhile wait and go together in the next call, whose script
//!   decides them one after the other, exactly as that many calls in the
//!   same millisecond would (a lone request is a batch of one). Why:
//!   Redis runs scripts on one thread, and most of a call's cost is fixed
//!   (the call, `TIME`, reading and writing the state, the reply), so a
//!   busy key (one client's many connections, the common case of a hot
//!   key) costs Redis a call per round trip instead of one per request.
//!   Different states never share a call, so a key's call touches only
//!   its own Redis Cluster slot.
//! - **One clock:** the script reads Redis `TIME`, so every replica
//!   computes the same `X-RateLimit-Reset` and `Retry-After`. Times are
//!   whole milliseconds; the decision is the core's for that millisecond
//!   (tests/ratelimit_redis_script.rs compares them over 100,000 random steps).
//! - **Names:** `{<sha256 hex>}:m<perMinute>/d<perDay>` for a key (the
//!   braces are a Redis Cluster hash tag: a key's entries share a slot;
//!   the quota in the name makes a changed quota start fresh), and
//!   `{anon:<IPv4 or IPv6 /64>}:m<perMinute>` for a client address. Never
//!   the raw key. Every write sets a TTL that outlives the state.
//! - **Redis unreachable or slow:** every call has a [`TIMEOUT`]; on a
//!   failure the request is decided by the replica's in-process limiter
//!   at the full plan (the state the local backend keeps), and a circuit
//!   breaker sends the requests of that shard there for [`BREAKER`]
//!   before one call probes it again (`breaker.rs`). One Redis is one
//!   shard; a Redis Cluster's hash slots are each one, so a master that
//!   fails sends only the keys it holds to the replicas' own limiters.
//!   Each change of mode is logged once; fallbacks and Redis latency are
//!   in `/metrics`. Never a 5xx, never an unhealthy `/healthz` because of
//!   Redis: a limiter that fails open per replica (each still enforcing
//!   the plan) is the lesser harm than refusing every request (Kong's
//!   `fault_tolerant`, Envoy's `failure_mode_deny=false`).
//! - **Redis Cluster** (`--redis-cluster`, `link.rs`): redis-rs's cluster
//!   client sends each call to the master of its key's slot and follows
//!   MOVED and ASK. A call names one state, whose name's hash tag is the
//!   key's SHA-256, so it never spans two slots.
//!
//! | file | holds |
//! |---|---|
//! | `mod.rs` | [`RedisLimits`]: one call in flight per state, the fallback |
//! | `link.rs` | the connection: one Redis or a Redis Cluster |
//! | `breaker.rs` | the circuit breaker of each shard |
//! | `script.rs` | `limit.lua`, its arguments, the states' names, its reply decoded |
//! | `metrics.rs` | its latency, decisions and fallbacks in `/metrics` |

mod breaker;
mod link;
mod metrics;
mod script;

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use petstore_core::{Clock, Decision, Outcome};
use prometheus_client::collector::Collector;
use tokio::sync::oneshot;

pub use metrics::{Stats, LATENCY_BOUNDS};
pub use script::{anonymous_name, decode, decode_batch, Params, MAX_BAN_MS, MAX_BATCH, SCRIPT};

use super::charge::Charge;
use crate::{log_error, log_info};
pub use breaker::BREAKER;
pub use link::TIMEOUT;

use breaker::{Breakers, Shard};
use link::Link;

/// The shared limiter: a connection to Redis, the script, the breaker and
/// the requests waiting for their state's call.
#[derive(Clone)]
pub struct RedisLimits {
    link: Link,
    script: Arc<::redis::Script>,
    inner: Arc<Inner>,
    /// The clock of the fallback decisions (Redis decides on its own
    /// `TIME`).
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for RedisLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLimits").finish_non_exhaustive()
    }
}

/// A state's name and the script's arguments: requests batch together
/// only when both are equal (a reload that changes a key's ban policy but
/// not its quota keeps the name, not the arguments).
type BatchKey = (Arc<str>, [u64; 5]);

/// Where a waiting request's decision goes: `None` when Redis did not
/// decide it (the request falls back to this replica's limiter).
type Waiter = oneshot::Sender<Option<Decision>>;

#[derive(Debug)]
struct Inner {
    /// One circuit breaker per shard.
    breakers: Breakers,
    /// The names of states whose trouble was logged (bounded).
    troubled: Mutex<HashSet<Box<str>>>,
    stats: Arc<Stats>,
    /// Per state with a call in flight, the requests waiting for the
    /// next. A state is here exactly while its driver task runs. A plain
    /// mutex: held for a push or a swap, never across an await.
    waiting: Mutex<HashMap<BatchKey, Vec<Waiter>>>,
}

impl RedisLimits {
    /// A limiter over the Redis at `url` (`redis://host:port/db`). It
    /// connects lazily, so a server starts while Redis is down (deciding
    /// alone until it is up); a malformed URL is an error.
    pub fn new(url: &str, clock: Arc<dyn Clock>) -> Result<RedisLimits, String> {
        Ok(RedisLimits::over(Link::single(url)?, clock))
    }

    /// A limiter over the Redis Cluster that the seed nodes `urls`
    /// (`redis://host:port`) belong to (`--redis-cluster`). Each state
    /// lives in its key's hash slot; a shard that fails sends only its
    /// keys to this replica's own limiter. Connects lazily, as [`new`](Self::new).
    pub fn cluster(urls: &[String], clock: Arc<dyn Clock>) -> Result<RedisLimits, String> {
        Ok(RedisLimits::over(Link::cluster(urls)?, clock))
    }

    fn over(link: Link, clock: Arc<dyn Clock>) -> RedisLimits {
        RedisLimits {
            link,
            script: Arc::new(::redis::Script::new(SCRIPT)),
            inner: Arc::new(Inner {
                breakers: Breakers::new(BREAKER),
                troubled: Mutex::new(HashSet::new()),
                stats: Arc::new(Stats::default()),
                waiting: Mutex::new(HashMap::new()),
            }),
            clock,
        }
    }

    /// Checks once Redis answers (at most a few tries a second apart)
    /// that it never evicts a state: a Redis with `maxmemory` and an
    /// evicting `maxmemory-policy` would silently refill quotas and lift
    /// bans under memory pressure. Logs a warning if it might, or that it
    /// will not. Run as a task of its own at start.
    pub async fn check_eviction(self) {
        for _ in 0..10 {
            let asked = async {
                let limit = self.link.config_get("maxmemory").await?;
                let policy = self.link.config_get("maxmemory-policy").await?;
                Ok::<_, ::redis::RedisError>((limit, policy))
            };
            match tokio::time::timeout(Duration::from_secs(1), asked).await {
                Ok(Ok((limit, policy))) => {
                    let unbounded = limit.as_deref().is_none_or(|l| l == "0");
                    let policy = policy.unwrap_or_default();
                    if unbounded || policy == "noeviction" {
                        log_info!(
                            "Redis: maxmemory-policy {policy}, maxmemory {}: limiter states are never evicted",
                            limit.as_deref().unwrap_or("0")
                        );
                    } else {
                        log_error!(
                            "WARNING: Redis has maxmemory {} and maxmemory-policy {policy}: under memory pressure it may evict limiter states, which refills quotas and lifts bans. Set maxmemory-policy noeviction",
                            limit.as_deref().unwrap_or("?")
                        );
                    }
                    return;
                }
                // Down, or CONFIG refused (a managed Redis): try again, a
                // few times, then say that it could not be checked.
                _ => tokio::time::sleep(Duration::from_secs(1)).await,
            }
        }
        log_error!(
            "Redis: could not read maxmemory-policy; make sure it is noeviction, or quotas refill and bans lift when Redis evicts"
        );
    }

    /// Latency and fallback counts.
    pub fn stats(&self) -> Arc<Stats> {
        self.inner.stats.clone()
    }

    /// The collector of its metrics, for `/metrics`.
    pub fn collector(&self) -> Box<dyn Collector> {
        Box::new(metrics::RedisCollector(self.stats()))
    }

    /// Decides one request of `charge` in Redis, or in this replica's own
    /// limiter when Redis does not answer within [`TIMEOUT`] (or the
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
                    Arc::from(anonymous_name(*ip, per_minute)),
                    Params::anonymous(per_minute),
                )
            }
        };
        let decided = if self.inner.breakers.is_open(self.link.shard(&name)) {
            None
        } else {
            self.batched(name, params).await
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
                charge.decide_here(self.clock.now())
            }
        }
    }

    /// Joins the requests waiting for `name`'s next call, or, when no call
    /// of that state is in flight, starts its driver with this request as
    /// the first batch. The driver is a task of its own, so a request
    /// dropped while it waits (its client gone) never strands the others.
    async fn batched(&self, name: Arc<str>, params: Params) -> Option<Decision> {
        let (tx, rx) = oneshot::channel();
        let lead = match self
            .inner
            .waiting
            .lock()
            .entry((name.clone(), params.args()))
        {
            Entry::Occupied(mut waiting) => {
                waiting.get_mut().push(tx);
                None
            }
            Entry::Vacant(slot) => {
                slot.insert(Vec::new());
                Some(tx)
            }
        };
        if let Some(tx) = lead {
            tokio::spawn(self.clone().drive(name, params, vec![tx]));
        }
        // The driver answers every waiter or drops it (its guard), and each
        // of its calls is bounded by TIMEOUT: this wait is bounded too.
        rx.await.ok().flatten()
    }

    /// Calls Redis for `batch`, answers it, and goes on with the requests
    /// that arrived meanwhile until none wait.
    async fn drive(self, name: Arc<str>, params: Params, mut batch: Vec<Waiter>) {
        let mut guard = Driving {
            limits: &self,
            key: Some((name, params.args())),
        };
        loop {
            let Some(key) = guard.key.as_ref() else {
                return;
            };
            let shard = self.link.shard(&key.0);
            let decided = if self.inner.breakers.may_try(shard) {
                self.call(&key.0, shard, &params, batch.len()).await
            } else {
                None
            };
            match decided {
                Some(decisions) => {
                    for (waiter, decision) in batch.drain(..).zip(decisions) {
                        // A waiter gone (its connection closed) was charged
                        // all the same, as a request the client abandoned.
                        let _ = waiter.send(Some(decision));
                    }
                }
                None => {
                    for waiter in batch.drain(..) {
                        let _ = waiter.send(None);
                    }
                }
            }
            let mut all = self.inner.waiting.lock();
            let more = match all.get_mut(key) {
                Some(waiting) if waiting.len() > MAX_BATCH => {
                    batch.extend(waiting.drain(..MAX_BATCH));
                    true
                }
                Some(waiting) if !waiting.is_empty() => {
                    std::mem::swap(waiting, &mut batch);
                    true
                }
                _ => false,
            };
            if !more {
                all.remove(key);
                drop(all);
                guard.key = None;
            }
        }
    }

    /// One script call deciding `count` requests of `name`; `None` (the
    /// failure logged and the breaker opened) when Redis did not answer
    /// with the script's reply within [`TIMEOUT`].
    async fn call(
        &self,
        name: &str,
        shard: Shard,
        params: &Params,
        count: usize,
    ) -> Option<Vec<Decision>> {
        let started = Instant::now();
        let mut invocation = self.script.prepare_invoke();
        invocation
            .key(name)
            .arg("")
            .arg(&params.args()[..])
            .arg(count);
        let mut reset = false;
        let decided = loop {
            let reply = match tokio::time::timeout(TIMEOUT, self.link.invoke(&invocation)).await {
                Err(_) => Err(Failure::Unreachable(format!(
                    "no answer within {} ms",
                    TIMEOUT.as_millis()
                ))),
                Ok(Err(e)) => Err(Failure::of(&e)),
                Ok(Ok(reply)) => Ok(reply),
            };
            match reply {
                // Not the script's state (a key of another type written
                // over it): reset once, as a state that expired would be.
                Err(Failure::WrongType(_)) if !reset => {
                    reset = true;
                    if self.reset(name).await {
                        continue;
                    }
                    break Err(Failure::State(
                        "it holds a value of another type and could not be reset".into(),
                    ));
                }
                Err(failure) => break Err(failure),
                Ok(reply) => {
                    break decode_batch(&reply, params, count).ok_or_else(|| {
                        Failure::State(format!("unexpected script reply {reply:?}"))
                    })
                }
            }
        };
        if reset {
            self.state_trouble(name, "it held a value of another type; it was reset");
        }
        match decided {
            Ok(decisions) => {
                self.inner.stats.latency.observe(started.elapsed());
                self.inner
                    .stats
                    .decisions
                    .fetch_add(count as u64, Ordering::Relaxed);
                if self.inner.breakers.succeeded(shard) {
                    log_info!("Redis answers again: one rate limit across replicas");
                }
                Some(decisions)
            }
            // Redis answered, about this state only: its requests fall
            // back, and the breaker stays as it is for every other state.
            Err(Failure::State(why) | Failure::WrongType(why)) => {
                self.state_trouble(name, &why);
                None
            }
            Err(Failure::Unreachable(e)) => {
                if self.inner.breakers.failed(shard) {
                    log_error!(
                        "Redis: {e}; each replica limits alone at the full plan (with a cluster, the keys of the shard that failed) until Redis answers (probing every {} s)",
                        BREAKER.as_secs()
                    );
                }
                None
            }
        }
    }

    /// Deletes the state `name` (same slot as the call), within the
    /// timeout; whether it is gone.
    async fn reset(&self, name: &str) -> bool {
        matches!(
            tokio::time::timeout(TIMEOUT, self.link.del(name)).await,
            Ok(Ok(()))
        )
    }

    /// Counts a problem of one state and logs it, once per state name (at
    /// most [`MAX_TROUBLED`] names are remembered; past them a problem is
    /// counted, not logged).
    fn state_trouble(&self, name: &str, why: &str) {
        self.inner
            .stats
            .state_errors
            .fetch_add(1, Ordering::Relaxed);
        let mut logged = self.inner.troubled.lock();
        if logged.len() < MAX_TROUBLED && logged.insert(Box::from(name)) {
            log_error!(
                "Redis: the limiter state {name}: {why}; its requests are decided by each replica alone meanwhile, every other state stays shared"
            );
        }
    }
}

/// How many troubled state names are remembered for logging them once.
const MAX_TROUBLED: usize = 1_000;

/// Why a call got no decision.
#[derive(Debug)]
enum Failure {
    /// Redis did not answer, or not in time, or its cluster could not
    /// route the call: the shard's breaker opens.
    Unreachable(String),
    /// Redis answered with an error about this state alone (the script
    /// failed on it, or its reply was not the script's): only its
    /// requests fall back.
    State(String),
    /// The state is a key of another type.
    WrongType(String),
}

impl Failure {
    fn of(e: &::redis::RedisError) -> Failure {
        use ::redis::{ErrorKind, ServerErrorKind};
        if e.code() == Some("WRONGTYPE") {
            return Failure::WrongType(e.to_string());
        }
        match e.kind() {
            ErrorKind::Extension | ErrorKind::Server(ServerErrorKind::ResponseError) => {
                Failure::State(e.to_string())
            }
            _ => Failure::Unreachable(e.to_string()),
        }
    }
}

/// A running driver's claim on its state's queue. Dropped without having
/// emptied it (the task cancelled at shutdown, or a panic), it removes the
/// queue, so the waiters' channels close (they fall back to this replica's
/// limiter) and the next request of the state starts a new driver instead
/// of waiting behind one that is gone.
struct Driving<'a> {
    limits: &'a RedisLimits,
    key: Option<BatchKey>,
}

impl Drop for Driving<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.limits.inner.waiting.lock().remove(&key);
        }
    }
}
