//! The HTTP contract: [`respond`] turns one parsed request into its
//! response over the core. Synchronous and free of sockets, so every rule
//! is testable without a server; `server.rs` only reads the body and calls
//! it.
//!
//! Order of checks for the operations (README, "Routing and order of
//! checks"): route, method, key, rate limit, query, path, body.

use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use hyper::http::request::Parts;
use hyper::{Method, Response, StatusCode};
use petstore_core::{quote, Decision, ListQuery, NewPet, Outcome, PetError};

use crate::auth::{authorization, Authorization};
use crate::connection::Connection;
use crate::error::{ApiError, HttpResponse};
use crate::headers::{Extra, QuotaHeaders};
use crate::state::AppState;
use crate::{buffers, cors, headers, query};

/// The OpenAPI document, embedded so the binary serves exactly the file in
/// the repository.
pub const OPENAPI: &str = include_str!("../openapi.json");

/// The one server URL of [`OPENAPI`], as written in the file.
const OPENAPI_SERVER_URL: &str = "\"url\": \"/v1\"";

/// The document as served for `base_url`: the file itself when there is
/// no configured base address (`/v1`), else the file with that address as
/// its server URL, so that generated clients and tools call the public
/// address instead of guessing `http://localhost/v1`. Built once at start
/// ([`AppState::new`]), never per request. A text replacement, not a
/// parse and re-encode, so every other byte stays the file's (a unit test
/// checks that the file names its server URL exactly once).
pub fn openapi_document(base_url: &str) -> Bytes {
    if base_url == "/v1" {
        return Bytes::from_static(OPENAPI.as_bytes());
    }
    // A JSON string literal of the URL (`--base-url` refuses quotes
    // already; the encoder makes sure).
    let url = serde_json::to_string(base_url).unwrap_or_else(|_| "\"/v1\"".into());
    Bytes::from(OPENAPI.replacen(OPENAPI_SERVER_URL, &format!("\"url\": {url}"), 1))
}

/// Most bytes a request body may have (decisions.md: 64 KiB).
pub const MAX_BODY: usize = 64 * 1024;

/// What the server layer managed to read of the request body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BodyRead {
    /// The whole body (possibly empty).
    Complete(Bytes),
    /// Over [`MAX_BODY`]; not read (or not to the end).
    TooLarge,
    /// Did not arrive within the body timeout, which is given (the 408
    /// says it).
    TimedOut(Duration),
    /// The connection broke or the framing was invalid.
    Broken,
}

/// What the access log and the metrics need to know of an answered
/// request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Served {
    /// The route template, e.g. `/v1/pets/{petId}`; `unknown` for no route.
    pub route: &'static str,
    /// The name of the key's entry, when a valid key was sent.
    pub key: Option<&'static str>,
    /// `rate_limited` or `key_banned` when refused with 429.
    pub refusal: Option<&'static str>,
}

/// The routes of the service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route<'a> {
    Health,
    OpenApi,
    Pets,
    Pet(&'a str),
    Orders,
    Metrics,
}

const HEALTH: &str = "/healthz";
const OPENAPI_JSON: &str = "/v1/openapi.json";
const PETS: &str = "/v1/pets";
const PET: &str = "/v1/pets/{petId}";
const ORDERS: &str = "/v1/store/orders";
const METRICS: &str = "/metrics";
const UNKNOWN: &str = "unknown";

/// Every route template, as the metrics and the access log name a
/// request's route; the last, `unknown`, is for requests that match none.
pub const TEMPLATES: [&str; 7] = [HEALTH, OPENAPI_JSON, PETS, PET, ORDERS, METRICS, UNKNOWN];

