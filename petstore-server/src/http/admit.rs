//! [`admit`]: every check of one parsed request that needs no body, in
//! the order of docs/http.md ("Routing and order of checks"): route,
//! method, key, rate limit, query, path, and of the body what its headers
//! tell (415, a declared length over the cap). Synchronous and free of
//! sockets, so every rule is testable without a server.
//!
//! The rate limit is the seam's ([`RateLimits`](crate::ratelimit::RateLimits)):
//! decided at once ([`Admission::Admitted`] or a refusal), or to be
//! awaited ([`Admission::Charge`]); the driver awaits it and calls
//! [`admit_decided`], which goes on from where [`admit`] stopped.
//!
//! Why before the body: a client that sends `Expect: 100-continue` is
//! invited to send its body (hyper's `100 Continue`) only when the server
//! first reads it, so a request refused here is refused without inviting a
//! byte of it; and a body is never read for a request that is refused
//! anyway.

use hyper::body::Body;
use hyper::header::{
    HeaderMap, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HOST,
    TRANSFER_ENCODING,
};
#[cfg(test)]
use hyper::http::request::Parts;
use hyper::{Method, Request, Response, StatusCode, Uri, Version};
use petstore_core::{
    idempotency::{IdempotencyKey, KeyError},
    inventory::OrderQuery,
    order::OrderId,
    quote::quote,
    Decision, ListQuery, Outcome, PetError, PetId, Timestamp, Transition,
};

use super::auth::Authorization;
use super::body::MAX_BODY;
use super::connection::Connection;
use super::cors::Origin;
use super::error::{ApiError, HttpResponse, ResponseBody};
use super::query_string::EventsRequest;
use super::reply::{decorate, empty, json, refusal};
use super::route::{order_segment, pet_segment, Operation, OrderAction, Route};
use super::weighted::weighted;
use super::{cors, docs, health, query_string};
use crate::headers::{Binding, QuotaHeaders, IDEMPOTENCY_KEY, LAST_EVENT_ID};
use crate::keys::{Scope, Scopes};
use crate::paths::UNKNOWN;
use crate::ratelimit::{Charged, Later};
use crate::state::AppState;
use petstore_core::event::EventId;

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

/// What the checks read of a request's head, borrowed where it lies.
///
/// Why not hyper's `Parts`: taking those out of the request
/// (`Request::into_parts`) moves 224 bytes, a `memcpy` on every request
/// (`scripts/bench/profile`); the driver lends the head of the request it holds
/// instead.
#[derive(Clone, Copy, Debug)]
pub struct Head<'a> {
    /// The method.
    pub method: &'a Method,
    /// The request target.
    pub uri: &'a Uri,
    /// The HTTP version.
    pub version: Version,
    /// The header fields.
    pub headers: &'a HeaderMap,
    /// Whether the request has no body at all (hyper knows from its
    /// framing).
    pub body_empty: bool,
}

impl<'a> Head<'a> {
    /// The head of `request`.
    pub fn of<B: Body>(request: &'a Request<B>) -> Self {
        Head {
            method: request.method(),
            uri: request.uri(),
            version: request.version(),
            headers: request.headers(),
            body_empty: request.body().is_end_stream(),
        }
    }

