//! Rate limiting per API key: [`KeyLimiter`] (one key's minute and day
//! buckets and its ban) and [`RateLimiter`] (a table of them with a clock).
//!
//! Rules (decisions.md): a request is allowed when both buckets hold a
//! token and takes one from each; a refused request takes none; a key
//! refused `strikes` times within the ban window is banned for the ban
//! duration, and while banned every request is refused.
//!
//! What counts as a strike: a refusal of a request that came back before
//! the `Retry-After` of the key's previous refusal. The specification bans
//! "repeated requests after 429"; a client that waits as told but uses its
//! whole plan meets about one refusal per wait (`Retry-After` is at least
//! a second), and counting those would ban exactly the clients that
//! behave. A client that ignores `Retry-After` is banned as before.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use crate::bucket::{Bucket, Verdict};
use crate::clock::{Clock, Timestamp};
use crate::decision::{retry_after_secs, Decision, Outcome, WindowState};
use crate::quota::{BanPolicy, Quota};

pub(crate) const MINUTE: Duration = Duration::from_secs(60);
pub(crate) const DAY: Duration = Duration::from_secs(86_400);

/// The limiter of one key. Cheap to check from many threads: one short
/// critical section per request (a `parking_lot` mutex: no syscall unless
/// contended, no poisoning).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use petstore_core::{BanPolicy, KeyLimiter, Outcome, Quota, Timestamp};
/// let ban = BanPolicy::new(2, 60, 600).unwrap();
/// let limiter = KeyLimiter::new(Quota::new(1, 100).unwrap(), ban);
/// let t = Timestamp::from_unix_secs(0);
/// assert!(limiter.check(t).is_allowed());
/// // Refused, and told to come back in 60 s.
/// assert!(matches!(limiter.check(t).outcome, Outcome::Limited { .. }));
/// // Coming back sooner is a strike; the second strike in the window
/// // earns a ban of 600 s.
/// assert!(matches!(limiter.check(t).outcome, Outcome::Limited { .. }));
/// let banned = limiter.check(t);
/// assert_eq!(banned.outcome, Outcome::Banned { retry_after: Duration::from_secs(600) });
/// assert!(banned.ban_started);
/// assert_eq!(banned.binding().remaining, 0);
/// ```
#[derive(Debug)]
pub struct KeyLimiter {
    quota: Quota,
    ban: BanPolicy,
    minute: Bucket,
    day: Bucket,
    state: Mutex<KeyState>,
}

#[derive(Debug, Default)]
struct KeyState {
    minute_tat: u128,
    day_tat: u128,
    /// Times of the recent refusals, at most `strikes` of them; allocated
    /// only once a key has been refused.
    refusals: VecDeque<Timestamp>,
    banned_until: Option<Timestamp>,
    /// When the last refusal told the client to come back (its
    /// `Retry-After`, in whole seconds as the header says).
    retry_at: Option<Timestamp>,
}

impl KeyLimiter {
    /// A limiter with full buckets.
    pub fn new(quota: Quota, ban: BanPolicy) -> Self {
        KeyLimiter {
            quota,
            ban,
            minute: Bucket::new(quota.per_minute().get(), MINUTE),
            day: Bucket::new(quota.per_day().get(), DAY),
            state: Mutex::new(KeyState::default()),
        }
    }

    /// The quota it enforces.
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// The ban policy it enforces.
    pub fn ban_policy(&self) -> BanPolicy {
        self.ban
    }

