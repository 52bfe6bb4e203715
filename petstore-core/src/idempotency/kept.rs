//! [`KeptKeys`]: the keys of one inventory, in flight or kept with their
//! answers, and their expiry; [`Claim`]: a key held by the write that
//! runs for it.
//!
//! One map from (scope, key) to its entry, and a queue of kept keys in
//! the order they were kept, popped from its front while the front has
//! expired, by every lookup, claim and restore (each with its own
//! request's time as now): memory is given back without a timer, and an
//! expired key is never answered from, whether popped yet or not.
//! Keys are kept in the order of their requests' times but for requests
//! that raced (a few milliseconds at most), so the queue's front is, to
//! within that, the oldest.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;

use super::answer::{Answer, Seen};
use super::fingerprint::Fingerprint;
use super::key::IdempotencyKey;
use super::keyed::{Keyed, Scope};
use crate::clock::Timestamp;

type Slot = (Scope, IdempotencyKey);

/// A key's entry.
#[derive(Debug)]
enum Entry {
    /// Its first request is running.
    InFlight,
    /// Its first request was answered.
    Kept {
        fingerprint: Fingerprint,
        expires: Timestamp,
        answer: Answer,
    },
}

#[derive(Debug, Default)]
struct Table {
    map: HashMap<Slot, Entry>,
    /// Kept keys and when each expires, oldest first.
    queue: VecDeque<(Timestamp, Slot)>,
    /// Entries of `map` that are kept (not in flight).
    kept: usize,
}

impl Table {
    /// Drops every kept key expired at `now` that is at the queue's front.
    fn expire(&mut self, now: Timestamp) {
        while let Some((expires, _)) = self.queue.front() {
            if *expires > now {
                break;
            }
            let Some((expires, slot)) = self.queue.pop_front() else {
                break;
            };
            // The key may have been kept again since (after it expired):
            // then its entry is not this one.
            if matches!(self.map.get(&slot), Some(Entry::Kept { expires: e, .. }) if *e == expires)
            {
                self.map.remove(&slot);
                self.kept -= 1;
            }
        }
    }

    /// What `keyed` finds, at its own time.
    fn seen(&mut self, keyed: &Keyed, slot: &Slot) -> Seen {
        self.expire(keyed.at);
        match self.map.get(slot) {
            None => Seen::New,
            Some(Entry::Kept { expires, .. }) if *expires <= keyed.at => {
                self.map.remove(slot);
                self.kept -= 1;
                Seen::New
            }
            // In flight, whatever the request: the first request's
            // answer, which decides between a replay and a reuse, is not
            // known yet (and a replica, which holds its keys in flight by
            // name, answers the same).
            Some(Entry::InFlight) => Seen::InFlight,
            Some(Entry::Kept { fingerprint, .. }) if *fingerprint != keyed.fingerprint => {
                Seen::Reused
            }
            Some(Entry::Kept { answer, .. }) => Seen::Replay(answer.clone()),
        }
    }

    /// Keeps `answer` for `keyed`, in place of what its slot held.
    fn keep(&mut self, keyed: &Keyed, answer: Answer) {
        let slot = (keyed.scope.clone(), keyed.key.clone());
        let expires = keyed.expires();
        let entry = Entry::Kept {
            fingerprint: keyed.fingerprint,
            expires,
            answer,
        };
        if !matches!(
            self.map.insert(slot.clone(), entry),
            Some(Entry::Kept { .. })
        ) {
            self.kept += 1;
        }
        self.queue.push_back((expires, slot));
    }
}

/// The keys of one inventory. Shared (an `Arc`) with its [`Claim`]s.
#[derive(Debug, Default)]
pub(crate) struct KeptKeys {
    table: Mutex<Table>,
}

impl KeptKeys {
    /// What `keyed` finds now (at `keyed.at`).
    pub(crate) fn seen(&self, keyed: &Keyed) -> Seen {
        let slot = (keyed.scope.clone(), keyed.key.clone());
        self.table.lock().seen(keyed, &slot)
    }

