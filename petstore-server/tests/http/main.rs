//! The HTTP contract, against the real server binary: what a client sends
//! and what it gets back, over every protocol the server speaks.
//!
//! | file | tests |
//! |---|---|
//! | `auth.rs` | API keys: 401s and their challenges, SHA-256 entries, SIGHUP reload, `keygen` |
//! | `client_example.rs` | the `client` example backs off and is never banned; a naive client is |
//! | `docs.rs` | `GET /docs` and its assets: types, CSP, caching, gzip, HEAD, 405, `--no-docs`, the admin listener |
//! | `errors.rs` | 404, 405, 408, 413, 415, 501, the order of the checks, error bodies |
//! | `event_stream.rs` | listEvents as a stream (Server-Sent Events): what follows the cursor then each new event, `Last-Event-ID`, 400s and 410 before a stream, a drain's clean end, HTTP/2 |
//! | `events.rs` | listEvents: commit order, links, 400s, 410, long polls, a drain, a restart, list-then-follow with `Events-Cursor` |
//! | `framing.rs` | HEAD, `Host`, transfer codings, `Expect: 100-continue`, `Connection: close` |
//! | `idempotency.rs` | `Idempotency-Key` on createPet and the transitions: replay, 422, 400s, scope, what is kept |
//! | `headers.rs` | deprecation headers, `--base-url`, CORS, `/healthz`, the OpenAPI document |
//! | `orders.rs` | placeOrder, listOrders, getOrder, completeOrder, cancelOrder: every row on one node, doors, scopes, idempotency, a restart |
//! | `pets.rs` | createPet, getPet, listPets and every 400 of the contract |
//! | `protocols.rs` | one contract over HTTP/1.1, h2c, HTTP/1.1 over TLS and HTTP/2 over TLS |
//! | `scopes.rs` | what a key may do: scopes and their 403, expiry and its 401, a reload that takes a scope away, `keygen --rotate` end to end |
//! | `transitions.rs` | reservePet, releasePet, sellPet: every row of their contract on one node |
//!
//! One test binary for the area, so that the shared harness (`../common`)
//! is compiled once for all of it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;

mod auth;
mod client_example;
mod docs;
mod errors;
mod event_stream;
mod events;
mod framing;
mod headers;
mod idempotency;
mod orders;
mod pets;
mod protocols;
mod scopes;
mod transitions;
