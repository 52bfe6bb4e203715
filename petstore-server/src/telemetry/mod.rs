//! What the server tells its operators: log lines, the access log, and
//! the metrics behind `GET /metrics`.
//!
//! | file | holds |
//! |---|---|
//! | `log.rs` | `log_info!`, `log_error!`: lines on stderr, as text or JSON (`--log-format`) |
//! | `panics.rs` | the panic hook: a panic's place and message as one log line |
//! | `access_log.rs` | `--access-log`: one JSON line per request |
//! | `metrics.rs` | [`Metrics`]: the registry each owner registers its collector with |
//! | `recorder.rs` | per-thread request counters (the hot-path half of the metrics) |
//! | `histogram.rs` | an atomic histogram for the backends' latencies |
//! | `process.rs` | the process figures (memory, CPU, open files, start) from `/proc/self` |
//! | `reloads.rs` | the reloads (SIGHUP) that failed, by file |
//! | `certificate.rs` | when the served TLS certificate expires |
//!
//! May use: `util`, `paths.rs`.
//!
//! `paths.rs`: the recorder sizes its arrays by the route templates.

pub mod access_log;
pub mod certificate;
pub mod histogram;
pub mod log;
pub mod metrics;
pub mod panics;
pub mod process;
pub mod recorder;
pub mod reloads;

pub use metrics::Metrics;
