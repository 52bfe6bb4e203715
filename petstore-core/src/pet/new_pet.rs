//! [`NewPet`]: a pet to be created, valid by construction. Its JSON body
//! parser, [`NewPet::from_json`], is in `body.rs`.

use super::error::PetError;
use super::id::{CategoryId, PetId};
use super::name::validate_name;
use super::record::Pet;
use super::status::PetStatus;

/// A pet to be created: the request body of `createPet`. Only valid values
/// can be built, so [`Inventory::create`](crate::Inventory::create) never
/// has to check it again.
///
/// # Examples
///
/// ```
/// use petstore_core::{CategoryId, NewPet, PetStatus};
/// let cat = CategoryId::new(3).unwrap();
/// let pet = NewPet::new("Rex", cat).unwrap().with_status(PetStatus::Sold);
/// assert_eq!(pet.name(), "Rex");
/// assert_eq!(pet.status(), PetStatus::Sold);
///
/// let parsed = NewPet::from_json(br#"{"name":"Rex","categoryId":3,"status":"sold"}"#).unwrap();
/// assert_eq!(parsed, pet);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewPet {
    name: String,
    category_id: CategoryId,
    status: PetStatus,
}

impl NewPet {
    /// A new pet with status `available`; fails when the name is invalid.
    pub fn new(name: impl Into<String>, category_id: CategoryId) -> Result<Self, PetError> {
        let name = name.into();
        validate_name(&name).map_err(PetError::Name)?;
        Ok(NewPet {
            name,
            category_id,
            status: PetStatus::default(),
        })
    }

    /// The same pet with another status.
    #[must_use]
    pub fn with_status(mut self, status: PetStatus) -> Self {
        self.status = status;
        self
    }

    /// The name, exactly as sent.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The category.
    pub fn category_id(&self) -> CategoryId {
        self.category_id
    }

    /// The status (`available` when none was given).
    pub fn status(&self) -> PetStatus {
        self.status
    }

    /// The pet under the id `id`. An inventory gives ids itself
    /// ([`Inventory::create`](crate::Inventory::create)); this is for a
    /// store that gives them elsewhere (a database's counter), whose pets
    /// then enter an in-memory copy with
    /// [`Inventory::apply`](crate::Inventory::apply).
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::{CategoryId, NewPet, PetId};
    /// let pet = NewPet::new("Rex", CategoryId::MIN).unwrap().into_pet(PetId::new(7).unwrap());
    /// assert_eq!(pet.id().get(), 7);
    /// assert_eq!(pet.name(), "Rex");
    /// ```
    pub fn into_pet(self, id: PetId) -> Pet {
        Pet::from_parts(id, self.name, self.category_id, self.status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pet::error::NameError;

    #[test]
    fn name_rules_count_characters_not_bytes() {
        assert!(validate_name(&"é".repeat(100)).is_ok());
        assert!(validate_name(&"a".repeat(100)).is_ok());
        assert_eq!(validate_name(&"a".repeat(101)), Err(NameError::TooLong));
        assert_eq!(validate_name("\t\n "), Err(NameError::ControlCharacter));
        assert_eq!(validate_name("\u{85}"), Err(NameError::ControlCharacter));
        assert_eq!(validate_name("\u{2003}"), Err(NameError::Blank));
        assert_eq!(validate_name("x\u{9f}"), Err(NameError::ControlCharacter));
        // Stored exactly as sent: surrounding spaces are kept, not trimmed.
        let cat = CategoryId::MIN;
        assert_eq!(
            NewPet::new("  Rex ", cat).map(|p| p.name),
            Ok("  Rex ".into())
        );
    }
}
