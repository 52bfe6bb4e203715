//! The server as an operator runs it, against the real server binary:
//! flags, signals, files that go wrong, stopping and restarting.
//!
//! | file | tests |
//! |---|---|
//! | `admin_addr.rs` | `--admin-addr`: `/metrics` and `/healthz` on a second listener only |
//! | `command_line.rs` | `--help` under its headings, the shell completions, the man page and docs/operating.md's flag table, each against clap's definitions |
//! | `dashboard.rs` | the Grafana dashboard's and the alert rules' metric names and labels against real servers' `/metrics` |
//! | `drain.rs` | SIGTERM with `--shutdown-delay`: drain, close the listener, finish, exit 0 |
//! | `haproxy_stream.rs` | a stream of events through the documented HAProxy recipe: each event as it is made, the idle timeouts over the heartbeat |
//! | `healthcheck.rs` | `petstore-server healthcheck`: its target from the server's flags, its verdicts and bounds |
//! | `hsts.rs` | `Strict-Transport-Security` on TLS responses: the default, `--hsts-max-age`, none over plaintext |
//! | `keys_file.rs` | a keys file that is a FIFO, too large, writable by others, or holds a key where it should not |
//! | `lifecycle.rs` | the process's output, flags and environment, shutdown, connection-level limits |
//! | `rolling_restart.rs` | two replicas restarted in turn behind HAProxy lose no request |
//! | `tls.rs` | `--tls-cert`/`--tls-key`, a broken pair, SIGHUP reload, plain HTTP on the TLS port |
//!
//! One test binary for the area, so that the shared harness (`../common`)
//! is compiled once for all of it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;

mod admin_addr;
mod command_line;
mod dashboard;
mod drain;
mod haproxy_stream;
mod healthcheck;
mod hsts;
mod keys_file;
mod lifecycle;
mod rolling_restart;
mod tls;
