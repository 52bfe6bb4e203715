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
//!   and `PEXPIRE` cost Redis more than a `GET` and a `SET`; parsing and
//!   printing decimals was a large share of the script's time; and hundreds of
//!   reply integers cost the replica's client more to parse than the rest
//!   of the call. A state with no `:v3` form yet takes over the previous
//!   version's text at `:v2`, or the hash of the version before at the
//!   name without a suffix, so a deploy neither refills a quota nor lifts
//!   a ban (and replicas of the previous version, during a rolling
//!   deploy, go on with their form untouched).
//! - **Named alone when decided lately** (`recent.rs`): a call gives a
//!   state that this replica's calls decided within the last
//!   second only its current name, not the two of its previous forms,
//!   which Redis would take in and never read (work for nothing, on
//!   every call). A guess, never trusted: such a state missing after all
//!   (its TTL ran out) comes back unread, and goes again at once, named
//!   with its previous forms.
//! - **One clock:** the script reads Redis `TIME`, so every replica
//!   computes the same `X-RateLimit-Reset` and `Retry-After`. Times are
//!   whole milliseconds; the decision is the core's for that millisecond
//!   (tests/ratelimit/redis_script.rs compares them over 100,000 random steps).
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
//! | `mod.rs` | these notes; what the wiring and the tests see |
//! | `limits.rs` | [`RedisLimits`]: its setup, and a request's way in ([`RedisLimits::decide`]) |
//! | `eviction.rs` | the check at start that Redis never evicts a state |
//! | `queue.rs` | the requests waiting for their shard's next call |
//! | `part.rs` | a call's parts: the waiting requests grouped by state, with the bans that ride along |
//! | `flusher.rs` | the flusher: rounds of calls, their replies sent to the waiters |
//! | `call.rs` | one script call, built straight into one command |
//! | `carry.rs` | carry-over: reading a cluster state's previous form (`carry.lua`) |
//! | `failure.rs` | why a call got no decision, and what is logged |
//! | `link.rs` | the connection: one Redis or a Redis Cluster |
//! | `breaker.rs` | the circuit breaker of each shard |
//! | `script.rs` | `limit.lua`, its arguments, the states' names, its reply decoded |
//! | `groups.rs` | the hash-tag groups of a cluster's states |
//! | `recent.rs` | the states decided lately, named alone in a call |
//! | `anonymous.rs` | a client address's state name, made once per thread |
//! | `metrics.rs` | its latency, decisions, fallbacks and open breakers in `/metrics` |

mod anonymous;
mod breaker;
mod call;
mod carry;
mod eviction;
mod failure;
mod flusher;
mod groups;
mod limits;
mod link;
mod metrics;
mod part;
mod queue;
mod recent;
mod script;

pub use breaker::BREAKER;
pub use groups::{cluster_name, GROUPS};
pub use limits::RedisLimits;
pub use link::TIMEOUT;
pub use metrics::{RedisStats, LATENCY_BOUNDS};
pub use script::{
    anonymous_name, current_name, decode_call, state_arg, text_name, Params, Previous, Requests,
    StateArg, StateReply, CARRY, MAX_BAN_MS, MAX_CALL, SCRIPT,
};
