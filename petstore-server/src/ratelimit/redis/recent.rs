//! [`Recent`]: the states this replica's calls decided lately.
//!
//! Such a state has its current (`:v3`) form in Redis: every write gives
//! it a TTL of at least a second past the call (`limit.lua`). So a call
//! names it alone ([`Previous::Unnamed`](super::Previous::Unnamed)), not
//! with the two names of its previous forms, which Redis would take in
//! and never read: about 7% of Redis's work for a state. A guess, never
//! trusted: a state missing after all comes back unread, and the replica
//! calls again naming its previous forms.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a state counts as decided lately: one to two turns. About
/// the shortest TTL the script gives a state it writes, so that a state
/// remembered here is nearly always still there.
const TURN: Duration = Duration::from_secs(1);

/// The most names a turn holds; past it the turn ends early. Bounds the
/// memory (two turns of names) whatever the traffic, anonymous clients of
/// many addresses included.
const MAX: usize = 65_536;

/// The states decided in this turn and in the one before.
///
/// Two sets turned over, not a time per name: nothing to sweep, and a
/// name costs one insert. The sets hash with std's random keys (SipHash):
/// anonymous states are named by client addresses, which a client
/// chooses.
#[derive(Debug, Default)]
pub(super) struct Recent {
    this: HashSet<Arc<str>>,
    before: HashSet<Arc<str>>,
    /// When this turn began; `None` before the first name.
    began: Option<Instant>,
}

impl Recent {
    /// Whether `name` was decided in this turn or the one before, as of
    /// `now`.
    pub(super) fn has(&self, name: &str, now: Instant) -> bool {
        match self.began {
            // Both turns are over: nothing is recent any more.
            Some(began) if now.saturating_duration_since(began) >= 2 * TURN => false,
            Some(began) if now.saturating_duration_since(began) >= TURN => self.this.contains(name),
            Some(_) => self.this.contains(name) || self.before.contains(name),
            None => false,
        }
    }

    /// Remembers that `name` was decided at `now`.
    pub(super) fn add(&mut self, name: &Arc<str>, now: Instant) {
        match self.began {
            // This turn goes on.
            Some(began) if now.saturating_duration_since(began) < TURN && self.this.len() < MAX => {
            }
            // The next turn begins.
            Some(began) if now.saturating_duration_since(began) < 2 * TURN => {
                self.before = std::mem::take(&mut self.this);
                self.began = Some(now);
            }
            // The first name, or one after a quiet spell.
            _ => {
                self.before.clear();
                self.this.clear();
                self.began = Some(now);
            }
        }
        if !self.this.contains(&**name) {
            self.this.insert(name.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Arc<str> {
        Arc::from(s)
    }

    #[test]
    fn a_name_is_recent_for_one_to_two_turns() {
        let t = Instant::now();
        let mut recent = Recent::default();
        assert!(!recent.has("a", t));
        recent.add(&name("a"), t);
        assert!(recent.has("a", t));
        assert!(!recent.has("b", t));
        // Still in this turn.
        assert!(recent.has("a", t + TURN / 2));
        // A new turn began with `b`: `a` is of the turn before.
        recent.add(&name("b"), t + TURN + TURN / 2);
        assert!(recent.has("a", t + TURN + TURN / 2));
        assert!(recent.has("b", t + TURN + TURN / 2));
        // Another: `a` is forgotten, `b` is not.
        recent.add(&name("c"), t + 3 * TURN);
        assert!(!recent.has("a", t + 3 * TURN));
        assert!(recent.has("b", t + 3 * TURN));
    }

    #[test]
    fn nothing_is_recent_once_both_turns_are_over() {
        let t = Instant::now();
        let mut recent = Recent::default();
        recent.add(&name("a"), t);
        // No name since: the turn that began at `t` ends at `t + TURN`,
        // and the one after it at `t + 2 TURN`.
        assert!(recent.has("a", t + TURN));
        assert!(!recent.has("a", t + 2 * TURN));
        // A name long after starts afresh: nothing older carries over.
        recent.add(&name("b"), t + 5 * TURN);
        assert!(!recent.has("a", t + 5 * TURN));
        assert!(recent.has("b", t + 5 * TURN));
    }

    #[test]
    fn a_full_turn_ends_early_so_memory_stays_bounded() {
        let t = Instant::now();
        let mut recent = Recent::default();
        for i in 0..3 * MAX {
            recent.add(&name(&i.to_string()), t);
        }
        assert!(recent.this.len() <= MAX && recent.before.len() <= MAX);
        // The latest are remembered.
        assert!(recent.has(&(3 * MAX - 1).to_string(), t));
    }
}
