//! [`PetStatus`]: a pet's availability, and the error of parsing one.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

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
