//! The pet records of the contract: [`Pet`], [`NewPet`], [`PetStatus`] and
//! the id newtypes, with the validation rules of `docs/contract.md`.

use std::fmt;
use std::num::NonZeroU64;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{IdError, NameError, PetError};

/// The largest id the contract allows: ids are `int64`, so 2^63 - 1.
const MAX_ID: u64 = i64::MAX as u64;

/// Longest allowed `name`, in Unicode scalar values (characters).
pub const MAX_NAME_CHARS: usize = 100;

macro_rules! positive_int64 {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "u64", into = "u64")]
        pub struct $name(NonZeroU64);

        impl $name {
            /// The smallest value, 1.
            pub const MIN: Self = match NonZeroU64::new(1) {
                Some(one) => Self(one),
                None => unreachable!(),
            };
            /// The largest value, 2^63 - 1.
            pub const MAX: Self = match NonZeroU64::new(MAX_ID) {
                Some(max) => Self(max),
                None => unreachable!(),
            };

            /// Builds the value; `None` unless `1 <= value <= 2^63 - 1`.
            pub const fn new(value: u64) -> Option<Self> {
                if value > MAX_ID {
                    return None;
                }
                match NonZeroU64::new(value) {
                    Some(v) => Some(Self(v)),
                    None => None,
                }
            }

            /// The value as an integer.
            pub const fn get(self) -> u64 {
                self.0.get()
            }
        }

        impl TryFrom<u64> for $name {
            type Error = IdError;
            fn try_from(value: u64) -> Result<Self, IdError> {
                Self::new(value).ok_or(IdError::OutOfRange)
            }
        }

        impl From<$name> for u64 {
            fn from(id: $name) -> u64 {
                id.get()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        /// Parses the one spelling docs/contract.md allows in a URL: decimal
        /// digits without a sign, spaces or leading zeros (`01` is
        /// refused, so one id has one URL and one cache entry).
        impl FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(IdError::NotAnInteger);
                }
                if s.len() > 1 && s.starts_with('0') {
                    return Err(IdError::LeadingZero);
                }
                // All digits: the only way `parse` can fail is overflow.
                let value: u64 = s.parse().map_err(|_| IdError::OutOfRange)?;
                Self::new(value).ok_or(IdError::OutOfRange)
            }
        }
    };
}

positive_int64! {
    /// Identifier of a pet: an `int64` from 1 to 2^63 - 1, assigned by the
    /// inventory as 1, 2, 3, ... and never reused.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::PetId;
    /// let id: PetId = "42".parse().unwrap();
    /// assert_eq!(id.get(), 42);
    /// assert!("0".parse::<PetId>().is_err());
    /// assert!("-1".parse::<PetId>().is_err());
    /// assert!(PetId::new(1 << 63).is_none());
    /// ```
    PetId
}

positive_int64! {
    /// Identifier of the category a pet belongs to: 1 to 2^63 - 1.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::CategoryId;
    /// assert_eq!(CategoryId::new(7).map(|c| c.get()), Some(7));
    /// assert!(CategoryId::new(0).is_none());
    /// ```
    CategoryId
}

/// Availability of a pet. The JSON names are lowercase.
///
/// # Examples
///
/// ```
/// use petstore_core::PetStatus;
/// assert_eq!("sold".parse::<PetStatus>().unwrap(), PetStatus::Sold);
/// assert_eq!(PetStatus::Pending.as_str(), "pending");
/// assert!("Sold".parse::<PetStatus>().is_err());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PetStatus {
    /// Listed as available; the status of a pet created without one.
    #[default]
    Available,
    /// Pending.
    Pending,
    /// Sold.
    Sold,
}

impl PetStatus {
    /// Every status, in the order of the contract.
    pub const ALL: [PetStatus; 3] = [PetStatus::Available, PetStatus::Pending, PetStatus::Sold];

