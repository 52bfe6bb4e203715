//! Rate limiting per API key: [`KeyLimiter`] (one key's minute and day
//! buckets and its ban) and [`RateLimiter`] (a table of them with a clock).
//!
//! Rules (docs/contract.md, "Rate limits"): a request is allowed when both buckets hold a
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

use super::bucket::{Bucket, Judgement};
use super::decision::{retry_after_secs, Decision, Outcome, WindowState};
use super::quota::{BanPolicy, Quota};
use crate::clock::{Clock, Timestamp};

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
    minute: Bucket,
    day: Bucket,
    state: Mutex<KeyState>,
}

#[derive(Debug, Default)]
struct KeyState {
    /// Under the lock with the buckets, so that an edit of the keys file's
    /// `ban` section can change it on the limiter in force
    /// ([`KeyLimiter::set_ban_policy`]) without a copy that would lose the
    /// requests charged meanwhile. Read only on a refusal.
    ban: BanPolicy,
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
            minute: Bucket::new(quota.per_minute().get(), MINUTE),
            day: Bucket::new(quota.per_day().get(), DAY),
            state: Mutex::new(KeyState {
                ban,
                ..KeyState::default()
            }),
        }
    }

    /// A limiter that goes on from `state`, a [`KeyLimiter::state`] taken
    /// from a limiter with the same `quota` (the buckets' numbers are in
    /// units of the quota, see [`KeyLimiterState`]), possibly in another
    /// process. `now` bounds what a damaged or foreign state can do: no
    /// bucket emptier than empty, no ban longer than `ban` gives.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::{BanPolicy, KeyLimiter, Quota, Timestamp};
    /// let quota = Quota::new(60, 10).unwrap();
    /// let t = Timestamp::from_unix_secs(1_000);
    /// let before = KeyLimiter::new(quota, BanPolicy::default());
    /// for _ in 0..4 {
    ///     before.check(t);
    /// }
    /// let after = KeyLimiter::restore(quota, BanPolicy::default(), before.state(), t);
    /// assert_eq!(after.check(t).day.unwrap().remaining, 5);
    /// ```
    pub fn restore(quota: Quota, ban: BanPolicy, state: KeyLimiterState, now: Timestamp) -> Self {
        let limiter = KeyLimiter::new(quota, ban);
        limiter.replace_state(state, now);
        limiter
    }

    /// Replaces this limiter's buckets, strikes and ban with `state` (see
    /// [`KeyLimiter::restore`]); the ban policy stays.
    pub fn replace_state(&self, state: KeyLimiterState, now: Timestamp) {
        let mut current = self.state.lock();
        let ban = current.ban;
        let bound = |bucket: &Bucket, tat: u128| {
            let cap = u128::from(bucket.capacity());
            let full_debt = u128::from(bucket.period().as_nanos() as u64) * cap;
            tat.min(u128::from(now.as_unix_nanos()) * cap + full_debt)
        };
        let mut refusals: Vec<Timestamp> =
            state.refusals.into_iter().filter(|t| *t <= now).collect();
        refusals.sort_unstable();
        let keep = (ban.strikes().get() as usize).saturating_sub(1);
        let skip = refusals.len().saturating_sub(keep);
        *current = KeyState {
            ban,
            minute_tat: bound(&self.minute, state.minute_tat),
            day_tat: bound(&self.day, state.day_tat),
            refusals: refusals.into_iter().skip(skip).collect(),
            banned_until: state.banned_until.map(|t| t.min(now + ban.duration())),
            retry_at: state.retry_at.map(|t| t.min(now + DAY)),
        };
    }

    /// Records a ban that another limiter imposed on this key (a shared
    /// limiter's, seen in its [`Decision`]), ending at `until`: this
    /// limiter refuses the key until then too, so that a process which
    /// falls back to its own limiter keeps enforcing the ban. Never
    /// shortens a ban in force; never longer than this limiter's own ban
    /// from `now`, as [`KeyLimiter::restore`] bounds a restored one.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use petstore_core::{BanPolicy, KeyLimiter, Outcome, Plan, Plans, Timestamp};
    ///
    /// let quota = Plans::default().quota(Plan::Free, None).unwrap();
    /// let limiter = KeyLimiter::new(quota, BanPolicy::default());
    /// let now = Timestamp::from_unix_secs(1_000);
    /// limiter.remember_ban(now + Duration::from_secs(30), now);
    /// assert_eq!(
    ///     limiter.check(now).outcome,
    ///     Outcome::Banned { retry_after: Duration::from_secs(30) }
    /// );
    /// ```
    pub fn remember_ban(&self, until: Timestamp, now: Timestamp) {
        let mut state = self.state.lock();
        let until = until.min(now + state.ban.duration());
        if state.banned_until.is_none_or(|t| t < until) {
            state.banned_until = Some(until);
        }
    }

    /// A copy of this limiter's state as plain numbers: what a restart
    /// (the state file) or another process (Redis) needs to go on exactly
    /// where this one is.
    pub fn state(&self) -> KeyLimiterState {
        let state = self.state.lock();
        KeyLimiterState {
            minute_tat: state.minute_tat,
            day_tat: state.day_tat,
            refusals: state.refusals.iter().copied().collect(),
            banned_until: state.banned_until,
            retry_at: state.retry_at,
        }
    }

    /// Changes the ban policy, keeping both buckets, the recent refusals
    /// and a ban in force: an edit of the keys file's `ban` section must
    /// not refill any key (the refusals count toward the new policy's
    /// strikes; a ban already started runs to its end).
    pub fn set_ban_policy(&self, ban: BanPolicy) {
        self.state.lock().ban = ban;
    }

    /// The quota it enforces.
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// The ban policy it enforces.
    pub fn ban_policy(&self) -> BanPolicy {
        self.state.lock().ban
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
                true => match state.strike(now) {
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
                let keep = |v: Judgement| {
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
    fn strike(&mut self, now: Timestamp) -> Option<Outcome> {
        let ban = self.ban;
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

/// The state of one [`KeyLimiter`] as plain numbers, for keeping it
/// outside the process (a file, Redis) and going on from it later
/// ([`KeyLimiter::restore`]). Every time is absolute (Unix), so the state
/// means the same in another process or after a restart.
///
/// The buckets are GCRA's *theoretical arrival times*: the instant each
/// bucket is full again, in units of `1 ns / capacity` since the Unix
/// epoch (nanoseconds times the bucket's capacity, so that a token is a
/// whole number of units). They mean something only with the quota they
/// were counted under.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyLimiterState {
    /// The minute bucket's TAT, scaled by the per-minute limit.
    pub minute_tat: u128,
    /// The day bucket's TAT, scaled by the per-day limit.
    pub day_tat: u128,
    /// The recent strikes (refusals that came back too early), oldest
    /// first; fewer than the policy's `strikes`.
    pub refusals: Vec<Timestamp>,
    /// When the ban in force (if any) ends.
    pub banned_until: Option<Timestamp>,
    /// When the last refusal told the client to come back; a refusal
    /// before it is a strike.
    pub retry_at: Option<Timestamp>,
}

impl KeyLimiterState {
    /// Whether a limiter in this state at `now` behaves as a new one
    /// (both buckets full, no ban, nothing that a refusal could count as
    /// a strike under `ban`), so there is nothing worth keeping.
    pub fn is_fresh(&self, quota: Quota, ban: BanPolicy, now: Timestamp) -> bool {
        let nanos = u128::from(now.as_unix_nanos());
        self.minute_tat <= nanos * u128::from(quota.per_minute().get())
            && self.day_tat <= nanos * u128::from(quota.per_day().get())
            && self.banned_until.is_none_or(|t| t <= now)
            && self.retry_at.is_none_or(|t| t <= now)
            && self
                .refusals
                .iter()
                .all(|t| now.saturating_duration_since(*t) >= ban.window())
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

#[cfg(test)]
mod tests {
    use super::*;

    const T: Timestamp = Timestamp::from_unix_secs(1_700_000_000);

    fn quota(m: u32, d: u32) -> Quota {
        Quota::new(m, d).unwrap_or(Quota::from_nonzero(
            std::num::NonZeroU32::MIN,
            std::num::NonZeroU32::MIN,
        ))
    }

    fn ban(strikes: u32) -> BanPolicy {
        BanPolicy::new(strikes, 60, 600).unwrap_or_default()
    }

    #[test]
    fn a_remembered_ban_holds_is_never_shortened_and_never_longer_than_its_own() {
        let limiter = KeyLimiter::new(quota(60, 1000), ban(3));
        let secs = Duration::from_secs;
        limiter.remember_ban(T + secs(100), T);
        assert_eq!(
            limiter.check(T + secs(40)).outcome,
            Outcome::Banned {
                retry_after: secs(60)
            }
        );
        // A shorter report does not shorten it.
        limiter.remember_ban(T + secs(50), T);
        assert_eq!(limiter.state().banned_until, Some(T + secs(100)));
        // A longer one than this limiter's own ban (600 s) is bounded.
        limiter.remember_ban(T + secs(100_000), T);
        assert_eq!(limiter.state().banned_until, Some(T + secs(600)));
        // Over at its end.
        assert_eq!(limiter.check(T + secs(600)).outcome, Outcome::Allowed);
    }

    #[test]
    fn a_restored_limiter_goes_on_exactly_where_the_old_one_was() {
        let old = KeyLimiter::new(quota(2, 100), ban(2));
        let mut t = T;
        // Two allowed, a refusal, a strike; the next strike bans.
        for _ in 0..4 {
            old.check(t);
        }
        let later = t + Duration::from_secs(1);
        let new = KeyLimiter::restore(quota(2, 100), ban(2), old.state(), later);
        assert_eq!(new.state(), old.state());
        let (a, b) = (old.check(later), new.check(later));
        assert_eq!(a, b);
        assert!(b.ban_started);
        t = later + Duration::from_secs(5);
        assert_eq!(old.check(t), new.check(t));
        // A ban survives a state round trip.
        let again = KeyLimiter::restore(quota(2, 100), ban(2), new.state(), t);
        assert!(matches!(again.check(t).outcome, Outcome::Banned { .. }));
    }

    #[test]
    fn a_damaged_state_cannot_block_a_key_for_longer_than_its_policy() {
        let state = KeyLimiterState {
            minute_tat: u128::MAX,
            day_tat: u128::MAX,
            refusals: vec![Timestamp::from_unix_nanos(u64::MAX); 5],
            banned_until: Some(Timestamp::from_unix_nanos(u64::MAX)),
            retry_at: Some(Timestamp::from_unix_nanos(u64::MAX)),
        };
        let limiter = KeyLimiter::restore(quota(60, 1_000), ban(3), state, T);
        let banned = limiter.check(T);
        assert_eq!(
            banned.outcome,
            Outcome::Banned {
                retry_after: Duration::from_secs(600)
            }
        );
        // After the ban, the buckets were at most empty: 600 s of refill
        // of 1,000 a day is 6 requests.
        let after = T + Duration::from_secs(600);
        assert!(limiter.state().refusals.len() < 3);
        let allowed = (0..10)
            .filter(|_| limiter.check(after).is_allowed())
            .count();
        assert_eq!(allowed, 6);
    }

    #[test]
    fn a_new_ban_policy_keeps_the_buckets_and_strikes() {
        let limiter = KeyLimiter::new(quota(1, 100), ban(3));
        limiter.check(T);
        limiter.check(T); // refused
        limiter.check(T); // strike 1 of 3
        limiter.set_ban_policy(ban(2));
        assert_eq!(limiter.ban_policy(), ban(2));
        // The next strike is the second: banned under the new policy.
        assert!(limiter.check(T).ban_started);
        assert!(limiter.state().refusals.is_empty());
    }

    #[test]
    fn freshness() {
        let limiter = KeyLimiter::new(quota(1, 100), ban(3));
        assert!(limiter.state().is_fresh(quota(1, 100), ban(3), T));
        limiter.check(T);
        assert!(!limiter.state().is_fresh(quota(1, 100), ban(3), T));
        // The day bucket refills one token in 864 s.
        let later = T + Duration::from_secs(864);
        assert!(limiter.state().is_fresh(quota(1, 100), ban(3), later));
        limiter.check(later);
        limiter.check(later); // refused: retry_at set
        limiter.check(later); // strike
        let after = later + Duration::from_secs(864);
        assert!(!limiter
            .state()
            .is_fresh(quota(1, 100), ban(3), later + Duration::from_secs(59)));
        assert!(limiter.state().is_fresh(quota(1, 100), ban(3), after));
    }

    #[test]
    fn freshness_needs_both_buckets_full_and_no_ban() {
        let (q, b) = (quota(60, 1_000), ban(3));
        let limiter = KeyLimiter::new(q, b);
        limiter.check(T);
        // A minute later the minute bucket is full, the day bucket not.
        assert!(!limiter.state().is_fresh(q, b, T + Duration::from_secs(60)));
        // A day later both are.
        assert!(limiter
            .state()
            .is_fresh(q, b, T + Duration::from_secs(86_400)));
        // A ban is fresh from the instant it ends, not before.
        let end = T + Duration::from_secs(600);
        let banned = KeyLimiterState {
            banned_until: Some(end),
            ..KeyLimiterState::default()
        };
        assert!(banned.is_fresh(q, b, end));
        assert!(!banned.is_fresh(q, b, T));
    }
}
