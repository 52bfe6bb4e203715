//! The routes of the service: which path is which route (the paths
//! themselves, and their templates, are `paths.rs`), the methods it
//! answers, and the operations behind a key.

use petstore_core::Transition;

use super::docs::{self, Asset};
use crate::keys::Scope;
use crate::paths::{
    DOCS, DOCS_ASSET, DOCS_PREFIX, HEALTH, METRICS, OPENAPI_JSON, ORDERS, PET, PETS, PET_PREFIX,
    RELEASE, RESERVE, SELL,
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
            METRICS => Some(Route::Metrics),
            DOCS => Some(Route::Docs),
            _ if path.starts_with(DOCS_PREFIX) => {
                let (fingerprint, name) = path[DOCS_PREFIX.len()..].split_once('/')?;
                docs::find(fingerprint, name).map(Route::DocsAsset)
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
            (Route::Pets, false) => "GET, HEAD, POST",
            (Route::Pets, true) => "GET, HEAD, POST, OPTIONS",
            (Route::Transition(..), false) => "POST",
            (Route::Transition(..), true) => "POST, OPTIONS",
            (_, false) => "GET, HEAD",
            (_, true) => "GET, HEAD, OPTIONS",
        }
    }
}

/// The operations and the orders placeholder: the routes behind a key.
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
}

impl Operation {
    /// The scope a key needs for it (docs/contract.md, "Keys and plans").
    pub(super) fn scope(self) -> Scope {
        match self {
            Operation::ListPets | Operation::GetPet => Scope::PetsRead,
            Operation::CreatePet => Scope::PetsWrite,
            Operation::Transition(_) | Operation::ListOrders => Scope::Orders,
        }
    }
}

/// The `{petId}` segment of a `/v1/pets/{petId}` path, or of a
/// transition's `/v1/pets/{petId}/{transition}`.
pub(super) fn pet_segment(path: &str) -> &str {
    let rest = path.strip_prefix(PET_PREFIX).unwrap_or(path);
    rest.split_once('/').map_or(rest, |(id, _)| id)
}
