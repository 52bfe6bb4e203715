//! [`StateId`]: the name of one key's limiter state outside the process
//! (the limiter state file, a shared store), never the key itself.

use std::fmt;

use petstore_core::Quota;

use crate::util::hex::hex;

/// The name of one key's limiter state outside the process: the key's
/// SHA-256 and its quota. Displayed as `SHA256HEX/m60/d1000`. A changed
/// quota names another state, so it starts fresh, while an unchanged one
/// keeps its state across an edit of the keys file or a restart.
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

    /// The state's name in a shared store of limiter states:
    /// `{SHA256HEX}:m60/d1000`. The braces are a hash tag (a store that
    /// shards by key puts every name of one key on one shard).
    pub fn external_name(&self) -> String {
        format!(
            "{{{}}}:{}",
            hex(&self.digest),
            StateId::quota_fingerprint(self.quota)
        )
    }
}

impl fmt::Display for StateId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}",
            hex(&self.digest),
            StateId::quota_fingerprint(self.quota)
        )
    }
}
