//! The `listPets` query ([`ListQuery`], [`PageSize`]) and its results
//! ([`Page`], [`JsonPage`]).

use super::error::PageSizeError;
use crate::order::{Order, OrderId, OrderStatus};
use crate::pet::{Pet, PetId, PetStatus};

/// A page size: 1 to 100, default 20. Values outside cannot be built.
///
/// # Examples
///
/// ```
/// use petstore_core::PageSize;
/// assert_eq!(PageSize::default().get(), 20);
/// assert_eq!(PageSize::new(100).map(PageSize::get), Ok(100));
/// assert!(PageSize::new(0).is_err());
/// assert!(PageSize::new(101).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PageSize(u8);

impl PageSize {
    /// The smallest page size.
    pub const MIN: PageSize = PageSize(1);
    /// The largest page size.
    pub const MAX: PageSize = PageSize(100);
    /// The page size when none is asked for.
    pub const DEFAULT: PageSize = PageSize(20);

    /// A page size; fails outside 1..=100.
    pub fn new(value: u64) -> Result<PageSize, PageSizeError> {
        match value {
            1..=100 => Ok(PageSize(value as u8)),
            _ => Err(PageSizeError),
        }
    }

    /// The page size.
    pub const fn get(self) -> usize {
        self.0 as usize
    }
}

impl Default for PageSize {
    fn default() -> Self {
        PageSize::DEFAULT
    }
}

/// What `listPets` asks for: at most `limit` pets, optionally only those of
/// one status, optionally only those with an id greater than `after`; in
/// ascending id order.
///
/// # Examples
///
/// ```
/// use petstore_core::{PageSize, ListQuery, PetId, PetStatus};
/// let q = ListQuery::new()
///     .limit(PageSize::new(5).unwrap())
///     .status(PetStatus::Sold)
///     .after(PetId::new(10).unwrap());
/// assert_eq!(q.limit.get(), 5);
/// assert_eq!(ListQuery::default().limit, PageSize::DEFAULT);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ListQuery {
    /// Most pets on the page.
    pub limit: PageSize,
    /// Only pets with this status.
    pub status: Option<PetStatus>,
    /// Only pets with an id greater than this one (the paging cursor).
    pub after: Option<PetId>,
}

impl ListQuery {
    /// The first page of everything, 20 pets.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the page size.
    #[must_use]
    pub fn limit(mut self, limit: PageSize) -> Self {
        self.limit = limit;
        self
    }

    /// Keeps only pets with this status.
    #[must_use]
    pub fn status(mut self, status: PetStatus) -> Self {
        self.status = Some(status);
        self
    }

    /// Starts after this id.
    #[must_use]
    pub fn after(mut self, after: PetId) -> Self {
        self.after = Some(after);
        self
    }
}

/// One page of pets, and where the next one starts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Page {
    /// The pets, ascending by id.
    pub pets: Vec<Pet>,
    /// `Some(last id on this page)` when more pets match the query: pass it
    /// as `after` to get the next page. `None` on the last page.
    pub next_after: Option<PetId>,
}

/// A first page that no create can change, encoded once as the JSON body
/// of the response and shared until a transition reaches it
/// ([`Inventory::final_page`]).
///
/// [`Inventory::final_page`]: crate::Inventory::final_page
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinalPage {
    /// The response body: `[{"id":1,...},...]`.
    pub body: Box<[u8]>,
    /// How many pets the body holds: the query's limit.
    pub count: usize,
    /// The last id on the page: more pets match, so there is always a
    /// next page.
    pub next_after: PetId,
}

impl AsRef<[u8]> for FinalPage {
    fn as_ref(&self) -> &[u8] {
        &self.body
    }
}

/// One page already encoded as the JSON body of the response (a bare array
/// of Pet), and where the next page starts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JsonPage {
    /// The response body: `[{"id":1,...},...]`.
    pub body: Vec<u8>,
    /// How many pets the body holds.
    pub count: usize,
    /// As [`Page::next_after`].
    pub next_after: Option<PetId>,
}

/// What `listOrders` asks for: at most `limit` orders, optionally only
/// those of one status, optionally only those with an id greater than
/// `after`; in ascending id order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct OrderQuery {
    /// Most orders on the page.
    pub limit: PageSize,
    /// Only orders with this status.
    pub status: Option<OrderStatus>,
    /// Only orders with an id greater than this one (the paging cursor).
    pub after: Option<OrderId>,
}

impl OrderQuery {
    /// The first page of every order, 20 of them.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the page size.
    #[must_use]
    pub fn limit(mut self, limit: PageSize) -> Self {
        self.limit = limit;
        self
    }

    /// Keeps only orders with this status.
    #[must_use]
    pub fn status(mut self, status: OrderStatus) -> Self {
        self.status = Some(status);
        self
    }

    /// Starts after this id.
    #[must_use]
    pub fn after(mut self, after: OrderId) -> Self {
        self.after = Some(after);
        self
    }
}

/// One page of orders, and where the next one starts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OrderPage {
    /// The orders, ascending by id.
    pub orders: Vec<Order>,
    /// `Some(last id on this page)` when more orders match: pass it as
    /// `after` to get the next page. `None` on the last page.
    pub next_after: Option<OrderId>,
}

impl OrderPage {
    /// The page as the JSON body of the response: a bare array of Order.
    pub fn to_json(&self) -> Vec<u8> {
        crate::order::encode_array(&self.orders)
    }
}
