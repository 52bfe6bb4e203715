//! The rate limiter of the API's plans: token buckets per API key (a
//! minute and a day, with bans for clients that ignore `Retry-After`) and
//! per client address for requests without a key, on an injectable clock.
//!
//! | file | holds |
//! |---|---|
//! | `clock.rs` | [`Clock`], [`SystemClock`], [`FakeClock`], [`Timestamp`] |
//! | `bucket.rs` | one GCRA token bucket and its judgement of a request (crate-private) |
//! | `quota.rs` | [`Plan`], [`Plans`], [`Quota`], [`BanPolicy`], [`UnknownPlan`] |
//! | `decision.rs` | [`Decision`], [`Outcome`], [`WindowState`]: what the headers need |
//! | `limiter.rs` | [`KeyLimiter`] (one key: minute + day + ban), [`KeyLimiterState`], [`RateLimiter`] |
//! | `anonymous.rs` | [`AnonymousLimiter`]: per-address limits with bounded memory; [`AnonymousState`], [`client_key`] |
//! | `error.rs` | [`QuotaError`] |
//!
//! May use: nothing.

mod anonymous;
mod bucket;
mod clock;
mod decision;
mod error;
mod limiter;
mod quota;

pub use anonymous::{client_key, AnonymousLimiter, AnonymousState};
pub use clock::{Clock, FakeClock, SystemClock, Timestamp};
pub use decision::{Decision, Outcome, WindowState};
pub use error::QuotaError;
pub use limiter::{KeyLimiter, KeyLimiterState, RateLimiter};
pub use quota::{BanPolicy, Plan, Plans, Quota, UnknownPlan};
