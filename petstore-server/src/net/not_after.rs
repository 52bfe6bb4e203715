//! When a served certificate chain stops being valid: the earliest
//! `notAfter` of its certificates (RFC 5280 section 4.1.2.5), read from
//! their DER, for the metric an expiry alert watches.
//!
//! Why by hand: it is one field at a fixed place of the structure (the
//! fifth or sixth of the to-be-signed part), and a general X.509 parser
//! would bring its ASN.1 and parser crates into the build for it. What
//! is read is the operator's own file, which rustls has already taken;
//! whatever this reader cannot follow (a length past the end, a time in
//! another form) makes it answer `None`, never panic.

use rustls::pki_types::CertificateDer;

use petstore_core::clock::{civil_from_days, days_from_civil};

const SEQUENCE: u8 = 0x30;
/// `[0] EXPLICIT`: the optional version before the serial number.
const VERSION: u8 = 0xa0;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;

/// The earliest `notAfter` of `chain`, in Unix seconds; `None` when no
/// certificate of it could be read.
pub(super) fn earliest_not_after(chain: &[CertificateDer<'_>]) -> Option<i64> {
    chain.iter().filter_map(|cert| not_after(cert)).min()
}

/// One certificate's `notAfter`, in Unix seconds.
fn not_after(der: &[u8]) -> Option<i64> {
    let (certificate, _) = expect(SEQUENCE, der)?;
    let (tbs, _) = expect(SEQUENCE, certificate)?;
    let (tag, _, after_first) = element(tbs)?;
    // serialNumber (after the version, when there is one), signature,
    // issuer; then validity.
    let mut fields = if tag == VERSION { after_first } else { tbs };
    for _ in 0..3 {
        fields = element(fields)?.2;
    }
    let (validity, _) = expect(SEQUENCE, fields)?;
    let (_, _, after_not_before) = element(validity)?;
    let (tag, time, _) = element(after_not_before)?;
    unix_seconds(tag, time)
}

/// The contents of the element at the start of `der` when its tag is
/// `tag`, and what follows it.
fn expect(tag: u8, der: &[u8]) -> Option<(&[u8], &[u8])> {
    let (found, contents, rest) = element(der)?;
    (found == tag).then_some((contents, rest))
}

/// The DER element at the start of `der`: its tag, its contents, and
/// what follows it. Single-byte tags and definite lengths only, as DER
/// writes every field read here.
fn element(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        // Long form: the next `first & 0x7f` bytes, big-endian; four
        // bytes are more than any certificate holds.
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 {
            return None;
        }
        let (bytes, rest) = rest.split_at_checked(count)?;
        let len = bytes
            .iter()
            .fold(0usize, |len, &b| (len << 8) | usize::from(b));
        (len, rest)
    };
    let (contents, rest) = rest.split_at_checked(len)?;
    Some((tag, contents, rest))
}

/// A `UTCTime` (`YYMMDDHHMMSSZ`, years 1950 to 2049) or
/// `GeneralizedTime` (`YYYYMMDDHHMMSSZ`) as RFC 5280 section 4.1.2.5
/// requires them: in UTC, with seconds, without fractions.
fn unix_seconds(tag: u8, time: &[u8]) -> Option<i64> {
    let (year, rest) = match (tag, time.len()) {
        (UTC_TIME, 13) => {
            let yy = number(time.get(..2)?)?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, time.get(2..)?)
        }
        (GENERALIZED_TIME, 15) => (number(time.get(..4)?)?, time.get(4..)?),
        _ => return None,
    };
    if rest.last() != Some(&b'Z') {
        return None;
    }
    let field = |at: usize| number(rest.get(at..at + 2)?);
    let (month, day) = (field(0)?, field(2)?);
    let (hour, minute, second) = (field(4)?, field(6)?, field(8)?);
    // A day past its month's end (Feb 30) comes back as another date.
    let days = days_from_civil(year, month, day);
    let valid = (1..=12).contains(&month)
        && day >= 1
        && civil_from_days(days) == (year, month, day)
        && hour < 24
        && minute < 60
        && second < 60;
    valid.then(|| days * 86_400 + hour * 3_600 + minute * 60 + second)
}

/// Decimal digits, and nothing else.
fn number(digits: &[u8]) -> Option<i64> {
    digits.iter().try_fold(0i64, |n, &d| {
        d.is_ascii_digit().then(|| n * 10 + i64::from(d - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate valid until `year-month-day 00:00:00`
    /// UTC (rcgen writes a UTCTime before 2050, a GeneralizedTime after).
    fn cert_until(year: i32, month: u8, day: u8) -> Vec<u8> {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params.not_after = rcgen::date_time_ymd(year, month, day);
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn reads_utc_and_generalized_times() {
        // 2031-05-17 and 2051-01-01, both at midnight UTC.
        assert_eq!(not_after(&cert_until(2031, 5, 17)), Some(1_936_742_400));
        assert_eq!(not_after(&cert_until(2051, 1, 1)), Some(2_556_144_000));
        // A leap day.
        assert_eq!(not_after(&cert_until(2028, 2, 29)), Some(1_835_395_200));
    }

    #[test]
    fn a_chain_expires_with_its_earliest_certificate() {
        let chain = [cert_until(2040, 1, 1), cert_until(2030, 1, 1)].map(CertificateDer::from);
        assert_eq!(earliest_not_after(&chain), Some(1_893_456_000));
        let unreadable = [CertificateDer::from(vec![0x30, 0x00])];
        assert_eq!(earliest_not_after(&unreadable), None);
    }

    #[test]
    fn times_in_other_forms_are_not_read() {
        assert_eq!(unix_seconds(UTC_TIME, b"700101000000Z"), Some(0));
        assert_eq!(
            unix_seconds(UTC_TIME, b"491231235959Z"),
            Some(2_524_607_999)
        );
        assert_eq!(unix_seconds(UTC_TIME, b"500101000000Z"), Some(-631_152_000));
        for (tag, time) in [
            (UTC_TIME, &b"700101000000"[..]),
            (UTC_TIME, b"7001010000Z"),
            (UTC_TIME, b"701301000000Z"),
            (UTC_TIME, b"700230000000Z"),
            (UTC_TIME, b"700101240000Z"),
            (UTC_TIME, b"70010100000+Z"),
            (GENERALIZED_TIME, b"20300101000000.5Z"),
            (GENERALIZED_TIME, b"20300101000000+0100"),
            (0x04, b"700101000000Z"),
        ] {
            assert_eq!(
                unix_seconds(tag, time),
                None,
                "{:?}",
                String::from_utf8_lossy(time)
            );
        }
    }

    #[test]
    fn every_cut_of_a_certificate_is_refused_without_a_panic() {
        let der = cert_until(2031, 5, 17);
        for end in 0..der.len() {
            let cut = &der[..end];
            // The outer length no longer fits: nothing is read.
            assert_eq!(not_after(cut), None, "cut at {end}");
        }
        // Every byte changed in turn: an answer or none, never a panic.
        for at in 0..der.len() {
            let mut bent = der.clone();
            bent[at] ^= 0xff;
            let _ = not_after(&bent);
        }
    }
}
