//! `getPet`'s deprecation: its date, its announced removal, and the
//! `Deprecation`, `Sunset` and successor `Link` headers.

use hyper::header::{HeaderMap, HeaderValue, LINK};

use super::names::{DEPRECATION, SUNSET};
use super::static_text::static_text;

/// The `Deprecation` value: `@` and the Unix time at which v1.0.0
/// declared `getPet` deprecated, 2025-12-05T00:00:00Z.
pub const DEPRECATION_VALUE: &str = "@1764892800";
/// `getPet`'s announced removal.
pub const GET_PET_SUNSET: &str = "Thu, 05 Dec 2030 00:00:00 GMT";

/// The successor-version `Link` of `getPet`, built once at startup.
pub fn successor_link(base_url: &str) -> HeaderValue {
    HeaderValue::from_static(static_text(format!(
        "<{base_url}/pets>; rel=\"successor-version\""
    )))
}

/// Adds `getPet`'s `Deprecation`, `Sunset` and successor `Link`.
pub fn deprecation(headers: &mut HeaderMap, successor: &HeaderValue) {
    headers.insert(DEPRECATION, HeaderValue::from_static(DEPRECATION_VALUE));
    headers.insert(SUNSET, HeaderValue::from_static(GET_PET_SUNSET));
    headers.append(LINK, successor.clone());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deprecation_headers() {
        let mut h = HeaderMap::new();
        deprecation(&mut h, &successor_link("/v1"));
        // 2025-12-05T00:00:00Z: 20,427 days after the epoch.
        assert_eq!(DEPRECATION_VALUE, format!("@{}", 20_427 * 86_400));
        assert_eq!(h[&DEPRECATION], "@1764892800");
        assert_eq!(h[&SUNSET], "Thu, 05 Dec 2030 00:00:00 GMT");
        assert_eq!(h[LINK], r#"</v1/pets>; rel="successor-version""#);
    }
}
