//! The Unicode rules of a pet name: [`validate_name`], and the same rules
//! as ranges of code points ([`name_rules`]) for a store outside the
//! process.

use super::error::NameError;

/// Longest allowed `name`, in Unicode scalar values (characters).
pub const MAX_NAME_CHARS: usize = 100;

/// Checks a pet name against `docs/contract.md`: 1 to 100 characters; at least
/// one of them neither White_Space nor Default_Ignorable_Code_Point (a name
/// of only U+200B is blank: it shows as nothing); none a control character
/// (category Cc), a bidirectional control (U+202A..U+202E,
/// U+2066..U+2069: they reorder the text around the name where it is
/// shown) or a noncharacter (U+FDD0..U+FDEF, U+nFFFE, U+nFFFF).
///
/// # Examples
///
/// ```
/// use petstore_core::pet::{validate_name, NameError};
/// assert!(validate_name("Rex").is_ok());
/// assert_eq!(validate_name(""), Err(NameError::Empty));
/// assert_eq!(validate_name("   "), Err(NameError::Blank));
/// assert_eq!(validate_name("a\u{7}b"), Err(NameError::ControlCharacter));
/// assert_eq!(validate_name("\u{200b}"), Err(NameError::Blank));
/// assert_eq!(validate_name("a\u{202e}b"), Err(NameError::ControlCharacter));
/// assert_eq!(validate_name(&"é".repeat(101)), Err(NameError::TooLong));
/// ```
pub fn validate_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    let mut chars = 0usize;
    let mut blank = true;
    for c in name.chars() {
        chars += 1;
        if c.is_ascii() {
            // Most names: no table lookup. The only ASCII White_Space that
            // is not a control character is the space; no ASCII character
            // is default-ignorable, a bidi control or a noncharacter.
            if c.is_ascii_control() {
                return Err(NameError::ControlCharacter);
            }
            blank &= c == ' ';
            continue;
        }
        if refused(c) {
            return Err(NameError::ControlCharacter);
        }
        blank &= is_white_space(c) || is_default_ignorable(c);
    }
    if chars > MAX_NAME_CHARS {
        return Err(NameError::TooLong);
    }
    if blank {
        return Err(NameError::Blank);
    }
    Ok(())
}

/// [`validate_name`]'s character rules as ranges of code points, for a
/// store outside the process that must refuse what the core refuses (the
/// server's PostgreSQL CHECK is built from these, so the two cannot
/// drift). A name is valid when it has 1 to [`MAX_NAME_CHARS`]
/// characters, none in `refused`, and at least one not in `blank`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameRules {
    /// Code points refused anywhere in a name: control characters,
    /// bidirectional controls, noncharacters. Sorted inclusive ranges.
    pub refused: Vec<(u32, u32)>,
    /// Code points that do not make a name visible (White_Space and
    /// Default_Ignorable_Code_Point). Sorted inclusive ranges.
    pub blank: Vec<(u32, u32)>,
}

/// The rules [`validate_name`] applies, as ranges.
///
/// # Examples
///
/// ```
/// use petstore_core::pet::{name_rules, validate_name};
/// let rules = name_rules();
/// let inside = |ranges: &[(u32, u32)], c: char| {
///     ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(&u32::from(c)))
/// };
/// assert!(inside(&rules.refused, '\u{7}') && validate_name("a\u{7}").is_err());
/// assert!(inside(&rules.blank, '\u{200b}') && validate_name("\u{200b}").is_err());
/// assert!(!inside(&rules.refused, 'é') && !inside(&rules.blank, 'é'));
/// ```
pub fn name_rules() -> NameRules {
    let mut refused = vec![
        (0x00, 0x1F),
        (0x7F, 0x9F),
        (0x202A, 0x202E),
        (0x2066, 0x2069),
        (0xFDD0, 0xFDEF),
    ];
    refused.extend((0..=0x10u32).map(|plane| (plane << 16 | 0xFFFE, plane << 16 | 0xFFFF)));
    refused.sort_unstable();
    let mut blank: Vec<(u32, u32)> = WHITE_SPACE
        .iter()
        .chain(DEFAULT_IGNORABLE_CODE_POINT)
        .copied()
        .collect();
    blank.sort_unstable();
    NameRules { refused, blank }
}

