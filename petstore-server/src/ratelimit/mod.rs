//! Where the limiter's state lives, behind one seam: [`RateLimits`].
//!
//! The rules (two buckets per key, strikes, bans, per-address buckets)
//! are the core's (`KeyLimiter`, `AnonymousLimiter`). What this room adds
//! is the state outliving the process (docs/contract.md, "Rate limits"):
//! a restart or a deploy neither refills a day quota nor lifts a ban.
//!
//! Every backend holds the same state under the same name (a
//! [`StateId`](crate::keys::StateId)): in the process, written to
//! `DIR/limits.state` ([`RateLimits::Local`], [`snapshot_file`]), or in
//! Redis for replicas ([`RateLimits::Redis`]). A request gets
//! [`Charged::Now`] or [`Charged::Later`], and the contract never knows
//! which backend decided. The seam in full: docs/architecture.md, "The
//! walk", step 5.
//!
//! | file | holds |
//! |---|---|
//! | `mod.rs` | the seam: [`RateLimits`], [`Charged`], [`Later`] |
//! | `charge.rs` | [`Charge`]: whose buckets a request charges, and the in-process decision |
//! | `snapshot.rs` | [`Snapshot`]: the in-process state at one instant, as plain numbers |
//! | `snapshot_take_restore.rs` | [`snapshot()`] takes one from the key table, [`restore`] gives it back |
//! | `snapshot_file.rs` | `DIR/limits.state` and its writer thread |
//! | `in_redis/` | the Redis backend, its script `limit.lua`, its metrics |
//!
//! May use: `util`, `telemetry`, `keys/mod.rs`.
//! From outside only this file is visible (and `snapshot_file` and
//! `in_redis` to the start-up wiring).

mod charge;
pub mod in_redis;
mod snapshot;
pub mod snapshot_file;
mod snapshot_take_restore;

use std::net::IpAddr;
use std::sync::Arc;

use petstore_core::{limit::AnonymousLimiter, Decision, Timestamp};
use prometheus_client::collector::Collector;

pub use charge::Charge;
pub use snapshot::Snapshot;
pub use snapshot_take_restore::{restore, snapshot, Restored};

use crate::keys::KeyEntry;
use in_redis::RedisLimits;

/// Where the rate limits are decided. An enum, not a trait object: static
/// dispatch, no `dyn` on the request path.
#[derive(Clone, Debug)]
pub enum RateLimits {
    /// In this process, by each key's own limiter.
    Local,
    /// In Redis, shared with the other replicas (`--redis`).
    Redis(RedisLimits),
}

/// A request's rate limit: decided at once, or to be awaited.
#[derive(Debug)]
pub enum Charged {
    /// Decided in process, right there, synchronously: no allocation,
    /// lock or await beyond the core's own.
    Now(Decision),
    /// Decided elsewhere: await [`Later::decide`].
    Later(Later),
}

/// A decision to await, and whose buckets it charges.
#[derive(Debug)]
pub struct Later {
    limits: RedisLimits,
    charge: Charge,
}

impl Later {
    /// The decision. Never fails: a backend that does not answer in time
    /// falls back to this process's own limiter, at the full plan.
    pub async fn decide(&self) -> Decision {
        self.limits.decide(&self.charge).await
    }

    /// The decision of this process's own limiter at `now` (for a caller
    /// that cannot wait).
    pub fn decide_here(&self, now: Timestamp) -> Decision {
        self.charge.decide_here(now)
    }
}

impl RateLimits {
    /// Charges one request of the key of `entry` at `now`.
    #[inline]
    pub fn charge_key(&self, entry: &Arc<KeyEntry>, now: Timestamp) -> Charged {
        match self {
            RateLimits::Local => Charged::Now(entry.limiter.check(now)),
            RateLimits::Redis(limits) => Charged::Later(Later {
                limits: limits.clone(),
                charge: Charge::Key(entry.clone()),
            }),
        }
    }

    /// Charges one request without a valid key, from `ip`, in the
    /// per-address limiter `anonymous`, at `now`.
    #[inline]
    pub fn charge_anonymous(
        &self,
        anonymous: &Arc<AnonymousLimiter>,
        ip: IpAddr,
        now: Timestamp,
    ) -> Charged {
        match self {
            RateLimits::Local => Charged::Now(anonymous.check(ip, now)),
            RateLimits::Redis(limits) => Charged::Later(Later {
                limits: limits.clone(),
                charge: Charge::Anonymous(ip, anonymous.clone()),
            }),
        }
    }

    /// The collector of the backend's own metrics, if it has any.
    pub fn collector(&self) -> Option<Box<dyn Collector>> {
        match self {
            RateLimits::Local => None,
            RateLimits::Redis(limits) => Some(limits.collector()),
        }
    }
}
