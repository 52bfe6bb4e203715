//! # petstore-server
//!
//! The HTTP/JSON face of [`petstore_core`], on raw hyper 1.x. The binary
//! (`main.rs`) parses flags and calls [`server::run`]; everything else is
//! here, one concept per module:
//!
//! | module | holds |
//! |---|---|
//! | [`cli`] | flags and their environment variables |
//! | [`server`] | accept loop, connection limits, body reading, graceful shutdown |
//! | [`routes`] | [`routes::admit`] (the checks before the body), then [`routes::Admitted::finish`]: one response out, or a [`routes::Waiting`] on the store |
//! | [`auth`] | the `Authorization: Bearer` header |
//! | [`buffers`] | reused buffers for list pages and per-response header values |
//! | [`connection`] | one client connection: its address, the key it presented last |
//! | [`per_address`] | open connections per client address, and their cap |
//! | [`proxy_protocol`] | `--proxy-protocol`: the client address from a load balancer's PROXY header |
//! | [`write_timeout`] | a socket whose stalled writes fail after a bounded time |
//! | [`keys`] | the keys file, key lookup, reload |
//! | [`limits`] | where limiter state lives beyond the process: the seam, the state file, Redis (`--redis`) |
//! | [`file_read`] | reading an operator's file without blocking on a FIFO or swelling memory |
//! | [`query`] | query-string and path-parameter parsing |
//! | [`headers`] | rate-limit and deprecation headers; per-quota templates of 2xx headers |
//! | [`intern`] | process-lifetime strings (no shared reference counts per request) |
//! | [`cors`] | CORS preflight and response headers |
//! | [`error`] | [`error::ApiError`]: every error's status, code and body |
//! | [`state`] | [`state::AppState`], shared by all requests |
//! | [`store`] | where pets live: the seam and its backends (in memory, journal, PostgreSQL) |
//! | [`keygen`] | `petstore-server keygen` |
//! | [`journal_cmd`] | `petstore-server journal check` and `journal repair` |
//! | [`health`] | `GET /healthz`: ok, or degraded with a reason |
//! | [`metrics`] | `GET /metrics` (Prometheus) |
//! | [`recorder`] | per-thread request counters behind `/metrics` |
//! | [`histogram`] | an atomic histogram for `/metrics` (PostgreSQL, Redis) |
//! | [`access_log`] | `--access-log`: one JSON line per request |
//! | [`log`] | log lines on stderr |

#![deny(missing_docs)]

pub mod access_log;
pub mod auth;
pub mod buffers;
pub mod cli;
pub mod connection;
pub mod cors;
pub mod error;
pub mod file_read;
pub mod headers;
pub mod health;
pub mod histogram;
pub mod intern;
pub mod journal_cmd;
pub mod keygen;
pub mod keys;
pub mod limits;
pub mod log;
pub mod metrics;
pub mod per_address;
pub mod proxy_protocol;
pub mod query;
pub mod recorder;
pub mod routes;
pub mod server;
pub mod state;
pub mod store;
pub mod write_timeout;
