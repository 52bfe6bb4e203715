//! [`Recent`]: the states this replica's calls decided lately.
//!
//! Such a state has its current (`:v3`) form in Redis: every write gives
//! it a TTL of at least a second past the call (`limit.lua`). So a call
//! names it alone ([`Previous::Unnamed`](super::Previous::Unnamed)), not
//! with the two names of its previous forms, which Redis would take in
//! and never read: work Redis would do for nothing. A guess, never
//! trusted: a state missing after all comes back unread, and the replica
//! calls again naming its previous forms.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::util::mix::mix64;

/// How long a state counts as decided lately: the shortest TTL the
/// script gives a state it writes, so that a state remembered here is
/// nearly always still there.
const LATELY: Duration = Duration::from_secs(1);

/// Slots of the table: a power of two. Far more than the states of a
/// call (at most [`MAX_CALL`](super::MAX_CALL) requests), so that the
/// states of the calls of the last second mostly keep their slots.
const SLOTS: usize = 4096;

/// The states decided lately, by identity: a table of [`SLOTS`] slots,
/// each the last state seen there and when.
///
/// Why by identity, not by name: a key's state name is one `Arc` for the
/// life of its key table (`KeyEntry::state_name`), so its address is
/// its identity, and a slot is found by a multiplication where hashing
/// the name (80 bytes, SipHash, twice a request) was a visible share of
/// the replica's work per request (`scripts/bench/profile-keys`). Each slot holds
/// its `Arc`, so no other name can take its address while it is
/// remembered. An anonymous state's name is one `Arc` per address and
/// worker thread (`anonymous.rs`): found when the request's thread
/// named that address lately. A slot taken over by another state forgets the first: a
/// guess lost, nothing more. Memory: the table, bounded, whatever the
/// traffic.
#[derive(Debug)]
pub(super) struct Recent {
    slots: Vec<Option<(Arc<str>, Instant)>>,
}

impl Default for Recent {
    fn default() -> Self {
        Recent {
            slots: vec![None; SLOTS],
        }
    }
}

/// The slot of the state named by this very `Arc`: its address, mixed.
fn slot(name: &Arc<str>) -> usize {
    (mix64(Arc::as_ptr(name).cast::<u8>() as usize as u64) as usize) & (SLOTS - 1)
}

impl Recent {
    /// Whether the state named by `name` (this `Arc`) was decided within
    /// [`LATELY`] before `now`.
    pub(super) fn has(&self, name: &Arc<str>, now: Instant) -> bool {
        match self.slots.get(slot(name)) {
            Some(Some((held, at))) => {
                Arc::ptr_eq(held, name) && now.saturating_duration_since(*at) < LATELY
            }
            _ => false,
        }
    }

    /// Remembers that the state named by `name` was decided at `now`.
    pub(super) fn add(&mut self, name: &Arc<str>, now: Instant) {
        let Some(slot) = self.slots.get_mut(slot(name)) else {
            return;
        };
        match slot {
            Some((held, at)) if Arc::ptr_eq(held, name) => *at = now,
            _ => *slot = Some((name.clone(), now)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_is_recent_for_a_second_after_its_decision() {
        let t = Instant::now();
        let mut recent = Recent::default();
        let a: Arc<str> = Arc::from("a");
        let b: Arc<str> = Arc::from("b");
        assert!(!recent.has(&a, t));
        recent.add(&a, t);
        assert!(recent.has(&a, t));
        assert!(recent.has(&a, t + LATELY / 2));
        assert!(!recent.has(&a, t + LATELY));
        assert!(!recent.has(&b, t));
        // Decided again: recent again.
        recent.add(&a, t + 2 * LATELY);
        assert!(recent.has(&a, t + 2 * LATELY + LATELY / 2));
    }

    #[test]
    fn the_same_name_in_another_arc_is_not_the_same_state() {
        // An anonymous state's name is made per request.
        let t = Instant::now();
        let mut recent = Recent::default();
        let first: Arc<str> = Arc::from("{anon:192.0.2.1}:m60");
        recent.add(&first, t);
        let again: Arc<str> = Arc::from("{anon:192.0.2.1}:m60");
        assert!(!recent.has(&again, t));
    }

    #[test]
    fn a_slot_taken_over_forgets_the_state_before() {
        let t = Instant::now();
        let mut recent = Recent::default();
        let first: Arc<str> = Arc::from("first");
        // Names are made (and kept, so that no address is given twice)
        // until one shares the first's slot. Among a fixed 16,384 names
        // none did in about 2% of runs (e^-4): a test that failed on the
        // allocator's addresses. Here a miss would take four million
        // names in a row (e^-1024).
        let mut kept: Vec<Arc<str>> = Vec::new();
        let rival = loop {
            let name: Arc<str> = Arc::from(kept.len().to_string());
            if slot(&name) == slot(&first) {
                break name;
            }
            assert!(kept.len() < 1 << 22, "no name shares the first's slot");
            kept.push(name);
        };
        recent.add(&first, t);
        recent.add(&rival, t);
        assert!(recent.has(&rival, t));
        assert!(!recent.has(&first, t));
    }

    #[test]
    fn states_spread_over_the_slots() {
        // 16,384 states at random leave about 75 of the 4,096 slots empty
        // (e^-4 of them, give or take 9); more than 409 empty is some 39
        // standard deviations away.
        let names: Vec<Arc<str>> = (0..4 * SLOTS).map(|i| Arc::from(i.to_string())).collect();
        let used: std::collections::HashSet<usize> = names.iter().map(slot).collect();
        assert!(used.len() > SLOTS * 9 / 10, "{} slots used", used.len());
    }
}
