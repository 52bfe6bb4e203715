//! The contract's rules through [`respond`], without a server: every
//! check of [`admit`] and [`Admitted::finish`](super::Admitted::finish)
//! on requests built by hand.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Bytes;
use hyper::header::LOCATION;
use hyper::http::request::Parts;
use hyper::StatusCode;
use petstore_core::{Clock as _, FakeClock, Inventory, Quota, Timestamp};

use super::*;
use crate::keys::Keys;
use crate::ratelimit::RateLimits;
use crate::state::AppState;
use crate::store::Store;

/// Answers one request on `connection` whose body has been read:
/// [`admit`], then [`Admitted::finish`], synchronously. A rate limit to
/// await is decided by this process's own limiter; the in-memory store
/// of these tests never makes a request wait.
fn respond(connection: &Connection, head: &Parts, body: BodyRead) -> (HttpResponse, Served) {
    let empty = matches!(&body, BodyRead::Complete(bytes) if bytes.is_empty());
    let now = connection.state.clock.now();
    let admitted = match admit(connection, Head::from_parts(head, empty), now) {
        Admission::Answered(response, served) => return (response, served),
        Admission::Admitted(admitted) => admitted,
        Admission::Charge(pending) => {
            let decision = pending.decide_here(&connection.state);
            match admit_decided(connection, pending, decision) {
                Decided::Admitted(admitted) => admitted,
                Decided::Answered(response, served) => return (response, served),
            }
        }
    };
    match admitted.finish(connection, body) {
        Finished::Answered(response, served) => (response, served),
        // A keyed POST asks the store about its key first.
        Finished::Waiting(waiting) => tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(waiting.finish(connection)),
    }
}

const KEY: &str = "test-key";

fn state() -> Connection {
    state_at(Arc::new(FakeClock::new(Timestamp::from_unix_secs(
        1_000_000,
    ))))
}

