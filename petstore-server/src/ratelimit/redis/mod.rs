//! The Redis backend: one rate limit across replicas (`--redis URL`).
//!
//! - **One script decides** ([`SCRIPT`], `limit.lua`): one EVALSHA
//!   decides and charges both windows, counts the strike, starts the ban
//!   and returns every number the headers need, atomically in Redis. The
//!   server never reads and then writes (two replicas doing that lose
//!   each other's updates). redis-rs's `Script` sends EVALSHA and loads
//!   the script on `NOSCRIPT` (a restarted or flushed Redis).
//! - **One call in flight per shard:** a replica keeps at most one call
//!   in flight per shard (the one Redis, or one hash slot of a cluster);
//!   the requests that arrive meanwhile, of any state, wait and go
//!   together in the next call (at most [`MAX_CALL`]), grouped by state in
//!   the order each state first arrived. One flusher sends the calls, in
//!   rounds of one call per shard sent together, so a cluster master gets
//!   the calls of its groups in one read. The script decides each state's requests
//!   one after the other at one Redis `TIME`, exactly as that many calls
//!   in the same millisecond would (a lone request is a call of one).
//!   Why: Redis runs scripts on one thread, and a call's fixed cost (the
//!   call, `TIME`, the reply) is paid once per round trip instead of once
//!   per request, for a hot key and for many keys alike. A call's states
//!   share a slot, so a cluster never sees a cross-slot call.
//! - **Binary in, binary out:** one binary string per state (`GET`, then
//!   `SET ... PX`) at the state's name with `:v3`, read and written with
//!   `struct.unpack`/`struct.pack`; each state's numbers packed into one
//!   argument; the reply one packed string. Why: a hash's `HMGET`, `HSET`
//!   and `PEXPIRE` cost Redis twice a `GET` and a `SET`; parsing and
//!   printing decimals was a third of the script's time; and hundreds of
//!   reply integers cost the replica's client more to parse than the rest
//!   of the call. A state with no `:v3` form yet takes over the previous
//!   version's text at `:v2`, or the hash of the version before at the
//!   name without a suffix, so a deploy neither refills a quota nor lifts
//!   a ban (and replicas of the previous version, during a rolling
//!   deploy, go on with their form untouched).
//! - **Named alone when decided lately** (`recent.rs`): a call gives a
//!   state that this replica's calls decided within the last
//!   second only its current name, not the two of its previous forms,
//!   which Redis would take in and never read (about 7% of its work for
//!   a state). A guess, never trusted: such a state missing after all
//!   (its TTL ran out) comes back unread, and goes again at once, named
//!   with its previous forms.
//! - **One clock:** the script reads Redis `TIME`, so every replica
//!   computes the same `X-RateLimit-Reset` and `Retry-After`. Times are
//!   whole milliseconds; the decision is the core's for that millisecond
//!   (tests/ratelimit_redis_script.rs compares them over 100,000 random steps).
//! - **Names:** `{<sha256 hex>}:m<perMinute>/d<perDay>` for a key (the
//!   braces are a Redis Cluster hash tag: a key's state has one slot;
//!   the quota in the name makes a changed quota start fresh), and
//!   `{anon:<IPv4 or IPv6 /64>}:m<perMinute>` for a client address (in a
//!   cluster, behind a group's hash tag: below), each with its form's
//!   suffix (`:v3`). Never the raw key. Every write sets a TTL that
//!   outlives the state.
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
//! - **Redis Cluster** (`--redis-cluster`, `link.rs`, `groups.rs`):
//!   redis-rs's cluster client sends each call to the master of its
//!   key's slot and follows MOVED and ASK. A state's name there carries
//!   one of [`GROUPS`] hash tags (`{ps3.17}:<sha256 hex>:m60/d1000`), so
//!   that a call carries the queued requests of many states of one slot
//!   instead of one state per call; the replica groups calls by slot, so
//!   a call never spans two. A state missing there takes over the form
//!   the previous version kept under the key's own hash tag, in another
//!   slot: the script answers "unread" for it, the replica reads it
//!   (`carry.lua`, read only) and calls again with its text, once per
//!   state, so a deploy neither refills a quota nor lifts a ban.
//! - **Bans outlive an outage:** a ban Redis reports is remembered by the
//!   key's own limiter (the fallback keeps enforcing it), and a ban the
//!   fallback starts alone rides along in the shard's next call once
//!   Redis answers, so every replica enforces it from then on.
//!
//! | file | holds |
//! |---|---|
//! | `mod.rs` | [`RedisLimits`]: one call in flight per shard, the fallback |
//! | `link.rs` | the connection: one Redis or a Redis Cluster |
//! | `breaker.rs` | the circuit breaker of each shard |
//! | `script.rs` | `limit.lua`, its arguments, the states' names, its reply decoded |
//! | `groups.rs` | the hash-tag groups of a cluster's states |
//! | `recent.rs` | the states decided lately, named alone in a call |
//! | `anonymous.rs` | a client address's state name, made once per thread |
//! | `metrics.rs` | its latency, decisions and fallbacks in `/metrics` |

