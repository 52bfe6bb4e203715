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

/// The rate-limit header values of a limiter that depend only on its
/// quota: `RateLimit-Policy` (e.g. `"minute";q=60;w=60, "day";q=1000;w=86400`)
/// and each window's `X-RateLimit-Limit`. Built once per key (at load),
/// not per request, and [`intern`]ed, so it is `Copy` and a request hands
/// the values to its response without formatting, allocating, validating
/// or touching a shared reference count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaHeaders {
    policy: &'static str,
    /// `(limit, its digits)` per window, minute first; a limiter without a
    /// day window repeats the minute's.
    limits: [(u32, &'static str); 2],
}

impl QuotaHeaders {
    /// The values of the limiter that made `decision`.
    pub fn of(decision: &Decision) -> Self {
        let mut policy = String::with_capacity(48);
        let mut limits = [(0, ""); 2];
        for (i, w) in decision.windows().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            let _ = write!(
                policy,
                "{sep}\"{}\";q={};w={}",
                w.name,
                w.limit,
                w.period.as_secs()
            );
            if let Some(slot) = limits.get_mut(i) {
                *slot = (w.limit, static_text(w.limit.to_string()));
            }
        }
        if limits[1].1.is_empty() {
            limits[1] = limits[0];
        }
        QuotaHeaders {
            policy: static_text(policy),
            limits,
        }
    }

    /// The `RateLimit-Policy` value.
    pub fn policy(&self) -> HeaderValue {
        HeaderValue::from_static(self.policy)
    }

    /// The `X-RateLimit-Limit` value for a window of `limit` requests.
    fn limit(&self, limit: u32) -> HeaderValue {
        match self.limits.iter().find(|(l, _)| *l == limit) {
            Some((_, text)) => HeaderValue::from_static(text),
            None => HeaderValue::from(limit),
        }
    }
}

/// `text` for the life of the process ([`intern`]ed), when it is a valid
/// static header value; else the empty string.
fn static_text(text: String) -> &'static str {
    // Exactly what `from_static` accepts (it panics on anything else; it
    // is stricter than `from_str`, which also takes bytes over 0x7f).
    if !text
        .bytes()
        .all(|b| b == b'\t' || (0x20..0x7f).contains(&b))
    {
        return "";
    }
    intern(&text)
}

/// Adds the rate-limit headers describing `decision`; `quota` holds the
/// values that depend only on the limiter's quota.
///
/// This runs on every request, so nothing goes through `fmt` (which cost
/// more than the rest of a list request; README, "Performance"): the
/// three changing values are written as digits into one buffer and handed
/// to the header map as slices of it, one allocation for all.
pub fn rate_limit(headers: &mut HeaderMap, decision: &Decision, quota: &QuotaHeaders) {
    let binding = decision.binding();
    let mut buf = Vec::with_capacity(64);
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
    headers.insert(X_RATELIMIT_LIMIT, quota.limit(binding.limit));
    for (name, range) in [
        (X_RATELIMIT_REMAINING, remaining),
        (X_RATELIMIT_RESET, reset),
        (RATELIMIT, current),
    ] {
        if let Some(v) = slice(range) {
            headers.insert(name, v);
        }
    }
    headers.insert(RATELIMIT_POLICY, quota.policy());
}

/// Appends `n` in decimal; returns where it landed. With `itoa` (four
/// digits per step): a list response writes seven numbers, and a digit
/// at a time was 800 instructions of it (`scripts/profile`).
pub fn push_u64(buf: &mut Vec<u8>, n: u64) -> std::ops::Range<usize> {
    let start = buf.len();
    buf.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    start..buf.len()
}

/// The successor-version `Link` of `getPet`, built once at startup.
pub fn successor_link(base_url: &str) -> HeaderValue {
    HeaderValue::from_static(static_text(format!(
        "<{base_url}/pets>; rel=\"successor-version\""
    )))
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
        rate_limit(&mut h, &d, &QuotaHeaders::of(&d));
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
        rate_limit(&mut h, &d, &QuotaHeaders::of(&d));
        assert_eq!(h[&X_RATELIMIT_LIMIT], "2");
        assert_eq!(h[&X_RATELIMIT_REMAINING], "1");
        assert_eq!(h[&RATELIMIT], r#""day";r=1;t=43200"#);
        assert_eq!(h[&X_RATELIMIT_RESET], "1043201");
    }

    #[test]
    fn interned_values_are_shared_not_leaked_again() {
        let a = static_text("\"minute\";q=7;w=60".to_owned());
        let b = static_text("\"minute\";q=7;w=60".to_owned());
        assert_eq!(a, b);
        assert_eq!(a.as_ptr(), b.as_ptr());
        assert_eq!(static_text("bad\nvalue".to_owned()), "");
        assert_eq!(static_text("caf\u{e9}".to_owned()), "");
    }

    #[test]
    fn digits() {
        let mut buf = Vec::new();
        for n in [
            0,
            7,
            9,
            10,
            42,
            99,
            100,
            101,
            999,
            12_345,
            1_000_000,
            u64::MAX,
        ] {
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
