//! The HTTP contract: [`admit`] makes every check of one parsed request
//! that needs no body, and [`Admitted::finish`] answers it once the body
//! is read ([`respond`] is both, for a body already read). Synchronous and
//! free of sockets, so every rule is testable without a server;
//! `server.rs` only reads the body between the two. With `--redis` the
//! rate limit is decided in Redis: [`admit`] then answers
//! [`Admission::Charge`], `server.rs` awaits the decision and hands it to
//! [`admit_decided`] (`limits/mod.rs`, "How a request meets the seam").
//! The other await is the store's ([`Waiting::finish`]): a create the
//! store cannot answer at once, or a get of an id its read copy may not
//! hold yet; which backend answers is the store's business (`store/`),
//! not this file's.
//!
//! Order of checks for the operations (README, "Routing and order of
//! checks"): route, method, key, rate limit, query, path, body; of the
//! body, what its headers tell (415, a declared length over the cap) is
//! checked by [`admit`], the rest by [`Admitted::finish`].

use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{
    HeaderMap, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, HOST, TRANSFER_ENCODING,
};
use hyper::http::request::Parts;
use hyper::{Method, Response, StatusCode, Version};
use petstore_core::{quote, Decision, ListQuery, NewPet, Outcome, Pet, PetError, PetId};

use crate::auth::{authorization, Authorization};
use crate::connection::Connection;
use crate::error::{ApiError, HttpResponse};
use crate::headers::{Extra, QuotaHeaders};
use crate::limits::redis::{Charge, RedisLimits};
use crate::state::AppState;
use crate::store::CreateFailed;
use crate::{buffers, cors, headers, health, query};

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
            (Route::Pets, false) => "GET, HEAD, POST",
            (Route::Pets, true) => "GET, HEAD, POST, OPTIONS",
            (_, false) => "GET, HEAD",
            (_, true) => "GET, HEAD, OPTIONS",
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

/// Answers one request on `connection` whose body has been read: [`admit`],
/// then [`Admitted::finish`]. Also returns what the access log and
/// metrics record of it.
///
/// Synchronous: with Redis, the rate limit is decided by this process's
/// own limiter (the fallback), as it cannot wait for Redis. A request
/// that must wait for the store ([`Finished::Waiting`]) is awaited on a
/// runtime of its own, so call this outside any runtime (it is for tests
/// and embedders; the server awaits instead). With the in-memory store
/// nothing waits.
pub fn respond(connection: &Connection, head: &Parts, body: BodyRead) -> (HttpResponse, Served) {
    let empty = matches!(&body, BodyRead::Complete(bytes) if bytes.is_empty());
    let admitted = match admit(connection, head, empty) {
        Admission::Answered(response, served) => return (response, served),
        Admission::Admitted(admitted) => admitted,
        Admission::Charge(pending) => {
            let decision = pending.decide_here(&connection.state);
            match admit_decided(connection, head, empty, pending, decision) {
                Decided::Admitted(admitted) => admitted,
                Decided::Answered(response, served) => return (response, served),
            }
        }
    };
    match admitted.finish(connection, head, body) {
        Finished::Answered(response, served) => (response, served),
        Finished::Waiting(waiting) => match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime.block_on(waiting.finish(connection, head)),
            Err(_) => (ApiError::Internal.to_response(), Served::default()),
        },
    }
}

/// What [`admit`] decided before the body was read.
#[derive(Debug)]
pub enum Admission {
    /// Answered without the body: a refusal, or a route that takes none.
    Answered(HttpResponse, Served),
    /// Passed every check that needs no body: [`Admitted::finish`] answers
    /// it once the body is read.
    Admitted(Admitted),
    /// The rate limit is decided elsewhere (Redis, `--redis`): the server
    /// awaits [`Pending::decide`] and calls [`admit_decided`] with it.
    Charge(Pending),
}

/// What [`admit_decided`] made of a request once its rate limit was
/// decided: [`Admission`] but for the rate limit to await.
#[derive(Debug)]
pub enum Decided {
    /// Refused (429, 401, or a check after the rate limit).
    Answered(HttpResponse, Served),
    /// Passed every check that needs no body.
    Admitted(Admitted),
}