impl<'a> Route<'a> {
    fn template(self) -> &'static str {
        match self {
            Route::Health => HEALTH,
            Route::OpenApi => OPENAPI_JSON,
            Route::Pets => PETS,
            Route::Pet(_) => PET,
            Route::Orders => ORDERS,
            Route::Metrics => METRICS,
        }
    }

    fn find(path: &'a str) -> Option<Route<'a>> {
        match path {
            HEALTH => Some(Route::Health),
            OPENAPI_JSON => Some(Route::OpenApi),
            PETS => Some(Route::Pets),
            ORDERS => Some(Route::Orders),
            METRICS => Some(Route::Metrics),
            _ => match path.strip_prefix("/v1/pets/") {
                Some(id) if !id.is_empty() && !id.contains('/') => Some(Route::Pet(id)),
                _ => None,
            },
        }
    }

    /// The `Allow` header: the methods of the path.
    fn allow(self, cors: bool) -> &'static str {
        match (self, cors) {
            (Route::Pets, false) => "GET, POST",
            (Route::Pets, true) => "GET, POST, OPTIONS",
            (_, false) => "GET",
            (_, true) => "GET, OPTIONS",
        }
    }
}

/// The three operations and the orders placeholder: the routes behind a key.
#[derive(Clone, Copy, Debug)]
enum Operation<'a> {
    ListPets,
    CreatePet,
    GetPet(&'a str),
    ListOrders,
}

/// Answers one request on `connection`. `body` is what the server read of
/// the body. Also returns what the access log and metrics record of it.
pub fn respond(connection: &Connection, head: &Parts, body: BodyRead) -> (HttpResponse, Served) {
    let state = &*connection.state;
    let cors_on = !state.options.cors_origins.is_empty();
    let origin = cors::allowed_origin(&state.options.cors_origins, &head.headers);
    let route =
        Route::find(head.uri.path()).filter(|r| *r != Route::Metrics || state.metrics.is_some());
    let Some(route) = route else {
        let mut response =
            ApiError::NotFound(format!("no route for {}", quote(head.uri.path()))).to_response();
        cors::decorate(response.headers_mut(), origin, cors_on);
        let served = Served {
            route: UNKNOWN,
            ..Served::default()
        };
        return (response, served);
    };
    let mut served = Served {
        route: route.template(),
        ..Served::default()
    };
    let mut response = match (&head.method, route) {
        (&Method::GET, Route::Health) => {
            json(StatusCode::OK, Bytes::from_static(b"{\"status\":\"ok\"}"))
        }
        (&Method::GET, Route::OpenApi) => json(StatusCode::OK, state.openapi().clone()),
        (&Method::GET, Route::Metrics) => metrics(state),
        (&Method::GET, Route::Pets) => {
            operation(connection, head, body, Operation::ListPets, &mut served)
        }
        (&Method::POST, Route::Pets) => {
            operation(connection, head, body, Operation::CreatePet, &mut served)
        }
        (&Method::GET, Route::Pet(id)) => {
            operation(connection, head, body, Operation::GetPet(id), &mut served)
        }
        (&Method::GET, Route::Orders) => {
            operation(connection, head, body, Operation::ListOrders, &mut served)
        }
        (&Method::OPTIONS, route) if cors_on => {
            let mut response = empty(StatusCode::NO_CONTENT);
            let allow = route.allow(true);
            response
                .headers_mut()
                .insert(hyper::header::ALLOW, HeaderValue::from_static(allow));
            if origin.is_some() {
                cors::preflight(response.headers_mut(), allow);
            }
            response
        }
        (_, route) => ApiError::MethodNotAllowed {
            allow: route.allow(cors_on),
        }
        .to_response(),
    };
    cors::decorate(response.headers_mut(), origin, cors_on);
    (response, served)
}

fn metrics(state: &AppState) -> HttpResponse {
    let anonymous = state.keys().anonymous.tracked();
    let text = state
        .metrics
        .as_ref()
        .map(|m| m.encode(anonymous))
        .unwrap_or_default();
    let mut response = Response::new(Full::new(Bytes::from(text)));
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    response
}