    /// The head of a request taken apart, whose body is empty or not.
    #[cfg(test)]
    pub(super) fn from_parts(parts: &'a Parts, body_empty: bool) -> Self {
        Head {
            method: &parts.method,
            uri: &parts.uri,
            version: parts.version,
            headers: &parts.headers,
            body_empty,
        }
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
    /// The rate limit is decided elsewhere (a shared limiter): the driver
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

/// A request whose rate-limit decision has to be awaited: the decision to
/// await, and what [`admit`] found before the rate limit (the operation,
/// the caller), so that [`admit_decided`] goes on from there instead of
/// checking again (a keys reload meanwhile cannot give the decision to
/// another entry).
#[derive(Debug)]
pub struct Pending {
    later: Later,
    found: Found,
    /// The checks after the rate limit, made before it is awaited (they
    /// need the request head, which a waiting request does not keep:
    /// [`Origin`]'s why) and applied once it is decided, in their order.
    checked: Result<Checked, ApiError>,
}

impl Pending {
    /// The decision (never fails: the backend falls back to this
    /// process's own limiter).
    pub async fn decide(&self) -> Decision {
        self.later.decide().await
    }

    /// The decision of this process's own limiter, for a caller that
    /// cannot wait.
    pub fn decide_here(&self, state: &AppState) -> Decision {
        self.later.decide_here(state.clock.now())
    }

    /// The route template, for a log line.
    pub fn route(&self) -> &'static str {
        self.found.served.route
    }
}

/// What the checks before the rate limit found: the operation, what the
/// access log records so far, and the charged limiter's quota headers and
/// caller (the key's entry, or why there is no valid key).
#[derive(Debug)]
struct Found {
    op: Operation,
    served: Served,
    quota: QuotaHeaders,
    caller: Result<Caller, ApiError>,
    origin: Origin,
}

/// Who a request with a valid key is: its entry's name and scopes, copied
/// out of the entry where it was looked up (a byte and a pointer: the
/// scope check needs no second lookup).
#[derive(Clone, Copy, Debug)]
struct Caller {
    name: &'static str,
    scopes: Scopes,
}

/// A request to an operation that passed route, method, key, rate limit,
/// query, path and, for a create or a transition with a body, the
/// content type and declared length.
/// Its token is already charged.
#[derive(Debug)]
pub struct Admitted {
    pub(super) op: Checked,
    /// What the rate-limit headers say of the decision: all a response
    /// needs of it once admitted ([`Binding`]'s why).
    pub(super) binding: Binding,
    pub(super) quota: QuotaHeaders,
    pub(super) served: Served,
    /// For the CORS headers of its answer: the request head is not kept.
    pub(super) origin: Origin,
    /// Whether its key has `orders:all`: it sees and acts on every key's
    /// orders.
    pub(super) all_orders: bool,
    /// A list's `Events-Cursor`: the feed's position, read before the
    /// page (`Inventory::events_head`, on why before).
    pub(super) events_cursor: Option<EventId>,
}

impl Admitted {
    /// The route template, for a log line.
    pub fn route(&self) -> &'static str {
        self.served.route
    }
}

/// An operation whose query and path are parsed; a POST with its
/// `Idempotency-Key`, when it sent one.
#[derive(Clone, Debug)]
pub(super) enum Checked {
    ListPets(ListQuery),
    CreatePet(Option<IdempotencyKey>),
    GetPet(PetId),
    Transition(PetId, Transition, Option<IdempotencyKey>),
    ListOrders(OrderQuery),
    PlaceOrder(Option<IdempotencyKey>),
    GetOrder(OrderId),
    OrderStep(OrderId, OrderAction, Option<IdempotencyKey>),
    ListEvents(EventsRequest),
    /// `listEvents` asked as a stream (`Accept: text/event-stream`),
    /// from `Last-Event-ID` when it was sent, else from `after`.
    StreamEvents(EventsRequest),
}

