//! [`Scope`] and [`Scopes`]: what a key may do (docs/contract.md, "Keys
//! and plans"). A key entry lists its scopes; one without a list has all
//! of them, as every key had before scopes existed.
//!
//! Why a bitset: the scope a request needs is checked on every request,
//! after the key is already looked up; a copy of one byte carried with
//! the entry makes that check an AND, with no allocation and no second
//! lookup.

use std::fmt;

/// One thing a key may be allowed to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// List and get pets.
    PetsRead,
    /// Create pets.
    PetsWrite,
    /// Place, complete and cancel its own orders; reserve, release and
    /// sell pets; see its own orders.
    Orders,
    /// See, complete and cancel every key's orders.
    OrdersAll,
    /// Read the event feed.
    Events,
}

impl Scope {
    /// Every scope, in the order the documents list them.
    pub const ALL: [Scope; 5] = [
        Scope::PetsRead,
        Scope::PetsWrite,
        Scope::Orders,
        Scope::OrdersAll,
        Scope::Events,
    ];

    /// Its name in a keys file and in `WWW-Authenticate`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Scope::PetsRead => "pets:read",
            Scope::PetsWrite => "pets:write",
            Scope::Orders => "orders",
            Scope::OrdersAll => "orders:all",
            Scope::Events => "events",
        }
    }

    /// The scope of this name, if there is one.
    pub fn parse(name: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|s| s.as_str() == name)
    }

    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of scopes.
///
/// # Examples
///
/// ```
/// use petstore_server::keys::{Scope, Scopes};
/// let shop_window = Scopes::NONE.with(Scope::PetsRead);
/// assert!(shop_window.allows(Scope::PetsRead));
/// assert!(!shop_window.allows(Scope::Orders));
/// assert!(Scopes::ALL.allows(Scope::Events));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Scopes(u8);

impl Scopes {
    /// No scope at all.
    pub const NONE: Scopes = Scopes(0);
    /// Every scope: an entry that lists none.
    pub const ALL: Scopes = Scopes(
        Scope::PetsRead.bit()
            | Scope::PetsWrite.bit()
            | Scope::Orders.bit()
            | Scope::OrdersAll.bit()
            | Scope::Events.bit(),
    );

    /// This set and `scope`.
    pub const fn with(self, scope: Scope) -> Scopes {
        Scopes(self.0 | scope.bit())
    }

    /// Whether the set holds `scope`.
    pub const fn allows(self, scope: Scope) -> bool {
        self.0 & scope.bit() != 0
    }

    /// The scopes of the set, in [`Scope::ALL`]'s order.
    pub fn iter(self) -> impl Iterator<Item = Scope> {
        Scope::ALL.into_iter().filter(move |s| self.allows(*s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scope_has_one_name_and_one_bit() {
        let mut all = Scopes::NONE;
        for scope in Scope::ALL {
            assert_eq!(Scope::parse(scope.as_str()), Some(scope));
            assert!(!all.allows(scope), "{scope} shares a bit");
            all = all.with(scope);
        }
        assert_eq!(all, Scopes::ALL);
        assert_eq!(Scope::parse("pets"), None);
        assert_eq!(Scope::parse("Pets:Read"), None);
        assert_eq!(Scopes::ALL.iter().count(), 5);
    }
}
