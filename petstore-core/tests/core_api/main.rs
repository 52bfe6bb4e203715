//! The core's integration tests: its public API, from outside the crate,
//! in one test binary (one link instead of one per file).
//!
//! | module | tests |
//! |---|---|
//! | `events` | the feed of events (beta): every change in commit order, the same after a reopen, retention, a follower and a lister racing writers |
//! | `compaction` | snapshots: a compacted journal opens the same, a start replays only what follows the snapshot, a flipped byte or a missing segment is found and refused, check and repair across snapshot and segments |
//! | `concurrency` | threads creating and listing at once, in memory and durable |
//! | `idempotency` | keyed creates and transitions: kept answers across a reopen, expiry at replay, claims in flight, one pet from a race of one key |
//! | `journal` | the durable inventory's outcomes: recovery, corruption, check and repair, one writer |
//! | `journal_bounds` | lines longer than any record: bounded memory and disk at a start, a check, a repair |
//! | `model` | the naive list model the list tests compare with |
//! | `orders` | orders: random steps of several keys against a naive model, in memory and durable, reopen, lapses while closed, races with one winner |
//! | `read_copy` | a read copy applying pets and statuses in any order: pages, kept first pages and reads equal a model's, and readers racing the writer get well-formed pages |
//! | `limiter_props` | property tests of the rate limiter on an injected clock |
//! | `scratch` | the one helper for a test's temporary directory |
//! | `transitions` | transitions: the list model with transitions mixed in, durable and replayed in order, reopen equals before, torn, corrupt, one winner per step under races |

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod compaction;
mod concurrency;
mod events;
mod idempotency;
mod journal;
mod journal_bounds;
mod limiter_props;
mod model;
mod orders;
mod read_copy;
mod scratch;
mod transitions;