/// The checks of one request that need no body (the module's order);
/// `now` is when it arrived, the time its rate limit is charged at.
pub fn admit(connection: &Connection, head: Head<'_>, now: Timestamp) -> Admission {
    let (state, api) = (&*connection.state, &*connection.api);
    let route = Route::find(head.uri.path())
        .filter(|r| (*r != Route::Metrics || state.metrics.is_some()) && api.serves(*r));
    let served = Served {
        route: route.map_or(UNKNOWN, Route::template),
        ..Served::default()
    };
    let (hosts, authorization, padded) = host_and_authorization(head.headers);
    let origin = Origin::of(&api.options.cors_origins, head.headers);
    if let Err(error) = framing(head, hosts, padded) {
        return answered(connection, &origin, error.to_response(), served);
    }
    let Some(route) = route else {
        let response =
            ApiError::NotFound(format!("no route for {}", quote(head.uri.path()))).to_response();
        return answered(connection, &origin, response, served);
    };
    let cors_on = api.cors_on();
    // HEAD is GET without the body (docs/contract.md, "HTTP"): the same
    // work, the same token; hyper sends the headers (`Content-Length`
    // included) and drops the body.
    let get = *head.method == Method::GET || *head.method == Method::HEAD;
    let op = match (head.method, route) {
        (_, Route::Health) if get => {
            let (status, body) = health::check(&state.store, state.is_draining());
            return answered(connection, &origin, json(status, body), served);
        }
        (_, Route::OpenApi) if get => {
            let response = json(StatusCode::OK, api.openapi().clone());
            return answered(connection, &origin, response, served);
        }
        (_, Route::Metrics) if get => return answered(connection, &origin, metrics(state), served),
        (_, Route::Docs) if get => {
            let response = docs::page_response(api.docs_page());
            return answered(connection, &origin, response, served);
        }
        (_, Route::DocsAsset(asset)) if get => {
            let response = docs::asset_response(asset, head.headers);
            return answered(connection, &origin, response, served);
        }
        (_, Route::Pets) if get => Operation::ListPets,
        (&Method::POST, Route::Pets) => Operation::CreatePet,
        (_, Route::Pet(_)) if get => Operation::GetPet,
        (&Method::POST, Route::Transition(_, transition)) => Operation::Transition(transition),
        (_, Route::Orders) if get => Operation::ListOrders,
        (&Method::POST, Route::Orders) => Operation::PlaceOrder,
        (_, Route::Order(_)) if get => Operation::GetOrder,
        (&Method::POST, Route::OrderStep(_, action)) => Operation::OrderStep(action),
        (_, Route::Events) if get => Operation::ListEvents,
        (&Method::OPTIONS, route) if cors_on => {
            let mut response = empty(StatusCode::NO_CONTENT);
            let allow = route.allow(true);
            response
                .headers_mut()
                .insert(hyper::header::ALLOW, HeaderValue::from_static(allow));
            if origin.is_allowed() {
                cors::preflight(response.headers_mut(), allow);
            }
            return answered(connection, &origin, response, served);
        }
        (_, route) => {
            let response = ApiError::MethodNotAllowed {
                allow: route.allow(cors_on),
            }
            .to_response();
            return answered(connection, &origin, response, served);
        }
    };
    operation(connection, head, now, op, served, authorization, origin)
}

/// `response` with the CORS headers, as the answer of [`admit`].
fn answered(
    connection: &Connection,
    origin: &Origin,
    mut response: HttpResponse,
    served: Served,
) -> Admission {
    decorate(&connection.api, origin, &mut response);
    Admission::Answered(response, served)
}

/// How many `Host` headers the request has (0, 1, or 2 for more than
/// one), its `Authorization`, and the name of the first of the two whose
/// value starts or ends with whitespace, in one pass over its headers.
///
/// Why one pass and not two lookups: a lookup by name hashes the name and
/// probes the map, each time (`scripts/bench/profile` shows it), while a
/// request's head holds a handful of headers whose names compare as
/// small integers. The pass is
/// bounded by hyper's cap on the number of headers (100).
fn host_and_authorization(headers: &HeaderMap) -> (u8, Authorization<'_>, Option<&'static str>) {
    let mut hosts = 0u8;
    let mut authorization = Authorization::Missing;
    let mut padded = None;
    for (name, value) in headers {
        if name == HOST {
            hosts = hosts.saturating_add(1).min(2);
            if is_padded(value) {
                padded = padded.or(Some("Host"));
            }
        } else if name == AUTHORIZATION {
            authorization = authorization.and(value.as_bytes());
            if is_padded(value) {
                padded = padded.or(Some("Authorization"));
            }
        }
    }
    (hosts, authorization, padded)
}

/// Whether `value` starts or ends with a space or a tab: a malformed
/// field over HTTP/2 (RFC 9113 section 8.2.1), which, unlike HTTP/1.1's
/// parser, hands the value over as sent. Its first and last byte only.
fn is_padded(value: &HeaderValue) -> bool {
    let bytes = value.as_bytes();
    let blank = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
    blank(bytes.first()) || blank(bytes.last())
}

/// The refusal of an HTTP/2 request whose `name` header's value is
/// padded ([`is_padded`]).
fn padded_refusal(name: &str) -> ApiError {
    ApiError::InvalidHeader(format!(
        "the {name} header's value starts or ends with whitespace, which HTTP/2 does not allow"
    ))
}