/// A request whose rate-limit decision has to be awaited: whose buckets
/// it charges, the backend that decides, and what [`admit`] found before
/// the rate limit (the operation, the caller), so that
/// [`admit_decided`] goes on from there instead of checking again (a
/// keys reload meanwhile cannot give the decision to another entry).
#[derive(Debug)]
pub struct Pending {
    limits: RedisLimits,
    charge: Charge,
    op: PendingOperation,
    served: Served,
    quota: QuotaHeaders,
    caller: Result<&'static str, ApiError>,
}

/// [`Operation`] owning its path segment, to outlive an await.
#[derive(Debug)]
enum PendingOperation {
    ListPets,
    CreatePet,
    GetPet(Box<str>),
    ListOrders,
}

impl PendingOperation {
    fn new(op: Operation<'_>) -> PendingOperation {
        match op {
            Operation::ListPets => PendingOperation::ListPets,
            Operation::CreatePet => PendingOperation::CreatePet,
            Operation::GetPet(segment) => PendingOperation::GetPet(segment.into()),
            Operation::ListOrders => PendingOperation::ListOrders,
        }
    }

    fn as_operation(&self) -> Operation<'_> {
        match self {
            PendingOperation::ListPets => Operation::ListPets,
            PendingOperation::CreatePet => Operation::CreatePet,
            PendingOperation::GetPet(segment) => Operation::GetPet(segment),
            PendingOperation::ListOrders => Operation::ListOrders,
        }
    }
}

impl Pending {
    /// The decision (never fails: the backend falls back to this
    /// replica's own limiter).
    pub async fn decide(&self, state: &AppState) -> Decision {
        self.limits.decide(state, &self.charge).await
    }

    /// The decision of this process's own limiter (Redis's fallback).
    pub fn decide_here(&self, state: &AppState) -> Decision {
        crate::limits::redis::decide_here(state, &self.charge)
    }
}

/// A request to an operation that passed route, method, key, rate limit,
/// query, path and, for a create, the content type and declared length.
/// Its token is already charged.
#[derive(Debug)]
pub struct Admitted {
    op: Checked,
    decision: Decision,
    quota: QuotaHeaders,
    served: Served,
}

/// An operation whose query and path are parsed.
#[derive(Clone, Copy, Debug)]
enum Checked {
    ListPets(ListQuery),
    CreatePet,
    GetPet(PetId),
    ListOrders,
}

/// The checks of one request that need no body, in the order of the
/// README ("Routing and order of checks"): route, method, key, rate limit,
/// query, path, and of the body what its headers tell (415, a declared
/// length over the cap: 413). `body_empty` says whether the request has
/// no body at all (hyper knows from its framing).
///
/// Why before the body: a client that sends `Expect: 100-continue` is
/// invited to send its body (hyper's `100 Continue`) only when the server
/// first reads it, so a request refused here is refused without inviting a
/// byte of it; and a body is never read for a request that is refused
/// anyway.
pub fn admit(connection: &Connection, head: &Parts, body_empty: bool) -> Admission {
    let state = &*connection.state;
    let route =
        Route::find(head.uri.path()).filter(|r| *r != Route::Metrics || state.metrics.is_some());
    let mut served = Served {
        route: route.map_or(UNKNOWN, Route::template),
        ..Served::default()
    };
    if let Err(error) = framing(head, body_empty) {
        return answered(state, head, error.to_response(), served);
    }
    let Some(route) = route else {
        let response =
            ApiError::NotFound(format!("no route for {}", quote(head.uri.path()))).to_response();
        return answered(state, head, response, served);
    };
    let cors_on = !state.options.cors_origins.is_empty();
    // HEAD is GET without the body (decisions.md): the same work, the same
    // token; hyper sends the headers (`Content-Length` included) and drops
    // the body.
    let get = head.method == Method::GET || head.method == Method::HEAD;
    let response = match (&head.method, route) {
        (_, Route::Health) if get => {
            let (status, body) = health::check(&state.store);
            json(status, body)
        }
        (_, Route::OpenApi) if get => json(StatusCode::OK, state.openapi().clone()),
        (_, Route::Metrics) if get => metrics(state),
        (_, Route::Pets) if get => {
            return operation(connection, head, body_empty, Operation::ListPets, served)
        }
        (&Method::POST, Route::Pets) => {
            return operation(connection, head, body_empty, Operation::CreatePet, served)
        }
        (_, Route::Pet(id)) if get => {
            return operation(connection, head, body_empty, Operation::GetPet(id), served)
        }
        (_, Route::Orders) if get => {
            return operation(connection, head, body_empty, Operation::ListOrders, served)
        }
        (&Method::OPTIONS, route) if cors_on => {
            let mut response = empty(StatusCode::NO_CONTENT);
            let allow = route.allow(true);
            response
                .headers_mut()
                .insert(hyper::header::ALLOW, HeaderValue::from_static(allow));
            if cors::allowed_origin(&state.options.cors_origins, &head.headers).is_some() {
                cors::preflight(response.headers_mut(), allow);
            }
            response
        }
        (_, route) => ApiError::MethodNotAllowed {
            allow: route.allow(cors_on),
        }
        .to_response(),
    };
    served.route = route.template();
    answered(state, head, response, served)
}

