//! Rate limits and bans, in one process and shared by replicas through
//! Redis, against the real server binary and a Redis of the harness's own.
//!
//! | file | tests |
//! |---|---|
//! | `anonymous_flood.rs` | requests without a key from many addresses; the anonymous limiter's bounded memory |
//! | `limits.rs` | the headers, 429 and Retry-After, bans, anonymous limits, plan defaults |
//! | `redis_cluster.rs` | replicas sharing one limit in a Redis Cluster, a master dying, a slot moving |
//! | `redis_replicas.rs` | replicas sharing one limit in one Redis, and what a Redis failure does |
//! | `redis_script.rs` | the Redis script decides exactly as the core's limiter |
//! | `state_file.rs` | the limiter's state outlives the process; the state file never holds a key |
//!
//! One test binary for the area, so that the shared harness (`../common`)
//! is compiled once for all of it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;

mod anonymous_flood;
mod limits;
mod redis_cluster;
mod redis_replicas;
mod redis_script;
mod state_file;
