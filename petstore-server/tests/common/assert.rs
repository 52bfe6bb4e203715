//! Assertions on error bodies and rate-limit headers.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

#[allow(unused_imports)]
use super::*;

/// Asserts an error response: this status, `application/json`, a body of
/// exactly `{code, message, status}` with this code and `status` equal to
/// the HTTP status. Returns the message.
pub fn assert_error(resp: &Response, status: u16, code: &str) -> String {
    assert_eq!(resp.status, status, "wrong status: {}", resp.describe());
    let ct = resp.single("content-type").to_ascii_lowercase();
    assert!(
        ct == "application/json" || ct.starts_with("application/json;"),
        "error Content-Type is not application/json: {}",
        resp.describe()
    );
    let v = resp.json();
    let obj = v
        .as_object()
        .unwrap_or_else(|| panic!("error body is not an object: {}", resp.describe()));
    let keys: BTreeSet<&str> = obj.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        BTreeSet::from(["code", "message", "status"]),
        "error body fields: {}",
        resp.describe()
    );
    assert_eq!(obj["code"], code, "error code: {}", resp.describe());
    assert_eq!(
        obj["status"].as_u64(),
        Some(u64::from(status)),
        "error body status: {}",
        resp.describe()
    );
    let message = obj["message"]
        .as_str()
        .unwrap_or_else(|| panic!("message is not a string: {}", resp.describe()));
    assert!(
        !message.trim().is_empty(),
        "empty message: {}",
        resp.describe()
    );
    message.to_owned()
}

/// Whether `message` names `field` as a word of its own.
pub fn names(message: &str, field: &str) -> bool {
    message
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|w| w == field)
}

/// Asserts that the error message names the field.
pub fn assert_names(message: &str, field: &str, context: &str) {
    assert!(
        names(message, field),
        "{context}: message {message:?} does not name `{field}`"
    );
}

/// A parsed `RateLimit` header: `"minute";r=42;t=18`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimitField {
    /// The window name.
    pub name: String,
    /// `r=`: requests remaining.
    pub remaining: u64,
    /// `t=`: seconds until the window is full again.
    pub reset: u64,
}

/// Parses a `RateLimit` header value of one window.
pub fn parse_ratelimit(value: &str) -> RateLimitField {
    let mut parts = value.split(';').map(str::trim);
    let name = parts.next().unwrap_or_default();
    let name = name
        .strip_prefix('"')
        .and_then(|n| n.strip_suffix('"'))
        .unwrap_or_else(|| panic!("RateLimit {value:?}: window name not quoted"));
    let mut remaining = None;
    let mut reset = None;
    for p in parts {
        let (k, v) = p
            .split_once('=')
            .unwrap_or_else(|| panic!("RateLimit {value:?}: parameter {p:?}"));
        let n: u64 = v
            .parse()
            .unwrap_or_else(|_| panic!("RateLimit {value:?}: {p:?} not an integer"));
        match k {
            "r" => remaining = Some(n),
            "t" => reset = Some(n),
            _ => panic!("RateLimit {value:?}: unexpected parameter {k}"),
        }
    }
    RateLimitField {
        name: name.to_owned(),
        remaining: remaining.unwrap_or_else(|| panic!("RateLimit {value:?}: no r=")),
        reset: reset.unwrap_or_else(|| panic!("RateLimit {value:?}: no t=")),
    }
}

/// The `X-RateLimit-*` triple of a response: limit, remaining, reset.
pub fn x_ratelimit(resp: &Response) -> (u64, u64, u64) {
    (
        resp.header_u64("x-ratelimit-limit"),
        resp.header_u64("x-ratelimit-remaining"),
        resp.header_u64("x-ratelimit-reset"),
    )
}

/// Asserts that all four rate-limit headers are present once.
pub fn assert_has_ratelimit_headers(resp: &Response) {
    for h in [
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
        "ratelimit-policy",
        "ratelimit",
    ] {
        let _ = resp.single(h);
    }
}

/// The path of a `Link: <PATH>; rel="next"` header's target; panics on
/// any other form.
pub fn next_path(link: &str) -> String {
    link.strip_prefix('<')
        .and_then(|l| l.split_once(">; rel=\"next\""))
        .map(|(url, _)| url.to_owned())
        .unwrap_or_else(|| panic!("Link {link:?}"))
}