/// `response` with the CORS headers, as the answer of [`admit`].
fn answered(
    state: &AppState,
    head: &Parts,
    mut response: HttpResponse,
    served: Served,
) -> Admission {
    decorate(state, head, &mut response);
    Admission::Answered(response, served)
}

/// The CORS headers every response carries when CORS is on.
fn decorate(state: &AppState, head: &Parts, response: &mut HttpResponse) {
    let cors_on = !state.options.cors_origins.is_empty();
    let origin = cors::allowed_origin(&state.options.cors_origins, &head.headers);
    cors::decorate(response.headers_mut(), origin, cors_on);
}

/// The framing rules of HTTP/1.1 that hyper leaves to the application:
/// exactly one `Host` (RFC 9112 section 3.2; decisions.md), and no
/// transfer coding but `chunked` (section 6.1: hyper decodes the chunks
/// of `gzip, chunked` and would hand over gzip bytes as the body).
fn framing(head: &Parts, body_empty: bool) -> Result<(), ApiError> {
    if head.version == Version::HTTP_11 {
        let mut hosts = head.headers.get_all(HOST).iter();
        let count = match (hosts.next(), hosts.next()) {
            (None, _) => 0,
            (Some(_), None) => 1,
            (Some(_), Some(_)) => 2,
        };
        if count != 1 {
            return Err(ApiError::InvalidHeader(format!(
                "an HTTP/1.1 request needs exactly one Host header, and this one has {}",
                if count == 0 { "none" } else { "more than one" }
            )));
        }
    }
    // A request without a body has no transfer coding (hyper reads a
    // chunked body, even an empty one, as a body that is not yet ended):
    // the bodiless fast path looks up no header for this.
    if !body_empty {
        let mut codings = head
            .headers
            .get_all(TRANSFER_ENCODING)
            .iter()
            .flat_map(|value| value.as_bytes().split(|b| *b == b','))
            .map(<[u8]>::trim_ascii)
            .filter(|coding| !coding.is_empty());
        match (codings.next(), codings.next()) {
            (None, _) => {}
            (Some(coding), None) if coding.eq_ignore_ascii_case(b"chunked") => {}
            _ => {
                return Err(ApiError::NotImplemented(
                    "the only transfer coding implemented is chunked, alone".into(),
                ))
            }
        }
    }
    Ok(())
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

/// Key, rate limit, then the checks of the operation that need no body;
/// a refusal carries the rate-limit headers.
fn operation(
    connection: &Connection,
    head: &Parts,
    body_empty: bool,
    op: Operation<'_>,
    served: Served,
) -> Admission {
    let (authorized, quota, caller) = authorize(connection, &head.headers);
    let decision = match authorized {
        Authorized::Decided(decision) => decision,
        Authorized::Charge(limits, charge) => {
            return Admission::Charge(Pending {
                limits,
                charge,
                op: PendingOperation::new(op),
                served,
                quota,
                caller,
            })
        }
    };
    let found = Found {
        op,
        served,
        quota,
        caller,
    };
    match limited(connection, head, body_empty, found, decision) {
        Decided::Admitted(admitted) => Admission::Admitted(admitted),
        Decided::Answered(response, served) => Admission::Answered(response, served),
    }
}

/// [`admit`] once the awaited rate-limit decision of
/// [`Admission::Charge`] is in: the checks after the rate limit, with
/// `decision` as its answer. Admitted, or answered (a refusal).
pub fn admit_decided(
    connection: &Connection,
    head: &Parts,
    body_empty: bool,
    pending: Pending,
    decision: Decision,
) -> Decided {
    let Pending {
        op,
        served,
        quota,
        caller,
        ..
    } = pending;
    let found = Found {
        op: op.as_operation(),
        served,
        quota,
        caller,
    };
    limited(connection, head, body_empty, found, decision)
}

/// What the checks before the rate limit found: the operation, what the
/// access log records so far, and the charged limiter's quota headers and
/// caller (the key's entry name, or why there is no valid key).
struct Found<'a> {
    op: Operation<'a>,
    served: Served,
    quota: QuotaHeaders,
    caller: Result<&'static str, ApiError>,
}

