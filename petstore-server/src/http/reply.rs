//! Pieces every answer is made of: JSON and empty responses, the CORS
//! headers of every response, and the headers of an operation's refusal.

use hyper::body::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};

use super::api::Api;
use super::cors;
use super::error::{ApiError, HttpResponse, ResponseBody};
use crate::headers::{self, Binding, QuotaHeaders};

/// The CORS headers every response carries when CORS is on.
/// `origin`: the request's allowed origin ([`cors::Origin::of`]).
pub(super) fn decorate(api: &Api, origin: &cors::Origin, response: &mut HttpResponse) {
    cors::decorate(response.headers_mut(), origin, api.cors_on());
}

/// An error answer of an operation, with the rate-limit headers of the
/// charged bucket (and the deprecation headers of `getPet`).
pub(super) fn refusal(
    api: &Api,
    error: &ApiError,
    binding: Binding,
    quota: &QuotaHeaders,
    deprecated: bool,
) -> HttpResponse {
    let mut response = error.to_response();
    headers::rate_limit(response.headers_mut(), binding, quota);
    if deprecated {
        headers::deprecation(response.headers_mut(), api.successor_link());
    }
    response
}

pub(super) fn json(status: StatusCode, body: Bytes) -> HttpResponse {
    let mut response = Response::new(ResponseBody::full(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

pub(super) fn empty(status: StatusCode) -> HttpResponse {
    let mut response = Response::new(ResponseBody::default());
    *response.status_mut() = status;
    response
}