/// The framing rules of HTTP/1.1 that hyper leaves to the application:
/// exactly one `Host` (RFC 9112 section 3.2; docs/contract.md, "HTTP"), and no
/// transfer coding but `chunked` (section 6.1: hyper decodes the chunks
/// of `gzip, chunked` and would hand over gzip bytes as the body). And
/// of HTTP/2, no `Host` or `Authorization` value with whitespace around
/// it (the h2 crate leaves that to the application).
/// `hosts` is the request's number of `Host` headers (2 for more);
/// `padded` the first of those two headers whose value is padded.
fn framing(head: Head<'_>, hosts: u8, padded: Option<&str>) -> Result<(), ApiError> {
    if let Some(name) = padded.filter(|_| head.version == Version::HTTP_2) {
        return Err(padded_refusal(name));
    }
    if head.version == Version::HTTP_11 && hosts != 1 {
        return Err(ApiError::InvalidHeader(format!(
            "an HTTP/1.1 request needs exactly one Host header, and this one has {}",
            if hosts == 0 { "none" } else { "more than one" }
        )));
    }
    // A request without a body has no transfer coding (hyper reads a
    // chunked body, even an empty one, as a body that is not yet ended):
    // the bodiless fast path looks up no header for this.
    if !head.body_empty {
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
    let mut response = Response::new(ResponseBody::full(text));
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
    head: Head<'_>,
    now: Timestamp,
    op: Operation,
    served: Served,
    authorization: Authorization<'_>,
    origin: Origin,
) -> Admission {
    let (charged, quota, caller) = authorize(connection, authorization, now);
    let found = Found {
        op,
        served,
        quota,
        caller,
        origin,
    };
    match charged {
        Charged::Now(decision) => match limited(connection, found, decision, || check(head, op)) {
            Decided::Admitted(admitted) => Admission::Admitted(admitted),
            Decided::Answered(response, served) => Admission::Answered(response, served),
        },
        Charged::Later(later) => Admission::Charge(Pending {
            later,
            found,
            checked: check(head, op),
        }),
    }
}

/// [`admit`] once the awaited rate-limit decision of
/// [`Admission::Charge`] is in: the checks after the rate limit, with
/// `decision` as its answer. Admitted, or answered (a refusal).
pub fn admit_decided(connection: &Connection, pending: Pending, decision: Decision) -> Decided {
    let Pending { found, checked, .. } = pending;
    limited(connection, found, decision, || checked)
}

/// The rate limit's `decision` applied, then the checks of the operation
/// that need no body (`check`, made only when they count).
fn limited(
    connection: &Connection,
    found: Found,
    decision: Decision,
    check: impl FnOnce() -> Result<Checked, ApiError>,
) -> Decided {
    let Found {
        op,
        mut served,
        quota,
        caller,
        origin,
    } = found;
    let checked = match decision.outcome {
        Outcome::Limited { retry_after } => {
            let refused = ApiError::RateLimited { retry_after };
            served.refusal = Some(refused.code());
            Err(refused)
        }
        Outcome::Banned { retry_after } => {
            if decision.ban_started {
                let name = caller.as_ref().map_or("?", |caller| caller.name);
                crate::log_info!(
                    "key {name:?} banned for {} s: too many requests came back before their Retry-After",
                    super::error::secs(retry_after)
                );
            }
            let refused = ApiError::KeyBanned { retry_after };
            served.refusal = Some(refused.code());
            Err(refused)
        }
        Outcome::Allowed => match &caller {
            Err(error) => Err(error.clone()),
            // Charged like any request, before the operation's own checks:
            // a key without the scope learns nothing of them.
            Ok(caller) if !covers(caller.scopes, op) => {
                Err(ApiError::InsufficientScope(op.scope()))
            }
            Ok(_) => check(),
        },
    };
    let all_orders = caller
        .as_ref()
        .is_ok_and(|caller| caller.scopes.allows(Scope::OrdersAll));
    served.key = caller.ok().map(|caller| caller.name);
    match checked {
        Ok(op) => Decided::Admitted(Admitted {
            op,
            binding: Binding::from(&decision),
            quota,
            served,
            origin,
            all_orders,
            events_cursor: None,
        }),
        Err(error) => {
            let api = &*connection.api;
            let deprecated = matches!(op, Operation::GetPet);
            let mut response = refusal(api, &error, Binding::from(&decision), &quota, deprecated);
            decorate(api, &origin, &mut response);
            Decided::Answered(response, served)
        }
    }
}

/// Whether `scopes` cover `op`: its scope, or `orders:all` for what
/// that scope opens (`Operation::open_to_all_orders`).
fn covers(scopes: Scopes, op: Operation) -> bool {
    scopes.allows(op.scope()) || (op.open_to_all_orders() && scopes.allows(Scope::OrdersAll))
}

/// Query, path, and what the headers tell of the body.
fn check(head: Head<'_>, op: Operation) -> Result<Checked, ApiError> {
    let query = head.uri.query();
    match op {
        Operation::ListPets => Ok(Checked::ListPets(query_string::list_query(query)?)),
        Operation::CreatePet => {
            query_string::expect_none(query)?;
            let key = idempotency_key(head)?;
            content_type(head, head.body_empty)?;
            within_cap(head.headers)?;
            Ok(Checked::CreatePet(key))
        }
        Operation::GetPet => {
            query_string::expect_none(query)?;
            Ok(Checked::GetPet(query_string::pet_id(pet_segment(
                head.uri.path(),
            ))?))
        }
        Operation::Transition(transition) => {
            query_string::expect_none(query)?;
            let id = query_string::pet_id(pet_segment(head.uri.path()))?;
            let key = idempotency_key(head)?;
            // Its body is optional: the headers of one that is not there
            // describe nothing, and are not held against the request.
            if !head.body_empty {
                content_type(head, false)?;
                within_cap(head.headers)?;
            }
            Ok(Checked::Transition(id, transition, key))
        }
        Operation::ListOrders => Ok(Checked::ListOrders(query_string::order_query(query)?)),
        Operation::ListEvents => {
            let mut request = query_string::events_query(query)?;
            if !wants_event_stream(head.headers) {
                return Ok(Checked::ListEvents(request));
            }
            if request.wait.is_some() {
                return Err(ApiError::InvalidQuery(
                    "wait is for a long poll; a stream (Accept: text/event-stream) waits by itself"
                        .into(),
                ));
            }
            if let Some(cursor) = last_event_id(head.headers)? {
                request.query = request.query.after(cursor);
            }
            Ok(Checked::StreamEvents(request))
        }
        Operation::PlaceOrder => {
            query_string::expect_none(query)?;
            let key = idempotency_key(head)?;
            content_type(head, head.body_empty)?;
            within_cap(head.headers)?;
            Ok(Checked::PlaceOrder(key))
        }
        Operation::GetOrder => {
            query_string::expect_none(query)?;
            let id = query_string::order_id(order_segment(head.uri.path()))?;
            Ok(Checked::GetOrder(id))
        }
        Operation::OrderStep(action) => {
            query_string::expect_none(query)?;
            let id = query_string::order_id(order_segment(head.uri.path()))?;
            let key = idempotency_key(head)?;
            // Its body is optional, as a transition's.
            if !head.body_empty {
                content_type(head, false)?;
                within_cap(head.headers)?;
            }
            Ok(Checked::OrderStep(id, action, key))
        }
    }
}

/// Whether `Accept` lists `text/event-stream` (with a weight above 0):
/// what an `EventSource` sends, asking for a stream of events rather
/// than a page.
fn wants_event_stream(headers: &HeaderMap) -> bool {
    weighted(headers, &ACCEPT)
        .any(|(media, wanted)| wanted && media.eq_ignore_ascii_case("text/event-stream"))
}

/// `Last-Event-ID`, where a reconnecting `EventSource` resumes: a
/// cursor, as `after` takes; none, or exactly one valid value.
fn last_event_id(headers: &HeaderMap) -> Result<Option<EventId>, ApiError> {
    let mut values = headers.get_all(LAST_EVENT_ID).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(ApiError::InvalidHeader(
            "Last-Event-ID is given more than once".into(),
        ));
    }
    value
        .to_str()
        .ok()
        .and_then(EventId::parse)
        .map(Some)
        .ok_or_else(|| {
            ApiError::InvalidHeader(format!(
                "Last-Event-ID must be a cursor: an event's id (decimal digits), got {:?}",
                quote(&String::from_utf8_lossy(value.as_bytes()))
            ))
        })
}

