//! The Redis backend: one rate limit across replicas (`--redis URL`, or a
//! Redis Cluster with `--redis-cluster`). One script ([`SCRIPT`],
//! `limit.lua`) decides and charges atomically, on Redis's clock; a
//! replica keeps one call in flight per shard, and the requests that wait
//! meanwhile go together in the next (at most [`MAX_CALL`], grouped by
//! state); each state is one binary string. A call that fails or passes
//! its [`TIMEOUT`] leaves the request to the replica's own limiter at the
//! full plan, and the shard's breaker skips Redis for [`BREAKER`]. In a
//! cluster the states share [`GROUPS`] hash tags, so that a call carries
//! many states of one slot.
//!
//! Each of these and why, the states' names and forms, upgrades, bans
//! across an outage: docs/replicas.md, "One rate limit across replicas
//! (Redis)" and "Redis Cluster (`--redis-cluster`)".
//!
//! | file | holds |
//! |---|---|
//! | `mod.rs` | what the wiring and the tests see |
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
