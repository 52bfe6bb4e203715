//! Header texts that live as long as the process: valid static header
//! values, interned.

use crate::util::intern::intern;

/// `text` for the life of the process ([`intern`]ed), when it is a valid
/// static header value; else the empty string.
pub(super) fn static_text(text: String) -> &'static str {
    if !is_static_value(&text) {
        return "";
    }
    intern(&text)
}

/// Whether `text` is exactly what `HeaderValue::from_static` accepts (it
/// panics on anything else; it is stricter than `from_str`, which also
/// takes bytes over 0x7f).
pub(super) fn is_static_value(text: &str) -> bool {
    text.bytes()
        .all(|b| b == b'\t' || (0x20..0x7f).contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interned_values_are_shared_not_leaked_again() {
        let a = static_text("\"minute\";q=7;w=60".to_owned());
        let b = static_text("\"minute\";q=7;w=60".to_owned());
        assert_eq!(a, b);
        assert_eq!(a.as_ptr(), b.as_ptr());
        assert_eq!(static_text("bad\nvalue".to_owned()), "");
        assert_eq!(static_text("caf\u{e9}".to_owned()), "");
    }
}