    /// Decides one request at `now`, taking a token from each window if it
    /// is allowed.
    pub fn check(&self, now: Timestamp) -> Decision {
        let mut state = self.state.lock();
        let minute = self.minute.judge(state.minute_tat, now);
        let day = self.day.judge(state.day_tat, now);

        let mut ban_started = false;
        let outcome = if let Some(until) = state.banned_until.filter(|until| now < *until) {
            Outcome::Banned {
                retry_after: until.saturating_duration_since(now),
            }
        } else if minute.allowed && day.allowed {
            state.minute_tat = minute.next_tat;
            state.day_tat = day.next_tat;
            Outcome::Allowed
        } else {
            let wait_for =
                |allowed: bool, wait: Duration| if allowed { Duration::ZERO } else { wait };
            let retry_after =
                wait_for(minute.allowed, minute.wait).max(wait_for(day.allowed, day.wait));
            // Only a request that came back before the Retry-After it was
            // given is a strike: a client that honours Retry-After at full
            // use of its plan still meets about one refusal per wait, and
            // must not be banned for it.
            let ignored_retry_after = state.retry_at.is_some_and(|at| now < at);
            state.retry_at = Some(now + Duration::from_secs(retry_after_secs(retry_after)));
            match ignored_retry_after {
                true => match state.strike(now, &self.ban) {
                    Some(banned) => {
                        ban_started = true;
                        banned
                    }
                    None => Outcome::Limited { retry_after },
                },
                false => Outcome::Limited { retry_after },
            }
        };

        // A request that took nothing reports the buckets as they stand;
        // while banned, nothing is left until the ban ends.
        let full = |floor: Timestamp| {
            (
                self.minute.full_at(state.minute_tat).max(floor),
                self.day.full_at(state.day_tat).max(floor),
            )
        };
        let (minute_left, day_left, (minute_full, day_full)) = match outcome {
            Outcome::Allowed => (
                minute.remaining,
                day.remaining,
                (minute.full_at, day.full_at),
            ),
            Outcome::Limited { .. } => {
                let keep = |v: Verdict| {
                    if v.allowed {
                        v.remaining + 1
                    } else {
                        v.remaining
                    }
                };
                (keep(minute), keep(day), full(now))
            }
            Outcome::Banned { retry_after } => (0, 0, full(now + retry_after)),
        };
        Decision {
            outcome,
            at: now,
            minute: window("minute", &self.minute, minute_left, minute_full),
            day: Some(window("day", &self.day, day_left, day_full)),
            ban_started,
        }
    }
}

pub(crate) fn window(
    name: &'static str,
    bucket: &Bucket,
    remaining: u32,
    reset_at: Timestamp,
) -> WindowState {
    WindowState {
        name,
        limit: bucket.capacity(),
        remaining,
        period: bucket.period(),
        reset_at,
    }
}

impl KeyState {
    /// Counts a refusal; returns the ban outcome if this one earns a ban.
    fn strike(&mut self, now: Timestamp, ban: &BanPolicy) -> Option<Outcome> {
        let strikes = ban.strikes().get() as usize;
        while self
            .refusals
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= ban.window())
        {
            self.refusals.pop_front();
        }
        if self.refusals.len() + 1 >= strikes {
            self.refusals = VecDeque::new();
            self.banned_until = Some(now + ban.duration());
            return Some(Outcome::Banned {
                retry_after: ban.duration(),
            });
        }
        self.refusals.push_back(now);
        None
    }
}

/// A table of key limiters with a clock: the rate limiter an embedder uses.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use petstore_core::{BanPolicy, FakeClock, Plan, Plans, RateLimiter, Timestamp};
/// let clock = Arc::new(FakeClock::new(Timestamp::from_unix_secs(0)));
/// let limiter = RateLimiter::new(clock.clone());
/// let free = Plans::default().quota(Plan::Free, None).unwrap();
/// limiter.insert("alice", free, BanPolicy::default());
/// let d = limiter.check(&"alice").unwrap();
/// assert!(d.is_allowed());
/// assert_eq!(d.minute.remaining, 59);
/// assert!(limiter.check(&"mallory").is_none());
/// ```
#[derive(Debug)]
pub struct RateLimiter<K, C> {
    clock: C,
    keys: RwLock<HashMap<K, KeyLimiter>>,
}

impl<K: Hash + Eq, C: Clock> RateLimiter<K, C> {
    /// An empty table.
    pub fn new(clock: C) -> Self {
        RateLimiter {
            clock,
            keys: RwLock::new(HashMap::new()),
        }
    }

    /// Adds a key, or replaces its quota (and resets its state) if present.
    pub fn insert(&self, key: K, quota: Quota, ban: BanPolicy) {
        self.keys.write().insert(key, KeyLimiter::new(quota, ban));
    }

    /// Removes a key.
    pub fn remove(&self, key: &K) -> bool {
        self.keys.write().remove(key).is_some()
    }

    /// Decides one request of `key` now; `None` for an unknown key.
    pub fn check(&self, key: &K) -> Option<Decision> {
        let now = self.clock.now();
        self.keys.read().get(key).map(|limiter| limiter.check(now))
    }
}