/// Key, rate limit, then the operation itself; the rate-limit headers go
/// on whatever comes out.
fn operation(
    connection: &Connection,
    head: &Parts,
    body: BodyRead,
    op: Operation<'_>,
    served: &mut Served,
) -> HttpResponse {
    let state = &*connection.state;
    let (decision, quota, caller) = authorize(connection, &head.headers);
    let result = match decision.outcome {
        Outcome::Limited { retry_after } => {
            let refused = ApiError::RateLimited { retry_after };
            served.refusal = Some(refused.code());
            Err(refused)
        }
        Outcome::Banned { retry_after } => {
            if decision.ban_started {
                let name = caller.as_ref().map_or("?", |name| *name);
                crate::log_info!(
                    "key {name:?} banned for {} s: too many requests came back before their Retry-After",
                    crate::error::secs(retry_after)
                );
            }
            let refused = ApiError::KeyBanned { retry_after };
            served.refusal = Some(refused.code());
            Err(refused)
        }
        Outcome::Allowed => match &caller {
            Err(error) => Err(error.clone()),
            Ok(_) => run(state, head, body, op),
        },
    };
    served.key = caller.ok();
    match result {
        Ok(success) => {
            let mut response = Response::new(Full::new(success.body));
            *response.status_mut() = success.status;
            *response.headers_mut() = quota.success(&decision, success.extra);
            response
        }
        Err(error) => {
            let mut response = error.to_response();
            headers::rate_limit(response.headers_mut(), &decision, &quota);
            if let Operation::GetPet(_) = op {
                headers::deprecation(response.headers_mut(), state.successor_link());
            }
            response
        }
    }
}

/// A 2xx answer of an operation; [`QuotaHeaders::success`] makes its
/// headers.
struct Success<'a> {
    status: StatusCode,
    body: Bytes,
    extra: Extra<'a>,
}

/// Charges the key's buckets, or the client address's when there is no
/// valid key. Returns the decision, the quota's header values of the
/// charged limiter, and the key's entry name (or why there is no valid
/// key).
fn authorize(
    connection: &Connection,
    request: &HeaderMap,
) -> (Decision, QuotaHeaders, Result<&'static str, ApiError>) {
    let state = &*connection.state;
    let now = state.clock.now();
    let key_sent = match authorization(request) {
        Authorization::Value(header) => {
            let charged = connection.with_key(header, |entry| {
                (entry.limiter.check(now), entry.quota_headers, entry.name)
            });
            match charged {
                Some((decision, quota, name)) => return (decision, quota, Ok(name)),
                // Malformed, or not a key of ours: the same 401.
                None => true,
            }
        }
        Authorization::Several => true,
        Authorization::Missing => false,
    };
    let keys = state.keys();
    let decision = keys.anonymous.check(connection.peer, now);
    (
        decision,
        keys.anonymous_headers,
        Err(ApiError::Unauthorized { key_sent }),
    )
}

fn run<'a>(
    state: &'a AppState,
    head: &Parts,
    body: BodyRead,
    op: Operation<'_>,
) -> Result<Success<'a>, ApiError> {
    let query = head.uri.query();
    match op {
        Operation::ListPets => {
            let list = query::list_query(query)?;
            no_body(&body)?;
            Ok(list_pets(state, &list))
        }
        Operation::CreatePet => {
            query::expect_none(query)?;
            create_pet(state, &head.headers, body)
        }
        Operation::GetPet(segment) => {
            query::expect_none(query)?;
            let id = query::pet_id(segment)?;
            no_body(&body)?;
            match state.inventory.get_json(id) {
                Some(pet) => Ok(Success {
                    status: StatusCode::OK,
                    body: Bytes::from(pet),
                    extra: Extra::Deprecated(state.successor_link()),
                }),
                None => Err(ApiError::NotFound(format!("no pet with id {id}"))),
            }
        }
        Operation::ListOrders => {
            query::expect_none(query)?;
            no_body(&body)?;
            Err(ApiError::NotImplemented(
                "store orders are not implemented: the specification gives only the operation's existence".into(),
            ))
        }
    }
}

fn list_pets<'a>(state: &'a AppState, list: &ListQuery) -> Success<'a> {
    let page = state.inventory.list_json_into(list, buffers::take());
    Success {
        status: StatusCode::OK,
        body: buffers::into_bytes(page.body),
        extra: Extra::Next {
            base_url: &state.options.base_url,
            next: page.next_after.map(|after| list.after(after)),
        },
    }
}

