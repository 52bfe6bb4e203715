//! [`Charge`]: whose buckets one request charges.

use std::net::IpAddr;
use std::sync::Arc;

use petstore_core::{limit::AnonymousLimiter, Decision, Timestamp};

use crate::keys::KeyEntry;

/// Whose buckets one request charges: a key's (its entry) or, without a
/// valid key, the client address's (in the anonymous limiter of the key
/// table the request met).
#[derive(Clone, Debug)]
pub enum Charge {
    /// A valid key.
    Key(Arc<KeyEntry>),
    /// No valid key: the client's address.
    Anonymous(IpAddr, Arc<AnonymousLimiter>),
}

impl Charge {
    /// The decision of this process's own limiter at `now`: the local
    /// backend's, and a shared backend's fallback at the full plan.
    pub fn decide_here(&self, now: Timestamp) -> Decision {
        match self {
            Charge::Key(entry) => entry.limiter.check(now),
            Charge::Anonymous(ip, anonymous) => anonymous.check(*ip, now),
        }
    }
}
