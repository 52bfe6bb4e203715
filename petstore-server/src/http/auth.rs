//! The `Authorization: Bearer <key>` header (RFC 6750).

#[cfg(test)]
use hyper::header::{HeaderMap, AUTHORIZATION};

/// The `Authorization` header of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Authorization<'a> {
    /// None was sent.
    Missing,
    /// More than one was sent: not a credential (RFC 9110 allows one).
    Several,
    /// The one value sent, still to be read with [`bearer_token`].
    Value(&'a [u8]),
}

impl<'a> Authorization<'a> {
    /// What the request sent, with one more `Authorization` value: the
    /// value itself, unread (a connection compares it whole with the one
    /// it saw last before paying to parse it; see `connection.rs`), or
    /// several. The request's headers are scanned once for this and for
    /// `Host` (`admit.rs`).
    pub fn and(self, value: &'a [u8]) -> Self {
        match self {
            Authorization::Missing => Authorization::Value(value),
            _ => Authorization::Several,
        }
    }
}

/// The request's `Authorization` header, as `admit.rs` finds it.
#[cfg(test)]
fn authorization(headers: &HeaderMap) -> Authorization<'_> {
    headers
        .get_all(AUTHORIZATION)
        .iter()
        .fold(Authorization::Missing, |found, value| {
            found.and(value.as_bytes())
        })
}

/// The token of an `Authorization` value: `Bearer`, in any case, one or
/// more spaces, and a token68. `None` for anything else.
pub fn bearer_token(value: &[u8]) -> Option<&str> {
    let (scheme, rest) = value.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"bearer") || rest.first() != Some(&b' ') {
        return None;
    }
    let spaces = rest.iter().take_while(|b| **b == b' ').count();
    let token = &rest[spaces..];
    if !is_token68(token) {
        return None;
    }
    // A token68 is ASCII, so this cannot fail.
    std::str::from_utf8(token).ok()
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

    /// `None` without a header; `Some(None)` for one that is no bearer
    /// token (or several headers).
    fn token_of(values: &[&str]) -> Option<Option<String>> {
        match authorization(&with(values)) {
            Authorization::Missing => None,
            Authorization::Several => Some(None),
            Authorization::Value(v) => Some(bearer_token(v).map(str::to_owned)),
        }
    }

    #[test]
    fn reads_bearer_tokens() {
        assert_eq!(token_of(&[]), None);
        assert_eq!(token_of(&["Bearer abc"]), Some(Some("abc".into())));
        assert_eq!(
            token_of(&["bearer  a.b-c_d~e+f/g=="]),
            Some(Some("a.b-c_d~e+f/g==".into()))
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
            assert_eq!(token_of(&[bad]), Some(None), "{bad:?}");
        }
        assert_eq!(
            authorization(&with(&["Bearer a", "Bearer b"])),
            Authorization::Several
        );
    }
}
