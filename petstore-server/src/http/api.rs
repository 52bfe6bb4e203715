//! [`Api`]: what the HTTP contract itself is configured with (the base
//! address, CORS, the access log), and what it builds once from that
//! rather than per request (the OpenAPI bytes, `getPet`'s successor
//! link).

use hyper::body::Bytes;
use hyper::header::HeaderValue;

use super::docs;
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
    /// The listener serves TLS (for the access log's `tls` field, and
    /// whether its responses carry `Strict-Transport-Security`).
    pub tls: bool,
    /// `Strict-Transport-Security`'s `max-age` in seconds on a TLS
    /// listener's responses; 0: none.
    pub hsts_max_age: u64,
    /// Serve the docs page, `GET /docs` (`--no-docs`: 404).
    pub docs: bool,
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
            hsts_max_age: DEFAULT_HSTS_MAX_AGE,
            docs: true,
        }
    }
}

/// Two years, Mozilla's recommended `max-age` for
/// `Strict-Transport-Security`.
pub const DEFAULT_HSTS_MAX_AGE: u64 = 63_072_000;

/// The contract's configuration, shared by every connection.
#[derive(Debug)]
pub struct Api {
    /// The options it was built with.
    pub options: Options,
    successor_link: HeaderValue,
    openapi: Bytes,
    docs_page: Bytes,
    hsts: Option<HeaderValue>,
}

impl Api {
    /// The contract as configured by `options`.
    pub fn new(options: Options) -> Api {
        Api {
            successor_link: successor_link(&options.base_url),
            openapi: openapi_document(&options.base_url),
            // "Try it out" only where the operations are served.
            docs_page: docs::page(options.role != Role::Admin),
            hsts: hsts(&options),
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

    /// The docs page's HTML for this listener (built once, here).
    pub(super) fn docs_page(&self) -> &Bytes {
        &self.docs_page
    }

    /// The `Strict-Transport-Security` value of every response of this
    /// listener: only over TLS (a browser ignores it over plaintext, and
    /// it would tell nothing true there), and not when its `max-age` is
    /// 0. Built once: a response pays one header insertion, no
    /// formatting.
    pub fn hsts(&self) -> Option<&HeaderValue> {
        self.hsts.as_ref()
    }

    /// Whether CORS is on.
    pub fn cors_on(&self) -> bool {
        !self.options.cors_origins.is_empty()
    }

    /// Whether this listener serves `route` (else it is 404, as no route).
    /// The docs page is on every listener unless `--no-docs`; the admin
    /// listener serves the OpenAPI document too when it serves the page,
    /// which shows it.
    pub(super) fn serves(&self, route: Route) -> bool {
        let role = self.options.role;
        match route {
            Route::Docs | Route::DocsAsset(_) => self.options.docs,
            Route::Health | Route::Metrics => role != Role::Public,
            Route::OpenApi => role != Role::Admin || self.options.docs,
            _ => role != Role::Admin,
        }
    }
}

/// [`Api::hsts`]'s value for `options`.
fn hsts(options: &Options) -> Option<HeaderValue> {
    if !options.tls || options.hsts_max_age == 0 {
        return None;
    }
    // Static bytes, leaked once per listener: cloning the value for a
    // response then copies a pointer, where a shared value's clone is an
    // atomic count that every worker thread would bounce between them.
    let text: &'static str = Box::leak(format!("max-age={}", options.hsts_max_age).into());
    // Digits only: always a valid header value.
    HeaderValue::from_maybe_shared(Bytes::from_static(text.as_bytes())).ok()
}

impl Default for Api {
    fn default() -> Self {
        Api::new(Options::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hsts_only_over_tls_and_not_when_0() {
        let over = |tls, hsts_max_age| {
            let api = Api::new(Options {
                tls,
                hsts_max_age,
                ..Options::default()
            });
            api.hsts().map(|v| v.to_str().unwrap().to_owned())
        };
        assert_eq!(
            over(true, DEFAULT_HSTS_MAX_AGE).as_deref(),
            Some("max-age=63072000")
        );
        assert_eq!(over(true, 1).as_deref(), Some("max-age=1"));
        assert_eq!(over(true, 0), None);
        assert_eq!(over(false, DEFAULT_HSTS_MAX_AGE), None);
    }
}
