//! Taking and restoring a [`Snapshot`]: the in-process backend's state
//! lives in each key entry's `KeyLimiter` and in the table's
//! `AnonymousLimiter`; [`snapshot`] copies it out, [`restore`] puts it
//! back.
//!
//! Taking a snapshot locks each key's limiter for a copy of a few
//! numbers, and the anonymous limiter for a pass over its entries; it runs
//! on the state file's writer thread, never on a request.

use petstore_core::Timestamp;

use super::snapshot::Snapshot;
use crate::keys::{Keys, StateId};

/// What a restore found a use for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Restored {
    /// Keys that went on from their saved state.
    pub keys: usize,
    /// Saved keys left out: no longer in the keys file, or with another
    /// quota (they start fresh).
    pub dropped: usize,
    /// Client addresses that went on from their saved bucket.
    pub clients: usize,
}

/// The state of every key of `keys` that is not as a new limiter's at
/// `now`, and of the client addresses whose bucket is not full.
pub fn snapshot(keys: &Keys, now: Timestamp) -> Snapshot {
    let mut out: Vec<_> = keys
        .entries()
        .filter_map(|entry| {
            let limiter = &entry.limiter;
            let state = limiter.state();
            if state.is_fresh(limiter.quota(), limiter.ban_policy(), now) {
                return None;
            }
            Some((entry.state_id(), state))
        })
        .collect();
    // A stable order, so that an unchanged state compares equal.
    out.sort_unstable_by_key(|a| a.0.digest);
    let mut anonymous = keys.anonymous.state(now);
    anonymous.clients.sort_unstable();
    Snapshot {
        keys: out,
        anonymous,
    }
}

/// Gives each key of `keys` its state from `snapshot` when the snapshot
/// holds the same key with the same quota.
pub fn restore(keys: &Keys, snapshot: Snapshot, now: Timestamp) -> Restored {
    let mut saved: std::collections::HashMap<StateId, _> = snapshot.keys.into_iter().collect();
    let mut restored = Restored::default();
    for entry in keys.entries() {
        if let Some(state) = saved.remove(&entry.state_id()) {
            entry.limiter.replace_state(state, now);
            restored.keys += 1;
        }
    }
    restored.dropped = saved.len();
    restored.clients = keys.anonymous.restore(&snapshot.anonymous, now);
    restored
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restores_keys_with_the_same_quota_only() {
        let t = Timestamp::from_unix_secs(1_700_000_000);
        let file = r#"{"keys":[{"name":"a","key":"ka","plan":"free"},{"name":"b","key":"kb","plan":"free"}],
                       "plans":{"free":{"perMinute":5,"perDay":10}}}"#;
        let before = Keys::parse(file.as_bytes(), None).unwrap();
        for key in ["ka", "kb"] {
            for _ in 0..4 {
                before.lookup(key).unwrap().limiter.check(t);
            }
        }
        before.anonymous.check("192.0.2.1".parse().unwrap(), t);
        let saved = snapshot(&before, t);
        assert_eq!(saved.keys.len(), 2);
        assert_eq!(saved.anonymous.clients.len(), 1);

        let edited = r#"{"keys":[{"name":"a","key":"ka","plan":"free"},{"name":"b","key":"kb","plan":"pro"}],
                         "plans":{"free":{"perMinute":5,"perDay":10}}}"#;
        let after = Keys::parse(edited.as_bytes(), None).unwrap();
        let restored = restore(&after, saved, t);
        assert_eq!(
            restored,
            Restored {
                keys: 1,
                dropped: 1,
                clients: 1
            }
        );
        let day = |k: &str| after.lookup(k).unwrap().limiter.check(t).day.unwrap();
        assert_eq!(day("ka").remaining, 5);
        assert_eq!(day("kb").remaining, 9_999);
        // Nothing is written for a key at rest.
        assert!(snapshot(&Keys::parse(file.as_bytes(), None).unwrap(), t)
            .keys
            .is_empty());
    }
}
