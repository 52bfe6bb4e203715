//! A key entry's `expiresAt`: an RFC 3339 date-time, read into the
//! [`Timestamp`] from which the key is refused (401, "the key expired"),
//! and `keygen --expires-in`'s durations (`90d`, `12h`, `30m`, `45s`).

use std::time::Duration;

use petstore_core::Timestamp;

use petstore_core::clock::{civil_from_days, days_from_civil, rfc3339_utc};

/// The instant an RFC 3339 date-time names
/// (`2027-02-26T10:00:00Z`, `2027-02-26T11:00:00.5+01:00`); `None` for
/// anything else, or a date before 1970. Lower-case `t` and `z` are taken,
/// as RFC 3339 allows.
pub fn parse_rfc3339(text: &str) -> Option<Timestamp> {
    let b = text.as_bytes();
    let digits = |from: usize, len: usize| -> Option<i64> {
        let part = b.get(from..from + len)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let (year, month, day) = (digits(0, 4)?, digits(5, 2)?, digits(8, 2)?);
    let (hour, minute, second) = (digits(11, 2)?, digits(14, 2)?, digits(17, 2)?);
    let separators = [(4, b'-'), (7, b'-'), (13, b':'), (16, b':')];
    if separators.iter().any(|&(at, c)| b.get(at) != Some(&c))
        || !matches!(b.get(10), Some(b'T' | b't'))
    {
        return None;
    }
    // The calendar's own checks: a day past its month's end moves the
    // date, which a round trip shows.
    let days = days_from_civil(year, month, day);
    if !(1..=12).contains(&month) || civil_from_days(days) != (year, month, day) {
        return None;
    }
    // A leap second (60) is refused: no clock here counts one.
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let mut at = 19;
    let mut nanos = 0i64;
    if b.get(at) == Some(&b'.') {
        let count = b[at + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if count == 0 {
            return None;
        }
        for i in 0..9 {
            let digit = if i < count {
                i64::from(b[at + 1 + i] - b'0')
            } else {
                0
            };
            nanos = nanos * 10 + digit;
        }
        at += 1 + count;
    }
    let offset = match b.get(at..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (h, m) = (digits(at + 1, 2)?, digits(at + 4, 2)?);
            if h > 23 || m > 59 {
                return None;
            }
            let minutes = h * 60 + m;
            if *sign == b'+' {
                minutes
            } else {
                -minutes
            }
        }
        _ => return None,
    };
    let secs = days * 86_400 + hour * 3_600 + minute * 60 + second - offset * 60;
    let secs = u64::try_from(secs).ok()?;
    Some(Timestamp::from_unix_secs(secs) + Duration::from_nanos(nanos as u64))
}

/// `instant` as RFC 3339 in UTC, whole seconds (`keygen`'s `expiresAt`).
pub fn format_rfc3339(instant: Timestamp) -> String {
    rfc3339_utc(instant.as_unix_nanos() / 1_000_000_000, None)
}

/// A duration as `keygen --expires-in` takes it: a whole number and a
/// unit, `d`, `h`, `m` or `s` (`90d`); at least one second, at most
/// 100 years.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let form = "a whole number and a unit: 90d, 12h, 30m or 45s";
    let unit = text.chars().last().ok_or(form)?;
    let number: u64 = text[..text.len() - unit.len_utf8()]
        .parse()
        .map_err(|_| format!("{text:?} is not {form}"))?;
    let seconds = match unit {
        'd' => 86_400,
        'h' => 3_600,
        'm' => 60,
        's' => 1,
        _ => return Err(format!("{text:?} is not {form}")),
    };
    let total = number
        .checked_mul(seconds)
        .filter(|s| (1..=100 * 365 * 86_400).contains(s))
        .ok_or_else(|| format!("{text:?} must be from 1 second to 100 years"))?;
    Ok(Duration::from_secs(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_times_are_read_as_rfc_3339_writes_them() {
        let t = |s| parse_rfc3339(s).map(|t| t.as_unix_nanos());
        assert_eq!(t("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            t("2026-11-28T10:00:00Z"),
            Some(1_795_860_000 * 1_000_000_000)
        );
        assert_eq!(t("2026-11-28t11:00:00+01:00"), t("2026-11-28T10:00:00z"));
        assert_eq!(t("2026-11-28T09:30:00-00:30"), t("2026-11-28T10:00:00Z"));
        assert_eq!(
            t("2026-11-28T10:00:00.25Z"),
            t("2026-11-28T10:00:00Z").map(|n| n + 250_000_000)
        );
        assert_eq!(
            t("2028-02-29T00:00:00Z"),
            Some(1_835_395_200 * 1_000_000_000)
        );
        for bad in [
            "",
            "2026-11-28",
            "2026-11-28 10:00:00Z",
            "2026-11-28T10:00:00",
            "2026-02-29T10:00:00Z",
            "2026-13-01T10:00:00Z",
            "2026-11-28T24:00:00Z",
            "2026-11-28T10:00:60Z",
            "2026-11-28T10:00:00.Z",
            "2026-11-28T10:00:00+0100",
            "2026-11-28T10:00:00+24:00",
            "1969-12-31T23:59:59Z",
            "2026-11-28T10:00:00Zjunk",
            "+026-11-28T10:00:00Z",
            "２026-11-28T10:00:00Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_formatted_instant_reads_back() {
        for secs in [0, 1_795_860_000, 1_835_395_200, 4_102_444_799] {
            let t = Timestamp::from_unix_secs(secs);
            assert_eq!(parse_rfc3339(&format_rfc3339(t)), Some(t));
        }
        assert_eq!(
            format_rfc3339(Timestamp::from_unix_secs(1_795_860_000)),
            "2026-11-28T10:00:00Z"
        );
    }

    #[test]
    fn durations_take_one_unit() {
        assert_eq!(parse_duration("90d"), Ok(Duration::from_secs(90 * 86_400)));
        assert_eq!(parse_duration("12h"), Ok(Duration::from_secs(43_200)));
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1_800)));
        assert_eq!(parse_duration("45s"), Ok(Duration::from_secs(45)));
        for bad in [
            "",
            "d",
            "90",
            "90w",
            "0d",
            "-1d",
            "1.5d",
            "99999999999999d",
            "90dé",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
