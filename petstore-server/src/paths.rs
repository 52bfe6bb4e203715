//! The service's paths: each route's template, as the router matches it
//! (`http/route.rs`) and as the metrics and the access log name a
//! request's route (`telemetry/recorder.rs`).
//!
//! A room of its own, below both: the recorder sizes its counter arrays
//! by [`TEMPLATES`] at compile time, and the contract must not be
//! imported by the telemetry it reports to.
//!
//! May use: nothing.

/// `GET /healthz`.
pub const HEALTH: &str = "/healthz";
/// `GET /v1/openapi.json`.
pub const OPENAPI_JSON: &str = "/v1/openapi.json";
/// The pets collection.
pub const PETS: &str = "/v1/pets";
/// One pet, by id.
pub const PET: &str = "/v1/pets/{petId}";
/// `reservePet`: a pet set aside for a customer.
pub const RESERVE: &str = "/v1/pets/{petId}/reserve";
/// `releasePet`: a reserved pet back on offer.
pub const RELEASE: &str = "/v1/pets/{petId}/release";
/// `sellPet`: a pet sold, for good.
pub const SELL: &str = "/v1/pets/{petId}/sell";
/// The orders placeholder.
pub const ORDERS: &str = "/v1/store/orders";
/// `getOrder`.
pub const ORDER: &str = "/v1/store/orders/{orderId}";
/// `completeOrder`.
pub const COMPLETE: &str = "/v1/store/orders/{orderId}/complete";
/// `cancelOrder`.
pub const CANCEL: &str = "/v1/store/orders/{orderId}/cancel";
/// `listEvents`: the feed of changes (beta).
pub const EVENTS: &str = "/v1/events";
/// `GET /metrics`.
pub const METRICS: &str = "/metrics";
/// `GET /docs`: the API's docs page (not an operation).
pub const DOCS: &str = "/docs";
/// A file the docs page loads, under its fingerprint.
pub const DOCS_ASSET: &str = "/docs/{asset}";
/// What a docs asset's path starts with.
pub const DOCS_PREFIX: &str = "/docs/";
/// The label of a request that matches no route.
pub const UNKNOWN: &str = "unknown";
/// What a one-pet path starts with, before its `{petId}` segment.
pub const PET_PREFIX: &str = "/v1/pets/";
/// What every order's path starts with.
pub const ORDER_PREFIX: &str = "/v1/store/orders/";

/// Every route template, as the metrics and the access log name a
/// request's route; the last, `unknown`, is for requests that match none.
pub const TEMPLATES: [&str; 16] = [
    HEALTH,
    OPENAPI_JSON,
    PETS,
    PET,
    RESERVE,
    RELEASE,
    SELL,
    ORDERS,
    ORDER,
    COMPLETE,
    CANCEL,
    EVENTS,
    METRICS,
    DOCS,
    DOCS_ASSET,
    UNKNOWN,
];
