//! Response headers that the contract puts on many responses: the
//! rate-limit headers (both the `X-RateLimit-*` trio and the IETF
//! `RateLimit`/`RateLimit-Policy` fields) and `getPet`'s deprecation
//! headers.

use std::fmt::Write as _;

use hyper::body::Bytes;
use hyper::header::{HeaderMap, HeaderName, HeaderValue, LINK};
use petstore_core::Decision;

use crate::intern::intern;

/// `X-RateLimit-Limit`.
pub const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
/// `X-RateLimit-Remaining`.
pub const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
/// `X-RateLimit-Reset`.
pub const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
/// `RateLimit` (draft-ietf-httpapi-ratelimit-headers).
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
/// `RateLimit-Policy`.
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `Deprecation` (RFC 9745).
pub const DEPRECATION: HeaderName = HeaderName::from_static("deprecation");
/// `Sunset` (RFC 8594).
pub const SUNSET: HeaderName = HeaderName::from_static("sunset");

/// When v1.0.0 declared `getPet` deprecated: 2025-12-05T00:00:00Z.
pub const GET_PET_DEPRECATED_AT: u64 = 1_764_892_800;
/// The `Deprecation` value: `@` and [`GET_PET_DEPRECATED_AT`].
pub const DEPRECATION_VALUE: &str = "@1764892800";
/// `getPet`'s announced removal.
pub const GET_PET_SUNSET: &str = "Thu, 05 Dec 2030 00:00:00 GMT";

/// A header value from text this server formatted itself (digits, quoted
/// tokens, URLs checked at startup). Such text is always a valid value;
/// if it ever were not, the header is left out rather than panicking.
pub fn value(text: String) -> Option<HeaderValue> {
    HeaderValue::try_from(text).ok()
}

/// The `RateLimit-Policy` value of a key's windows, e.g.
/// `"minute";q=60;w=60, "day";q=1000;w=86400`. It depends only on the
/// quota, so it is built once per key (at load), not per request, and
/// [`intern`]ed: every request clones it, and cloning a static value
/// touches no shared reference count.
pub fn policy(decision: &Decision) -> HeaderValue {
    let mut policy = String::with_capacity(48);
    for (i, w) in decision.windows().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        let _ = write!(
            policy,
            "{sep}\"{}\";q={};w={}",
            w.name,
            w.limit,
            w.period.as_secs()
        );
    }
    static_value(policy)
}

/// A header value for the life of the process ([`intern`]ed). Text that
/// is not a valid static header value gives an empty value.
fn static_value(text: String) -> HeaderValue {
    // Exactly what `from_static` accepts (it panics on anything else; it
    // is stricter than `from_str`, which also takes bytes over 0x7f).
    if !text
        .bytes()
        .all(|b| b == b'\t' || (0x20..0x7f).contains(&b))
    {
        return HeaderValue::from_static("");
    }
    HeaderValue::from_static(intern(&text))
}

/// Adds the rate-limit headers describing `decision`; `policy` is the
/// key's [`policy`] value.
///
/// This runs on every request, so the four changing values are written as
/// digits into one buffer and handed to the header map as slices of it:
/// one allocation, no `fmt` machinery (which cost more than the rest of a
/// list request, measured with callgrind; see the README).
pub fn rate_limit(headers: &mut HeaderMap, decision: &Decision, policy: &HeaderValue) {
    let binding = decision.binding();
    let mut buf = Vec::with_capacity(80);
    let limit = push_u64(&mut buf, u64::from(binding.limit));
    let remaining = push_u64(&mut buf, u64::from(binding.remaining));
    let reset = push_u64(&mut buf, binding.reset_at.unix_secs_ceil());
    let start = buf.len();
    buf.push(b'"');
    buf.extend_from_slice(binding.name.as_bytes());
    buf.extend_from_slice(b"\";r=");
    push_u64(&mut buf, u64::from(binding.remaining));
    buf.extend_from_slice(b";t=");
    push_u64(&mut buf, decision.reset_after_secs());
    let current = start..buf.len();
    let buf = Bytes::from(buf);
    let slice =
        |range: std::ops::Range<usize>| HeaderValue::from_maybe_shared(buf.slice(range)).ok();
    for (name, range) in [
        (X_RATELIMIT_LIMIT, limit),
        (X_RATELIMIT_REMAINING, remaining),
        (X_RATELIMIT_RESET, reset),
        (RATELIMIT, current),
    ] {
        if let Some(v) = slice(range) {
            headers.insert(name, v);
        }
    }
    headers.insert(RATELIMIT_POLICY, policy.clone());
}

