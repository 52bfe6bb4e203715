//! [`IdempotencyKey`]: the value of an `Idempotency-Key` header, checked,
//! and [`KeyError`], why a value is not one.
//!
//! Two spellings are the same key: the IETF draft's structured-field
//! string (RFC 8941 section 3.3.3, `"abc"`) and the same characters
//! unquoted, as most clients send it. Inside quotes, `\"` and `\\` are
//! the sf-string's escapes of `"` and `\`; any other backslash is not an
//! sf-string, and a space inside the quotes, which an sf-string allows,
//! is not a visible character, so it is refused like a space unquoted.
//! Unquoted, every visible character is taken as it is, a backslash or a
//! quote after the first character included.

use std::fmt;
use std::sync::Arc;

use crate::quote::quote;

/// Most characters in a key, after its quotes and escapes are removed.
pub const MAX_KEY_CHARS: usize = 255;

/// An idempotency key: 1 to [`MAX_KEY_CHARS`] visible ASCII characters
/// (`0x21..=0x7E`), the way the client meant them (quotes and escapes
/// removed). Cheap to clone (an `Arc`).
///
/// # Examples
///
/// ```
/// use petstore_core::idempotency::{IdempotencyKey, KeyError};
/// let quoted = IdempotencyKey::parse_header(br#""8e03978e-40d5""#).unwrap();
/// let bare = IdempotencyKey::parse_header(b"8e03978e-40d5").unwrap();
/// assert_eq!(quoted, bare);
/// assert_eq!(quoted.as_str(), "8e03978e-40d5");
/// assert_eq!(IdempotencyKey::parse_header(br#""a\"b""#).unwrap().as_str(), "a\"b");
/// assert_eq!(IdempotencyKey::parse_header(b""), Err(KeyError::Empty));
/// assert_eq!(IdempotencyKey::parse_header(b"\"abc"), Err(KeyError::Unbalanced));
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdempotencyKey(Arc<str>);

/// Why a header value is not an idempotency key. Its `Display` is the
/// message of a 400 `invalid_idempotency_key`; it quotes nothing the
/// client sent but one character's position and code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// No characters, quoted or not.
    #[error("the Idempotency-Key header is empty")]
    Empty,
    /// More than [`MAX_KEY_CHARS`] characters.
    #[error("the Idempotency-Key header is longer than {MAX_KEY_CHARS} characters")]
    TooLong,
    /// A byte that is not a visible ASCII character (a space, a control
    /// character, or not ASCII), at this character position (1-based).
    #[error(
        "the Idempotency-Key header has a character that is not visible ASCII (0x{byte:02x}) at position {at}"
    )]
    NotVisible {
        /// The byte.
        byte: u8,
        /// Its position in the value as sent, from 1.
        at: usize,
    },
    /// An opening quote without its closing one, or text after the
    /// closing quote.
    #[error("the Idempotency-Key header opens a quoted string it does not close at its end")]
    Unbalanced,
    /// A backslash inside quotes followed by anything but `"` or `\`.
    #[error(
        "the Idempotency-Key header has a backslash inside quotes that escapes neither \" nor \\"
    )]
    BadEscape,
    /// The header more than once.
    #[error("the Idempotency-Key header was sent more than once")]
    Repeated,
}

impl IdempotencyKey {
    /// Reads an `Idempotency-Key` header value: quoted (an RFC 8941
    /// sf-string) or not; see the module's overview for the rules.
    pub fn parse_header(value: &[u8]) -> Result<Self, KeyError> {
        let visible = |byte: u8, at: usize| {
            if (0x21..=0x7e).contains(&byte) {
                Ok(byte as char)
            } else {
                Err(KeyError::NotVisible { byte, at: at + 1 })
            }
        };
        let mut key = String::new();
        match value {
            [] | [b'"', b'"'] => return Err(KeyError::Empty),
            [b'"', inner @ ..] => {
                let Some(inner) = inner.strip_suffix(b"\"") else {
                    return Err(KeyError::Unbalanced);
                };
                let mut bytes = inner.iter().enumerate();
                while let Some((i, &byte)) = bytes.next() {
                    let c = match byte {
                        b'\\' => match bytes.next() {
                            Some((_, &escaped @ (b'"' | b'\\'))) => escaped as char,
                            // What it escapes is the closing quote.
                            None => return Err(KeyError::Unbalanced),
                            Some(_) => return Err(KeyError::BadEscape),
                        },
                        // An unescaped quote before the end closes the
                        // string early: text follows it.
                        b'"' => return Err(KeyError::Unbalanced),
                        byte => visible(byte, i + 1)?,
                    };
                    if key.len() == MAX_KEY_CHARS {
                        return Err(KeyError::TooLong);
                    }
                    key.push(c);
                }
            }
            bare => {
                if bare.len() > MAX_KEY_CHARS {
                    // Visible or not, it is too long; say the first fault.
                    if let Some(i) = bare.iter().position(|b| !(0x21..=0x7e).contains(b)) {
                        visible(bare[i], i)?;
                    }
                    return Err(KeyError::TooLong);
                }
                for (i, &byte) in bare.iter().enumerate() {
                    key.push(visible(byte, i)?);
                }
            }
        }
        if key.is_empty() {
            return Err(KeyError::Empty);
        }
        Ok(IdempotencyKey(Arc::from(key)))
    }

