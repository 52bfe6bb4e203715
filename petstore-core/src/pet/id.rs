//! The id newtypes [`PetId`] and [`CategoryId`]: positive `int64`s with
//! one spelling each in a URL (docs/contract.md).

use std::fmt;
use std::num::NonZeroU64;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::error::IdError;

/// The largest id the contract allows: ids are `int64`, so 2^63 - 1.
const MAX_ID: u64 = i64::MAX as u64;

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

/// Other rooms' positive `int64` ids (an order's) are built the same way.
pub(crate) use positive_int64;

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

#[cfg(test)]
mod tests {
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

    proptest::proptest! {
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
}