/// Appends `n` in decimal; returns where it landed.
pub fn push_u64(buf: &mut Vec<u8>, mut n: u64) -> std::ops::Range<usize> {
    let start = buf.len();
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[i..]);
    start..buf.len()
}

/// The successor-version `Link` of `getPet`, built once at startup.
pub fn successor_link(base_url: &str) -> HeaderValue {
    static_value(format!("<{base_url}/pets>; rel=\"successor-version\""))
}

/// Adds `getPet`'s `Deprecation`, `Sunset` and successor `Link`.
pub fn deprecation(headers: &mut HeaderMap, successor: &HeaderValue) {
    headers.insert(DEPRECATION, HeaderValue::from_static(DEPRECATION_VALUE));
    headers.insert(SUNSET, HeaderValue::from_static(GET_PET_SUNSET));
    headers.append(LINK, successor.clone());
}

#[cfg(test)]
mod tests {
    use super::*;
    use petstore_core::{BanPolicy, KeyLimiter, Quota, Timestamp};
    use std::time::Duration;

    #[test]
    fn describes_the_binding_window() {
        let limiter = KeyLimiter::new(Quota::new(60, 1000).unwrap(), BanPolicy::default());
        let t = Timestamp::from_unix_secs(1_000_000);
        let d = limiter.check(t);
        let mut h = HeaderMap::new();
        rate_limit(&mut h, &d, &policy(&d));
        assert_eq!(h[&X_RATELIMIT_LIMIT], "60");
        assert_eq!(h[&X_RATELIMIT_REMAINING], "59");
        // One token used of 60/min: full again 1 s later.
        assert_eq!(h[&X_RATELIMIT_RESET], "1000001");
        assert_eq!(
            h[&RATELIMIT_POLICY],
            r#""minute";q=60;w=60, "day";q=1000;w=86400"#
        );
        assert_eq!(h[&RATELIMIT], r#""minute";r=59;t=1"#);

        // When the day has fewer left than the minute, the day binds.
        let tight = KeyLimiter::new(Quota::new(60, 2).unwrap(), BanPolicy::default());
        let d = tight.check(t + Duration::from_millis(500));
        let mut h = HeaderMap::new();
        rate_limit(&mut h, &d, &policy(&d));
        assert_eq!(h[&X_RATELIMIT_LIMIT], "2");
        assert_eq!(h[&X_RATELIMIT_REMAINING], "1");
        assert_eq!(h[&RATELIMIT], r#""day";r=1;t=43200"#);
        assert_eq!(h[&X_RATELIMIT_RESET], "1043201");
    }

    #[test]
    fn interned_values_are_shared_not_leaked_again() {
        let a = static_value("\"minute\";q=7;w=60".to_owned());
        let b = static_value("\"minute\";q=7;w=60".to_owned());
        assert_eq!(a, b);
        assert_eq!(a.as_bytes().as_ptr(), b.as_bytes().as_ptr());
        assert_eq!(static_value("bad\nvalue".to_owned()), "");
        assert_eq!(static_value("caf\u{e9}".to_owned()), "");
    }

    #[test]
    fn digits() {
        let mut buf = Vec::new();
        for n in [0, 7, 10, 99, 1_000_000, u64::MAX] {
            let range = push_u64(&mut buf, n);
            assert_eq!(&buf[range], n.to_string().as_bytes());
        }
    }

    #[test]
    fn deprecation_headers() {
        let mut h = HeaderMap::new();
        deprecation(&mut h, &successor_link("/v1"));
        assert_eq!(DEPRECATION_VALUE, format!("@{GET_PET_DEPRECATED_AT}"));
        assert_eq!(h[&DEPRECATION], "@1764892800");
        assert_eq!(h[&SUNSET], "Thu, 05 Dec 2030 00:00:00 GMT");
        assert_eq!(h[LINK], r#"</v1/pets>; rel="successor-version""#);
    }
}