/// The rate limit's `decision` applied, then the checks of the operation
/// that need no body.
fn limited(
    connection: &Connection,
    head: &Parts,
    body_empty: bool,
    found: Found<'_>,
    decision: Decision,
) -> Decided {
    let state = &*connection.state;
    let Found {
        op,
        mut served,
        quota,
        caller,
    } = found;
    let checked = match decision.outcome {
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
            Ok(_) => check(head, body_empty, op),
        },
    };
    served.key = caller.ok();
    match checked {
        Ok(op) => Decided::Admitted(Admitted {
            op,
            decision,
            quota,
            served,
        }),
        Err(error) => {
            let deprecated = matches!(op, Operation::GetPet(_));
            let mut response = refusal(state, &error, &decision, &quota, deprecated);
            decorate(state, head, &mut response);
            Decided::Answered(response, served)
        }
    }
}

/// Query, path, and what the headers tell of the body.
fn check(head: &Parts, body_empty: bool, op: Operation<'_>) -> Result<Checked, ApiError> {
    let query = head.uri.query();
    match op {
        Operation::ListPets => Ok(Checked::ListPets(query::list_query(query)?)),
        Operation::CreatePet => {
            query::expect_none(query)?;
            content_type(&head.headers, body_empty)?;
            if declared_length(&head.headers).is_some_and(|n| n > MAX_BODY as u64) {
                return Err(ApiError::PayloadTooLarge(MAX_BODY));
            }
            Ok(Checked::CreatePet)
        }
        Operation::GetPet(segment) => {
            query::expect_none(query)?;
            Ok(Checked::GetPet(query::pet_id(segment)?))
        }
        Operation::ListOrders => {
            query::expect_none(query)?;
            Ok(Checked::ListOrders)
        }
    }
}

/// The `Content-Length` a request declares, when it is a number.
pub fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

/// What [`Admitted::finish`] made of a request: its answer, or the store
/// work it must wait for first.
#[derive(Debug)]
pub enum Finished {
    /// Answered without waiting: every read of a pet the inventory holds,
    /// every refusal, and a create in memory.
    Answered(HttpResponse, Served),
    /// A create the store answers later (a journal's fsync, a PostgreSQL
    /// commit), or a get of an id the store's read copy may not hold yet:
    /// [`Waiting::finish`] awaits it and answers.
    Waiting(Waiting),
}

/// An admitted request waiting for the store. Holds no thread: the server
/// awaits [`finish`](Self::finish).
#[derive(Debug)]
pub struct Waiting {
    admitted: Admitted,
    work: Work,
}

