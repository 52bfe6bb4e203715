//! [`Transition`]: the three ways a pet changes hands (reserve, release,
//! sell), which statuses each starts from and which one it ends in.

use super::status::PetStatus;

/// A change of a pet's status that a client may ask for. Each starts from
/// some statuses only and ends in one; `sold` is final, so no transition
/// starts from it.
///
/// | transition | from | to |
/// |---|---|---|
/// | `reserve` | `available` | `pending` |
/// | `release` | `pending` | `available` |
/// | `sell` | `available` or `pending` | `sold` |
///
/// # Examples
///
/// ```
/// use petstore_core::{PetStatus, Transition};
/// assert!(Transition::Sell.allows(PetStatus::Pending));
/// assert!(!Transition::Reserve.allows(PetStatus::Pending));
/// assert_eq!(Transition::Release.to_status(), PetStatus::Available);
/// assert_eq!(Transition::Sell.as_str(), "sell");
/// assert_eq!("reserve".parse(), Ok(Transition::Reserve));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transition {
    /// `available` to `pending`: a customer holds the pet.
    Reserve,
    /// `pending` to `available`: the customer walked away.
    Release,
    /// `available` or `pending` to `sold`, for ever.
    Sell,
}

impl Transition {
    /// Every transition, in the order of the contract.
    pub const ALL: [Transition; 3] = [Transition::Reserve, Transition::Release, Transition::Sell];

    /// The name of the transition in paths and in the journal.
    pub const fn as_str(self) -> &'static str {
        match self {
            Transition::Reserve => "reserve",
            Transition::Release => "release",
            Transition::Sell => "sell",
        }
    }

    /// The statuses this transition starts from, in the contract's order.
    pub const fn from_statuses(self) -> &'static [PetStatus] {
        match self {
            Transition::Reserve => &[PetStatus::Available],
            Transition::Release => &[PetStatus::Pending],
            Transition::Sell => &[PetStatus::Available, PetStatus::Pending],
        }
    }

    /// The status a pet has after this transition.
    pub const fn to_status(self) -> PetStatus {
        match self {
            Transition::Reserve => PetStatus::Pending,
            Transition::Release => PetStatus::Available,
            Transition::Sell => PetStatus::Sold,
        }
    }

    /// Whether a pet whose status is `current` may take this transition.
    pub fn allows(self, current: PetStatus) -> bool {
        self.from_statuses().contains(&current)
    }
}

impl std::fmt::Display for Transition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of parsing a [`Transition`]: the text is not one of the three.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("must be one of reserve, release, sell")]
pub struct UnknownTransition;

impl std::str::FromStr for Transition {
    type Err = UnknownTransition;
    fn from_str(s: &str) -> Result<Self, UnknownTransition> {
        Transition::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or(UnknownTransition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_transition_ends_outside_where_it_starts_and_never_leaves_sold() {
        for t in Transition::ALL {
            assert!(!t.allows(t.to_status()), "{t} twice is a conflict");
            assert!(!t.allows(PetStatus::Sold));
            for s in PetStatus::ALL {
                assert_eq!(t.allows(s), t.from_statuses().contains(&s));
            }
            assert_eq!(t.as_str().parse(), Ok(t));
        }
        assert_eq!("Sell".parse::<Transition>(), Err(UnknownTransition));
    }
}
