//! What a keyed write is while it waits and what it comes to, apart from
//! the write path (`idempotency.rs`) so that [`Postgres`](super::Postgres)
//! can hold its committers and its keys in flight: a keyed create queued
//! for its committer ([`KeyedCreate`]; a keyed step rides with the steps,
//! `step.rs`), won or lost ([`Claimed`]), the kept row a loser
//! answers with ([`KeptRow`]), a key to look up ([`Lookup`]), and the
//! keys this replica is writing ([`InFlight`]).

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::Mutex;
use petstore_core::{
    idempotency::{Answer, Fingerprint, Keyed, KeyedOutcome},
    NewPet, Pet,
};

use crate::store::committer::Item;
use crate::store::failed::CreateFailed;

/// A kept row: its first request's fingerprint and its answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct KeptRow {
    pub(super) fingerprint: Fingerprint,
    pub(super) answer: Answer,
}

impl KeptRow {
    /// What a request with `fingerprint` makes of this row: the same
    /// request's replay, or another request's reuse of the key.
    pub(super) fn outcome(self, fingerprint: &Fingerprint) -> KeyedOutcome {
        if self.fingerprint == *fingerprint {
            KeyedOutcome::Replay(self.answer)
        } else {
            KeyedOutcome::Reused
        }
    }
}

/// What became of one keyed write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Claimed<T> {
    /// It claimed the key and was made: its answer (kept).
    Won(T),
    /// Another request holds the key: that request's kept row.
    Lost(KeptRow),
    /// Another request holds the key, with an answer this write's query
    /// does not read (an order's): the caller looks the key up.
    Unread,
}

/// A key waiting for the lookups' committer, which reads a batch of
/// keys in one query: what is kept for it, if anything.
#[derive(Debug)]
pub(super) struct Lookup(pub(super) Keyed);

impl Item for Lookup {
    type Done = Option<KeptRow>;
    type Failed = CreateFailed;
    const NOT_STORED: CreateFailed = CreateFailed;
}

/// A keyed create waiting for its committer.
#[derive(Debug)]
pub(super) struct KeyedCreate {
    pub(super) new: NewPet,
    pub(super) keyed: Keyed,
}

impl Item for KeyedCreate {
    type Done = Result<Claimed<Pet>, CreateFailed>;
    type Failed = CreateFailed;
    const NOT_STORED: CreateFailed = CreateFailed;
}

/// The keys this replica is writing now, `(scope, key)`.
#[derive(Debug, Default)]
pub(super) struct InFlight(Mutex<HashSet<(Arc<str>, Arc<str>)>>);

/// A key held in [`InFlight`] until dropped.
#[derive(Debug)]
pub(super) struct Held<'a> {
    set: &'a InFlight,
    id: (Arc<str>, Arc<str>),
}

impl InFlight {
    /// Holds `keyed`'s key, or `None` when this replica already does.
    pub(super) fn hold(&self, keyed: &Keyed) -> Option<Held<'_>> {
        let id = (
            Arc::from(keyed.scope.as_str()),
            Arc::from(keyed.key.as_str()),
        );
        // The lock is let go before a `Held` exists: dropping one takes it.
        let inserted = self.0.lock().insert(id.clone());
        inserted.then(|| Held { set: self, id })
    }

    /// Whether this replica is writing `keyed`'s key now.
    pub(super) fn holds(&self, keyed: &Keyed) -> bool {
        let id: (Arc<str>, Arc<str>) = (
            Arc::from(keyed.scope.as_str()),
            Arc::from(keyed.key.as_str()),
        );
        self.0.lock().contains(&id)
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.set.0.lock().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use petstore_core::{
        idempotency::{IdempotencyKey, Scope},
        CategoryId, PetId, Timestamp,
    };

    fn keyed(scope: &str, key: &str) -> Keyed {
        Keyed {
            scope: Scope::new(scope).unwrap(),
            key: IdempotencyKey::new(key).unwrap(),
            fingerprint: Fingerprint::from_bytes([1; 32]),
            at: Timestamp::from_unix_secs(1_800_000_000),
        }
    }

    #[test]
    fn a_key_is_held_once_until_its_holder_is_dropped() {
        let inflight = InFlight::default();
        let a = keyed("main", "k");
        let held = inflight.hold(&a).unwrap();
        // A second hold of the same key is refused, and leaves the first
        // in place (it must not let go of the holder's key).
        assert!(inflight.hold(&a).is_none());
        assert!(inflight.holds(&a));
        // Another scope's or another key's: their own.
        let other_scope = inflight.hold(&keyed("free", "k")).unwrap();
        let other_key = inflight.hold(&keyed("main", "k2")).unwrap();
        drop(held);
        assert!(!inflight.holds(&a));
        assert!(inflight.hold(&a).is_some());
        drop((other_scope, other_key));
        assert!(inflight.0.lock().is_empty());
    }

    #[test]
    fn a_kept_answer_is_replayed_only_for_the_same_request() {
        let pet = NewPet::new("Rex", CategoryId::MIN)
            .unwrap()
            .into_pet(PetId::MIN);
        let row = KeptRow {
            fingerprint: Fingerprint::from_bytes([1; 32]),
            answer: Answer::Created(pet.clone()),
        };
        assert_eq!(
            row.clone().outcome(&Fingerprint::from_bytes([1; 32])),
            KeyedOutcome::Replay(Answer::Created(pet))
        );
        assert_eq!(
            row.outcome(&Fingerprint::from_bytes([2; 32])),
            KeyedOutcome::Reused
        );
    }
}
