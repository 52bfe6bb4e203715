//! Time, injectable so tests are exact: the rate limiter's buckets, the
//! idempotency keys' expiry and the journal's timestamps all read it.
//!
//! A [`Timestamp`] is nanoseconds since the Unix epoch. The limiter needs a
//! clock that never goes backwards (buckets) *and* Unix time (the
//! `X-RateLimit-Reset` header); [`SystemClock`] gives both by reading the
//! wall clock once and adding the monotonic clock's elapsed time to it.
//! [`FakeClock`] is a test's: it moves only when told.
//!
//! Dates too: days since the epoch and dates of the proleptic Gregorian
//! calendar both ways (Howard Hinnant's `days_from_civil` and
//! `civil_from_days`), and RFC 3339 in UTC: an order's times, the log's
//! timestamps and a key's `expiresAt` are written with them.
//!
//! May use: nothing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A point in time: nanoseconds since the Unix epoch.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use petstore_core::Timestamp;
/// let t = Timestamp::from_unix_secs(100) + Duration::from_millis(1);
/// assert_eq!(t.unix_secs_ceil(), 101);
/// assert_eq!(t.saturating_duration_since(Timestamp::from_unix_secs(100)), Duration::from_millis(1));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(u64);

impl Timestamp {
    /// From nanoseconds since the Unix epoch.
    pub const fn from_unix_nanos(nanos: u64) -> Self {
        Timestamp(nanos)
    }

    /// From whole seconds since the Unix epoch.
    pub const fn from_unix_secs(secs: u64) -> Self {
        Timestamp(secs.saturating_mul(1_000_000_000))
    }

    /// Nanoseconds since the Unix epoch.
    pub const fn as_unix_nanos(self) -> u64 {
        self.0
    }

    /// Seconds since the Unix epoch, rounded up.
    pub const fn unix_secs_ceil(self) -> u64 {
        self.0.div_ceil(1_000_000_000)
    }

    /// How long after `earlier` this is; zero if it is not after it.
    pub const fn saturating_duration_since(self, earlier: Timestamp) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Timestamp {
    /// Whole seconds since the Unix epoch, rounded down.
    pub const fn unix_secs(self) -> u64 {
        self.0 / 1_000_000_000
    }

    /// This time in RFC 3339, UTC, whole seconds: `2026-11-28T10:00:00Z`.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::Timestamp;
    /// assert_eq!(Timestamp::from_unix_secs(1_764_324_000).to_rfc3339(), "2025-11-28T10:00:00Z");
    /// ```
    pub fn to_rfc3339(self) -> String {
        rfc3339_utc(self.unix_secs(), None)
    }
}

impl std::ops::Add<Duration> for Timestamp {
    type Output = Timestamp;
    fn add(self, d: Duration) -> Timestamp {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Timestamp(self.0.saturating_add(nanos))
    }
}

/// A source of the current time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current time; never earlier than a previous call returned.
    fn now(&self) -> Timestamp;

    /// The time at `instant`, a reading of the monotonic clock the caller
    /// took a moment ago (when its request arrived, say): a caller that
    /// has one need not read the clock again. It can be earlier than a
    /// previous [`Clock::now`] returned, by as long as `instant` is old;
    /// the limiters take such a time as a slightly stale one.
    ///
    /// By default the current time, `instant` ignored: a clock of its
    /// own time (a [`FakeClock`]) does not follow the monotonic one.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use petstore_core::{Clock, SystemClock};
    ///
    /// let clock = SystemClock::new();
    /// let arrived = Instant::now();
    /// let later = clock.now();
    /// assert!(clock.at(arrived) <= later);
    /// let then = clock.at(arrived + Duration::from_secs(5));
    /// assert_eq!(then.saturating_duration_since(clock.at(arrived)), Duration::from_secs(5));
    /// ```
    fn at(&self, instant: Instant) -> Timestamp {
        let _ = instant;
        self.now()
    }
}

/// The real clock: Unix time read once, then advanced by the monotonic
/// clock, so a wall-clock step (NTP, an operator) cannot refill or drain a
/// bucket.
#[derive(Clone, Copy, Debug)]
pub struct SystemClock {
    origin: Instant,
    origin_unix: u64,
}

