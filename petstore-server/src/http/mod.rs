//! The HTTP contract (docs/contract.md): routing, the checks of a
//! request in their documented order, the rate limit asked of its seam,
//! the answer from the store, and the one place that maps an error to its
//! status, code and body. Synchronous where it can be and free of
//! sockets: `net/` reads the request and its body and awaits what must be
//! awaited; everything a client sees is decided here: [`admit()`] before
//! the body, [`Admitted::finish`] with it ([`Admission::Charge`] then
//! [`admit_decided`] when a shared limiter decides, [`Finished::Waiting`]
//! then [`Waiting::finish`] when the store must be awaited). The walk:
//! docs/architecture.md, "The walk", steps 3 to 6.
//!
//! | file | holds |
//! |---|---|
//! | `route.rs` | which path is which route, its methods; the operations |
//! | `admit.rs` | every check before the body, and the rate limit |
//! | `finish.rs` | the answer once the body is read, or what it waits for |
//! | `body.rs` | what was read of the body, and its cap |
//! | `reply.rs` | JSON and empty answers, CORS on every response, refusals' headers |
//! | `response_body.rs` | [`ResponseBody`]: a response's body, whole or a stream of events |
//! | `error.rs` | [`ApiError`]: every error's status, code and body |
//! | `auth.rs` | the `Authorization: Bearer` header |
//! | `connection.rs` | [`Connection`]: a client's address and the key it presented last |
//! | `key_cache.rs` | the keys presented lately on the worker thread |
//! | `weighted.rs` | the weighted lists of `Accept` and `Accept-Encoding` |
//! | `query_string.rs` | query strings and path parameters |
//! | `cors.rs` | CORS preflight and response headers |
//! | `health.rs` | `GET /healthz` |
//! | `openapi.rs` | `GET /v1/openapi.json` |
//! | `docs.rs` | `GET /docs`: the docs page and its embedded assets |
//! | `api.rs` | [`Api`]: the contract's options and what it builds once from them |
//!
//! May use: `util`, `telemetry`, `headers`, `paths.rs`, `state.rs`, `keys/mod.rs`, `store/mod.rs`, `ratelimit/mod.rs`.
//!
//! Never a backend, a socket or a runtime (`tests/arch_layers/` checks
//! all three): what awaits and what holds a connection is `net/`'s.

mod admit;
mod api;
mod auth;
mod body;
mod connection;
mod cors;
mod docs;
mod error;
mod finish;
mod health;
mod key_cache;
mod openapi;
pub mod query_string;
mod reply;
mod response_body;
mod route;
#[cfg(test)]
mod tests;
mod weighted;

pub use admit::{
    admit, admit_decided, declared_length, Admission, Admitted, Decided, Head, Pending, Served,
};
pub use api::{Api, Options, Role, DEFAULT_HSTS_MAX_AGE};
pub use body::{BodyRead, MAX_BODY};
pub use connection::Connection;
pub use error::{ApiError, HttpResponse, ResponseBody};
pub use finish::{Finished, Waiting};
pub use openapi::OPENAPI;

/// For `net/`: an HTTP/2 connection lets a response's changing
/// rate-limit values be indexed now and then (`headers/never_indexed.rs`).
pub use crate::headers::index_changing;
