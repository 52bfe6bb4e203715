//! [`Pet`]: a pet of the inventory, a [`NewPet`](super::new_pet::NewPet)
//! with the id the inventory gave it. Its canonical JSON, [`Pet::to_json`],
//! is `json.rs`'s.

use serde::{Deserialize, Serialize};

use super::id::{CategoryId, PetId};
use super::status::PetStatus;

/// A pet of the inventory: a [`NewPet`](crate::NewPet) plus the id the
/// inventory gave it. Serialises to exactly the contract's JSON.
///
/// # Examples
///
/// ```
/// use petstore_core::{CategoryId, Inventory, NewPet};
/// let inventory = Inventory::in_memory();
/// let pet = inventory.create(NewPet::new("Rex", CategoryId::MIN).unwrap()).unwrap();
/// assert_eq!(
///     serde_json::to_string(&pet).unwrap(),
///     r#"{"id":1,"name":"Rex","categoryId":1,"status":"available"}"#
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Pet {
    id: PetId,
    name: String,
    category_id: CategoryId,
    status: PetStatus,
}

impl Pet {
    /// The id the inventory assigned.
    pub fn id(&self) -> PetId {
        self.id
    }

    /// The name, exactly as it was sent.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The category.
    pub fn category_id(&self) -> CategoryId {
        self.category_id
    }

    /// The status.
    pub fn status(&self) -> PetStatus {
        self.status
    }

    /// The same pet with another status: what a transition makes of it.
    pub(crate) fn with_status(mut self, status: PetStatus) -> Self {
        self.status = status;
        self
    }

    pub(crate) fn from_parts(
        id: PetId,
        name: String,
        category_id: CategoryId,
        status: PetStatus,
    ) -> Self {
        Pet {
            id,
            name,
            category_id,
            status,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pet::new_pet::NewPet;

    #[test]
    fn pet_json_shape() {
        let pet = NewPet::new("a\"b\\c", CategoryId::MAX)
            .map(|p| p.with_status(PetStatus::Pending).into_pet(PetId::MIN));
        let json = pet.as_ref().map(serde_json::to_string);
        assert!(matches!(
            json,
            Ok(Ok(ref s)) if s == r#"{"id":1,"name":"a\"b\\c","categoryId":9223372036854775807,"status":"pending"}"#
        ));
    }
}
