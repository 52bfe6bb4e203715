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
//!   (tests/redis_limits.rs compares them over 100,000 random steps).
//! - **Names:** `{<sha256 hex>}:m<perMinute>/d<perDay>` for a key (the
//!   braces are a Redis Cluster hash tag: a key's entries share a slot;
//!   the quota in the name makes a changed quota start fresh), and
//!   `{anon:<IPv4 or IPv6 /64>}:m<perMinute>` for a client address. Never
//!   the raw key. Every write sets a TTL that outlives the state.
//! - **Redis unreachable or slow:** every call has a [`TIMEOUT`]; on a
//!   failure the request is decided by the replica's in-process limiter
//!   at the full plan (the state the `local` backend keeps), and a circuit
//!   breaker sends every request there for [`BREAKER`] before one request
//!   probes Redis again. Each change of mode is logged once; fallbacks and
//!   Redis latency are in `/metrics`. Never a 5xx, never an unhealthy
//!   `/healthz` because of Redis: a limiter that fails open per replica
//!   (each still enforcing the plan) is the lesser harm than refusing
//!   every request (Kong's `fault_tolerant`, Envoy's
//!   `failure_mode_deny=false`).

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::redis::aio::ConnectionManager;
use parking_lot::Mutex;
use petstore_core::{client_key, BanPolicy, Decision, Outcome, Quota, Timestamp, WindowState};
use tokio::sync::oneshot;

use super::StateId;
use crate::histogram::Histogram;
use crate::keys::KeyEntry;
use crate::state::AppState;
use crate::{log_error, log_info};

/// The script, `limit.lua`.
pub const SCRIPT: &str = include_str!("limit.lua");

/// The longest a request waits for Redis before its replica decides alone.
pub const TIMEOUT: Duration = Duration::from_millis(50);

/// How long the replica decides alone after a failure before it probes
/// Redis again.
pub const BREAKER: Duration = Duration::from_secs(1);

/// The largest `perMinute` or `perDay` a keys file may give: the script's
/// exact arithmetic in doubles needs `86,400,000 ms * (perDay + 1) < 2^53`
/// (`limit.lua`). The same bound holds without Redis, so a keys file does
/// not become invalid when a deploy turns Redis on.
pub const MAX_QUOTA: u32 = 100_000_000;

/// The longest ban window or ban the script is given, 10^12 ms (about 31
/// years): with a Unix time in ms (about 1.8 * 10^12) the sum stays far
/// below 2^53. A keys file may say more; it changes nothing in practice.
pub const MAX_BAN_MS: u64 = 1_000_000_000_000;

/// The most requests one call decides. Bounds the time one script holds
/// Redis's thread (a few microseconds per request) and the reply's size;
/// more waiting requests go in the next call.
pub const MAX_BATCH: usize = 64;

const MINUTE: Duration = Duration::from_secs(60);
const DAY: Duration = Duration::from_secs(86_400);

/// Whose buckets one request charges: a key's (its entry) or, without a
/// valid key, the client address's.
#[derive(Clone, Debug)]
pub enum Charge {
    /// A valid key.
    Key(Arc<KeyEntry>),
    /// No valid key: the client's address.
    Anonymous(IpAddr),
}

/// What one script call needs besides its state's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// The minute window's limit.
    pub per_minute: u32,
    /// The day window's limit; `None` for an anonymous client.
    pub per_day: Option<u32>,
    /// The ban policy; `None` for an anonymous client (never banned).
    pub ban: Option<BanPolicy>,
}

impl Params {
    /// A key's.
    pub fn key(quota: Quota, ban: BanPolicy) -> Params {
        Params {
            per_minute: quota.per_minute().get(),
            per_day: Some(quota.per_day().get()),
            ban: Some(ban),
        }
    }

    /// A client address's, `per_minute` requests a minute.
    pub fn anonymous(per_minute: u32) -> Params {
        Params {
            per_minute,
            per_day: None,
            ban: None,
        }
    }