impl SystemClock {
    /// A clock starting at the current wall-clock time.
    pub fn new() -> Self {
        let origin_unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        SystemClock {
            origin: Instant::now(),
            origin_unix,
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        self.at(Instant::now())
    }

    fn at(&self, instant: Instant) -> Timestamp {
        Timestamp(self.origin_unix) + instant.saturating_duration_since(self.origin)
    }
}

/// A clock that moves only when told to, for deterministic tests.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use petstore_core::{Clock, FakeClock, Timestamp};
/// let clock = FakeClock::new(Timestamp::from_unix_secs(1_000));
/// clock.advance(Duration::from_secs(5));
/// assert_eq!(clock.now(), Timestamp::from_unix_secs(1_005));
/// ```
#[derive(Debug, Default)]
pub struct FakeClock(AtomicU64);

impl FakeClock {
    /// A clock standing at `start`.
    pub fn new(start: Timestamp) -> Self {
        FakeClock(AtomicU64::new(start.0))
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.0.fetch_add(nanos, Ordering::SeqCst);
    }

    /// Sets the clock (tests only; a real clock never goes back).
    pub fn set(&self, to: Timestamp) {
        self.0.store(to.0, Ordering::SeqCst);
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }
}

impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    fn now(&self) -> Timestamp {
        (**self).now()
    }

    fn at(&self, instant: Instant) -> Timestamp {
        (**self).at(instant)
    }
}

/// The date `days` days after 1970-01-01: `(year, month, day)`.
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// Appends a Unix time as RFC 3339 in UTC, whole seconds,
/// `2026-11-28T10:00:00Z`, to `out`: [`rfc3339_utc`] without its
/// allocations, for pages of many times.
pub fn write_rfc3339(secs: u64, out: &mut Vec<u8>) {
    let (year, month, day) = civil_from_days((secs / 86_400) as i64);
    if !(0..=9_999).contains(&year) {
        out.extend_from_slice(rfc3339_utc(secs, None).as_bytes());
        return;
    }
    let rem = secs % 86_400;
    let two = |out: &mut Vec<u8>, n: u64| {
        out.extend_from_slice(&[b'0' + (n / 10) as u8, b'0' + (n % 10) as u8])
    };
    let year = year as u64;
    two(out, year / 100);
    two(out, year % 100);
    out.push(b'-');
    two(out, month as u64);
    out.push(b'-');
    two(out, day as u64);
    out.push(b'T');
    two(out, rem / 3_600);
    out.push(b':');
    two(out, rem / 60 % 60);
    out.push(b':');
    two(out, rem % 60);
    out.push(b'Z');
}

/// A Unix time as RFC 3339 in UTC, `2026-11-28T10:00:00Z`, with
/// milliseconds when given (`...:00.123Z`): the log's timestamps and a key
/// entry's `expiresAt`.
pub fn rfc3339_utc(secs: u64, millis: Option<u32>) -> String {
    let (year, month, day) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    let (hour, minute, second) = (rem / 3_600, rem / 60 % 60, rem % 60);
    match millis {
        Some(millis) => {
            format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{millis:03}Z")
        }
        None => format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z"),
    }
}

/// Days from 1970-01-01 to `year-month-day`, for a month of 1 to 12 (a
/// day past the month's end counts on into the next: check a date by
/// [`civil_from_days`] of the result).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_ways_agree_over_four_centuries() {
        // 1900 (not a leap year), 2000 (one), and every day between.
        for days in days_from_civil(1900, 1, 1)..days_from_civil(2300, 1, 1) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(days_from_civil(2000, 2, 29), 11_016);
        assert_eq!(civil_from_days(days_from_civil(2100, 2, 29)), (2100, 3, 1));
    }

    #[test]
    fn the_writer_writes_what_the_formatter_formats() {
        for secs in [
            0,
            59,
            86_399,
            951_782_400,
            1_764_324_000,
            4_102_444_799,
            253_402_300_800,
        ] {
            let mut out = Vec::new();
            write_rfc3339(secs, &mut out);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                rfc3339_utc(secs, None),
                "{secs}"
            );
        }
    }
}