    /// A key from its characters (no quotes, no escapes), as a journal
    /// record holds it; `None` unless 1 to [`MAX_KEY_CHARS`] visible
    /// ASCII characters.
    pub fn new(key: &str) -> Option<Self> {
        let ok = (1..=MAX_KEY_CHARS).contains(&key.len())
            && key.bytes().all(|b| (0x21..=0x7e).contains(&b));
        ok.then(|| IdempotencyKey(Arc::from(key)))
    }

    /// The key's characters.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IdempotencyKey({:?})", quote(&self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &[u8]) -> Result<String, KeyError> {
        IdempotencyKey::parse_header(v).map(|k| k.as_str().to_owned())
    }

    #[test]
    fn quoted_and_bare_spellings_are_one_key() {
        assert_eq!(parse(b"abc"), Ok("abc".into()));
        assert_eq!(parse(b"\"abc\""), Ok("abc".into()));
        assert_eq!(parse(br#""a\\b""#), Ok(r"a\b".into()));
        assert_eq!(parse(br"a\b"), Ok(r"a\b".into()));
        assert_eq!(parse(br#""a\"b""#), Ok(r#"a"b"#.into()));
        assert_eq!(parse(br#"a"b"#), Ok(r#"a"b"#.into()));
        assert_eq!(parse(br#"ab""#), Ok(r#"ab""#.into()));
    }

    #[test]
    fn each_fault_is_named() {
        assert_eq!(parse(b""), Err(KeyError::Empty));
        assert_eq!(parse(b"\"\""), Err(KeyError::Empty));
        assert_eq!(parse(b"\""), Err(KeyError::Unbalanced));
        assert_eq!(parse(b"\"abc"), Err(KeyError::Unbalanced));
        assert_eq!(parse(b"\"ab\"c\""), Err(KeyError::Unbalanced));
        assert_eq!(parse(br#""a\b""#), Err(KeyError::BadEscape));
        assert_eq!(parse(br#""ab\""#), Err(KeyError::Unbalanced));
        assert_eq!(
            parse(b"a b"),
            Err(KeyError::NotVisible { byte: b' ', at: 2 })
        );
        assert_eq!(
            parse(b"\"a b\""),
            Err(KeyError::NotVisible { byte: b' ', at: 3 })
        );
        assert_eq!(
            parse("é".as_bytes()),
            Err(KeyError::NotVisible { byte: 0xc3, at: 1 })
        );
        assert_eq!(
            parse(b"a\tb"),
            Err(KeyError::NotVisible { byte: b'\t', at: 2 })
        );
        assert_eq!(
            parse(b"\x7f"),
            Err(KeyError::NotVisible { byte: 0x7f, at: 1 })
        );
    }

    #[test]
    fn the_length_bound_is_on_the_characters_meant() {
        let max = "k".repeat(MAX_KEY_CHARS);
        assert_eq!(parse(max.as_bytes()), Ok(max.clone()));
        assert_eq!(parse(format!("\"{max}\"").as_bytes()), Ok(max.clone()));
        let over = "k".repeat(MAX_KEY_CHARS + 1);
        assert_eq!(parse(over.as_bytes()), Err(KeyError::TooLong));
        assert_eq!(
            parse(format!("\"{over}\"").as_bytes()),
            Err(KeyError::TooLong)
        );
        // 255 escaped characters take 512 bytes quoted, and are one key.
        let escaped = r#"\""#.repeat(MAX_KEY_CHARS);
        assert_eq!(
            parse(format!("\"{escaped}\"").as_bytes()),
            Ok("\"".repeat(MAX_KEY_CHARS))
        );
    }

    #[test]
    fn every_key_round_trips_through_both_spellings() {
        // Every visible character, alone and among others.
        for b in 0x21u8..=0x7e {
            let c = b as char;
            let key = format!("k{c}k");
            let escaped = key.replace('\\', r"\\").replace('"', r#"\""#);
            assert_eq!(parse(key.as_bytes()), Ok(key.clone()), "{key}");
            assert_eq!(
                parse(format!("\"{escaped}\"").as_bytes()),
                Ok(key.clone()),
                "{escaped}"
            );
            assert_eq!(
                IdempotencyKey::new(&key).map(|k| k.as_str().to_owned()),
                Some(key)
            );
        }
        assert_eq!(IdempotencyKey::new(""), None);
        assert_eq!(IdempotencyKey::new("a b"), None);
    }

    #[test]
    fn no_message_quotes_the_value() {
        let errors = [
            KeyError::Empty,
            KeyError::TooLong,
            KeyError::NotVisible { byte: 1, at: 1 },
            KeyError::Unbalanced,
            KeyError::BadEscape,
            KeyError::Repeated,
        ];
        for e in errors {
            assert!(e.to_string().starts_with("the Idempotency-Key header"));
        }
    }
}
