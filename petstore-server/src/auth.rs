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

/// Reads the bearer token of a request: `Bearer`, in any case, one or
/// more spaces, and a token68. One pass over the bytes (this runs on
/// every request).
pub fn credential(headers: &HeaderMap) -> Credential<'_> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let Some(value) = values.next() else {
        return Credential::Missing;
    };
    if values.next().is_some() {
        return Credential::Malformed;
    }
    let bytes = value.as_bytes();
    let Some((scheme, rest)) = bytes.split_at_checked(6) else {
        return Credential::Malformed;
    };
    if !scheme.eq_ignore_ascii_case(b"bearer") || rest.first() != Some(&b' ') {
        return Credential::Malformed;
    }
    let spaces = rest.iter().take_while(|b| **b == b' ').count();
    let token = &rest[spaces..];
    if !is_token68(token) {
        return Credential::Malformed;
    }
    // A token68 is ASCII, so this cannot fail.
    match std::str::from_utf8(token) {
        Ok(token) => Credential::Bearer(token),
        Err(_) => Credential::Malformed,
    }
}

/// The bytes of token68 before its padding: `ALPHA / DIGIT / "-" / "." /
/// "_" / "~" / "+" / "/"`.
const TOKEN68: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] =
            c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~' | b'+' | b'/');
        b += 1;
    }
    table
};

/// `token68 = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`
fn is_token68(token: &[u8]) -> bool {
    let padding = token.iter().rev().take_while(|b| **b == b'=').count();
    let body = &token[..token.len() - padding];
    !body.is_empty() && body.iter().all(|b| TOKEN68[usize::from(*b)])
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
            "Bearerx abc",
            "Bearer\tabc",
            "Bearer a=b",
            "Bearer abc ",
            "Bear abc",
            "Bearer caf\u{e9}",
        ] {
            assert_eq!(credential(&with(&[bad])), Credential::Malformed, "{bad:?}");
        }
        assert_eq!(
            credential(&with(&["Bearer a", "Bearer b"])),
            Credential::Malformed
        );
    }
}
