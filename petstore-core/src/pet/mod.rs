//! The pet records of the contract and their validation rules
//! (docs/contract.md): what a pet is, what may be created, and why a value
//! is refused, and the pet's canonical JSON. Storage and listing are the
//! inventory's.
//!
//! | file | holds |
//! |---|---|
//! | `id.rs` | [`PetId`], [`CategoryId`]: positive `int64`s, one spelling each |
//! | `status.rs` | [`PetStatus`], [`UnknownStatus`] |
//! | `name.rs` | the Unicode name rules: [`validate_name`], [`name_rules`], [`MAX_NAME_CHARS`] |
//! | `new_pet.rs` | [`NewPet`]: a pet to be created, valid by construction |
//! | `body.rs` | the `createPet` JSON body parser behind [`NewPet::from_json`] |
//! | `record.rs` | [`Pet`]: a stored pet, a `NewPet` with its id |
//! | `json.rs` | the pet's canonical JSON: [`Pet::to_json`], its encoder and fast reader |
//! | `transition.rs` | [`Transition`]: reserve, release, sell, and the statuses each allows |
//! | `error.rs` | [`IdError`], [`NameError`], [`PetError`] |
//!
//! May use: `quote.rs`.

mod body;
mod error;
mod id;
pub(crate) mod json;
mod name;
mod new_pet;
mod record;
mod status;
mod transition;

pub use error::{IdError, NameError, PetError};
pub(crate) use id::positive_int64;
pub use id::{CategoryId, PetId};
pub use name::{name_rules, validate_name, NameRules, MAX_NAME_CHARS};
pub use new_pet::NewPet;
pub use record::Pet;
pub use status::{PetStatus, UnknownStatus};
pub use transition::{Transition, UnknownTransition};
