//! The weighted lists of `Accept` and `Accept-Encoding` (RFC 9110
//! section 12.4.2): each item, and whether its weight wants it.

use hyper::header::{HeaderMap, HeaderName};

/// The items of every `name` header, each as its first part (a media
/// range or a coding, trimmed) and whether it is wanted: no weight is 1,
/// a weight of 0, or one that is not a number, is not wanted.
pub(super) fn weighted<'a>(
    headers: &'a HeaderMap,
    name: &HeaderName,
) -> impl Iterator<Item = (&'a str, bool)> + 'a {
    headers
        .get_all(name)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|item| {
            let mut parts = item.split(';');
            let first = parts.next().unwrap_or("").trim();
            let weight = parts.find_map(|p| {
                let (name, value) = p.split_once('=')?;
                name.trim().eq_ignore_ascii_case("q").then(|| value.trim())
            });
            let wanted = weight.is_none_or(|q| q.parse::<f32>().is_ok_and(|q| q > 0.0));
            (first, wanted)
        })
}
