//! One token bucket with continuous refill, as GCRA (the generic cell rate
//! algorithm): instead of a token count and a last-refill time it keeps one
//! number, the *theoretical arrival time* (TAT) at which the bucket would be
//! full again. No background refill, no floating point.
//!
//! Time is kept in *scaled* units of `1 ns / capacity`, so one token is
//! exactly `period_ns` units and the full bucket exactly
//! `period_ns * capacity` units: a 7-per-minute bucket refills at exactly
//! 7 per 60 s with no rounding drift. The products need 128 bits.

use std::time::Duration;

use crate::clock::Timestamp;

/// The configuration of one bucket: `capacity` tokens refilled evenly over
/// `period`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Bucket {
    capacity: u32,
    period_ns: u64,
}

/// What a bucket says about one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Judgement {
    /// The request may take a token.
    pub(crate) allowed: bool,
    /// Tokens left: after taking one when allowed, as it stands otherwise.
    pub(crate) remaining: u32,
    /// When the bucket is full again (after taking the token, if allowed).
    pub(crate) full_at: Timestamp,
    /// When refused: how long until a token is there.
    pub(crate) wait: Duration,
    /// The TAT to store if the request goes ahead.
    pub(crate) next_tat: u128,
}

impl Bucket {
    pub(crate) const fn new(capacity: u32, period: Duration) -> Bucket {
        Bucket {
            capacity,
            period_ns: period.as_nanos() as u64,
        }
    }

    pub(crate) const fn capacity(&self) -> u32 {
        self.capacity
    }

    pub(crate) const fn period(&self) -> Duration {
        Duration::from_nanos(self.period_ns)
    }

    /// When a bucket whose stored TAT is `tat` is full again.
    pub(crate) fn full_at(&self, tat: u128) -> Timestamp {
        Timestamp::from_unix_nanos(tat.div_ceil(u128::from(self.capacity)) as u64)
    }

    /// Judges one request at `now` against the stored `tat`; the caller
    /// stores `next_tat` only if it lets the request through.
    pub(crate) fn judge(&self, tat: u128, now: Timestamp) -> Judgement {
        let cap = u128::from(self.capacity);
        let token = u128::from(self.period_ns);
        let span = token * cap;
        let now_scaled = u128::from(now.as_unix_nanos()) * cap;
        let tat = tat.max(now_scaled);
        // `debt`: how much of the full bucket is used, 0..=span. It can only
        // exceed the span when `now` is older than a time this bucket has
        // already seen: concurrent callers read the clock before taking the
        // limiter's lock, so one may arrive with a slightly stale `now`.
        // Seen from the past the bucket is at most empty, never below.
        let debt = (tat - now_scaled).min(span);
        let allowed = debt + token <= span;
        let (used, next_tat, wait) = if allowed {
            (debt + token, tat + token, 0)
        } else {
            (debt, tat, (debt + token - span).div_ceil(cap))
        };
        let remaining = ((span - used) / token) as u32;
        let full_at = self.full_at(next_tat);
        Judgement {
            allowed,
            remaining,
            full_at,
            wait: Duration::from_nanos(wait as u64),
            next_tat,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drains_then_refills_continuously() {
        let b = Bucket::new(3, Duration::from_secs(60));
        let t0 = Timestamp::from_unix_secs(1_000);
        let mut tat = 0;
        for left in [2, 1, 0] {
            let v = b.judge(tat, t0);
            assert!(v.allowed);
            assert_eq!(v.remaining, left);
            tat = v.next_tat;
        }
        let v = b.judge(tat, t0);
        assert!(!v.allowed);
        assert_eq!(v.remaining, 0);
        assert_eq!(v.wait, Duration::from_secs(20));
        assert_eq!(v.full_at, Timestamp::from_unix_secs(1_060));
        // One token comes back every 20 s.
        let v = b.judge(tat, t0 + Duration::from_secs(20));
        assert!(v.allowed);
        assert_eq!(v.remaining, 0);
        let v2 = b.judge(
            v.next_tat,
            t0 + Duration::from_secs(20) + Duration::from_nanos(1),
        );
        assert!(!v2.allowed);
        assert_eq!(v2.wait, Duration::from_secs(20) - Duration::from_nanos(1));
    }

    #[test]
    fn a_stale_now_sees_an_empty_bucket_and_never_underflows() {
        let b = Bucket::new(2, Duration::from_secs(60));
        let later = Timestamp::from_unix_secs(1_000);
        let mut tat = 0;
        for _ in 0..2 {
            tat = b.judge(tat, later).next_tat;
        }
        // A request whose clock reading is 5 s older than the last one.
        let stale = Timestamp::from_unix_secs(995);
        let v = b.judge(tat, stale);
        assert!(!v.allowed);
        assert_eq!(v.remaining, 0);
        assert_eq!(v.wait, Duration::from_secs(30));
        assert!(!b.judge(tat, Timestamp::from_unix_secs(0)).allowed);
    }

    #[test]
    fn uneven_rates_are_exact() {
        // 7 per minute: after exactly 60 s from empty, exactly 7 tokens.
        let b = Bucket::new(7, Duration::from_secs(60));
        let t0 = Timestamp::from_unix_secs(5);
        let mut tat = 0;
        for _ in 0..7 {
            tat = b.judge(tat, t0).next_tat;
        }
        let later = t0 + Duration::from_secs(60);
        let mut allowed = 0;
        loop {
            let v = b.judge(tat, later);
            if !v.allowed {
                break;
            }
            allowed += 1;
            tat = v.next_tat;
        }
        assert_eq!(allowed, 7);
    }
}
