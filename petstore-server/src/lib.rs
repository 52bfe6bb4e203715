//! # petstore-server
//!
//! The HTTP/JSON face of [`petstore_core`], on raw hyper 1.x. The binary
//! (`main.rs`) only calls [`cli::main`]; everything else is here, in
//! rooms, one concern each. The contract it serves is
//! `docs/contract.md`; where each behaviour of it lives:
//!
//! | room | holds |
//! |---|---|
//! | [`cli`] | flags, the start-up wiring (the only place naming every backend), `keygen`, `journal check\|repair`, `completions`, `man`, `healthcheck` |
//! | [`net`] | sockets: the accept loop and its limits, TLS, HTTP/1.1 or HTTP/2 per connection (and HTTP/2's watchdog), the one request driver, the per-address cap, the PROXY protocol, the write timeout |
//! | [`http`] | the contract: routes, the checks in their order, errors, auth, CORS, query strings, OpenAPI, health |
//! | `state` | `AppState`: the store, the rate limits, the keys in force, the clock, the metrics |
//! | [`keys`] | the key table, the keys file, reloads, the external name of a key's limiter state |
//! | [`ratelimit`] | the rate-limit seam: in process (with the state file `limits.state`) or Redis |
//! | `store` | the store seam: in memory, the journal's committer, PostgreSQL |
//! | `headers` | the rate-limit and deprecation headers: a quota's values and 2xx templates, made once |
//! | `telemetry` | logs, the panic hook, the access log, the metrics registry and recorder |
//! | `paths` | the service's paths and route templates |
//! | `util` | buffers, interned values, safe file reads, hex, a hash mixer, calendar dates |
//!
//! Public are only the rooms that code outside the library uses: `cli`
//! (the binary), `net` (the load benchmark's baseline server), `http`'s
//! query-string parsers and `keys`' file parser (the fuzz targets), and
//! `ratelimit`'s Redis script and names (the Redis tests). The rest is
//! private.
//!
//! Each room's rule, what it may import, is one line of its `mod.rs`
//! (of the file itself for a one-file room): `May use: ...`. A room is
//! visible from outside only through its `mod.rs` unless a rule names
//! the folder. `tests/arch_layers/` reads those lines and fails on a
//! forbidden import, on a room without its line, on any import circle
//! among rooms or among files, on a socket or runtime named in `http/`,
//! and on a backend named outside `store/`, `ratelimit/` and `cli/`.
//! Both seams are enums: static dispatch, no `dyn` on the request path.

#![deny(missing_docs)]

pub mod cli;
mod headers;
pub mod http;
pub mod keys;
pub mod net;
mod paths;
pub mod ratelimit;
mod state;
mod store;
mod telemetry;
mod util;
