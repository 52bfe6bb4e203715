//! [`ApiError`]: every error the HTTP API answers, and the one place that
//! maps each to its status, `code`, message and extra headers.

use std::time::Duration;

use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE};
use hyper::{Response, StatusCode};
use serde::Serialize;

use crate::keys::Scope;

pub use super::response_body::ResponseBody;

/// The response type of every handler.
pub type HttpResponse = Response<ResponseBody>;

/// An error answer of the API. The variants are the closed set of `code`
/// values documented in docs/contract.md ("Errors") and the OpenAPI document.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// 400 `invalid_body`.
    #[error("{0}")]
    InvalidBody(String),
    /// 400 `invalid_query`.
    #[error("{0}")]
    InvalidQuery(String),
    /// 400 `invalid_path`.
    #[error("{0}")]
    InvalidPath(String),
    /// 400 `invalid_header`: a request header breaks HTTP/1.1's rules
    /// (not exactly one `Host`).
    #[error("{0}")]
    InvalidHeader(String),
    /// 400 `invalid_idempotency_key`: the `Idempotency-Key` header is not
    /// a key (the message names the fault), or was sent twice.
    #[error("{0}")]
    InvalidIdempotencyKey(String),
    /// 401 `unauthorized`; `key_sent` tells a missing key from a bad one.
    #[error("{}", if *.key_sent { "the API key is not valid" } else { "an API key is required: send Authorization: Bearer <key>" })]
    Unauthorized {
        /// A key (or something in the Authorization header) was sent.
        key_sent: bool,
    },
    /// 401 `unauthorized`: a key of the table whose `expiresAt` has
    /// passed.
    #[error("the API key expired")]
    KeyExpired,
    /// 403 `insufficient_scope`: the key's scopes do not cover the
    /// operation; names the scope it needs.
    #[error("this API key's scopes do not include {0}, which this operation needs")]
    InsufficientScope(Scope),
    /// 404 `not_found`.
    #[error("{0}")]
    NotFound(String),
    /// 405 `method_not_allowed`, with the `Allow` header's value.
    #[error("method not allowed; allowed: {allow}")]
    MethodNotAllowed {
        /// The methods the path allows.
        allow: &'static str,
    },
    /// 408 `request_timeout`: the body did not arrive in time.
    #[error("the request body did not arrive within {0} s")]
    RequestTimeout(u64),
    /// 409 `status_conflict`: the pet's current status does not allow the
    /// transition; the message is the core's, naming the current status
    /// and the statuses the transition needs.
    #[error("{0}")]
    StatusConflict(String),
    /// 409 `idempotency_key_in_use`: the key's first request is still
    /// being answered.
    #[error(
        "a request with this Idempotency-Key is still being processed; retry once it is answered"
    )]
    IdempotencyKeyInUse,
    /// 422 `idempotency_key_reused`: the key was used with another
    /// request (method, path or body).
    #[error("this Idempotency-Key was used with another request (a different method, path or body); use a new key for a new request")]
    IdempotencyKeyReused,
    /// 410 `cursor_expired`: the feed cannot resume from the cursor (its
    /// events are past their retention, or it is beyond the newest); the
    /// message says which. The client lists again.
    #[error("{0}")]
    CursorExpired(String),
    /// 429 `too_many_waiters` (this key's) or 503 (the server's, `total`):
    /// as many requests already wait for events as may.
    #[error("{}", if *.total { "this server has as many requests waiting for events as it takes; retry without wait, or later" } else { "this API key has as many requests waiting for events as it may; retry without wait, or once one is answered" })]
    TooManyWaiters {
        /// The server's cap, not the key's.
        total: bool,
    },
    /// 413 `payload_too_large`.
    #[error("the request body is larger than {0} bytes")]
    PayloadTooLarge(usize),
    /// 415 `unsupported_media_type`.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 429 `rate_limited`.
    #[error("rate limit exceeded; retry after {} s", secs(*.retry_after))]
    RateLimited {
        /// Until a request would be allowed.
        retry_after: Duration,
    },
    /// 429 `key_banned`.
    #[error("this API key is temporarily banned after repeated requests over its limit; retry after {} s", secs(*.retry_after))]
    KeyBanned {
        /// Until the ban ends.
        retry_after: Duration,
    },
    /// 500 `internal`: details are logged, never sent.
    #[error("internal error")]
    Internal,
    /// 501 `not_implemented`.
    #[error("{0}")]
    NotImplemented(String),
    /// 503 `unavailable`: pets cannot be stored now. The message is the
    /// same whatever the cause (docs/contract.md, "Errors"): a client gets no path and
    /// no error number; the cause is logged once, when it starts.
    #[error("pets cannot be stored right now; reading pets still works")]
    Unavailable,
    /// 503 `unavailable`: a pet or an order (which of the two) this
    /// server does not hold yet may exist (another replica may just have
    /// made it), and the store could not be asked. Never a 404 for one
    /// that may have been acknowledged.
    #[error("this {0} cannot be looked up right now; try again shortly")]
    Unconfirmed(&'static str),
}