    /// The JSON and query-string spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            PetStatus::Available => "available",
            PetStatus::Pending => "pending",
            PetStatus::Sold => "sold",
        }
    }

    /// A dense index 0..3, for per-status tables.
    pub(crate) const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for PetStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of parsing a [`PetStatus`]: the text is not one of the three.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("must be one of available, pending, sold")]
pub struct UnknownStatus;

impl FromStr for PetStatus {
    type Err = UnknownStatus;
    fn from_str(s: &str) -> Result<Self, UnknownStatus> {
        match s {
            "available" => Ok(PetStatus::Available),
            "pending" => Ok(PetStatus::Pending),
            "sold" => Ok(PetStatus::Sold),
            _ => Err(UnknownStatus),
        }
    }
}

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
/// use petstore_core::{validate_name, NameError};
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
/// use petstore_core::{name_rules, validate_name};
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

/// A pet to be created: the request body of `createPet`. Only valid values
/// can be built, so [`Inventory::create`](crate::Inventory::create) never
/// has to check it again.
///
/// # Examples
///
/// ```
/// use petstore_core::{CategoryId, NewPet, PetStatus};
/// let cat = CategoryId::new(3).unwrap();
/// let pet = NewPet::new("Rex", cat).unwrap().with_status(PetStatus::Sold);
/// assert_eq!(pet.name(), "Rex");
/// assert_eq!(pet.status(), PetStatus::Sold);
///
/// let parsed = NewPet::from_json(br#"{"name":"Rex","categoryId":3,"status":"sold"}"#).unwrap();
/// assert_eq!(parsed, pet);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewPet {
    name: String,
    category_id: CategoryId,
    status: PetStatus,
}

impl NewPet {
    /// A new pet with status `available`; fails when the name is invalid.
    pub fn new(name: impl Into<String>, category_id: CategoryId) -> Result<Self, PetError> {
        let name = name.into();
        validate_name(&name).map_err(PetError::Name)?;
        Ok(NewPet {
            name,
            category_id,
            status: PetStatus::default(),
        })
    }

    /// The same pet with another status.
    #[must_use]
    pub fn with_status(mut self, status: PetStatus) -> Self {
        self.status = status;
        self
    }

    /// The name, exactly as sent.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The category.
    pub fn category_id(&self) -> CategoryId {
        self.category_id
    }

    /// The status (`available` when none was given).
    pub fn status(&self) -> PetStatus {
        self.status
    }

    /// The pet under the id `id`. An inventory gives ids itself
    /// ([`Inventory::create`](crate::Inventory::create)); this is for a
    /// store that gives them elsewhere (a database's counter), whose pets
    /// then enter an in-memory copy with
    /// [`Inventory::apply`](crate::Inventory::apply).
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::{CategoryId, NewPet, PetId};
    /// let pet = NewPet::new("Rex", CategoryId::MIN).unwrap().into_pet(PetId::new(7).unwrap());
    /// assert_eq!(pet.id().get(), 7);
    /// assert_eq!(pet.name(), "Rex");
    /// ```
    pub fn into_pet(self, id: PetId) -> Pet {
        Pet {
            id,
            name: self.name,
            category_id: self.category_id,
            status: self.status,
        }
    }
}

/// A pet of the inventory: a [`NewPet`] plus the id the inventory gave it.
/// Serialises to exactly the contract's JSON.
///
/// # Examples
///
/// ```
/// use petstore_core::{CategoryId, Inventory, NewPet};
/// let inventory = Inventory::in_memory();
/// let pet = inventory.create(NewPet::new("Rex", CategoryId::MIN).unwrap()).unwrap();
/// assert_eq!(
///     serde_json::to_string(&pet).unwrap(),
///     r#"{"id":1,"name":"Rex","categoryId":1,"status":"available"}"#
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Pet {
    id: PetId,
    name: String,
    category_id: CategoryId,
    status: PetStatus,
}

