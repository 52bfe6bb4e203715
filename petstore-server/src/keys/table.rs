//! The key table in force: [`Keys`] maps the SHA-256 of a presented key
//! to its [`KeyEntry`] (name, plan, limiter, header templates).

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Arc;

use petstore_core::{limit::AnonymousLimiter, BanPolicy, KeyLimiter, Plan, Quota, Timestamp};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::scope::Scopes;
use super::state_id::StateId;
use crate::headers::QuotaHeaders;
use crate::util::intern::intern;

/// Anonymous clients remembered at most by default (see
/// `AnonymousLimiter`): about 5 MB, and far more than the addresses one
/// server sees in a minute. `--anonymous-capacity` changes it.
pub const ANONYMOUS_CAPACITY: usize = 100_000;

/// Requests a minute per client address without a valid key, unless the
/// keys file says otherwise (`anonymousPerMinute`).
pub const ANONYMOUS_PER_MINUTE: u32 = 60;

/// What a key may do, and until when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// The scopes its requests may use.
    pub scopes: Scopes,
    /// From when its key is refused (`expiresAt`); `None`: never.
    pub expires_at: Option<Timestamp>,
}

impl Access {
    /// Every scope, no expiry: an entry that says neither.
    pub const UNLIMITED: Access = Access {
        scopes: Scopes::ALL,
        expires_at: None,
    };

    /// Whether the key is refused at `now`.
    pub fn expired(&self, now: Timestamp) -> bool {
        self.expires_at.is_some_and(|at| now >= at)
    }
}

/// One key's entry: who it is, its plan, and its limiter.
#[derive(Debug)]
pub struct KeyEntry {
    /// The entry's name (logged instead of the key), interned.
    pub name: &'static str,
    /// The plan.
    pub plan: Plan,
    /// The key's buckets; shared with the next table on reload when the
    /// entry is unchanged, so a reload does not refill them.
    pub limiter: Arc<KeyLimiter>,
    /// Its quota's rate-limit header values.
    pub quota_headers: QuotaHeaders,
    /// Its scopes and expiry.
    pub access: Access,
    /// The SHA-256 of the key (the first of its secrets, while it is
    /// rotated): how the key is named anywhere outside the process (the
    /// limiter state), never the key itself.
    pub(super) digest: [u8; 32],
    /// The external name of its limiter state
    /// ([`StateId::external_name`]), made once here rather than per
    /// request.
    state_name: Arc<str>,
}

impl KeyEntry {
    pub(super) fn new(
        name: &str,
        plan: Plan,
        limiter: Arc<KeyLimiter>,
        quota_headers: QuotaHeaders,
        digest: [u8; 32],
    ) -> KeyEntry {
        let id = StateId {
            digest,
            quota: limiter.quota(),
        };
        KeyEntry {
            name: intern(name),
            plan,
            limiter,
            quota_headers,
            access: Access::UNLIMITED,
            digest,
            state_name: Arc::from(id.external_name()),
        }
    }

    /// The entry with these scopes and expiry.
    pub(super) fn with_access(mut self, access: Access) -> KeyEntry {
        self.access = access;
        self
    }

    /// The name of the key's limiter state outside the process: its
    /// SHA-256 and the quota its limiter counts under.
    pub fn state_id(&self) -> StateId {
        StateId {
            digest: self.digest,
            quota: self.limiter.quota(),
        }
    }

    /// The external name of the key's limiter state
    /// ([`StateId::external_name`]).
    pub fn state_name(&self) -> Arc<str> {
        self.state_name.clone()
    }
}

/// The key table in force, and the limits of requests without a key.
#[derive(Debug)]
pub struct Keys {
    // Entries are shared so that a connection can remember the entry of
    // the key it presented (`http/connection.rs`) across requests.
    pub(super) by_digest: HashMap<[u8; 32], Arc<KeyEntry>>,
    /// Limits of requests without a valid key, per client address.
    pub anonymous: Arc<AnonymousLimiter>,
    /// The quota's rate-limit header values of requests without a valid
    /// key.
    pub anonymous_headers: QuotaHeaders,
}

/// The policy header of a limiter, from a decision it made at time zero
/// on a throwaway copy (the numbers depend only on the quota).
pub(super) fn key_headers(quota: Quota, ban: BanPolicy) -> QuotaHeaders {
    QuotaHeaders::of(&KeyLimiter::new(quota, ban).check(Timestamp::default()))
}

pub(super) fn anonymous_headers(limiter: &AnonymousLimiter) -> QuotaHeaders {
    let probe = AnonymousLimiter::new(
        NonZeroU32::new(limiter.per_minute()).unwrap_or(NonZeroU32::MIN),
        2,
    );
    QuotaHeaders::of(&probe.check(std::net::IpAddr::from([0, 0, 0, 0]), Timestamp::default()))
}

/// SHA-256 of a presented key.
pub fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

impl Keys {
    /// A table with one key (the development key of a server started
    /// without a keys file).
    pub fn single(name: &str, key: &str, quota: Quota) -> Keys {
        let entry = KeyEntry::new(
            name,
            Plan::Pro,
            Arc::new(KeyLimiter::new(quota, BanPolicy::default())),
            key_headers(quota, BanPolicy::default()),
            digest(key),
        );
        let anonymous = AnonymousLimiter::new(
            NonZeroU32::new(ANONYMOUS_PER_MINUTE).unwrap_or(NonZeroU32::MIN),
            ANONYMOUS_CAPACITY,
        );
        Keys {
            by_digest: HashMap::from([(entry.digest, Arc::new(entry))]),
            anonymous_headers: anonymous_headers(&anonymous),
            anonymous: Arc::new(anonymous),
        }
    }

    /// The same table with an anonymous limiter remembering at most
    /// `capacity` client addresses (at start, before any request; reloads
    /// keep it).
    pub fn with_anonymous_capacity(mut self, capacity: usize) -> Keys {
        let per_minute = NonZeroU32::new(self.anonymous.per_minute()).unwrap_or(NonZeroU32::MIN);
        self.anonymous = Arc::new(AnonymousLimiter::new(per_minute, capacity));
        self
    }

    /// The entry of a presented key.
    pub fn lookup(&self, key: &str) -> Option<&Arc<KeyEntry>> {
        let presented = digest(key);
        // Compared with the secret it is filed under (an entry rotating
        // its key is filed under both of its secrets).
        self.by_digest
            .get_key_value(&presented)
            .filter(|(secret, _)| bool::from(secret.ct_eq(&presented)))
            .map(|(_, entry)| entry)
    }

    /// Every entry once (an entry rotating its key is found by two
    /// secrets), in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = &Arc<KeyEntry>> {
        self.by_digest
            .iter()
            .filter(|(secret, entry)| **secret == entry.digest)
            .map(|(_, entry)| entry)
    }

    /// How many entries are in force.
    pub fn len(&self) -> usize {
        self.entries().count()
    }

    /// Whether no key is in force.
    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty()
    }
}