mod anonymous;
mod breaker;
mod groups;
mod link;
mod metrics;
mod recent;
mod script;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use parking_lot::Mutex;
use petstore_core::{Clock, Decision, Outcome};
use prometheus_client::collector::Collector;
use tokio::sync::oneshot;

pub use groups::{cluster_name, GROUPS};
pub use metrics::{Stats, LATENCY_BOUNDS};
pub use script::{
    anonymous_name, current_name, decode_call, state_arg, text_name, Params, Previous, Requests,
    StateArg, Verdict, CARRY, MAX_BAN_MS, MAX_CALL, SCRIPT,
};
use script::{Suffixed, CURRENT, TEXT};

use super::charge::Charge;
use crate::{log_error, log_info};
pub use breaker::BREAKER;
pub use link::TIMEOUT;

use breaker::{Breakers, Shard};
use link::Link;
use recent::Recent;

/// The shared limiter: a connection to Redis, the script, the breaker and
/// the requests waiting for their state's call.
///
/// One `Arc`: every request that Redis decides holds a clone while it
/// waits, and a clone of the connection, the scripts and the clock one by
/// one was a handful of atomic counts up and down again per request.
#[derive(Clone)]
pub struct RedisLimits {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RedisLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLimits").finish_non_exhaustive()
    }
}

/// Where a waiting request's decision goes: `None` when Redis did not
/// decide it (the request falls back to this replica's limiter).
type Waiter = oneshot::Sender<Option<Decision>>;

/// A request waiting for its shard's next call.
struct Queued {
    name: Arc<str>,
    params: Params,
    waiter: Waiter,
}

/// A part's waiters, in arrival order. The first is held apart: with
/// many keys most parts have one request, and a list of its own for
/// each was an allocation per request on top of the call's.
#[derive(Default)]
struct Waiters {
    first: Option<Waiter>,
    more: Vec<Waiter>,
}

impl Waiters {
    fn one(waiter: Waiter) -> Waiters {
        Waiters {
            first: Some(waiter),
            more: Vec::new(),
        }
    }

    fn push(&mut self, waiter: Waiter) {
        match self.first {
            None => self.first = Some(waiter),
            Some(_) => self.more.push(waiter),
        }
    }

    fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.more.len()
    }

    /// Takes them all, in order.
    fn drain(&mut self) -> impl Iterator<Item = Waiter> + '_ {
        self.first.take().into_iter().chain(self.more.drain(..))
    }
}

/// One state's part of a call: its requests (or none, when the part only
/// carries a ban this replica started while Redis was away).
struct Part {
    name: Arc<str>,
    params: Params,
    waiters: Waiters,
    /// The end (ms since the Unix epoch) of a ban this replica started
    /// alone, 0 for none.
    ban_until_ms: u64,
    /// Where the state's previous form is, should it have no `:v3` (or
    /// `:v2`) form.
    previous: Previous,
}

struct Inner {
    link: Link,
    /// The longest a call may take ([`TIMEOUT`] unless `--redis-timeout`).
    timeout: Duration,
    script: ::redis::Script,
    /// `carry.lua`, which reads a cluster state's previous form.
    carry: Arc<::redis::Script>,
    /// The clock of the fallback decisions (Redis decides on its own
    /// `TIME`).
    clock: Arc<dyn Clock>,
    /// One circuit breaker per shard.
    breakers: Breakers,
    /// The names of states whose trouble was logged (bounded).
    troubled: Mutex<HashSet<Box<str>>>,
    stats: Arc<Stats>,
    /// Per shard, the requests waiting for its next call, in arrival
    /// order, and whether the flusher runs. A plain mutex: held for a
    /// push or a round's taking, never across an await.
    waiting: Mutex<Queues>,
    /// Bans this replica's own limiter started while Redis was away, per
    /// state: its parameters and the ban's end (ms). Each rides along in
    /// its shard's next call, so that every replica enforces it once
    /// Redis is back. Bounded by the keys file (anonymous states are
    /// never banned).
    local_bans: Mutex<HashMap<Arc<str>, (Params, u64)>>,
    /// The states this replica's calls decided lately, which a call
    /// names alone ([`Previous::Unnamed`]). Only flushers take it, once
    /// per call.
    recent: Mutex<Recent>,
}