    /// Claims `keyed`'s key for a write about to run: in flight until the
    /// claim is kept or dropped. What it finds instead when it is not new.
    pub(crate) fn claim(self: &Arc<Self>, keyed: Keyed) -> Result<Claim, Seen> {
        let slot = (keyed.scope.clone(), keyed.key.clone());
        let mut table = self.table.lock();
        match table.seen(&keyed, &slot) {
            Seen::New => {
                table.map.insert(slot, Entry::InFlight);
                Ok(Claim {
                    keys: Arc::clone(self),
                    keyed,
                    kept: false,
                })
            }
            seen => Err(seen),
        }
    }

    /// Keeps `answer` for `keyed`, read back from a journal at `now`:
    /// skipped when it has expired by then.
    pub(crate) fn restore(&self, keyed: &Keyed, answer: Answer, now: Timestamp) {
        if keyed.expires() <= now {
            return;
        }
        let mut table = self.table.lock();
        table.expire(now);
        table.keep(keyed, answer);
    }

    /// Calls `visit` with each key kept with its answer and not expired at
    /// `now`, in the order they were kept (a snapshot writes them so).
    pub(crate) fn for_each_kept(&self, now: Timestamp, mut visit: impl FnMut(&Keyed, &Answer)) {
        let table = self.table.lock();
        for (expires, slot) in &table.queue {
            if *expires <= now {
                continue;
            }
            // The queue may name a slot kept again since: only the entry
            // it names now is the key's.
            let Some(Entry::Kept {
                fingerprint,
                expires: kept,
                answer,
            }) = table.map.get(slot)
            else {
                continue;
            };
            if kept != expires {
                continue;
            }
            let at = Timestamp::from_unix_nanos(
                expires
                    .as_unix_nanos()
                    .saturating_sub(super::keyed::RETENTION.as_nanos() as u64),
            );
            let keyed = Keyed {
                scope: slot.0.clone(),
                key: slot.1.clone(),
                fingerprint: *fingerprint,
                at,
            };
            visit(&keyed, answer);
        }
    }

    /// How many keys are kept with their answers (in flight ones aside).
    pub(crate) fn len(&self) -> usize {
        self.table.lock().kept
    }
}

/// A key claimed by the write that runs for it: another request with it
/// finds it in flight meanwhile. It is kept with the write's answer once
/// that is as durable as the write; dropped without, the key is let go
/// (the write failed, or never ran), and a retry runs afresh.
#[derive(Debug)]
pub struct Claim {
    keys: Arc<KeptKeys>,
    keyed: Keyed,
    /// Whether its answer is kept (then dropping it lets nothing go).
    kept: bool,
}

impl Claim {
    /// The key claimed and what it is judged by.
    pub fn keyed(&self) -> &Keyed {
        &self.keyed
    }

    /// Keeps `answer` as the key's, for [`RETENTION`](super::RETENTION)
    /// from its request's time.
    pub(crate) fn keep(mut self, answer: Answer) {
        self.keys.table.lock().keep(&self.keyed, answer);
        self.kept = true;
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        let slot = (self.keyed.scope.clone(), self.keyed.key.clone());
        let mut table = self.keys.table.lock();
        if matches!(table.map.get(&slot), Some(Entry::InFlight)) {
            table.map.remove(&slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What one kept key costs in the table, besides its heap bytes (the
    /// key's and the scope's `Arc<str>`, the pet's name): the figure
    /// docs/http.md ("Idempotency keys") gives.
    #[test]
    fn the_bytes_of_a_kept_key() {
        let entry = size_of::<(Slot, Entry)>();
        let queued = size_of::<(Timestamp, Slot)>();
        println!("map entry {entry} B, queue entry {queued} B");
        assert_eq!(queued, 40);
        assert!(entry <= 136, "map entry {entry} B");
    }
}