/// The `WWW-Authenticate` value of a 403 for `scope`: one static text
/// per scope, no formatting on the way.
fn insufficient_scope(scope: Scope) -> &'static str {
    match scope {
        Scope::PetsRead => {
            r#"Bearer realm="petstore", error="insufficient_scope", scope="pets:read""#
        }
        Scope::PetsWrite => {
            r#"Bearer realm="petstore", error="insufficient_scope", scope="pets:write""#
        }
        Scope::Orders => r#"Bearer realm="petstore", error="insufficient_scope", scope="orders""#,
        Scope::OrdersAll => {
            r#"Bearer realm="petstore", error="insufficient_scope", scope="orders:all""#
        }
        Scope::Events => r#"Bearer realm="petstore", error="insufficient_scope", scope="events""#,
    }
}

/// Whole seconds, rounded up, at least 1: the `Retry-After` value.
pub fn secs(d: Duration) -> u64 {
    (d.as_nanos().div_ceil(1_000_000_000) as u64).max(1)
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    code: &'a str,
    message: &'a str,
    status: u16,
}

impl ApiError {
    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidBody(_)
            | ApiError::InvalidQuery(_)
            | ApiError::InvalidPath(_)
            | ApiError::InvalidHeader(_)
            | ApiError::InvalidIdempotencyKey(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized { .. } | ApiError::KeyExpired => StatusCode::UNAUTHORIZED,
            ApiError::InsufficientScope(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::StatusConflict(_) | ApiError::IdempotencyKeyInUse => StatusCode::CONFLICT,
            ApiError::CursorExpired(_) => StatusCode::GONE,
            ApiError::TooManyWaiters { total: false } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::TooManyWaiters { total: true } => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::IdempotencyKeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::RateLimited { .. } | ApiError::KeyBanned { .. } => {
                StatusCode::TOO_MANY_REQUESTS
            }
            ApiError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::NotImplemented(_) => StatusCode::NOT_IMPLEMENTED,
            ApiError::Unavailable | ApiError::Unconfirmed(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The machine-readable `code`.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::InvalidBody(_) => "invalid_body",
            ApiError::InvalidQuery(_) => "invalid_query",
            ApiError::InvalidPath(_) => "invalid_path",
            ApiError::InvalidHeader(_) => "invalid_header",
            ApiError::InvalidIdempotencyKey(_) => "invalid_idempotency_key",
            ApiError::IdempotencyKeyInUse => "idempotency_key_in_use",
            ApiError::IdempotencyKeyReused => "idempotency_key_reused",
            ApiError::Unauthorized { .. } | ApiError::KeyExpired => "unauthorized",
            ApiError::InsufficientScope(_) => "insufficient_scope",
            ApiError::NotFound(_) => "not_found",
            ApiError::MethodNotAllowed { .. } => "method_not_allowed",
            ApiError::RequestTimeout(_) => "request_timeout",
            ApiError::StatusConflict(_) => "status_conflict",
            ApiError::CursorExpired(_) => "cursor_expired",
            ApiError::TooManyWaiters { .. } => "too_many_waiters",
            ApiError::PayloadTooLarge(_) => "payload_too_large",
            ApiError::UnsupportedMediaType(_) => "unsupported_media_type",
            ApiError::RateLimited { .. } => "rate_limited",
            ApiError::KeyBanned { .. } => "key_banned",
            ApiError::Internal => "internal",
            ApiError::NotImplemented(_) => "not_implemented",
            ApiError::Unavailable | ApiError::Unconfirmed(_) => "unavailable",
        }
    }

    /// The `{code, message, status}` body: of the response, and of an
    /// event stream's last event (`event: error`).
    pub fn body(&self) -> Vec<u8> {
        let message = self.to_string();
        let body = ErrorBody {
            code: self.code(),
            message: &message,
            status: self.status().as_u16(),
        };
        // Serialising three plain fields into a Vec cannot fail.
        serde_json::to_vec(&body).unwrap_or_default()
    }

    /// The response: the `{code, message, status}` body and this error's
    /// own headers (`Allow`, `Retry-After`, `WWW-Authenticate`).
    pub fn to_response(&self) -> HttpResponse {
        let mut response = Response::new(ResponseBody::full(self.body()));
        *response.status_mut() = self.status();
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        match self {
            ApiError::MethodNotAllowed { allow } => {
                headers.insert(ALLOW, HeaderValue::from_static(allow));
            }
            ApiError::RateLimited { retry_after } | ApiError::KeyBanned { retry_after } => {
                headers.insert(RETRY_AFTER, HeaderValue::from(secs(*retry_after)));
            }
            ApiError::Unauthorized { key_sent } => {
                let value = if *key_sent {
                    r#"Bearer realm="petstore", error="invalid_token""#
                } else {
                    r#"Bearer realm="petstore""#
                };
                headers.insert(WWW_AUTHENTICATE, HeaderValue::from_static(value));
            }
            ApiError::KeyExpired => {
                headers.insert(
                    WWW_AUTHENTICATE,
                    HeaderValue::from_static(
                        r#"Bearer realm="petstore", error="invalid_token", error_description="the key expired""#,
                    ),
                );
            }
            // RFC 6750 3.1: the scope the request needs.
            ApiError::InsufficientScope(scope) => {
                headers.insert(
                    WWW_AUTHENTICATE,
                    HeaderValue::from_static(insufficient_scope(*scope)),
                );
            }
            _ => {}
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_and_status_agree_for_every_code() {
        let all = [
            ApiError::InvalidBody("b".into()),
            ApiError::InvalidQuery("q".into()),
            ApiError::InvalidPath("p".into()),
            ApiError::InvalidHeader("h".into()),
            ApiError::InvalidIdempotencyKey("k".into()),
            ApiError::IdempotencyKeyInUse,
            ApiError::IdempotencyKeyReused,
            ApiError::Unauthorized { key_sent: false },
            ApiError::KeyExpired,
            ApiError::InsufficientScope(Scope::Orders),
            ApiError::NotFound("n".into()),
            ApiError::MethodNotAllowed { allow: "GET" },
            ApiError::RequestTimeout(10),
            ApiError::StatusConflict("pet 7 is sold; sell needs available or pending".into()),
            ApiError::PayloadTooLarge(65_536),
            ApiError::UnsupportedMediaType("m".into()),
            ApiError::RateLimited {
                retry_after: Duration::from_millis(1),
            },
            ApiError::KeyBanned {
                retry_after: Duration::from_secs(600),
            },
            ApiError::Internal,
            ApiError::NotImplemented("o".into()),
            ApiError::Unavailable,
            ApiError::Unconfirmed("pet"),
            ApiError::CursorExpired("c".into()),
            ApiError::TooManyWaiters { total: false },
            ApiError::TooManyWaiters { total: true },
        ];
        for e in all {
            let response = e.to_response();
            assert_eq!(response.status(), e.status());
            let body = http_body_util::BodyExt::collect(response.into_body());
            let bytes = collect_on_a_new_runtime(body);
            let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(v["code"], e.code());
            assert_eq!(v["status"], e.status().as_u16());
            assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()));
            assert_eq!(v.as_object().map(|o| o.len()), Some(3));
        }
    }

    /// Collects a response body on a tokio runtime of its own, built for
    /// the one call (tests only: `http/` runs on no runtime).
    fn collect_on_a_new_runtime(
        fut: impl std::future::Future<
            Output = Result<
                http_body_util::Collected<hyper::body::Bytes>,
                std::convert::Infallible,
            >,
        >,
    ) -> hyper::body::Bytes {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(fut).map(|c| c.to_bytes()).unwrap()
    }

    #[test]
    fn retry_after_rounds_up_to_at_least_one_second() {
        assert_eq!(secs(Duration::ZERO), 1);
        assert_eq!(secs(Duration::from_millis(1)), 1);
        assert_eq!(secs(Duration::from_millis(19_001)), 20);
        let r = ApiError::RateLimited {
            retry_after: Duration::from_millis(2_500),
        }
        .to_response();
        assert_eq!(r.headers()[RETRY_AFTER], "3");
    }
}