/// A POST's `Idempotency-Key`, when it sent one: none, or exactly one
/// valid value (quoted or not, `petstore_core::idempotency::IdempotencyKey`). Looked
/// up only on a POST, so reads pay nothing for it. Over HTTP/2 a padded
/// value is malformed, as for every header the contract reads
/// ([`is_padded`]).
fn idempotency_key(head: Head<'_>) -> Result<Option<IdempotencyKey>, ApiError> {
    let mut values = head.headers.get_all(IDEMPOTENCY_KEY).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    let refused = |e: KeyError| ApiError::InvalidIdempotencyKey(e.to_string());
    if values.next().is_some() {
        return Err(refused(KeyError::Repeated));
    }
    if head.version == Version::HTTP_2 && is_padded(value) {
        return Err(padded_refusal("Idempotency-Key"));
    }
    IdempotencyKey::parse_header(value.as_bytes())
        .map(Some)
        .map_err(refused)
}

/// 413 for a body whose declared length is over the cap, before a byte
/// of it is read.
fn within_cap(headers: &HeaderMap) -> Result<(), ApiError> {
    match declared_length(headers) {
        Some(n) if n > MAX_BODY as u64 => Err(ApiError::PayloadTooLarge(MAX_BODY)),
        _ => Ok(()),
    }
}

