//! The routes of the service: which path is which route (the paths
//! themselves, and their templates, are `paths.rs`), the methods it
//! answers, and the operations behind a key.

use petstore_core::Transition;

use super::docs::{self, Asset};
use crate::keys::Scope;
use crate::paths::{
    CANCEL, COMPLETE, DOCS, DOCS_ASSET, DOCS_PREFIX, EVENTS, HEALTH, METRICS, OPENAPI_JSON, ORDER,
    ORDERS, ORDER_PREFIX, PET, PETS, PET_PREFIX, RELEASE, RESERVE, SELL,
};

/// The routes of the service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Route<'a> {
    Health,
    OpenApi,
    Pets,
    Pet(&'a str),
    /// A transition of one pet: its `{petId}` segment, and which.
    Transition(&'a str, Transition),
    Orders,
    /// One order: its `{orderId}` segment.
    Order(&'a str),
    /// A step of one order: its `{orderId}` segment, and which.
    OrderStep(&'a str, OrderAction),
    /// The feed of changes (beta).
    Events,
    Metrics,
    /// The docs page.
    Docs,
    /// A file of the docs page, one of this build's under its current
    /// fingerprint (any other path under `/docs/` is no route).
    DocsAsset(&'static Asset),
}

impl<'a> Route<'a> {
    pub(super) fn template(self) -> &'static str {
        match self {
            Route::Health => HEALTH,
            Route::OpenApi => OPENAPI_JSON,
            Route::Pets => PETS,
            Route::Pet(_) => PET,
            Route::Transition(_, transition) => match transition {
                Transition::Reserve => RESERVE,
                Transition::Release => RELEASE,
                Transition::Sell => SELL,
            },
            Route::Orders => ORDERS,
            Route::Order(_) => ORDER,
            Route::OrderStep(_, OrderAction::Complete) => COMPLETE,
            Route::OrderStep(_, OrderAction::Cancel) => CANCEL,
            Route::Events => EVENTS,
            Route::Metrics => METRICS,
            Route::Docs => DOCS,
            Route::DocsAsset(_) => DOCS_ASSET,
        }
    }

    pub(super) fn find(path: &'a str) -> Option<Route<'a>> {
        match path {
            HEALTH => Some(Route::Health),
            OPENAPI_JSON => Some(Route::OpenApi),
            PETS => Some(Route::Pets),
            ORDERS => Some(Route::Orders),
            EVENTS => Some(Route::Events),
            METRICS => Some(Route::Metrics),
            DOCS => Some(Route::Docs),
            _ if path.starts_with(DOCS_PREFIX) => {
                let (fingerprint, name) = path[DOCS_PREFIX.len()..].split_once('/')?;
                docs::find(fingerprint, name).map(Route::DocsAsset)
            }
            _ if path.starts_with(ORDER_PREFIX) => {
                let rest = &path[ORDER_PREFIX.len()..];
                match rest.split_once('/') {
                    None if !rest.is_empty() => Some(Route::Order(rest)),
                    Some((id, action)) if !id.is_empty() => OrderAction::ALL
                        .into_iter()
                        .find(|a| a.as_str() == action)
                        .map(|a| Route::OrderStep(id, a)),
                    _ => None,
                }
            }
            _ => {
                let rest = path.strip_prefix(PET_PREFIX)?;
                match rest.split_once('/') {
                    None if !rest.is_empty() => Some(Route::Pet(rest)),
                    // `{petId}/reserve` and the like: an empty id is no
                    // route, as `/v1/pets/` is.
                    Some((id, action)) if !id.is_empty() => Transition::ALL
                        .into_iter()
                        .find(|t| t.as_str() == action)
                        .map(|t| Route::Transition(id, t)),
                    _ => None,
                }
            }
        }
    }

    /// The `Allow` header: the methods of the path.
    pub(super) fn allow(self, cors: bool) -> &'static str {
        match (self, cors) {
            (Route::Pets | Route::Orders, false) => "GET, HEAD, POST",
            (Route::Pets | Route::Orders, true) => "GET, HEAD, POST, OPTIONS",
            (Route::Transition(..) | Route::OrderStep(..), false) => "POST",
            (Route::Transition(..) | Route::OrderStep(..), true) => "POST, OPTIONS",
            (_, false) => "GET, HEAD",
            (_, true) => "GET, HEAD, OPTIONS",
        }
    }
}

/// The two steps of an order's own path, `complete` and `cancel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum OrderAction {
    Complete,
    Cancel,
}

impl OrderAction {
    const ALL: [OrderAction; 2] = [OrderAction::Complete, OrderAction::Cancel];

    pub(super) fn as_str(self) -> &'static str {
        match self {
            OrderAction::Complete => "complete",
            OrderAction::Cancel => "cancel",
        }
    }
}

/// The operations: the routes behind a key.
/// The `{petId}` segment is read from the request when it is checked, so
/// an operation is plain data that outlives an await.
#[derive(Clone, Copy, Debug)]
pub(super) enum Operation {
    ListPets,
    CreatePet,
    GetPet,
    /// `reservePet`, `releasePet`, `sellPet`.
    Transition(Transition),
    ListOrders,
    PlaceOrder,
    GetOrder,
    /// `completeOrder`, `cancelOrder`.
    OrderStep(OrderAction),
    ListEvents,
}

impl Operation {
    /// The scope a key needs for it (docs/contract.md, "Keys and plans").
    pub(super) fn scope(self) -> Scope {
        match self {
            Operation::ListPets | Operation::GetPet => Scope::PetsRead,
            Operation::CreatePet => Scope::PetsWrite,
            Operation::Transition(_)
            | Operation::ListOrders
            | Operation::PlaceOrder
            | Operation::GetOrder
            | Operation::OrderStep(_) => Scope::Orders,
            Operation::ListEvents => Scope::Events,
        }
    }

    /// Whether a key with `orders:all` and not `orders` may make it: it
    /// sees, completes and cancels every key's orders, but places none.
    pub(super) fn open_to_all_orders(self) -> bool {
        matches!(
            self,
            Operation::ListOrders | Operation::GetOrder | Operation::OrderStep(_)
        )
    }
}

/// The `{orderId}` segment of a `/v1/store/orders/{orderId}` path, or of
/// a step's `/v1/store/orders/{orderId}/{step}`.
pub(super) fn order_segment(path: &str) -> &str {
    let rest = path.strip_prefix(ORDER_PREFIX).unwrap_or(path);
    rest.split_once('/').map_or(rest, |(id, _)| id)
}

/// The `{petId}` segment of a `/v1/pets/{petId}` path, or of a
/// transition's `/v1/pets/{petId}/{transition}`.
pub(super) fn pet_segment(path: &str) -> &str {
    let rest = path.strip_prefix(PET_PREFIX).unwrap_or(path);
    rest.split_once('/').map_or(rest, |(id, _)| id)
}
