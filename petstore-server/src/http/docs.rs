//! `GET /docs`: an interactive reference of the served OpenAPI document
//! (Swagger UI), and `GET /docs/{fingerprint}/{asset}`, the files it
//! loads. Not an operation of the API, so not in the OpenAPI document:
//! no key, no rate limit, like `/v1/openapi.json`; `--no-docs` turns it
//! off (404, as no route).
//!
//! The assets are the npm package swagger-ui-dist's, committed as
//! `scripts/docs-assets` makes them from the pinned tarball and embedded
//! by `build.rs` with their gzip copies, and the page's own
//! `docs-page/init.js`. Their URL carries a
//! fingerprint of their bytes, so they are cached for good
//! (`immutable`); the page itself, which names that URL, is revalidated
//! (`no-cache`). Every response of the page and its assets carries a
//! Content-Security-Policy that allows this origin only: the page's one
//! script of ours is a served file, not inline.

use super::error::ResponseBody;
use super::weighted::weighted;
use hyper::body::Bytes;
use hyper::header::{
    HeaderMap, HeaderName, HeaderValue, ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING,
    CONTENT_SECURITY_POLICY, CONTENT_TYPE, VARY, X_CONTENT_TYPE_OPTIONS,
};
use hyper::{Response, StatusCode};

use super::error::{ApiError, HttpResponse};
use crate::paths::{DOCS_PREFIX, OPENAPI_JSON};

/// One file the page loads.
#[derive(Debug)]
pub(super) struct Asset {
    /// Its name, the last segment of its URL.
    pub name: &'static str,
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Its bytes.
    pub body: &'static [u8],
    /// The same gzipped (`gzip -9 -n`), for the files big enough to pay.
    pub gzip: Option<&'static [u8]>,
}

/// One asset is one entry of [`ASSETS`]: the same by name, without
/// comparing its bytes.
impl PartialEq for Asset {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Asset {}

// NOT_BUILT_IN, FINGERPRINT, ASSETS: written by build.rs.
include!(concat!(env!("OUT_DIR"), "/docs_assets.rs"));

/// Only this origin, for everything: scripts, styles, images, fetches.
/// `frame-ancestors`, `base-uri` and `form-action` do not fall back to
/// `default-src`, so they are said too.
const CSP: &str = "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// A year, with `immutable`: an asset's URL changes with its bytes.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// The page template: `{assets}`, `{spec}` and `{try_it_out}` are filled
/// in once per listener ([`page`]).
const TEMPLATE: &str = include_str!("../../docs-page/index.html");

/// The asset named `name` under the URL segment `fingerprint`, when it is
/// one of this build's.
pub(super) fn find(fingerprint: &str, name: &str) -> Option<&'static Asset> {
    if NOT_BUILT_IN.is_some() || fingerprint != FINGERPRINT {
        return None;
    }
    ASSETS.iter().find(|a| a.name == name)
}

/// The page's HTML for a listener: `try_it_out` when the listener serves
/// the operations (the admin listener's page is a reference only). Built
/// once at start.
pub(super) fn page(try_it_out: bool) -> Bytes {
    let assets = format!("{DOCS_PREFIX}{FINGERPRINT}");
    Bytes::from(
        TEMPLATE
            .replace("{assets}", &assets)
            .replace("{spec}", OPENAPI_JSON)
            .replace("{try_it_out}", if try_it_out { "true" } else { "false" }),
    )
}

/// The answer to `GET /docs`: the page, or 404 saying why this build has
/// none.
pub(super) fn page_response(page: &Bytes) -> HttpResponse {
    if let Some(why) = NOT_BUILT_IN {
        return ApiError::NotFound(format!(
            "this build has no docs page: {why} (the repository holds them; scripts/docs-assets makes them again)"
        ))
        .to_response();
    }
    let mut response = Response::new(ResponseBody::full(page.clone()));
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    guarded(headers);
    response
}

/// The answer to `GET` of `asset`: gzipped when the request accepts it
/// and the asset has a gzip copy.
pub(super) fn asset_response(asset: &'static Asset, request: &HeaderMap) -> HttpResponse {
    let gzip = asset.gzip.filter(|_| accepts_gzip(request));
    let mut response = Response::new(ResponseBody::full(Bytes::from_static(
        gzip.unwrap_or(asset.body),
    )));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(asset.content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static(IMMUTABLE));
    if asset.gzip.is_some() {
        // A cache between must not give the gzip bytes to a client that
        // did not ask for them.
        headers.insert(VARY, HeaderValue::from_static("accept-encoding"));
    }
    if gzip.is_some() {
        headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    guarded(headers);
    response
}

/// The headers every response of the page and its assets carries.
fn guarded(headers: &mut HeaderMap) {
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(
        HeaderName::from_static("referrer-policy"),
        HeaderValue::from_static("no-referrer"),
    );
}

/// Whether `Accept-Encoding` accepts gzip (RFC 9110 section 12.5.3):
/// `gzip` (or its old alias `x-gzip`) with a weight above 0, or else `*`
/// with one; no header, or `identity` alone, is no.
fn accepts_gzip(headers: &HeaderMap) -> bool {
    let (mut gzip, mut any) = (None, None);
    for (coding, wanted) in weighted(headers, &ACCEPT_ENCODING) {
        if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
            gzip = Some(wanted);
        } else if coding == "*" {
            any = Some(wanted);
        }
    }
    gzip.or(any).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepts(value: &str) -> bool {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT_ENCODING, HeaderValue::from_str(value).unwrap());
        accepts_gzip(&headers)
    }

    #[test]
    fn gzip_only_when_accepted_with_a_weight_above_0() {
        for yes in [
            "gzip",
            "GZIP",
            "gzip, deflate, br, zstd",
            "br;q=1.0, gzip;q=0.8",
            "x-gzip",
            "*",
            "identity, *;q=0.5",
            "gzip;q=0.001",
        ] {
            assert!(accepts(yes), "{yes}");
        }
        for no in [
            "",
            "identity",
            "br, deflate",
            "gzip;q=0",
            "gzip;q=0.000",
            "gzip; q=0, *",
            "*;q=0",
            "gzip;q=x",
            "gzipx",
        ] {
            assert!(!accepts(no), "{no}");
        }
        assert!(!accepts_gzip(&HeaderMap::new()));
    }

    #[test]
    fn the_page_names_its_assets_under_their_fingerprint_and_the_served_document() {
        let page = page(true);
        let text = std::str::from_utf8(&page).unwrap();
        assert!(!text.contains('{'), "a placeholder left: {text}");
        assert!(text.contains(r#"data-spec="/v1/openapi.json""#));
        assert!(text.contains(r#"data-try-it-out="true""#));
        assert!(text.contains(&format!("/docs/{FINGERPRINT}/init.js")));
        // No inline script or style: the CSP forbids them.
        assert!(!text.contains("<script>") && !text.contains("<style"));
        let reference = page_text(false);
        assert!(reference.contains(r#"data-try-it-out="false""#));
    }

    fn page_text(try_it_out: bool) -> String {
        String::from_utf8(page(try_it_out).to_vec()).unwrap()
    }
}
