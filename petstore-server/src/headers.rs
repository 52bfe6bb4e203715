//! Response headers that the contract puts on many responses: the
//! rate-limit headers (both the `X-RateLimit-*` trio and the IETF
//! `RateLimit`/`RateLimit-Policy` fields) and `getPet`'s deprecation
//! headers.

use std::fmt::Write as _;

use hyper::header::{HeaderMap, HeaderName, HeaderValue, LINK};
use petstore_core::Decision;

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
/// `getPet`'s announced removal.
pub const GET_PET_SUNSET: &str = "Thu, 05 Dec 2030 00:00:00 GMT";

/// A header value from text this server formatted itself (digits, quoted
/// tokens, URLs checked at startup). Such text is always a valid value;
/// if it ever were not, the header is left out rather than panicking.
pub fn value(text: String) -> Option<HeaderValue> {
    HeaderValue::try_from(text).ok()
}

/// Adds the rate-limit headers describing `decision`.
pub fn rate_limit(headers: &mut HeaderMap, decision: &Decision) {
    let binding = decision.binding();
    headers.insert(X_RATELIMIT_LIMIT, HeaderValue::from(binding.limit));
    headers.insert(X_RATELIMIT_REMAINING, HeaderValue::from(binding.remaining));
    headers.insert(
        X_RATELIMIT_RESET,
        HeaderValue::from(binding.reset_at.unix_secs_ceil()),
    );
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
    if let Some(v) = value(policy) {
        headers.insert(RATELIMIT_POLICY, v);
    }
    let current = format!(
        "\"{}\";r={};t={}",
        binding.name,
        binding.remaining,
        decision.reset_after_secs()
    );
    if let Some(v) = value(current) {
        headers.insert(RATELIMIT, v);
    }
}

/// Adds `getPet`'s `Deprecation`, `Sunset` and successor `Link`.
pub fn deprecation(headers: &mut HeaderMap, base_url: &str) {
    if let Some(v) = value(format!("@{GET_PET_DEPRECATED_AT}")) {
        headers.insert(DEPRECATION, v);
    }
    headers.insert(SUNSET, HeaderValue::from_static(GET_PET_SUNSET));
    if let Some(v) = value(format!("<{base_url}/pets>; rel=\"successor-version\"")) {
        headers.append(LINK, v);
    }
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
        rate_limit(&mut h, &d);
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
        rate_limit(&mut h, &d);
        assert_eq!(h[&X_RATELIMIT_LIMIT], "2");
        assert_eq!(h[&X_RATELIMIT_REMAINING], "1");
        assert_eq!(h[&RATELIMIT], r#""day";r=1;t=43200"#);
        assert_eq!(h[&X_RATELIMIT_RESET], "1043201");
    }

    #[test]
    fn deprecation_headers() {
        let mut h = HeaderMap::new();
        deprecation(&mut h, "/v1");
        assert_eq!(h[&DEPRECATION], "@1764892800");
        assert_eq!(h[&SUNSET], "Thu, 05 Dec 2030 00:00:00 GMT");
        assert_eq!(h[LINK], r#"</v1/pets>; rel="successor-version""#);
    }
}