impl std::fmt::Debug for Queued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queued").field("name", &self.name).finish()
    }
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
                script: ::redis::Script::new(SCRIPT),
                carry: Arc::new(::redis::Script::new(CARRY)),
                clock,
                breakers: Breakers::new(BREAKER),
                troubled: Mutex::new(HashSet::new()),
                stats: Arc::new(Stats::default()),
                waiting: Mutex::new(Queues::default()),
                local_bans: Mutex::new(HashMap::new()),
                recent: Mutex::new(Recent::default()),
            }),
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
                let limit = self.inner.link.config_get("maxmemory").await?;
                let policy = self.inner.link.config_get("maxmemory-policy").await?;
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
    async fn batched(&self, shard: Shard, name: Arc<str>, params: Params) -> Option<Decision> {
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

    /// The flusher: rounds of one call per shard that has requests
    /// waiting (each taking at most [`MAX_CALL`] of them), the calls of a
    /// round sent together, until nothing waits.
    ///
    /// Why together: a Redis spends about as much on an event-loop turn
    /// (reading a connection, writing its replies, the append-only file)
    /// as on deciding several states, and a cluster's group calls each
    /// carry a twelfth of the queue. Sent from one task in one go, the
    /// calls of the groups one master holds reach it in one read and are
    /// answered in one turn; each group's flusher on its own sent them
    /// at moments of their own, a turn each (`scripts/redis-cost`; on one
    /// Redis, 3 states a call cost 24 us a state one call a turn, 12 four
    /// calls a turn). The price: a round lasts as long as its slowest
    /// call, so a master that stops answering holds the others' next
    /// round for one timeout, until its breaker opens (and once per probe
    /// after that). One Redis is one shard: a round is one call.
    async fn flush(self) {
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
    /// waiters: the parts left unread ([`Verdict::Unread`]), or `None`
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
            Some((reply, verdicts)) => Some(self.answer(parts, &reply, verdicts)),
            None => {
                self.give_back_bans(&parts);
                None
            }
        }
    }

    /// Sends each part's decisions, read from `reply`, to its waiters;
    /// returns the parts left undecided because their previous form is
    /// unread.
    fn answer(&self, parts: Vec<Part>, reply: &[u8], verdicts: Vec<Verdict>) -> Vec<Part> {
        let mut unread = Vec::new();
        let now = Instant::now();
        let mut recent = self.inner.recent.lock();
        for (mut part, verdict) in parts.into_iter().zip(verdicts) {
            if matches!(verdict, Verdict::Decided(_) | Verdict::Reset(_)) {
                recent.add(&part.name, now);
            }
            let requests = match verdict {
                Verdict::Decided(requests) => requests,
                Verdict::Reset(requests) => {
                    self.state_trouble(
                        &part.name,
                        "it held something that is not a limiter state; it was reset",
                    );
                    requests
                }
                Verdict::NotStored => {
                    self.state_trouble(&part.name, "Redis could not store it");
                    continue;
                }
                Verdict::Unread => {
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

    /// The bans carried by `parts`, not decided, go back for the next call.
    fn give_back_bans(&self, parts: &[Part]) {
        let mut bans = self.inner.local_bans.lock();
        for part in parts.iter().filter(|p| p.ban_until_ms > 0) {
            bans.entry(part.name.clone())
                .or_insert((part.params, part.ban_until_ms));
        }
    }

    /// Reads the previous form of each of `parts` (a cluster's states
    /// missing under their group's tag: kept under their own hash tag,
    /// each in its own slot; all read at once) into its
    /// [`Previous::Read`], and returns the parts read. A part whose form
    /// could not be read within the timeout is dropped, so its requests
    /// fall back (a state's previous form is never skipped, or a deploy
    /// would refill its quota or lift its ban). The slot it is read from
    /// has its own breaker: a master that is down costs one timeout, then
    /// the states whose previous form it holds fall back at once, as its
    /// own keys do.
    async fn read_previous(&self, parts: Vec<Part>) -> Vec<Part> {
        let mut reads = tokio::task::JoinSet::new();
        let mut slots: Vec<Option<Part>> = Vec::with_capacity(parts.len());
        for part in parts {
            let home = self.inner.link.home_shard(&part.name);
            if !self.inner.breakers.may_try(home) {
                self.give_back_bans(std::slice::from_ref(&part));
                continue;
            }
            let (link, carry, timeout) = (
                self.inner.link.clone(),
                self.inner.carry.clone(),
                self.inner.timeout,
            );
            let keys = [text_name(&part.name), part.name.to_string()];
            let i = slots.len();
            slots.push(Some(part));
            reads.spawn(async move {
                let mut invocation = carry.prepare_invoke();
                invocation.key(&keys[0]).key(&keys[1]);
                let read = tokio::time::timeout(timeout, link.invoke::<String>(&invocation)).await;
                (i, home, read)
            });
        }
        let mut read = Vec::with_capacity(slots.len());
        while let Some(joined) = reads.join_next().await {
            // A read task cannot panic short of a bug; its part is then
            // left in `slots` and dropped below, so its requests fall back.
            let Ok((i, home, outcome)) = joined else {
                continue;
            };
            let Some(mut part) = slots.get_mut(i).and_then(Option::take) else {
                continue;
            };
            let failure = match outcome {
                Ok(Ok(text)) => {
                    self.answered(home);
                    part.previous = Previous::Read(text);
                    read.push(part);
                    continue;
                }
                Ok(Err(e)) => Failure::of(&e),
                Err(_) => Failure::timed_out(self.inner.timeout),
            };
            self.give_back_bans(std::slice::from_ref(&part));
            match failure {
                Failure::Call(why) => self.state_trouble(
                    &part.name,
                    &format!("its previous form could not be read: {why}"),
                ),
                Failure::Unreachable(e) => {
                    if self.inner.breakers.failed(home) {
                        log_error!(
                            "Redis: {e} (reading a limiter state's previous form); the states it holds are limited by each replica alone until it answers (probing every {} s)",
                            BREAKER.as_secs()
                        );
                    }
                }
            }
        }
        for part in slots.into_iter().flatten() {
            self.give_back_bans(std::slice::from_ref(&part));
        }
        read
    }

    /// `taken`'s requests grouped by state (and arguments: a reload that
    /// changes a key's ban policy but not its quota keeps the name), in
    /// the order each state first arrived, with the bans this replica
    /// started alone in `shard` while Redis was away. Empties `taken`.
    fn parts(&self, shard: Shard, taken: &mut Vec<Queued>) -> Vec<Part> {
        let mut parts: Vec<Part> = Vec::with_capacity(taken.len());
        let now = Instant::now();
        let recent = self.inner.recent.lock();
        for queued in taken.drain(..) {
            // Usually one state, or a few: a linear search beats a map.
            // By the name's identity (one `Arc` per key entry, and per
            // address on each worker thread), not its text: comparing
            // texts of one length was a `memcmp` per state already in the
            // call. Two `Arc`s of one text (a key's entry before and after
            // a reload, an address named on two threads) go as two parts,
            // which the script decides in turn, as it does a state whose
            // ban policy changed.
            match parts
                .iter_mut()
                .find(|p| Arc::ptr_eq(&p.name, &queued.name) && p.params == queued.params)
            {
                Some(part) => part.waiters.push(queued.waiter),
                None => parts.push(Part {
                    previous: if recent.has(&queued.name, now) {
                        Previous::Unnamed
                    } else {
                        self.inner.link.previous()
                    },
                    name: queued.name,
                    params: queued.params,
                    waiters: Waiters::one(queued.waiter),
                    ban_until_ms: 0,
                }),
            }
        }
        drop(recent);
        let mut bans = self.inner.local_bans.lock();
        if !bans.is_empty() {
            bans.retain(|name, (params, until)| {
                if self.inner.link.shard(name) != shard {
                    return true;
                }
                match parts.iter_mut().find(|p| p.name == *name) {
                    Some(part) => part.ban_until_ms = *until,
                    None => parts.push(Part {
                        name: name.clone(),
                        params: *params,
                        waiters: Waiters::default(),
                        ban_until_ms: *until,
                        previous: self.inner.link.previous(),
                    }),
                }
                false
            });
        }
        parts
    }

    /// One script call deciding `parts`; per part its [`Verdict`], or
    /// `None` (the failure logged, and the breaker opened when Redis did
    /// not answer) when Redis gave no reply of the script's within
    /// its timeout ([`TIMEOUT`] by default).
    async fn call(&self, shard: Shard, parts: &[Part]) -> Option<(Vec<u8>, Vec<Verdict>)> {
        let started = Instant::now();
        // EVALSHA written straight into one command: redis-rs's
        // `ScriptInvocation` keeps each argument in a `Vec` of its own and
        // copies them all into a command again, and each name was a
        // `format!` (`Suffixed`): about ten allocations a state.
        // Sized for the whole call up front: grown an argument at a time,
        // its buffers were copied again and again, most of them past
        // malloc's per-thread cache (a call carries tens of states).
        let names: usize = parts.iter().map(|p| p.previous.names()).sum();
        let bytes: usize = parts
            .iter()
            .map(|p| (p.name.len() + GROUP_TAG) * p.previous.names() + STATE_ARGS)
            .sum();
        let mut call = ::redis::Cmd::with_capacity(4 + names + parts.len(), 64 + bytes);
        call.arg("EVALSHA")
            .arg(self.inner.script.get_hash())
            .arg(names);
        for part in parts {
            let place = self.inner.link.place(&part.name);
            call.arg(Suffixed(&place, CURRENT));
            // As many names as counted above, by the same rule.
            if part.previous.names() > 1 {
                call.arg(Suffixed(&place, TEXT)).arg(&*place);
            }
        }
        call.arg("");
        for part in parts {
            call.arg(state_arg(
                &part.params,
                part.waiters.len(),
                part.ban_until_ms,
                &part.previous,
            ));
        }
        let reply = match tokio::time::timeout(
            self.inner.timeout,
            self.inner.link.eval::<Vec<u8>>(&self.inner.script, &call),
        )
        .await
        {
            Err(_) => Err(Failure::timed_out(self.inner.timeout)),
            Ok(Err(e)) => Err(Failure::of(&e)),
            Ok(Ok(reply)) => match decode_call(&reply, parts.iter().map(|p| p.waiters.len())) {
                Some(verdicts) => Ok((reply, verdicts)),
                None => Err(Failure::Call(format!("unexpected script reply {reply:?}"))),
            },
        };
        match reply {
            Ok((reply, verdicts)) => {
                self.inner.stats.latency.observe(started.elapsed());
                let decided: usize = parts
                    .iter()
                    .zip(&verdicts)
                    .filter(|(_, v)| !matches!(v, Verdict::NotStored | Verdict::Unread))
                    .map(|(p, _)| p.waiters.len())
                    .sum();
                self.inner
                    .stats
                    .decisions
                    .fetch_add(decided as u64, Ordering::Relaxed);
                self.answered(shard);
                Some((reply, verdicts))
            }
            // Redis answered, but not with the script's reply: only these
            // requests fall back, the breaker stays as it is.
            Err(Failure::Call(why)) => {
                for part in parts {
                    self.state_trouble(&part.name, &why);
                }
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

    /// `shard` answered: its breaker closes, and the last one to close
    /// says so in the log.
    fn answered(&self, shard: Shard) {
        if self.inner.breakers.succeeded(shard) {
            log_info!("Redis answers again: one rate limit across replicas");
        }
    }

    /// Counts a problem of one state and logs it, once per state name (at
    /// most [`MAX_TROUBLED`] names are remembered; past them a problem is
    /// counted, not logged).
    fn state_trouble(&self, name: &str, why: &str) {
        let name = current_name(&self.inner.link.place(name));
        self.inner
            .stats
            .state_errors
            .fetch_add(1, Ordering::Relaxed);
        let mut logged = self.inner.troubled.lock();
        if logged.len() < MAX_TROUBLED && logged.insert(Box::from(&*name)) {
            log_error!(
                "Redis: the limiter state {name}: {why}; its requests are decided by each replica alone meanwhile, every other state stays shared"
            );
        }
    }
}

/// Per shard, the requests waiting for its next call, in arrival order,
/// and whether the flusher runs. A list, not a map: one shard on one
/// Redis, at most [`GROUPS`] in a cluster, and a look along a few costs
/// less than hashing the shard on every request.
#[derive(Debug, Default)]
struct Queues {
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
    fn join(&mut self, shard: Shard, queued: Queued) -> bool {
        match self.queues.iter_mut().find(|(s, _)| *s == shard) {
            Some((_, queue)) => queue.push(queued),
            None => self.queues.push((shard, vec![queued])),
        }
        !std::mem::replace(&mut self.flushing, true)
    }

    /// The next round: each shard's waiting requests, at most
    /// [`MAX_CALL`] of each. Empty when none wait; the flusher stops
    /// then, and the next request starts it again.
    fn take_round(&mut self) -> Vec<(Shard, Vec<Queued>)> {
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
    fn give_back(&mut self, emptied: Vec<Vec<Queued>>) {
        self.spare = emptied;
    }

    /// Every waiting request dropped (their channels close, so they fall
    /// back), and no flusher. (When the flusher stops, none is waiting.)
    fn abandon(&mut self) {
        self.flushing = false;
        self.queues.clear();
        self.spare.clear();
    }
}

/// Room for a name's group tag in a cluster and its suffix, in bytes,
/// when a call's buffers are sized ([`RedisLimits::call`]).
const GROUP_TAG: usize = 16;

/// Room for a state's argument (packed numbers and FROM), in bytes, when
/// a call's buffers are sized; a FROM with a previous form's text is
/// longer, and grows them.
const STATE_ARGS: usize = 64;

/// How many troubled state names are remembered for logging them once.
const MAX_TROUBLED: usize = 1_000;

/// Why a call got no decision.
#[derive(Debug)]
enum Failure {
    /// Redis did not answer, or not in time, or its cluster could not
    /// route the call: the shard's breaker opens.
    Unreachable(String),
    /// Redis answered with an error, or with a reply that is not the
    /// script's: only this call's requests fall back.
    Call(String),
}

impl Failure {
    /// No answer within `timeout`.
    fn timed_out(timeout: Duration) -> Failure {
        Failure::Unreachable(format!("no answer within {} ms", timeout.as_millis()))
    }

    fn of(e: &::redis::RedisError) -> Failure {
        use ::redis::{ErrorKind, ServerErrorKind};
        match e.kind() {
            ErrorKind::Extension | ErrorKind::Server(ServerErrorKind::ResponseError) => {
                Failure::Call(e.to_string())
            }
            _ => Failure::Unreachable(e.to_string()),
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use petstore_core::SystemClock;

    fn queued(name: &Arc<str>, params: Params) -> (Queued, oneshot::Receiver<Option<Decision>>) {
        let (waiter, rx) = oneshot::channel();
        let queued = Queued {
            name: name.clone(),
            params,
            waiter,
        };
        (queued, rx)
    }

    #[tokio::test]
    async fn a_calls_requests_go_by_state_in_the_order_each_state_first_arrived() {
        // Lazy: nothing connects, and nothing here calls Redis.
        let limits = RedisLimits::new(
            "redis://127.0.0.1:1",
            Arc::new(SystemClock::new()),
            Duration::from_secs(1),
        )
        .unwrap();
        let p = Params::anonymous(60);
        let (a, b): (Arc<str>, Arc<str>) = ("{aa}:m60".into(), "{bb}:m60".into());
        // The same text in another `Arc` (a key entry after a reload).
        let a_again: Arc<str> = String::from(&*a).into();
        let mut taken = Vec::new();
        let mut receivers = Vec::new();
        for (name, params) in [
            (&a, p),
            (&b, p),
            (&a, p),
            (&a_again, p),
            (&a, Params::anonymous(7)),
        ] {
            let (q, rx) = queued(name, params);
            taken.push(q);
            receivers.push(rx);
        }
        let parts = limits.parts(None, &mut taken);
        assert!(taken.is_empty());
        let seen: Vec<(&str, u32, usize)> = parts
            .iter()
            .map(|p| (&*p.name, p.params.per_minute, p.waiters.len()))
            .collect();
        assert_eq!(
            seen,
            [
                ("{aa}:m60", 60, 2),
                ("{bb}:m60", 60, 1),
                ("{aa}:m60", 60, 1),
                ("{aa}:m60", 7, 1)
            ]
        );
        assert!(Arc::ptr_eq(&parts[0].name, &a) && Arc::ptr_eq(&parts[2].name, &a_again));
    }

    #[test]
    fn a_round_takes_each_shards_waiting_requests_and_one_flusher_runs() {
        let p = Params::anonymous(60);
        let (a, b): (Arc<str>, Arc<str>) = ("{aa}:m60".into(), "{bb}:m60".into());
        let (seven, nine): (Shard, Shard) = (
            Some(::redis::cluster_routing::Slot::for_key("seven")),
            Some(::redis::cluster_routing::Slot::for_key("nine")),
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
        let mut decision = petstore_core::AnonymousLimiter::new(per_minute, 16).check(
            "192.0.2.1".parse().unwrap(),
            petstore_core::Timestamp::from_unix_nanos(0),
        );
        decision.minute.remaining = remaining;
        decision
    }
}
