//! [`Keyed`]: a write's idempotency key with what it is judged by (its
//! [`Scope`], its request's [`Fingerprint`], the time), and [`RETENTION`].

use std::sync::Arc;
use std::time::Duration;

use super::fingerprint::Fingerprint;
use super::key::IdempotencyKey;
use crate::clock::Timestamp;

/// How long a key's answer is kept, from its first request.
pub const RETENTION: Duration = Duration::from_secs(24 * 60 * 60);

/// Most bytes in a [`Scope`]'s name: it is written into each keyed
/// journal record, whose length is bounded.
pub const MAX_SCOPE_BYTES: usize = 255;

/// Whose keys these are: two scopes may use the same key without
/// meeting. The server's scope is the name of the API key's entry (never
/// the API key itself). Cheap to clone (an `Arc`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scope(Arc<str>);

impl Scope {
    /// The scope named `name`; `None` when it is empty or longer than
    /// [`MAX_SCOPE_BYTES`] (a caller with longer names uses a digest).
    pub fn new(name: &str) -> Option<Scope> {
        (1..=MAX_SCOPE_BYTES)
            .contains(&name.len())
            .then(|| Scope(Arc::from(name)))
    }

    /// Its name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A write's idempotency key and what it is judged by.
///
/// `at` is wall-clock time (Unix time, as a [`Timestamp`]): a key is kept
/// until `at + RETENTION`, across restarts, so a monotonic clock would
/// not do. The caller reads its clock ([`Clock`](crate::Clock); a
/// [`FakeClock`](crate::FakeClock) in tests), once per request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keyed {
    /// Whose key it is.
    pub scope: Scope,
    /// The key.
    pub key: IdempotencyKey,
    /// The request it came with.
    pub fingerprint: Fingerprint,
    /// When the request came.
    pub at: Timestamp,
}

impl Keyed {
    /// When a kept answer of this request stops being kept.
    pub fn expires(&self) -> Timestamp {
        self.at + RETENTION
    }
}
