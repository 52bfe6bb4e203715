//! The `Authorization: Bearer <key>` header (RFC 6750).

use hyper::header::{HeaderMap, AUTHORIZATION};

/// What the request presented.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Credential<'a> {
    /// No `Authorization` header.
    Missing,
    /// A header that is not one `Bearer <token68>`.
    Malformed,
    /// A bearer token.
    Bearer(&'a str),
}

/// Reads the bearer token of a request.
pub fn credential(headers: &HeaderMap) -> Credential<'_> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let Some(value) = values.next() else {
        return Credential::Missing;
    };
    if values.next().is_some() {
        return Credential::Malformed;
    }
    let Ok(text) = value.to_str() else {
        return Credential::Malformed;
    };
    let Some((scheme, token)) = text.split_once(' ') else {
        return Credential::Malformed;
    };
    let token = token.trim_start_matches(' ');
    if !scheme.eq_ignore_ascii_case("bearer") || !is_token68(token) {
        return Credential::Malformed;
    }
    Credential::Bearer(token)
}

/// `token68 = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`
fn is_token68(s: &str) -> bool {
    let body = s.trim_end_matches('=');
    !body.is_empty()
        && body.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/')
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn with(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(AUTHORIZATION, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn reads_bearer_tokens() {
        assert_eq!(credential(&with(&[])), Credential::Missing);
        assert_eq!(
            credential(&with(&["Bearer abc"])),
            Credential::Bearer("abc")
        );
        assert_eq!(
            credential(&with(&["bearer  a.b-c_d~e+f/g=="])),
            Credential::Bearer("a.b-c_d~e+f/g==")
        );
        for bad in [
            "Bearer",
            "Bearer ",
            "Basic abc",
            "Bearer a b",
            "Bearer ==",
            "Token abc",
            "abc",
        ] {
            assert_eq!(credential(&with(&[bad])), Credential::Malformed, "{bad:?}");
        }
        assert_eq!(
            credential(&with(&["Bearer a", "Bearer b"])),
            Credential::Malformed
        );
    }
}
