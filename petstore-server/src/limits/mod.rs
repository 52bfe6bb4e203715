//! Where the limiter's state lives beyond one process, behind one seam.
//!
//! The rules (two buckets per key, strikes, bans, per-address buckets)
//! are the core's (`KeyLimiter`, `AnonymousLimiter`). What this module
//! adds is the state outliving the process (decisions.md, "Rate limits"):
//! a restart or a deploy neither refills a day quota nor lifts a ban.
//!
//! # The seam
//!
//! Every backend holds the same state, named the same way:
//! - **What:** the core's plain-data state, [`KeyLimiterState`] per key
//!   (each bucket's theoretical arrival time as an integer, strikes, the
//!   end of a ban, all in absolute Unix time) and [`AnonymousState`] per
//!   client address. These are the numbers a Redis script would hold.
//! - **Under which name:** a [`StateId`], the key's SHA-256 plus a
//!   fingerprint of its quota. Never the raw key; and a changed quota
//!   names another state, so it starts fresh, while an unchanged one
//!   keeps its state across an edit of the keys file or a restart.
//! - **When:** a backend decides each request on the state as it stands.
//!
//! The backends:
//! - [`local`]: the state in the process, in each key's `KeyLimiter`
//!   (the request path is the core's `check`, under one short lock; no
//!   lookup beyond the key's entry the connection remembers), made
//!   durable by [`state_file`]: a background thread writes a [`Snapshot`]
//!   to `DIR/limits.state` at least every second when it changed, and at
//!   shutdown; the server restores it at start.
//! - [`redis`] (`--redis URL`, for replicas): the same [`StateId`]s as
//!   Redis keys and the same numbers in a script that decides and charges
//!   in one round trip, with the local backend as its fallback.
//!
//! How a request meets the seam: `routes.rs` asks for a [`Decision`]
//! through [`crate::routes::admit`]. In-process, the decision is made
//! right there, synchronously (no allocation, lock or await more than
//! the core's own). With Redis, `admit` answers
//! [`crate::routes::Admission::Charge`] instead: `server.rs` awaits
//! [`redis::RedisLimits::decide`] and hands the decision back
//! ([`crate::routes::admit_decided`]). Either way the headers are made
//! from the same `Decision`, and `routes.rs` does not know which backend
//! gave it.
//!
//! [`Decision`]: petstore_core::Decision

pub mod local;
pub mod redis;
pub mod state_file;

use std::fmt;

use petstore_core::{AnonymousState, KeyLimiterState, Quota};

/// The name of one key's limiter state outside the process: the key's
/// SHA-256 and its quota. Displayed as `SHA256HEX/m60/d1000`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StateId {
    /// SHA-256 of the key.
    pub digest: [u8; 32],
    /// The quota the state was counted under.
    pub quota: Quota,
}

impl StateId {
    /// The quota's fingerprint, e.g. `m60/d1000`: equal for equal quotas
    /// only.
    pub fn quota_fingerprint(quota: Quota) -> String {
        format!("m{}/d{}", quota.per_minute(), quota.per_day())
    }
}

impl fmt::Display for StateId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}",
            crate::keys::hex(&self.digest),
            StateId::quota_fingerprint(self.quota)
        )
    }
}

/// All the limiter state of a server at one instant: the keys whose state
/// differs from a new limiter's, and the client addresses whose bucket is
/// not full.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Per key.
    pub keys: Vec<(StateId, KeyLimiterState)>,
    /// Per client address.
    pub anonymous: AnonymousState,
}
