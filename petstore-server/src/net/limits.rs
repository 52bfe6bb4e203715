//! [`ConnLimits`]: the limits of a connection and of the accept loop
//! (the rate limits are another matter: `ratelimit/`). Why each limit
//! exists is in `mod.rs`'s overview.

use std::time::Duration;

use super::per_address::PerAddress;

/// Limits of a connection and of the accept loop (the rate limits are
/// another matter: `ratelimit/`).
#[derive(Clone, Copy, Debug)]
pub struct ConnLimits {
    /// Time allowed for a request's headers to arrive, and for an idle
    /// keep-alive connection to send its next request.
    pub header_timeout: Duration,
    /// Time a write to the client may make no progress before the
    /// connection is closed.
    pub write_timeout: Duration,
    /// Time allowed for a request's body to arrive.
    pub body_timeout: Duration,
    /// Connections served at once.
    pub max_connections: usize,
    /// Connections served at once from one client address.
    pub max_connections_per_address: usize,
    /// How long shutdown waits for requests in flight.
    pub shutdown_grace: Duration,
    /// After a drain (`--shutdown-delay`), how long the connections still
    /// open are served as usual once the listener is closed, before the
    /// idle ones are closed: a connection accepted a moment before the
    /// listener closed has its first request read and answered instead
    /// of being closed as idle (its client would see no answer at all).
    /// Every response of a drain closes its connection anyway, so this
    /// ends early when none is left. Zero without a drain.
    pub settle: Duration,
    /// Every connection starts with a PROXY protocol header whose source
    /// address is the client's (`proxy_protocol.rs`); one without is
    /// closed.
    pub proxy_protocol: bool,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            header_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(10),
            max_connections: 1024,
            max_connections_per_address: PerAddress::default_cap(1024),
            shutdown_grace: Duration::from_secs(10),
            settle: Duration::ZERO,
            proxy_protocol: false,
        }
    }
}
