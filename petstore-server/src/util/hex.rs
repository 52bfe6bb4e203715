//! Lowercase hex of digests: how a key's SHA-256 is written in the keys
//! file, the limiter state file and the limiter state's external name.

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    out
}

/// A SHA-256 written as 64 hex digits, in either case (an operator may
/// paste the output of any tool into the keys file).
pub fn parse_digest(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in s.as_bytes().chunks(2).enumerate() {
        out[i] = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(out)
}

/// A SHA-256 as [`hex`] writes it: lower case only (what the server
/// wrote itself, so anything else is damage).
pub fn parse_lowercase_digest(s: &str) -> Option<[u8; 32]> {
    if !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    parse_digest(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_lower_case_is_what_the_server_writes() {
        let digest: [u8; 32] = std::array::from_fn(|i| (i * 37) as u8);
        let text = hex(&digest);
        assert_eq!(parse_digest(&text), Some(digest));
        assert_eq!(parse_lowercase_digest(&text), Some(digest));
        let upper = text.to_uppercase();
        assert_eq!(parse_digest(&upper), Some(digest));
        assert_eq!(parse_lowercase_digest(&upper), None);
        assert_eq!(parse_digest(&text[1..]), None);
        assert_eq!(parse_digest(&format!("{}g", &text[1..])), None);
    }
}