    /// The script's `ARGV[2..]` (after the time). A ban's window and
    /// length are capped at [`MAX_BAN_MS`], so that the script's sums of
    /// times stay exact.
    pub fn args(&self) -> [u64; 5] {
        let ms =
            |d: Duration| u64::try_from(d.as_millis()).map_or(MAX_BAN_MS, |ms| ms.min(MAX_BAN_MS));
        let (strikes, window, ban) = match self.ban {
            Some(ban) => (
                u64::from(ban.strikes().get()),
                ms(ban.window()),
                ms(ban.duration()),
            ),
            None => (0, 0, 0),
        };
        [
            u64::from(self.per_minute),
            u64::from(self.per_day.unwrap_or(0)),
            strikes,
            window,
            ban,
        ]
    }
}

/// The Redis name of a key's state.
pub fn key_name(id: &StateId) -> String {
    format!(
        "{{{}}}:{}",
        crate::keys::hex(&id.digest),
        StateId::quota_fingerprint(id.quota)
    )
}

/// The Redis name of a client address's state: IPv4 (an IPv4-mapped IPv6
/// address counts as its IPv4), or the IPv6 /64. Written from the core's
/// [`client_key`], so that Redis groups addresses exactly as the
/// in-process anonymous limiter does.
pub fn anonymous_name(ip: IpAddr, per_minute: u32) -> String {
    let key = client_key(ip);
    let client = match u32::try_from(key) {
        Ok(v4) => Ipv4Addr::from(v4).to_string(),
        Err(_) => {
            // The /64 in the key's upper half.
            let s = Ipv6Addr::from(key).segments();
            format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
        }
    };
    format!("{{anon:{client}}}:m{per_minute}")
}

/// The script's reply as the core's [`Decision`]; `None` for a reply that
/// is not the script's (12 integers, none negative).
pub fn decode(reply: &[i64], params: &Params) -> Option<Decision> {
    let r: [i64; 12] = reply.try_into().ok()?;
    if r.iter().any(|n| *n < 0) {
        return None;
    }
    let n = |i: usize| r[i] as u128;
    let ns =
        |ms: u128| Timestamp::from_unix_nanos(u64::try_from(ms * 1_000_000).unwrap_or(u64::MAX));
    let at = ns(n(1));
    // A TAT of ms + frac/cap is full again at its nanosecond, rounded up
    // (the core's `Bucket::full_at`); a wait of w/cap ms likewise.
    let full = |ms: u128, frac: u128, cap: u32| {
        let extra = (frac * 1_000_000).div_ceil(u128::from(cap));
        Timestamp::from_unix_nanos(u64::try_from(ms * 1_000_000 + extra).unwrap_or(u64::MAX))
    };
    let wait = |w: u128, cap: u32| {
        Duration::from_nanos(
            u64::try_from((w * 1_000_000).div_ceil(u128::from(cap))).unwrap_or(u64::MAX),
        )
    };
    let day_cap = params.per_day.unwrap_or(1);
    let outcome = match r[0] {
        0 => Outcome::Allowed,
        1 => Outcome::Limited {
            retry_after: wait(n(6), params.per_minute).max(match params.per_day {
                Some(cap) => wait(n(10), cap),
                None => Duration::ZERO,
            }),
        },
        2 => Outcome::Banned {
            retry_after: ns(n(11)).saturating_duration_since(at),
        },
        _ => return None,
    };
    // A request that took nothing reports the buckets as they stand, at
    // the earliest now; while banned, full at the earliest when it ends.
    let floor = match outcome {
        Outcome::Allowed => Timestamp::from_unix_nanos(0),
        Outcome::Limited { .. } => at,
        Outcome::Banned { retry_after } => at + retry_after,
    };
    let window = |name, cap: u32, period, base: usize| WindowState {
        name,
        limit: cap,
        remaining: u32::try_from(r[base]).unwrap_or(u32::MAX),
        period,
        reset_at: full(n(base + 1), n(base + 2), cap).max(floor),
    };
    Some(Decision {
        outcome,
        at,
        minute: window("minute", params.per_minute, MINUTE, 3),
        day: params.per_day.map(|_| window("day", day_cap, DAY, 7)),
        ban_started: r[2] == 1,
    })
}

/// A reply of the script for `count` requests, 12 integers each, as
/// their decisions in order; `None` for a reply that is not the script's.
pub fn decode_batch(reply: &[i64], params: &Params, count: usize) -> Option<Vec<Decision>> {
    if reply.len() != count * 12 {
        return None;
    }
    reply
        .chunks_exact(12)
        .map(|one| decode(one, params))
        .collect()
}

