//! The names of the headers this room writes, and of the idempotency
//! headers the contract reads and writes, made once as constants.

use hyper::header::HeaderName;

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
/// `Events-Cursor`: the feed's position a list page reflects (beta).
pub const EVENTS_CURSOR: HeaderName = HeaderName::from_static("events-cursor");
/// `Last-Event-ID`: where a reconnecting stream of events resumes
/// (beta; the HTML standard's Server-Sent Events).
pub const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
/// `Idempotent-Replayed` (an answer given again for an `Idempotency-Key`).
pub const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");
/// `Idempotency-Key` (draft-ietf-httpapi-idempotency-key-header), read on
/// every POST.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