fn create_pet<'a>(
    state: &'a AppState,
    request: &HeaderMap,
    body: BodyRead,
) -> Result<Success<'a>, ApiError> {
    // 415 first (README, "order of checks"): a body of the wrong type is
    // refused whatever its size or pace. Without a Content-Type, a body
    // that is known to be empty is simply missing (400 below).
    let known_empty = matches!(&body, BodyRead::Complete(bytes) if bytes.is_empty());
    match request.get(CONTENT_TYPE) {
        Some(value) if is_json(value) => {}
        Some(value) => {
            return Err(ApiError::UnsupportedMediaType(format!(
                "Content-Type must be application/json, got {:?}",
                quote(&String::from_utf8_lossy(value.as_bytes()))
            )))
        }
        None if known_empty => return Err(ApiError::InvalidBody(PetError::Empty.to_string())),
        None => {
            return Err(ApiError::UnsupportedMediaType(
                "Content-Type must be application/json, and none was sent".into(),
            ))
        }
    }
    let bytes = match body {
        BodyRead::Complete(bytes) => bytes,
        BodyRead::TooLarge => return Err(ApiError::PayloadTooLarge(MAX_BODY)),
        BodyRead::TimedOut(after) => return Err(ApiError::RequestTimeout(after.as_secs())),
        BodyRead::Broken => {
            return Err(ApiError::InvalidBody(
                "the request body could not be read".into(),
            ))
        }
    };
    let new = NewPet::from_json(&bytes).map_err(|e| ApiError::InvalidBody(e.to_string()))?;
    let pet = state
        .inventory
        .create(new)
        .map_err(|e| ApiError::Unavailable(e.to_string()))?;
    Ok(Success {
        status: StatusCode::CREATED,
        body: Bytes::from(pet.to_json()),
        extra: Extra::Location {
            base_url: &state.options.base_url,
            id: pet.id(),
        },
    })
}

/// `application/json`, optionally with parameters; a charset must be UTF-8.
fn is_json(value: &HeaderValue) -> bool {
    let Ok(text) = value.to_str() else {
        return false;
    };
    let mut parts = text.split(';');
    let media = parts.next().unwrap_or("").trim();
    if !media.eq_ignore_ascii_case("application/json") {
        return false;
    }
    parts.all(|param| match param.split_once('=') {
        Some((name, value)) if name.trim().eq_ignore_ascii_case("charset") => {
            value.trim().trim_matches('"').eq_ignore_ascii_case("utf-8")
        }
        Some(_) => true,
        None => param.trim().is_empty(),
    })
}

/// Operations without a request body refuse one.
fn no_body(body: &BodyRead) -> Result<(), ApiError> {
    match body {
        BodyRead::Complete(bytes) if bytes.is_empty() => Ok(()),
        BodyRead::TooLarge => Err(ApiError::PayloadTooLarge(MAX_BODY)),
        _ => Err(ApiError::InvalidBody(
            "this operation takes no request body".into(),
        )),
    }
}