/// The decision of this process's own limiter for `charge`: the
/// fallback, at the full plan.
pub fn decide_here(state: &AppState, charge: &Charge) -> Decision {
    let now = state.clock.now();
    match charge {
        Charge::Key(entry) => entry.limiter.check(now),
        Charge::Anonymous(ip) => state.keys().anonymous.check(*ip, now),
    }
}

/// Redis latency and fallbacks, for `/metrics`.
#[derive(Debug)]
pub struct Stats {
    fallbacks: AtomicU64,
    /// Requests Redis decided (over the calls: the mean batch).
    decisions: AtomicU64,
    /// Each call that got the script's reply.
    latency: Histogram,
}

impl Default for Stats {
    fn default() -> Stats {
        Stats {
            fallbacks: AtomicU64::new(0),
            decisions: AtomicU64::new(0),
            latency: Histogram::seconds(&LATENCY_BOUNDS),
        }
    }
}

/// Upper bounds (seconds) of the Redis latency histogram; `+Inf` follows.
pub static LATENCY_BOUNDS: [f64; 7] = [0.000_25, 0.000_5, 0.001, 0.002, 0.005, 0.01, 0.025];

impl Stats {
    /// Requests decided by the in-process limiter because Redis failed or
    /// the breaker was open.
    pub fn fallbacks(&self) -> u64 {
        self.fallbacks.load(Ordering::Relaxed)
    }

    /// Requests whose limit Redis decided.
    pub fn decisions(&self) -> u64 {
        self.decisions.load(Ordering::Relaxed)
    }

    /// The latency histogram, one observation per call.
    pub fn latency(&self) -> &Histogram {
        &self.latency
    }
}

