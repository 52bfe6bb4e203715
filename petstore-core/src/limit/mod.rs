//! The rate limiter of the API's plans: token buckets per API key (a
//! minute and a day, with bans for clients that ignore `Retry-After`) and
//! per client address for requests without a key, on an injectable clock.
//!
//! | file | holds |
//! |---|---|
//! | `bucket.rs` | one GCRA token bucket and its judgement of a request (crate-private) |
//! | `quota.rs` | [`Plan`], [`Plans`], [`Quota`], [`BanPolicy`], [`UnknownPlan`] |
//! | `decision.rs` | [`Decision`], [`Outcome`], [`WindowState`]: what the headers need |
//! | `limiter.rs` | [`KeyLimiter`] (one key: minute + day + ban), [`KeyLimiterState`], [`RateLimiter`] |
//! | `anonymous.rs` | [`AnonymousLimiter`]: per-address limits with bounded memory; [`AnonymousState`], [`client_key`] |
//! | `error.rs` | [`QuotaError`] |
//!
//! The clock it reads is a room of its own (`clock.rs`).
//!
//! May use: `clock.rs`.

mod anonymous;
mod bucket;
mod decision;
mod error;
mod limiter;
mod quota;

pub use anonymous::{client_key, AnonymousLimiter, AnonymousState};
pub use decision::{Decision, Outcome, WindowState};
pub use error::QuotaError;
pub use limiter::{KeyLimiter, KeyLimiterState, RateLimiter};
pub use quota::{BanPolicy, Plan, Plans, Quota, UnknownPlan};
