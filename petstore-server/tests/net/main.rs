//! Connections that try to keep the server from its other clients: every
//! bound of HTTP/1.1 and HTTP/2 on what one connection or one address may
//! hold, against the real server binary.
//!
//! | file | tests |
//! |---|---|
//! | `h2_hpack.rs` | HTTP/2: the rate-limit values that change on every response, and a walking client's next links, kept out of the compression table |
//! | `h2_deviations.rs` | HTTP/2: the h2 crate's error codes that differ from the RFCs', pinned until an upgrade fixes them |
//! | `h2_limits.rs` | HTTP/2: idle and preface timeouts, flow control, rapid reset, CONTINUATION flood, stream and header bounds |
//! | `h2_malformed.rs` | requests that end with trailers (HTTP/1.1 and HTTP/2), HTTP/2 header values with whitespace around them, an `Idempotency-Key` over HTTP/2 |
//! | `hostile_clients.rs` | clients that never read, a reconnecting slowloris, idle keep-alive connections |
//! | `proxy_protocol.rs` | `--proxy-protocol`: silent connections and one header timeout for the PROXY header and the head |
//! | `raw_h2.rs` | (harness) HTTP/2 frames written and read by hand |
//!
//! One test binary for the area, so that the shared harness (`../common`)
//! is compiled once for all of it. Each test runs its own server and the
//! hostile ones connect from a loopback address of their own (127.0.0.2,
//! 127.0.0.3), so tests running beside each other never share a
//! per-address count.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;

mod h2_deviations;
mod h2_hpack;
mod h2_limits;
mod h2_malformed;
mod hostile_clients;
mod proxy_protocol;
mod raw_h2;
