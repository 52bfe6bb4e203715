//! [`Actor`]: who places, completes and cancels orders.

use std::sync::Arc;

/// Who acts on orders: a key entry's name (the orders it places carry it
/// as `placedBy`), and whether it may see and act on every key's orders
/// (the `orders:all` scope) or only its own.
///
/// # Examples
///
/// ```
/// use petstore_core::order::Actor;
/// let shop = Actor::new("shop-frontend");
/// assert_eq!(shop.name(), "shop-frontend");
/// assert!(!shop.sees_all());
/// assert!(Actor::new("back-office").with_all_orders().sees_all());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Actor {
    name: Arc<str>,
    all: bool,
}

impl Actor {
    /// An actor that sees its own orders only.
    pub fn new(name: &str) -> Actor {
        Actor {
            name: Arc::from(name),
            all: false,
        }
    }

    /// The same actor, seeing and acting on every key's orders.
    pub fn with_all_orders(mut self) -> Actor {
        self.all = true;
        self
    }

    /// The store itself, as an embedder that calls
    /// [`Inventory::transition`](crate::Inventory::transition) acts: named
    /// `store`, seeing every order.
    pub fn store() -> Actor {
        Actor::new("store").with_all_orders()
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether it sees every key's orders.
    pub fn sees_all(&self) -> bool {
        self.all
    }

    /// Whether it may see an order placed by `placer`.
    pub fn sees(&self, placer: &str) -> bool {
        self.all || *self.name == *placer
    }
}