/// Control characters, bidirectional controls and noncharacters: refused
/// anywhere in a name.
fn refused(c: char) -> bool {
    let u = u32::from(c);
    c.is_control()
        || (0x202A..=0x202E).contains(&u)
        || (0x2066..=0x2069).contains(&u)
        || (0xFDD0..=0xFDEF).contains(&u)
        // U+nFFFE and U+nFFFF of every plane.
        || u & 0xFFFE == 0xFFFE
}

/// `White_Space=Yes`, from Unicode 16.0.0 `PropList.txt`
/// (<https://www.unicode.org/Public/16.0.0/ucd/PropList.txt>), as
/// inclusive ranges of code points. The property has been stable since
/// Unicode 6.3. A test checks it against `char::is_whitespace`, which
/// the standard library defines as this same property.
const WHITE_SPACE: &[(u32, u32)] = &[
    (0x0009, 0x000D),
    (0x0020, 0x0020),
    (0x0085, 0x0085),
    (0x00A0, 0x00A0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
];

/// `Default_Ignorable_Code_Point=Yes`, from Unicode 16.0.0
/// `DerivedCoreProperties.txt`
/// (<https://www.unicode.org/Public/16.0.0/ucd/DerivedCoreProperties.txt>;
/// unchanged from 15.0 and 15.1), as inclusive ranges of code points:
/// characters that render as nothing (zero-width space, joiners, word
/// joiner, BOM, variation selectors, Hangul fillers, tags, ...). A name of
/// only these is as blank as one of only spaces.
const DEFAULT_IGNORABLE_CODE_POINT: &[(u32, u32)] = &[
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
];

/// Whether `c` lies in one of `table`'s sorted, disjoint ranges.
fn in_table(table: &[(u32, u32)], c: char) -> bool {
    let u = u32::from(c);
    table
        .binary_search_by(|&(lo, hi)| {
            if hi < u {
                std::cmp::Ordering::Less
            } else if lo > u {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

fn is_white_space(c: char) -> bool {
    in_table(WHITE_SPACE, c)
}

fn is_default_ignorable(c: char) -> bool {
    in_table(DEFAULT_IGNORABLE_CODE_POINT, c)
}

#[cfg(test)]
mod tests {
    #[test]
    fn name_rules_are_exactly_what_validate_name_applies() {
        // Every code point: alone, a name is valid iff it is neither
        // refused nor blank; after a visible letter, iff it is not refused.
        let rules = name_rules();
        let inside =
            |ranges: &[(u32, u32)], u: u32| ranges.iter().any(|&(lo, hi)| lo <= u && u <= hi);
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            let u = u32::from(c);
            let (refused, blank) = (inside(&rules.refused, u), inside(&rules.blank, u));
            assert_eq!(
                validate_name(&c.to_string()).is_ok(),
                !refused && !blank,
                "{u:#x}"
            );
            assert_eq!(validate_name(&format!("a{c}")).is_ok(), !refused, "{u:#x}");
        }
    }

    use super::*;

    #[test]
    fn invisible_names_are_blank() {
        for blank in [
            "\u{200b}",
            "\u{2060}",
            "\u{feff}",
            "\u{200b}\u{2060}\u{feff}",
            " \u{200b} ",
            "\u{00a0}\u{3000}\u{200d}",
            "\u{115f}\u{3164}\u{ffa0}",
            "\u{e0001}\u{e0fff}",
            "\u{fe0f}\u{34f}\u{ad}",
        ] {
            assert_eq!(validate_name(blank), Err(NameError::Blank), "{blank:?}");
        }
        // One visible character among invisible ones is enough.
        for fine in [
            "\u{200b}x",
            "a\u{200d}b",
            "\u{1f600}",
            "\u{e1000}",
            "\u{fff9}",
        ] {
            assert_eq!(validate_name(fine), Ok(()), "{fine:?}");
        }
    }

    #[test]
    fn bidi_controls_and_noncharacters_are_refused_like_controls() {
        let refused = [
            0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069, 0xFDD0, 0xFDEF,
            0xFFFE, 0xFFFF, 0x1FFFE, 0x1FFFF, 0xEFFFE, 0x10FFFE, 0x10FFFF,
        ];
        for u in refused {
            let c = char::from_u32(u).unwrap();
            let name = format!("Rex{c}");
            assert_eq!(
                validate_name(&name),
                Err(NameError::ControlCharacter),
                "U+{u:04X}"
            );
        }
        // The neighbours of each refused range are allowed (the isolates'
        // and embeddings' ranges end exactly where docs/contract.md says).
        for u in [
            0x2029, 0x202F, 0x2065, 0x206A, 0xFDCF, 0xFDF0, 0xFFFD, 0x1FFFD, 0x20000,
        ] {
            let c = char::from_u32(u).unwrap();
            let name = format!("Rex{c}");
            assert_eq!(validate_name(&name), Ok(()), "U+{u:04X}");
        }
    }

    /// The tables are sorted and disjoint (the binary search needs it),
    /// and `WHITE_SPACE` is exactly what the standard library calls
    /// whitespace (also the White_Space property) for every character.
    #[test]
    fn unicode_tables_are_well_formed() {
        for table in [WHITE_SPACE, DEFAULT_IGNORABLE_CODE_POINT] {
            for pair in table.windows(2) {
                assert!(pair[0].0 <= pair[0].1 && pair[0].1 < pair[1].0, "{pair:?}");
            }
        }
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            assert_eq!(
                is_white_space(c),
                c.is_whitespace(),
                "U+{:04X}",
                u32::from(c)
            );
        }
        // Every range of the ignorable table, at both ends and just outside.
        for &(lo, hi) in DEFAULT_IGNORABLE_CODE_POINT {
            for (u, inside) in [(lo, true), (hi, true), (lo - 1, false), (hi + 1, false)] {
                if let Some(c) = char::from_u32(u) {
                    let listed = DEFAULT_IGNORABLE_CODE_POINT
                        .iter()
                        .any(|&(a, b)| a <= u && u <= b);
                    assert_eq!(is_default_ignorable(c), listed, "U+{u:04X}");
                    if inside {
                        assert!(listed);
                    }
                }
            }
        }
    }

    #[test]
    fn the_ascii_fast_path_agrees_with_the_tables() {
        for b in 0u8..=127 {
            let c = char::from(b);
            let name = c.to_string();
            let want = if refused(c) {
                Err(NameError::ControlCharacter)
            } else if is_white_space(c) || is_default_ignorable(c) {
                Err(NameError::Blank)
            } else {
                Ok(())
            };
            assert_eq!(validate_name(&name), want, "{c:?}");
        }
    }

    proptest::proptest! {
        /// A name is blank exactly when every character is White_Space or
        /// Default_Ignorable (and none is refused), whatever the mix.
        #[test]
        fn blank_means_only_invisible(picks in proptest::collection::vec(0usize..12, 1..20)) {
            const POOL: [char; 12] = [
                ' ', '\u{a0}', '\u{2003}', '\u{3000}', '\u{200b}', '\u{2060}', '\u{feff}',
                '\u{ad}', '\u{e0020}', 'x', '\u{e9}', '\u{1f600}',
            ];
            let name: String = picks.iter().map(|&i| POOL[i]).collect();
            let visible = picks.iter().any(|&i| i >= 9);
            let want = if visible { Ok(()) } else { Err(NameError::Blank) };
            proptest::prop_assert_eq!(validate_name(&name), want);
        }
    }
}
