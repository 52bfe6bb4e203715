//! What the limiter says about one request: [`Decision`], with everything
//! the rate-limit headers need.

use std::time::Duration;

use crate::clock::Timestamp;

/// Allowed, refused, or refused because the key is banned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The request goes ahead; it took one token from each window.
    Allowed,
    /// Over the limit; no token was taken. Retry after the wait.
    Limited {
        /// How long until a request would be allowed.
        retry_after: Duration,
    },
    /// The key is temporarily banned.
    Banned {
        /// How long the ban still lasts.
        retry_after: Duration,
    },
}

/// The state of one window (bucket) after the decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowState {
    /// `"minute"` or `"day"`: the name in the `RateLimit` headers.
    pub name: &'static str,
    /// The limit (the bucket's capacity).
    pub limit: u32,
    /// Requests left now.
    pub remaining: u32,
    /// The window length (`w=` of `RateLimit-Policy`).
    pub period: Duration,
    /// When the bucket is full again.
    pub reset_at: Timestamp,
}

/// The limiter's answer for one request.
///
/// # Examples
///
/// ```
/// use petstore_core::{KeyLimiter, Quota, BanPolicy, Timestamp, Outcome};
/// let limiter = KeyLimiter::new(Quota::new(2, 100).unwrap(), BanPolicy::default());
/// let now = Timestamp::from_unix_secs(1_000);
/// let d = limiter.check(now);
/// assert!(d.is_allowed());
/// assert_eq!(d.binding().name, "minute");
/// assert_eq!(d.binding().remaining, 1);
/// limiter.check(now);
/// let refused = limiter.check(now);
/// assert_eq!(refused.outcome, Outcome::Limited { retry_after: std::time::Duration::from_secs(30) });
/// assert_eq!(refused.retry_after_secs(), Some(30));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// What happens to the request.
    pub outcome: Outcome,
    /// When it was decided.
    pub at: Timestamp,
    /// The per-minute window.
    pub minute: WindowState,
    /// The per-day window, where there is one (not for anonymous clients).
    pub day: Option<WindowState>,
    /// This very request started a ban (worth a log line).
    pub ban_started: bool,
}

impl Decision {
    /// Whether the request may go ahead.
    pub fn is_allowed(&self) -> bool {
        matches!(self.outcome, Outcome::Allowed)
    }

    /// The window the `X-RateLimit-*` headers describe: the one with fewer
    /// requests remaining, the minute window on a tie.
    pub fn binding(&self) -> &WindowState {
        match &self.day {
            Some(day) if day.remaining < self.minute.remaining => day,
            _ => &self.minute,
        }
    }

    /// Every window, minute first.
    pub fn windows(&self) -> impl Iterator<Item = &WindowState> {
        std::iter::once(&self.minute).chain(self.day.as_ref())
    }

    /// Seconds until the binding window is full again, rounded up (`t=` of
    /// the `RateLimit` header).
    pub fn reset_after_secs(&self) -> u64 {
        let wait = self.binding().reset_at.saturating_duration_since(self.at);
        ceil_secs(wait)
    }

    /// For a refusal, the `Retry-After` value: whole seconds, at least 1.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self.outcome {
            Outcome::Allowed => None,
            Outcome::Limited { retry_after } | Outcome::Banned { retry_after } => {
                Some(retry_after_secs(retry_after))
            }
        }
    }
}

/// A wait as `Retry-After` states it: whole seconds, rounded up, at least 1.
pub(crate) fn retry_after_secs(wait: Duration) -> u64 {
    ceil_secs(wait).max(1)
}

/// Whole seconds of `wait`, rounded up. In `u64`: the same as dividing its
/// nanoseconds (a `u128`) by 10^9, without the 128-bit division, which is
/// slow next to the rest of a rate-limit check and runs on every request.
fn ceil_secs(wait: Duration) -> u64 {
    wait.as_secs()
        .saturating_add(u64::from(wait.subsec_nanos() > 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_seconds_round_up_as_the_nanoseconds_did() {
        for nanos in [
            0,
            1,
            999_999_999,
            1_000_000_000,
            1_000_000_001,
            59_999_999_999,
            86_400_000_000_000,
            u64::MAX,
        ] {
            let wait = Duration::from_nanos(nanos);
            let old = wait.as_nanos().div_ceil(1_000_000_000) as u64;
            assert_eq!(ceil_secs(wait), old, "{nanos}");
            assert_eq!(retry_after_secs(wait), old.max(1), "{nanos}");
        }
        assert_eq!(ceil_secs(Duration::MAX), u64::MAX);
    }
}