#[derive(Debug)]
enum Work {
    Create(NewPet),
    CatchUp(PetId),
}

impl Waiting {
    /// Awaits the store, then answers as [`Admitted::finish`] would have.
    pub async fn finish(self, connection: &Connection, head: &Parts) -> (HttpResponse, Served) {
        let state = &*connection.state;
        let result = match self.work {
            Work::Create(new) => created(state, state.store.create(new).await),
            Work::CatchUp(id) => {
                state.store.catch_up(id).await;
                get_pet(state, id)
            }
        };
        self.admitted.answer(state, head, result)
    }
}

impl Admitted {
    /// Answers the admitted request with `body`, what the server read of
    /// its body, or says what it must wait for.
    pub fn finish(self, connection: &Connection, head: &Parts, body: BodyRead) -> Finished {
        let state = &*connection.state;
        let result = match self.op {
            Checked::ListPets(list) => no_body(&body).map(|()| list_pets(state, &list)),
            Checked::CreatePet => match new_pet(body) {
                Err(error) => Err(error),
                Ok(new) => match state.store.create_now(new) {
                    Ok(stored) => created(state, stored),
                    Err(new) => return self.wait(Work::Create(new)),
                },
            },
            Checked::GetPet(id) => {
                // Asked before the read, not after a miss: a read copy
                // that takes the pet in between would otherwise answer
                // 404 for a pet it holds (another replica's, just made).
                let may_catch_up = state.store.may_catch_up(id);
                match no_body(&body).and_then(|()| get_pet(state, id)) {
                    // Only a 404 waits for the store to know more.
                    Err(ApiError::NotFound(_)) if may_catch_up => {
                        return self.wait(Work::CatchUp(id))
                    }
                    result => result,
                }
            }
            Checked::ListOrders => no_body(&body).and_then(|()| {
                Err(ApiError::NotImplemented(
                    "store orders are not implemented: the specification gives only the operation's existence".into(),
                ))
            }),
        };
        let (response, served) = self.answer(state, head, result);
        Finished::Answered(response, served)
    }

    fn wait(self, work: Work) -> Finished {
        Finished::Waiting(Waiting {
            admitted: self,
            work,
        })
    }

    /// The response to `result`, with the rate-limit and CORS headers.
    fn answer(
        self,
        state: &AppState,
        head: &Parts,
        result: Result<Success<'_>, ApiError>,
    ) -> (HttpResponse, Served) {
        let mut response = match result {
            Ok(success) => {
                let mut response = Response::new(Full::new(success.body));
                *response.status_mut() = success.status;
                *response.headers_mut() = self.quota.success(&self.decision, success.extra);
                response
            }
            Err(error) => {
                let deprecated = matches!(self.op, Checked::GetPet(_));
                refusal(state, &error, &self.decision, &self.quota, deprecated)
            }
        };
        decorate(state, head, &mut response);
        (response, self.served)
    }
}

/// An error answer of an operation, with the rate-limit headers of the
/// charged bucket (and the deprecation headers of `getPet`).
fn refusal(
    state: &AppState,
    error: &ApiError,
    decision: &Decision,
    quota: &QuotaHeaders,
    deprecated: bool,
) -> HttpResponse {
    let mut response = error.to_response();
    headers::rate_limit(response.headers_mut(), decision, quota);
    if deprecated {
        headers::deprecation(response.headers_mut(), state.successor_link());
    }
    response
}

/// A 2xx answer of an operation; [`QuotaHeaders::success`] makes its
/// headers.
struct Success<'a> {
    status: StatusCode,
    body: Bytes,
    extra: Extra<'a>,
}

/// What [`authorize`] found of the rate limit: decided here (in
/// process), or to be charged in Redis (`--redis`).
enum Authorized {
    Decided(Decision),
    Charge(RedisLimits, Charge),
}