/// The shared limiter: a connection to Redis, the script, the breaker and
/// the requests waiting for their state's call.
#[derive(Clone)]
pub struct RedisLimits {
    connection: ConnectionManager,
    script: Arc<::redis::Script>,
    inner: Arc<Inner>,
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
    /// The instant (ms since `origin`) until which requests skip Redis.
    open_until_ms: AtomicU64,
    /// Whether the last call failed (the mode logged last).
    alone: AtomicBool,
    origin: Instant,
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
    pub fn new(url: &str) -> Result<RedisLimits, String> {
        let client = ::redis::Client::open(url).map_err(|e| format!("--redis: {e}"))?;
        let config = ::redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(TIMEOUT))
            .set_response_timeout(Some(TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(BREAKER);
        let connection = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|e| format!("--redis: {e}"))?;
        Ok(RedisLimits {
            connection,
            script: Arc::new(::redis::Script::new(SCRIPT)),
            inner: Arc::new(Inner {
                open_until_ms: AtomicU64::new(0),
                alone: AtomicBool::new(false),
                origin: Instant::now(),
                stats: Arc::new(Stats::default()),
                waiting: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// Latency and fallback counts.
    pub fn stats(&self) -> Arc<Stats> {
        self.inner.stats.clone()
    }

    /// Decides one request of `charge` in Redis, or in this replica's own
    /// limiter when Redis does not answer within [`TIMEOUT`] (or the
    /// breaker is open). Never fails.
    pub async fn decide(&self, state: &AppState, charge: &Charge) -> Decision {
        let decided = if self.breaker_open() {
            None
        } else {
            let (name, params) = match charge {
                Charge::Key(entry) => (
                    entry.redis_name(),
                    Params::key(entry.limiter.quota(), entry.limiter.ban_policy()),
                ),
                Charge::Anonymous(ip) => {
                    let per_minute = state.keys().anonymous.per_minute();
                    (
                        Arc::from(anonymous_name(*ip, per_minute)),
                        Params::anonymous(per_minute),
                    )
                }
            };
            self.batched(name, params).await
        };
        match decided {
            Some(decision) => decision,
            None => {
                self.inner.stats.fallbacks.fetch_add(1, Ordering::Relaxed);
                decide_here(state, charge)
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
            let decided = if self.may_try() {
                self.call(&key.0, &params, batch.len()).await
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

    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.inner.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Whether the breaker is open and not yet due for a probe: the
    /// request is decided here without queueing.
    fn breaker_open(&self) -> bool {
        let open_until = self.inner.open_until_ms.load(Ordering::Relaxed);
        open_until != 0 && self.elapsed_ms() < open_until
    }

    /// Whether this call may go to Redis: the breaker is closed, or this
    /// is the one call that probes once it has been open for [`BREAKER`]
    /// (it pushes the next probe a breaker's length away).
    fn may_try(&self) -> bool {
        let open_until = self.inner.open_until_ms.load(Ordering::Relaxed);
        if open_until == 0 {
            return true;
        }
        let now = self.elapsed_ms();
        now >= open_until
            && self
                .inner
                .open_until_ms
                .compare_exchange(
                    open_until,
                    now + BREAKER.as_millis() as u64,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    fn failed(&self, why: &str) {
        let until = self.elapsed_ms() + BREAKER.as_millis() as u64;
        self.inner
            .open_until_ms
            .store(until.max(1), Ordering::Relaxed);
        if !self.inner.alone.swap(true, Ordering::Relaxed) {
            log_error!(
                "Redis: {why}; each replica limits alone at the full plan until Redis answers (probing every {} s)",
                BREAKER.as_secs()
            );
        }
    }

    /// One script call deciding `count` requests of `name`; `None` (the
    /// failure logged and the breaker opened) when Redis did not answer
    /// with the script's reply within [`TIMEOUT`].
    async fn call(&self, name: &str, params: &Params, count: usize) -> Option<Vec<Decision>> {
        let started = Instant::now();
        let mut connection = self.connection.clone();
        let mut invocation = self.script.prepare_invoke();
        invocation
            .key(name)
            .arg("")
            .arg(&params.args()[..])
            .arg(count);
        let reply: Result<Vec<i64>, String> =
            match tokio::time::timeout(TIMEOUT, invocation.invoke_async(&mut connection)).await {
                Err(_) => Err(format!("no answer within {} ms", TIMEOUT.as_millis())),
                Ok(Err(e)) => Err(e.to_string()),
                Ok(Ok(reply)) => Ok(reply),
            };
        let decided = reply.and_then(|reply| {
            decode_batch(&reply, params, count)
                .ok_or_else(|| format!("unexpected script reply {reply:?}"))
        });
        match decided {
            Ok(decisions) => {
                self.inner.stats.latency.observe(started.elapsed());
                self.inner
                    .stats
                    .decisions
                    .fetch_add(count as u64, Ordering::Relaxed);
                if self.inner.alone.swap(false, Ordering::Relaxed) {
                    // The probe got through: close the breaker.
                    self.inner.open_until_ms.store(0, Ordering::Relaxed);
                    log_info!("Redis answers again: one rate limit across replicas");
                }
                Some(decisions)
            }
            Err(e) => {
                self.failed(&e);
                None
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_never_hold_the_key_and_group_ipv6_by_64() {
        let id = StateId {
            digest: [0xab; 32],
            quota: Quota::new(60, 1_000).unwrap(),
        };
        assert_eq!(key_name(&id), format!("{{{}}}:m60/d1000", "ab".repeat(32)));
        let v6: IpAddr = "2001:db8:1:2:3:4:5:6".parse().unwrap();
        assert_eq!(anonymous_name(v6, 60), "{anon:2001:db8:1:2::/64}:m60");
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().unwrap();
        assert_eq!(anonymous_name(mapped, 7), "{anon:192.0.2.1}:m7");
    }

    #[test]
    fn a_reply_that_is_not_the_scripts_is_refused() {
        let p = Params::anonymous(60);
        assert!(decode(&[0; 11], &p).is_none());
        assert!(decode(&[-1; 12], &p).is_none());
        assert!(decode(&[3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], &p).is_none());
        assert!(decode(&[0, 1, 0, 59, 1, 0, 0, 0, 0, 0, 0, 0], &p).is_some());
        let two = [
            [0, 1, 0, 59, 1, 0, 0, 0, 0, 0, 0, 0],
            [0, 1, 0, 58, 2, 0, 0, 0, 0, 0, 0, 0],
        ];
        let batch = decode_batch(two.as_flattened(), &p, 2).unwrap();
        assert_eq!(batch.len(), 2);
        assert_eq!(batch[1].minute.remaining, 58);
        // A batch's reply must hold exactly its requests.
        assert!(decode_batch(two.as_flattened(), &p, 1).is_none());
        assert!(decode_batch(two.as_flattened(), &p, 3).is_none());
        assert!(decode_batch(&two.as_flattened()[..23], &p, 2).is_none());
    }
}
