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

/// The request's `Origin` if it is one of the allowed origins.
pub fn allowed_origin(origins: &[String], request: &HeaderMap) -> Option<HeaderValue> {
    // With CORS off (the default) every request would look up a header
    // that cannot matter.
    if origins.is_empty() {
        return None;
    }
    let origin = request.get(ORIGIN)?;
    origins
        .iter()
        .any(|allowed| allowed.as_bytes() == origin.as_bytes())
        .then(|| origin.clone())
}

/// Adds the CORS headers of an actual (non-preflight) response.
pub fn decorate(response: &mut HeaderMap, origin: Option<HeaderValue>, enabled: bool) {
    if enabled {
        // The answer depends on Origin whenever CORS is on, allowed or not.
        response.append(VARY, HeaderValue::from_static("Origin"));
    }
    if let Some(origin) = origin {
        response.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin);
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
