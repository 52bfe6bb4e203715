//! [`Order`]: one deal, and [`OrderStatus`]: where it stands.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::clock::Timestamp;
use crate::pet::{PetId, PetStatus};

use super::id::OrderId;

/// Where an order stands. `Placed` holds its pet (`pending`) until one of
/// the other three, each final, releases or sells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OrderStatus {
    /// Holding its pet until `expiresAt`.
    Placed,
    /// Paid: its pet sold.
    Completed,
    /// Called off before its hold lapsed: its pet available again.
    Cancelled,
    /// Its hold lapsed: its pet available again.
    Expired,
}

impl OrderStatus {
    /// Every status, in the order the contract lists them.
    pub const ALL: [OrderStatus; 4] = [
        OrderStatus::Placed,
        OrderStatus::Completed,
        OrderStatus::Cancelled,
        OrderStatus::Expired,
    ];

    /// The status as the contract spells it.
    pub const fn as_str(self) -> &'static str {
        match self {
            OrderStatus::Placed => "placed",
            OrderStatus::Completed => "completed",
            OrderStatus::Cancelled => "cancelled",
            OrderStatus::Expired => "expired",
        }
    }

    /// The status of an order's pet while the order is in this one:
    /// `pending` while placed, `sold` once completed, `available` once
    /// cancelled or expired.
    pub(crate) const fn pet_status(self) -> PetStatus {
        match self {
            OrderStatus::Placed => PetStatus::Pending,
            OrderStatus::Completed => PetStatus::Sold,
            OrderStatus::Cancelled | OrderStatus::Expired => PetStatus::Available,
        }
    }

    pub(crate) const fn code(self) -> u8 {
        self as u8
    }

    pub(crate) const fn from_code(code: u8) -> OrderStatus {
        match code {
            0 => OrderStatus::Placed,
            1 => OrderStatus::Completed,
            2 => OrderStatus::Cancelled,
            _ => OrderStatus::Expired,
        }
    }
}

impl fmt::Display for OrderStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A text that is no [`OrderStatus`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("must be one of placed, completed, cancelled, expired")]
pub struct UnknownOrderStatus;

impl FromStr for OrderStatus {
    type Err = UnknownOrderStatus;
    fn from_str(s: &str) -> Result<Self, UnknownOrderStatus> {
        OrderStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or(UnknownOrderStatus)
    }
}

/// Why [`Order::from_parts`] refused an order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not an order: {0}")]
pub struct InvalidOrder(&'static str);

/// One order as it stands. Times are whole seconds, as the contract
/// writes them, so a hold ends exactly where `expiresAt` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Order {
    pub(crate) id: OrderId,
    pub(crate) pet: PetId,
    pub(crate) status: OrderStatus,
    pub(crate) placed_by: Arc<str>,
    pub(crate) placed_at: Timestamp,
    pub(crate) expires_at: Timestamp,
    pub(crate) closed_at: Option<Timestamp>,
}

impl Order {
    /// An order as another store keeps it (a read copy of PostgreSQL's
    /// table), checked as the core would have made it: closed exactly
    /// when it is no longer placed, and never closed or lapsing before it
    /// was placed.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::{PetId, Timestamp};
    /// use petstore_core::order::{Order, OrderId, OrderStatus};
    /// let at = Timestamp::from_unix_secs(1_000);
    /// let later = Timestamp::from_unix_secs(1_900);
    /// let order = Order::from_parts(OrderId::MIN, PetId::MIN, OrderStatus::Placed, "shop", at, later, None)
    ///     .unwrap();
    /// assert_eq!(order.expires_at(), later);
    /// // Placed, yet closed: refused.
    /// assert!(Order::from_parts(OrderId::MIN, PetId::MIN, OrderStatus::Placed, "shop", at, later, Some(at))
    ///     .is_err());
    /// ```
    pub fn from_parts(
        id: OrderId,
        pet: PetId,
        status: OrderStatus,
        placed_by: &str,
        placed_at: Timestamp,
        expires_at: Timestamp,
        closed_at: Option<Timestamp>,
    ) -> Result<Order, InvalidOrder> {
        if placed_by.is_empty() {
            return Err(InvalidOrder("its placedBy is empty"));
        }
        if (status == OrderStatus::Placed) != closed_at.is_none() {
            return Err(InvalidOrder(
                "it must have closedAt exactly when it is no longer placed",
            ));
        }
        if expires_at < placed_at || closed_at.is_some_and(|closed| closed < placed_at) {
            return Err(InvalidOrder("it expires or closes before it was placed"));
        }
        Ok(Order {
            id,
            pet,
            status,
            placed_by: Arc::from(placed_by),
            placed_at,
            expires_at,
            closed_at,
        })
    }

    /// Its id.
    pub fn id(&self) -> OrderId {
        self.id
    }

    /// The pet it holds or held.
    pub fn pet(&self) -> PetId {
        self.pet
    }

    /// Where it stands.
    pub fn status(&self) -> OrderStatus {
        self.status
    }

    /// The name of the key entry that placed it.
    pub fn placed_by(&self) -> &str {
        &self.placed_by
    }

    /// When it was placed.
    pub fn placed_at(&self) -> Timestamp {
        self.placed_at
    }

    /// When its hold lapses (for a sale made at once, when it was placed).
    pub fn expires_at(&self) -> Timestamp {
        self.expires_at
    }

    /// When it left `placed`; `None` while it is placed.
    pub fn closed_at(&self) -> Option<Timestamp> {
        self.closed_at
    }

    /// Whether its hold has lapsed at `now`: placed, and `now` at or past
    /// `expiresAt`.
    pub fn lapsed_at(&self, now: Timestamp) -> bool {
        self.status == OrderStatus::Placed && now >= self.expires_at
    }
}