fn json(status: StatusCode, body: Bytes) -> HttpResponse {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn empty(status: StatusCode) -> HttpResponse {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = status;
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Keys;
    use crate::state::Options;
    use hyper::header::LOCATION;
    use petstore_core::{FakeClock, Inventory, Quota, Timestamp};
    use std::net::{IpAddr, Ipv4Addr};
    use std::sync::Arc;

    const KEY: &str = "test-key";

    fn state() -> Connection {
        let keys = Keys::single("test", KEY, Quota::new(1000, 10_000).unwrap());
        let clock = Arc::new(FakeClock::new(Timestamp::from_unix_secs(1_000_000)));
        let state = AppState::new(
            Arc::new(Inventory::in_memory()),
            keys,
            None,
            clock,
            Options::default(),
        );
        Connection::new(Arc::new(state), IpAddr::V4(Ipv4Addr::LOCALHOST))
    }

    fn request(method: &str, uri: &str, headers: &[(&str, &str)]) -> Parts {
        let mut builder = hyper::Request::builder().method(method).uri(uri);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).unwrap().into_parts().0
    }

    fn call(connection: &Connection, method: &str, uri: &str, body: &str) -> HttpResponse {
        let auth = format!("Bearer {KEY}");
        let head = request(
            method,
            uri,
            &[
                ("authorization", &auth),
                ("content-type", "application/json"),
            ],
        );
        let body = BodyRead::Complete(Bytes::from(body.to_owned()));
        respond(connection, &head, body).0
    }

    #[test]
    fn create_then_get_then_list() {
        let s = state();
        let created = call(&s, "POST", "/v1/pets", r#"{"name":"Rex","categoryId":2}"#);
        assert_eq!(created.status(), StatusCode::CREATED);
        assert_eq!(created.headers()[LOCATION], "/v1/pets/1");
        assert_eq!(call(&s, "GET", "/v1/pets/1", "").status(), StatusCode::OK);
        assert_eq!(
            call(&s, "GET", "/v1/pets/2", "").status(),
            StatusCode::NOT_FOUND
        );
        assert_eq!(call(&s, "GET", "/v1/pets", "").status(), StatusCode::OK);
        assert_eq!(
            call(&s, "DELETE", "/v1/pets", "").headers()["allow"],
            "GET, POST"
        );
        assert_eq!(
            call(&s, "GET", "/v1/nope", "").status(),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            call(&s, "GET", "/v1/pets/", "").status(),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            call(&s, "GET", "/v1/pets/x", "").status(),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            call(&s, "GET", "/v1/store/orders", "").status(),
            StatusCode::NOT_IMPLEMENTED
        );
    }

    #[test]
    fn refused_create_changes_nothing() {
        let s = state();
        assert_eq!(
            call(&s, "POST", "/v1/pets", r#"{"name":"","categoryId":2}"#).status(),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            call(&s, "POST", "/v1/pets?x=1", r#"{"name":"a","categoryId":2}"#).status(),
            StatusCode::BAD_REQUEST
        );
        assert!(s.state.inventory.is_empty());
    }

    #[test]
    fn unsupported_media_type_comes_before_size_and_time() {
        let s = state();
        for body in [
            BodyRead::TooLarge,
            BodyRead::TimedOut(Duration::from_secs(10)),
            BodyRead::Complete(Bytes::from_static(b"x")),
        ] {
            let head = request(
                "POST",
                "/v1/pets",
                &[
                    ("authorization", "Bearer test-key"),
                    ("content-type", "text/plain"),
                ],
            );
            let (response, _) = respond(&s, &head, body.clone());
            assert_eq!(
                response.status(),
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "{body:?}"
            );
        }
        let json = [
            ("authorization", "Bearer test-key"),
            ("content-type", "application/json"),
        ];
        let (r, _) = respond(&s, &request("POST", "/v1/pets", &json), BodyRead::TooLarge);
        assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let (r, _) = respond(
            &s,
            &request("POST", "/v1/pets", &json),
            BodyRead::TimedOut(Duration::from_secs(7)),
        );
        assert_eq!(r.status(), StatusCode::REQUEST_TIMEOUT);
    }

    #[test]
    fn the_openapi_document_names_the_base_url_as_its_server() {
        assert_eq!(OPENAPI.matches(OPENAPI_SERVER_URL).count(), 1);
        let servers = |doc: &Bytes| {
            let v: serde_json::Value = serde_json::from_slice(doc).unwrap();
            v["servers"].clone()
        };
        let plain = openapi_document("/v1");
        assert_eq!(plain.as_ref(), OPENAPI.as_bytes());
        assert_eq!(servers(&plain)[0]["url"], "/v1");
        for base in [
            "https://pets.example.com/v1",
            "/api/v1",
            "http://10.0.0.1:8080/x/v1",
        ] {
            let doc = openapi_document(base);
            assert_eq!(servers(&doc)[0]["url"], base);
            assert_eq!(servers(&doc).as_array().map(Vec::len), Some(1));
            // Nothing else changed.
            let mut a: serde_json::Value = serde_json::from_slice(&doc).unwrap();
            let mut b: serde_json::Value = serde_json::from_str(OPENAPI).unwrap();
            a["servers"] = serde_json::Value::Null;
            b["servers"] = serde_json::Value::Null;
            assert_eq!(a, b, "{base}");
        }
    }

    #[test]
    fn content_types() {
        let yes = [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/json;charset=\"UTF-8\"",
        ];
        let no = [
            "text/plain",
            "application/json; charset=latin1",
            "application/jsonx",
            "application/json; x",
        ];
        for v in yes {
            assert!(is_json(&HeaderValue::from_static(v)), "{v}");
        }
        for v in no {
            assert!(!is_json(&HeaderValue::from_static(v)), "{v}");
        }
    }
}
