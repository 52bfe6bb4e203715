//! The routes of the service: each path's template (the label of the
//! metrics and the access log), the methods it answers, and the
//! operations behind a key.

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

const HEALTH: &str = "/healthz";
const OPENAPI_JSON: &str = "/v1/openapi.json";
const PETS: &str = "/v1/pets";
const PET: &str = "/v1/pets/{petId}";
const ORDERS: &str = "/v1/store/orders";
const METRICS: &str = "/metrics";
pub(super) const UNKNOWN: &str = "unknown";
const PET_PREFIX: &str = "/v1/pets/";

/// Every route template, as the metrics and the access log name a
/// request's route; the last, `unknown`, is for requests that match none.
pub const TEMPLATES: [&str; 7] = [HEALTH, OPENAPI_JSON, PETS, PET, ORDERS, METRICS, UNKNOWN];

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