/// The `Content-Length` a request declares, when it is a number.
pub fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

/// Charges the key's buckets, or the client address's when there is no
/// valid key, through the rate-limit seam. Also returns the quota's
/// header values of the charged limiter, and the key's entry name (or why
/// there is no valid key).
fn authorize(
    connection: &Connection,
    authorization: Authorization<'_>,
    now: Timestamp,
) -> (Charged, QuotaHeaders, Result<Caller, ApiError>) {
    let state = &*connection.state;
    let refused = match authorization {
        Authorization::Value(header) => {
            let charged = connection.with_key(header, |entry| {
                // An expired key is no key: it is charged as a request
                // without one, per address, as a guessed key is.
                if entry.access.expired(now) {
                    return None;
                }
                let caller = Caller {
                    name: entry.name,
                    scopes: entry.access.scopes,
                };
                Some((
                    state.limits.charge_key(entry, now),
                    entry.quota_headers,
                    caller,
                ))
            });
            match charged {
                Some(Some((charged, quota, caller))) => return (charged, quota, Ok(caller)),
                Some(None) => ApiError::KeyExpired,
                // Malformed, or not a key of ours: the same 401.
                None => ApiError::Unauthorized { key_sent: true },
            }
        }
        Authorization::Several => ApiError::Unauthorized { key_sent: true },
        Authorization::Missing => ApiError::Unauthorized { key_sent: false },
    };
    let keys = state.keys();
    let charged = state
        .limits
        .charge_anonymous(&keys.anonymous, connection.peer, now);
    (charged, keys.anonymous_headers, Err(refused))
}

/// 415 first (docs/http.md, "Routing and order of checks"): a body of the wrong type is
/// refused whatever its size or pace, before it is read. Without a
/// Content-Type, a body that is known to be empty is simply missing (400).
/// Over HTTP/2, a value with whitespace around it is malformed (400,
/// [`is_padded`]); HTTP/1.1's parser has already trimmed it.
fn content_type(head: Head<'_>, body_empty: bool) -> Result<(), ApiError> {
    match head.headers.get(CONTENT_TYPE) {
        Some(value) if head.version == Version::HTTP_2 && is_padded(value) => {
            Err(padded_refusal("Content-Type"))
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_is_whitespace_at_either_end_only() {
        for v in [" a", "a ", "\ta", "a\t", " ", "\t"] {
            assert!(is_padded(&HeaderValue::from_static(v)), "{v:?}");
        }
        for v in ["", "a", "a b", "Bearer x", "a\tb"] {
            assert!(!is_padded(&HeaderValue::from_static(v)), "{v:?}");
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
