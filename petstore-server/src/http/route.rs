//! The routes of the service: which path is which route (the paths
//! themselves, and their templates, are `paths.rs`), the methods it
//! answers, and the operations behind a key.

/// The routes of the service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Route<'a> {
    Health,
    OpenApi,
    Pets,
    Pet(&'a str),
    Orders,
    Metrics,
}

use crate::paths::{HEALTH, METRICS, OPENAPI_JSON, ORDERS, PET, PETS, PET_PREFIX};

impl<'a> Route<'a> {
    pub(super) fn template(self) -> &'static str {
        match self {
            Route::Health => HEALTH,
            Route::OpenApi => OPENAPI_JSON,
            Route::Pets => PETS,
            Route::Pet(_) => PET,
            Route::Orders => ORDERS,
            Route::Metrics => METRICS,
        }
    }

    pub(super) fn find(path: &'a str) -> Option<Route<'a>> {
        match path {
            HEALTH => Some(Route::Health),
            OPENAPI_JSON => Some(Route::OpenApi),
            PETS => Some(Route::Pets),
            ORDERS => Some(Route::Orders),
            METRICS => Some(Route::Metrics),
            _ => match path.strip_prefix(PET_PREFIX) {
                Some(id) if !id.is_empty() && !id.contains('/') => Some(Route::Pet(id)),
                _ => None,
            },
        }
    }

    /// The `Allow` header: the methods of the path.
    pub(super) fn allow(self, cors: bool) -> &'static str {
        match (self, cors) {
            (Route::Pets, false) => "GET, HEAD, POST",
            (Route::Pets, true) => "GET, HEAD, POST, OPTIONS",
            (_, false) => "GET, HEAD",
            (_, true) => "GET, HEAD, OPTIONS",
        }
    }
}

/// The three operations and the orders placeholder: the routes behind a
/// key. `GetPet`'s path segment is read from the request when it is
/// checked, so an operation is plain data that outlives an await.
#[derive(Clone, Copy, Debug)]
pub(super) enum Operation {
    ListPets,
    CreatePet,
    GetPet,
    ListOrders,
}

/// The `{petId}` segment of a `/v1/pets/{petId}` path.
pub(super) fn pet_segment(path: &str) -> &str {
    path.strip_prefix(PET_PREFIX).unwrap_or(path)
}
