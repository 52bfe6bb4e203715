//! The circuit breaker, one per shard: after a failed call, the states of
//! that shard skip Redis for [`BREAKER`] (decided by the
//! replica alone, no 50 ms wait each), then one call probes it again.
//! A single Redis is one shard; in a Redis Cluster each hash slot is one,
//! so a master that fails sends only the keys it holds to the replicas'
//! own limiters while every other key stays shared.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::cluster_routing::Slot;

/// How long the replica decides alone after a failure before it probes
/// Redis again.
pub const BREAKER: Duration = Duration::from_secs(1);

/// Where a state lives: the one Redis (`None`), or a cluster's hash slot.
pub(super) type Shard = Option<Slot>;

/// The breakers of every shard, open ones only.
#[derive(Debug)]
pub(super) struct Breakers {
    origin: Instant,
    period_ms: u64,
    /// Per open shard, the instant (ms since `origin`) of its next probe.
    /// A plain mutex, never held across an await; not taken at all while
    /// every breaker is closed (`open_count` is 0), the usual case.
    open: Mutex<HashMap<Shard, u64>>,
    open_count: AtomicUsize,
}

impl Breakers {
    /// Breakers that stay open for `period` after a failure.
    pub(super) fn new(period: Duration) -> Breakers {
        Breakers {
            origin: Instant::now(),
            period_ms: u64::try_from(period.as_millis()).unwrap_or(u64::MAX),
            open: Mutex::new(HashMap::new()),
            open_count: AtomicUsize::new(0),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// How many shards' breakers are open (waiting for a probe to
    /// succeed), for `/metrics`.
    pub(super) fn open_count(&self) -> usize {
        self.open_count.load(Ordering::Relaxed)
    }

    /// Whether the requests of `shard` skip Redis now: its breaker is
    /// open and not yet due for a probe.
    pub(super) fn is_open(&self, shard: Shard) -> bool {
        if self.open_count.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let now = self.now_ms();
        self.open
            .lock()
            .get(&shard)
            .is_some_and(|probe| now < *probe)
    }

    /// Whether a call of `shard` may go to Redis: its breaker is closed,
    /// or this is the one call that probes it (which pushes the next
    /// probe a period away).
    pub(super) fn may_try(&self, shard: Shard) -> bool {
        if self.open_count.load(Ordering::Relaxed) == 0 {
            return true;
        }
        let now = self.now_ms();
        match self.open.lock().get_mut(&shard) {
            None => true,
            Some(probe) if now >= *probe => {
                *probe = now.saturating_add(self.period_ms);
                true
            }
            Some(_) => false,
        }
    }

    /// A call of `shard` failed: its breaker opens (or stays open). True
    /// when it is the first open breaker: the change of mode to log.
    pub(super) fn failed(&self, shard: Shard) -> bool {
        let probe = self.now_ms().saturating_add(self.period_ms);
        let mut open = self.open.lock();
        let first = open.is_empty();
        if open.insert(shard, probe).is_none() {
            self.open_count.fetch_add(1, Ordering::Relaxed);
        }
        first
    }

    /// A call of `shard` got Redis's answer: its breaker closes. True
    /// when it was the last open one: the change of mode to log.
    pub(super) fn succeeded(&self, shard: Shard) -> bool {
        if self.open_count.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let mut open = self.open.lock();
        if open.remove(&shard).is_none() {
            return false;
        }
        self.open_count.fetch_sub(1, Ordering::Relaxed);
        open.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_that_fails_opens_alone_and_probes_once_per_period() {
        let breakers = Breakers::new(Duration::from_secs(3600));
        let (a, b) = (Some(Slot::for_key("{a}")), Some(Slot::for_key("{b}")));
        assert_ne!(a, b);
        assert!(!breakers.is_open(a) && breakers.may_try(a));
        assert!(
            breakers.failed(a),
            "the first open breaker is a change of mode"
        );
        assert!(!breakers.failed(a), "still open: no new change");
        assert!(breakers.is_open(a));
        assert_eq!(breakers.open_count(), 1);
        assert!(
            !breakers.may_try(a),
            "not due for a probe within the period"
        );
        // Another shard is untouched.
        assert!(!breakers.is_open(b) && breakers.may_try(b));
        assert!(!breakers.succeeded(b), "b was never open");
        assert!(!breakers.failed(b), "a second open shard is not a new mode");
        assert!(!breakers.succeeded(a), "b is still open");
        assert!(!breakers.is_open(a));
        assert_eq!(breakers.open_count(), 1);
        assert!(breakers.succeeded(b), "the last open shard closed");
        assert_eq!(breakers.open_count(), 0);
        assert!(!breakers.is_open(b));
    }

    #[test]
    fn an_open_breaker_lets_one_probe_through_once_due() {
        let breakers = Breakers::new(Duration::ZERO);
        breakers.failed(None);
        // Due at once (a zero period): one probe, which pushes the next.
        assert!(!breakers.is_open(None));
        assert!(breakers.may_try(None));
        assert!(breakers.succeeded(None));
        assert!(breakers.may_try(None));
    }
}