/// Charges the key's buckets, or the client address's when there is no
/// valid key, in process; with Redis, says what to charge there. Also
/// returns the quota's header values of the charged limiter, and the
/// key's entry name (or why there is no valid key).
fn authorize(
    connection: &Connection,
    request: &HeaderMap,
) -> (Authorized, QuotaHeaders, Result<&'static str, ApiError>) {
    let state = &*connection.state;
    let now = state.clock.now();
    let key_sent = match authorization(request) {
        Authorization::Value(header) => {
            let charged = connection.with_key(header, |entry| {
                let authorized = match &state.redis {
                    None => Authorized::Decided(entry.limiter.check(now)),
                    Some(limits) => Authorized::Charge(limits.clone(), Charge::Key(entry.clone())),
                };
                (authorized, entry.quota_headers, entry.name)
            });
            match charged {
                Some((authorized, quota, name)) => return (authorized, quota, Ok(name)),
                // Malformed, or not a key of ours: the same 401.
                None => true,
            }
        }
        Authorization::Several => true,
        Authorization::Missing => false,
    };
    let keys = state.keys();
    let authorized = match &state.redis {
        None => Authorized::Decided(keys.anonymous.check(connection.peer, now)),
        Some(limits) => Authorized::Charge(limits.clone(), Charge::Anonymous(connection.peer)),
    };
    (
        authorized,
        keys.anonymous_headers,
        Err(ApiError::Unauthorized { key_sent }),
    )
}

fn get_pet(state: &AppState, id: PetId) -> Result<Success<'_>, ApiError> {
    match state.inventory.get_json(id) {
        Some(pet) => Ok(Success {
            status: StatusCode::OK,
            body: Bytes::from(pet),
            extra: Extra::Deprecated(state.successor_link()),
        }),
        None => Err(ApiError::NotFound(format!("no pet with id {id}"))),
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

/// 415 first (README, "order of checks"): a body of the wrong type is
/// refused whatever its size or pace, before it is read. Without a
/// Content-Type, a body that is known to be empty is simply missing (400).
fn content_type(request: &HeaderMap, body_empty: bool) -> Result<(), ApiError> {
    match request.get(CONTENT_TYPE) {
        Some(value) if is_json(value) => Ok(()),
        Some(value) => Err(ApiError::UnsupportedMediaType(format!(
            "Content-Type must be application/json, got {:?}",
            quote(&String::from_utf8_lossy(value.as_bytes()))
        ))),
        None if body_empty => Err(ApiError::InvalidBody(PetError::Empty.to_string())),
        None => Err(ApiError::UnsupportedMediaType(
            "Content-Type must be application/json, and none was sent".into(),
        )),
    }
}

/// The validated pet of a create's body.
fn new_pet(body: BodyRead) -> Result<NewPet, ApiError> {
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
    NewPet::from_json(&bytes).map_err(|e| ApiError::InvalidBody(e.to_string()))
}

/// The 201 of a stored pet, or the 503 of one the store could not store
/// (the cause is logged once, by the store, when it starts).
fn created(state: &AppState, stored: Result<Pet, CreateFailed>) -> Result<Success<'_>, ApiError> {
    let pet = stored.map_err(|CreateFailed| ApiError::Unavailable)?;
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
    use crate::store::Store;
    use hyper::header::LOCATION;
    use petstore_core::{FakeClock, Inventory, Quota, Timestamp};
    use std::net::{IpAddr, Ipv4Addr};
    use std::sync::Arc;

    const KEY: &str = "test-key";

    fn state() -> Connection {
        let keys = Keys::single("test", KEY, Quota::new(1000, 10_000).unwrap());
        let clock = Arc::new(FakeClock::new(Timestamp::from_unix_secs(1_000_000)));
        let state = AppState::new(
            Store::local(Arc::new(Inventory::in_memory())),
            keys,
            None,
            clock,
            Options::default(),
        );
        Connection::new(Arc::new(state), IpAddr::V4(Ipv4Addr::LOCALHOST))
    }

    fn request(method: &str, uri: &str, headers: &[(&str, &str)]) -> Parts {
        let mut builder = hyper::Request::builder()
            .method(method)
            .uri(uri)
            .header("host", "x");
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
            "GET, HEAD, POST"
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