fn state_at(clock: Arc<FakeClock>) -> Connection {
    let keys = Keys::single("test", KEY, Quota::new(1000, 10_000).unwrap());
    let state = AppState::new(
        Store::local(Arc::new(Inventory::in_memory())),
        RateLimits::Local,
        keys,
        None,
        clock,
        None,
    );
    Connection::new(
        Arc::new(state),
        Arc::new(Api::default()),
        IpAddr::V4(Ipv4Addr::LOCALHOST),
    )
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
    // Orders are served: a key that placed none sees an empty page.
    let orders = call(&s, "GET", "/v1/store/orders", "");
    assert_eq!(orders.status(), StatusCode::OK);
    assert_eq!(
        call(&s, "GET", "/v1/store/orders/", "").status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        call(&s, "GET", "/v1/store/orders/01", "").status(),
        StatusCode::BAD_REQUEST
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
fn a_body_that_ends_with_trailers_is_invalid_and_changes_nothing() {
    let s = state();
    let created = call(&s, "POST", "/v1/pets", r#"{"name":"Rex","categoryId":2}"#);
    assert_eq!(created.status(), StatusCode::CREATED);
    let json = [
        ("authorization", "Bearer test-key"),
        ("content-type", "application/json"),
    ];
    for path in ["/v1/pets", "/v1/pets/1/reserve", "/v1/pets/1/sell"] {
        let (r, _) = respond(&s, &request("POST", path, &json), BodyRead::Trailers);
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{path}");
    }
    let (r, _) = respond(&s, &request("GET", "/v1/pets", &json), BodyRead::Trailers);
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(s.state.inventory.len(), 1);
    let pet = s.state.inventory.get(petstore_core::PetId::new(1).unwrap());
    assert_eq!(
        pet.map(|p| p.status()),
        Some(petstore_core::PetStatus::Available)
    );
}

#[test]
fn transitions_route_by_their_last_segment_and_answer_in_memory() {
    let s = state();
    let created = call(&s, "POST", "/v1/pets", r#"{"name":"Rex","categoryId":2}"#);
    assert_eq!(created.status(), StatusCode::CREATED);
    // Each transition's answer names its own route, for the metrics and
    // the access log.
    for (uri, status, route) in [
        ("/v1/pets/1/reserve", StatusCode::OK, crate::paths::RESERVE),
        (
            "/v1/pets/1/reserve",
            StatusCode::CONFLICT,
            crate::paths::RESERVE,
        ),
        ("/v1/pets/1/release", StatusCode::OK, crate::paths::RELEASE),
        ("/v1/pets/1/sell", StatusCode::OK, crate::paths::SELL),
        ("/v1/pets/2/sell", StatusCode::NOT_FOUND, crate::paths::SELL),
        (
            "/v1/pets/01/sell",
            StatusCode::BAD_REQUEST,
            crate::paths::SELL,
        ),
        (
            "/v1/pets/1/buy",
            StatusCode::NOT_FOUND,
            crate::paths::UNKNOWN,
        ),
        (
            "/v1/pets//sell",
            StatusCode::NOT_FOUND,
            crate::paths::UNKNOWN,
        ),
        (
            "/v1/pets/1/sell/",
            StatusCode::NOT_FOUND,
            crate::paths::UNKNOWN,
        ),
    ] {
        let auth = format!("Bearer {KEY}");
        let head = request("POST", uri, &[("authorization", &auth)]);
        let (response, served) = respond(&s, &head, BodyRead::Complete(Bytes::new()));
        assert_eq!((response.status(), served.route), (status, route), "{uri}");
    }
    // The body: none or `{}`, whatever the request's other checks.
    assert_eq!(
        call(&s, "POST", "/v1/pets/1/sell", "{}").status(),
        StatusCode::CONFLICT
    );
    for body in ["{ }", "null", r#"{"status":"available"}"#] {
        let response = call(&s, "POST", "/v1/pets/1/sell", body);
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{body}");
    }
    let response = call(&s, "GET", "/v1/pets/1/sell", "");
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(response.headers()["allow"], "POST");
}

/// A keyed POST: `call` with an `Idempotency-Key`.
fn keyed(connection: &Connection, uri: &str, key: &str, body: &str) -> HttpResponse {
    let auth = format!("Bearer {KEY}");
    let head = request(
        "POST",
        uri,
        &[
            ("authorization", &auth),
            ("content-type", "application/json"),
            ("idempotency-key", key),
        ],
    );
    let body = BodyRead::Complete(Bytes::from(body.to_owned()));
    respond(connection, &head, body).0
}

fn code(response: HttpResponse) -> String {
    let body = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(http_body_util::BodyExt::collect(response.into_body()))
        .unwrap()
        .to_bytes();
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    v["code"].as_str().unwrap().to_owned()
}

#[test]
fn a_key_whose_first_request_is_in_flight_is_409_and_runs_nothing() {
    let s = state();
    let rex = r#"{"name":"Rex","categoryId":2}"#;
    // The first request, held in flight: its claim taken, its write not
    // done (what a journal's create is while its batch is on the way to
    // disk).
    let at = s.state.clock.now();
    let held = s
        .state
        .inventory
        .claim(petstore_core::idempotency::Keyed {
            scope: petstore_core::idempotency::Scope::new("test").unwrap(),
            key: petstore_core::idempotency::IdempotencyKey::parse_header(b"k1").unwrap(),
            fingerprint: finish::fingerprint_of_create(rex.as_bytes()),
            at,
        })
        .unwrap();
    let second = keyed(&s, "/v1/pets", "k1", rex);
    assert_eq!(second.status(), StatusCode::CONFLICT);
    assert_eq!(code(second), "idempotency_key_in_use");
    assert!(s.state.inventory.is_empty());
    // Another body with the key, valid or not: 409 too (as on a
    // replica, whose claim is not seen before it commits), not 422 or 400.
    for body in [r#"{"name":"Tom","categoryId":2}"#, "{"] {
        let other = keyed(&s, "/v1/pets", "k1", body);
        assert_eq!(other.status(), StatusCode::CONFLICT);
        assert_eq!(code(other), "idempotency_key_in_use");
    }
    assert!(s.state.inventory.is_empty());
    // The first request failed: its key is let go, and a retry runs.
    drop(held);
    assert_eq!(
        keyed(&s, "/v1/pets", "k1", rex).status(),
        StatusCode::CREATED
    );
    assert_eq!(s.state.inventory.len(), 1);
}

#[test]
fn a_kept_answer_expires_24_hours_after_its_first_request() {
    let clock = Arc::new(FakeClock::new(Timestamp::from_unix_secs(1_000_000)));
    let s = state_at(clock.clone());
    let first = keyed(&s, "/v1/pets", "day", r#"{"name":"Rex","categoryId":2}"#);
    assert_eq!(first.status(), StatusCode::CREATED);
    clock.advance(petstore_core::idempotency::RETENTION - Duration::from_secs(1));
    let tom = r#"{"name":"Tom","categoryId":2}"#;
    assert_eq!(
        keyed(&s, "/v1/pets", "day", tom).status(),
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(s.state.inventory.kept_keys(), 1);
    clock.advance(Duration::from_secs(1));
    // A day on, the key is free: a new request with it runs.
    let again = keyed(&s, "/v1/pets", "day", tom);
    assert_eq!(again.status(), StatusCode::CREATED);
    assert_eq!(again.headers()[LOCATION], "/v1/pets/2");
    assert_eq!(s.state.inventory.kept_keys(), 1);
}
