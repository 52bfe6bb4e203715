//! [`Api`]: what the HTTP contract itself is configured with (the base
//! address, CORS, the access log), and what it builds once from that
//! rather than per request (the OpenAPI bytes, `getPet`'s successor
//! link).

use hyper::body::Bytes;
use hyper::header::HeaderValue;

use super::openapi::openapi_document;
use super::route::Route;
use crate::headers::successor_link;

/// Options of the HTTP contract.
#[derive(Clone, Debug)]
pub struct Options {
    /// Public base address including `/v1`, without a trailing `/`;
    /// `"/v1"` when none is configured (relative links).
    pub base_url: String,
    /// Origins allowed by CORS; empty: CORS off.
    pub cors_origins: Vec<String>,
    /// Write one access-log line per request on stderr.
    pub access_log: bool,
    /// Which routes this listener serves.
    pub role: Role,
    /// The listener serves TLS (for the access log's `tls` field).
    pub tls: bool,
}

/// Which routes a listener serves (`--admin-addr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Every route: one listener for everything (the default).
    All,
    /// Every route but `/healthz` and `/metrics`, which are on the admin
    /// listener: the public port answers them 404, so that they cannot
    /// be read through a public front end.
    Public,
    /// Only `/healthz` and `/metrics` (404 for the rest).
    Admin,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            base_url: "/v1".into(),
            cors_origins: Vec::new(),
            access_log: false,
            role: Role::All,
            tls: false,
        }
    }
}

/// The contract's configuration, shared by every connection.
#[derive(Debug)]
pub struct Api {
    /// The options it was built with.
    pub options: Options,
    successor_link: HeaderValue,
    openapi: Bytes,
}

impl Api {
    /// The contract as configured by `options`.
    pub fn new(options: Options) -> Api {
        Api {
            successor_link: successor_link(&options.base_url),
            openapi: openapi_document(&options.base_url),
            options,
        }
    }

    /// `getPet`'s successor-version `Link` value.
    pub fn successor_link(&self) -> &HeaderValue {
        &self.successor_link
    }

    /// The OpenAPI document as served: its server URL is the configured
    /// base address (built once, here, not per request).
    pub fn openapi(&self) -> &Bytes {
        &self.openapi
    }

    /// Whether CORS is on.
    pub fn cors_on(&self) -> bool {
        !self.options.cors_origins.is_empty()
    }

    /// Whether this listener serves `route` (else it is 404, as no route).
    pub(super) fn serves(&self, route: Route) -> bool {
        let admin = matches!(route, Route::Health | Route::Metrics);
        match self.options.role {
            Role::All => true,
            Role::Public => !admin,
            Role::Admin => admin,
        }
    }
}

impl Default for Api {
    fn default() -> Self {
        Api::new(Options::default())
    }
}