impl Pet {
    /// The id the inventory assigned.
    pub fn id(&self) -> PetId {
        self.id
    }

    /// The name, exactly as it was sent.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The category.
    pub fn category_id(&self) -> CategoryId {
        self.category_id
    }

    /// The status.
    pub fn status(&self) -> PetStatus {
        self.status
    }

    pub(crate) fn from_parts(
        id: PetId,
        name: String,
        category_id: CategoryId,
        status: PetStatus,
    ) -> Self {
        Pet {
            id,
            name,
            category_id,
            status,
        }
    }
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
    fn id_bounds() {
        assert_eq!(PetId::new(0), None);
        assert_eq!(PetId::new(MAX_ID).map(PetId::get), Some(MAX_ID));
        assert_eq!(PetId::new(MAX_ID + 1), None);
        assert_eq!("9223372036854775807".parse::<PetId>(), Ok(PetId::MAX));
        assert_eq!(
            "9223372036854775808".parse::<PetId>(),
            Err(IdError::OutOfRange)
        );
        assert_eq!(
            "99999999999999999999999".parse::<PetId>(),
            Err(IdError::OutOfRange)
        );
        for bad in ["", "+1", " 1", "1.0", "1e3", "abc", "-0", "0x10"] {
            assert_eq!(bad.parse::<PetId>(), Err(IdError::NotAnInteger), "{bad:?}");
        }
        assert_eq!("0".parse::<PetId>(), Err(IdError::OutOfRange));
        // One spelling per number: no leading zeros, whatever follows.
        for bad in [
            "01",
            "00",
            "0001",
            "09223372036854775807",
            "0000000000000000000000001",
        ] {
            assert_eq!(bad.parse::<PetId>(), Err(IdError::LeadingZero), "{bad:?}");
            assert_eq!(
                bad.parse::<CategoryId>(),
                Err(IdError::LeadingZero),
                "{bad:?}"
            );
        }
        assert_eq!("10".parse::<PetId>().map(PetId::get), Ok(10));
    }

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

        /// Digits parse back to the number exactly when they are its one
        /// spelling.
        #[test]
        fn ids_have_one_spelling(n in 1u64..=MAX_ID, zeros in 0usize..3) {
            let text = format!("{}{n}", "0".repeat(zeros));
            let parsed = text.parse::<PetId>();
            if zeros == 0 {
                proptest::prop_assert_eq!(parsed.map(PetId::get), Ok(n));
            } else {
                proptest::prop_assert_eq!(parsed, Err(IdError::LeadingZero));
            }
        }
    }

    #[test]
    fn name_rules_count_characters_not_bytes() {
        assert!(validate_name(&"é".repeat(100)).is_ok());
        assert!(validate_name(&"a".repeat(100)).is_ok());
        assert_eq!(validate_name(&"a".repeat(101)), Err(NameError::TooLong));
        assert_eq!(validate_name("\t\n "), Err(NameError::ControlCharacter));
        assert_eq!(validate_name("\u{85}"), Err(NameError::ControlCharacter));
        assert_eq!(validate_name("\u{2003}"), Err(NameError::Blank));
        assert_eq!(validate_name("x\u{9f}"), Err(NameError::ControlCharacter));
        // Stored exactly as sent: surrounding spaces are kept, not trimmed.
        let cat = CategoryId::MIN;
        assert_eq!(
            NewPet::new("  Rex ", cat).map(|p| p.name),
            Ok("  Rex ".into())
        );
    }

    #[test]
    fn pet_json_shape() {
        let pet = NewPet::new("a\"b\\c", CategoryId::MAX)
            .map(|p| p.with_status(PetStatus::Pending).into_pet(PetId::MIN));
        let json = pet.as_ref().map(serde_json::to_string);
        assert!(matches!(
            json,
            Ok(Ok(ref s)) if s == r#"{"id":1,"name":"a\"b\\c","categoryId":9223372036854775807,"status":"pending"}"#
        ));
    }
}
