//! [`quote`]: how an error message quotes what a client sent.
//!
//! docs/contract.md: a message quotes client input at most
//! [`MAX_QUOTED_CHARS`] characters long, then `…`. A client can send a
//! 60 KB field name or a 5,000-digit path; echoing it whole makes every
//! error as large as the input and floods logs and dashboards that show
//! messages. Every message that quotes client input goes through this one
//! function, so the rule cannot drift between the body parser, the query
//! parser and the router.

use std::fmt;

/// Most characters of client input an error message quotes.
pub const MAX_QUOTED_CHARS: usize = 64;

/// Client input as an error message quotes it: at most
/// [`MAX_QUOTED_CHARS`] characters (Unicode scalar values, so never a cut
/// inside a UTF-8 sequence), then `…` when there was more.
///
/// `Display` writes the kept characters as they are (for a name between
/// backticks); `Debug` writes them as a Rust string literal, quotes and
/// escapes included, with the `…` inside the quotes.
///
/// # Examples
///
/// ```
/// use petstore_core::quote::quote;
/// assert_eq!(quote("abc").to_string(), "abc");
/// assert_eq!(format!("{:?}", quote("a\"b")), r#""a\"b""#);
/// let long = "é".repeat(65);
/// assert_eq!(quote(&long).to_string(), format!("{}…", "é".repeat(64)));
/// assert_eq!(format!("{:?}", quote(&long)), format!("\"{}…\"", "é".repeat(64)));
/// ```
pub fn quote(input: &str) -> Quoted<'_> {
    // Looks at no more than 65 characters, however long the input is.
    match input.char_indices().nth(MAX_QUOTED_CHARS) {
        Some((cut, _)) => Quoted {
            kept: input.get(..cut).unwrap_or(input),
            cut: true,
        },
        None => Quoted {
            kept: input,
            cut: false,
        },
    }
}

/// The result of [`quote`]: a view into the input, formatted on demand
/// (no allocation of its own).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Quoted<'a> {
    kept: &'a str,
    cut: bool,
}

impl Quoted<'_> {
    /// The kept characters, without the `…`.
    pub fn kept(&self) -> &str {
        self.kept
    }

    /// Whether the input was longer than [`MAX_QUOTED_CHARS`].
    pub fn is_cut(&self) -> bool {
        self.cut
    }

    fn ellipsis(&self) -> &'static str {
        if self.cut {
            "…"
        } else {
            ""
        }
    }
}

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kept)?;
        f.write_str(self.ellipsis())
    }
}

impl fmt::Debug for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"")?;
        for c in self.kept.chars() {
            // As `str`'s Debug: a single quote needs no escape in a
            // double-quoted literal (`char::escape_debug` would write `\'`).
            if c == '\'' {
                f.write_str("'")?;
            } else {
                fmt::Display::fmt(&c.escape_debug(), f)?;
            }
        }
        f.write_str(self.ellipsis())?;
        f.write_str("\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_short_input_whole() {
        for s in [
            "",
            "x",
            "it's \"quoted\"\t\\",
            &"a".repeat(64),
            &"\u{1F600}".repeat(64),
        ] {
            let q = quote(s);
            assert!(!q.is_cut());
            assert_eq!(q.to_string(), s);
            assert_eq!(format!("{q:?}"), format!("{s:?}"));
        }
    }

    #[test]
    fn cuts_at_64_characters_never_inside_one() {
        // 4-byte, 3-byte, 2-byte and 1-byte characters: the cut is at the
        // 64th character whatever their widths.
        for c in ['\u{1F600}', '€', 'é', 'a'] {
            let s: String = std::iter::repeat_n(c, 65).collect();
            let q = quote(&s);
            assert!(q.is_cut());
            assert_eq!(q.kept().chars().count(), 64);
            assert_eq!(q.kept().len(), 64 * c.len_utf8());
            assert_eq!(q.to_string(), format!("{}…", q.kept()));
        }
        let mixed = format!("{}é{}", "a".repeat(63), "b".repeat(10_000));
        assert_eq!(quote(&mixed).to_string(), format!("{}é…", "a".repeat(63)));
    }

    #[test]
    fn debug_escapes_like_a_string_literal() {
        assert_eq!(format!("{:?}", quote("a\"b\n")), "\"a\\\"b\\n\"");
        let long = "\n".repeat(100);
        assert_eq!(
            format!("{:?}", quote(&long)),
            format!("\"{}…\"", "\\n".repeat(64))
        );
    }
}
