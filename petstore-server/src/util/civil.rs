//! Days since the Unix epoch and dates of the proleptic Gregorian
//! calendar, both ways (Howard Hinnant's `days_from_civil` and
//! `civil_from_days`): the log's timestamps and a key's `expiresAt` are
//! written with one ([`rfc3339_utc`]), a certificate's expiry and a key's
//! `expiresAt` are read with the other.

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
}
