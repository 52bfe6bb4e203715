//! CORS, off unless `--cors-origin` names origins: preflight answers and
//! the headers that let a browser page on an allowed origin read responses.

use hyper::header::{
    HeaderMap, HeaderValue, ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS,
    ACCESS_CONTROL_ALLOW_ORIGIN, ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE, ORIGIN,
    VARY,
};

/// The headers a browser script may read besides the safelisted ones.
const EXPOSED: &str = "Location, Link, Retry-After, Deprecation, Sunset, RateLimit, RateLimit-Policy, \
                       X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, WWW-Authenticate";

/// The request's `Origin` when it is one of the allowed origins, copied
/// out of the request head; empty otherwise (and always with CORS off).
///
/// Why a copy: the head's values are slices of hyper's connection read
/// buffer. A request that waits (its body, a shared rate limit, the
/// store) and kept any of them would keep that buffer shared, and hyper's
/// read-ahead then allocates a fresh 8 KiB buffer for the connection
/// (`scripts/bench/profile`: `BytesMut::reserve_inner`). So a waiting request
/// keeps this instead of the head. Boxed: 8 bytes in every request, and
/// an allocation only for an allowed origin.
#[derive(Clone, Debug, Default)]
pub struct Origin(Option<Box<HeaderValue>>);

impl Origin {
    /// The allowed origin of `request` among `origins`.
    pub fn of(origins: &[String], request: &HeaderMap) -> Origin {
        // With CORS off (the default) every request would look up a header
        // that cannot matter.
        if origins.is_empty() {
            return Origin(None);
        }
        let allowed = request.get(ORIGIN).filter(|origin| {
            origins
                .iter()
                .any(|allowed| allowed.as_bytes() == origin.as_bytes())
        });
        Origin(allowed.and_then(|origin| {
            HeaderValue::from_bytes(origin.as_bytes())
                .ok()
                .map(Box::new)
        }))
    }

    /// Whether the request came from an allowed origin.
    pub fn is_allowed(&self) -> bool {
        self.0.is_some()
    }
}

/// Adds the CORS headers of an actual (non-preflight) response.
pub fn decorate(response: &mut HeaderMap, origin: &Origin, enabled: bool) {
    if enabled {
        // The answer depends on Origin whenever CORS is on, allowed or not.
        response.append(VARY, HeaderValue::from_static("Origin"));
    }
    if let Some(origin) = &origin.0 {
        response.insert(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::clone(origin));
        response.insert(
            ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static(EXPOSED),
        );
    }
}

/// Adds the headers of a preflight answer for an allowed origin.
pub fn preflight(response: &mut HeaderMap, methods: &'static str) {
    response.insert(
        ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static(methods),
    );
    response.insert(
        ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("Authorization, Content-Type"),
    );
    response.insert(ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
}
