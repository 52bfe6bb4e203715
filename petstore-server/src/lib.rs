//! # petstore-server
//!
//! The HTTP/JSON face of [`petstore_core`], on raw hyper 1.x. The binary
//! (`main.rs`) only calls [`cli::main`]; everything else is here, in
//! rooms, one concern each. The contract it serves is
//! `docs/contract.md`; where each behaviour of it lives:
//!
//! | room | holds | may use |
//! |---|---|---|
//! | [`cli`] | flags, the start-up wiring (the only place naming every backend), `keygen`, `journal check\|repair` | anything |
//! | [`net`] | sockets: the accept loop and its limits, TLS, HTTP/1.1 or HTTP/2 per connection (and HTTP/2's watchdog), the one request driver, the per-address cap, the PROXY protocol, the write timeout | `http`, `state`, `telemetry`, `util` |
//! | [`http`] | the contract: routes, the checks in their order, errors, headers, auth, CORS, query strings, OpenAPI, health | `state`, `keys`, the seams' `mod.rs`, `telemetry`, `util` |
//! | `state` | `AppState`: the store, the rate limits, the keys in force, the clock, the metrics | the seams' `mod.rs`, `keys`, `telemetry`, `util` |
//! | [`keys`] | the key table, the keys file, reloads, the external name of a key's limiter state | `util`, `telemetry`, `http/headers.rs` |
//! | [`ratelimit`] | the rate-limit seam: in process (with the state file `limits.state`) or Redis | `keys`, `telemetry`, `util` |
//! | `store` | the store seam: in memory, the journal's committer, PostgreSQL | `telemetry`, `util` |
//! | `telemetry` | logs, the access log, the metrics registry and recorder | `util`, `http/route.rs` |
//! | `util` | buffers, interned strings, safe file reads, hex, a hash mixer | nothing |
//!
//! The rules are checked by `tests/arch_layers.rs`, which also fails on
//! any import circle among files. Both seams are enums: static dispatch,
//! no `dyn` on the request path.

#![deny(missing_docs)]

pub mod cli;
pub mod headers;
pub mod http;
pub mod keys;
pub mod net;
mod paths;
pub mod ratelimit;
mod state;
mod store;
pub mod telemetry;
pub mod util;
