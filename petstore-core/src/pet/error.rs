//! The pet's typed errors: why an id, a name or a `createPet` body is
//! refused. Each names what was wrong, so a server can turn it into a
//! clear message without guessing.

/// Why a text or number is not a valid [`PetId`](crate::PetId) or
/// [`CategoryId`](crate::CategoryId).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// Not a plain decimal integer.
    #[error("must be an integer")]
    NotAnInteger,
    /// An integer outside 1 to 2^63 - 1.
    #[error("must be an integer from 1 to 9223372036854775807")]
    OutOfRange,
    /// Digits with a leading zero (`01`): a number has one spelling.
    #[error("must be written without leading zeros")]
    LeadingZero,
}

/// Why a pet name is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The empty string.
    #[error("must not be empty")]
    Empty,
    /// Only whitespace and invisible (default-ignorable) characters.
    #[error(
        "must contain at least one visible character, not only whitespace or invisible characters"
    )]
    Blank,
    /// More than 100 characters.
    #[error("must be at most 100 characters")]
    TooLong,
    /// Holds a control character (Unicode category Cc), a bidirectional
    /// control (U+202A to U+202E, U+2066 to U+2069) or a noncharacter.
    #[error("must not contain control characters, bidirectional controls or noncharacters")]
    ControlCharacter,
}

/// Why a `createPet` body or a [`NewPet`](crate::NewPet) is refused.
///
/// [`field`](PetError::field) names the field at fault where there is one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PetError {
    /// No body at all.
    #[error("request body is empty; expected a JSON object with name and categoryId")]
    Empty,
    /// Not valid JSON.
    #[error("request body is not valid JSON: {0}")]
    Malformed(String),
    /// Valid JSON, but not an object.
    #[error("request body must be a JSON object")]
    NotAnObject,
    /// The client sent an `id`; the inventory assigns ids.
    #[error("field `id` must not be sent; the service assigns ids")]
    IdNotAllowed,
    /// A field the schema does not have.
    #[error(
        "unknown field `{}`; allowed fields are name, categoryId, status",
        crate::quote::quote(.0)
    )]
    UnknownField(String),
    /// The same field twice.
    #[error("field `{0}` appears more than once")]
    DuplicateField(&'static str),
    /// A required field is absent.
    #[error("field `{0}` is required")]
    MissingField(&'static str),
    /// A field holds a value of the wrong JSON type (`null` included).
    #[error("field `{field}` must be {expected}")]
    WrongType {
        /// The field.
        field: &'static str,
        /// What it must be, in words.
        expected: &'static str,
    },
    /// `name` breaks a rule.
    #[error("field `name` {0}")]
    Name(NameError),
    /// `categoryId` is not within 1 to 2^63 - 1.
    #[error("field `categoryId` {0}")]
    CategoryId(IdError),
    /// `status` is not one of the three values.
    #[error("field `status` must be one of available, pending, sold")]
    Status,
}

impl PetError {
    /// The field at fault, if the error is about one field.
    pub fn field(&self) -> Option<&str> {
        match self {
            PetError::Empty | PetError::Malformed(_) | PetError::NotAnObject => None,
            PetError::IdNotAllowed => Some("id"),
            PetError::UnknownField(name) => Some(name),
            PetError::DuplicateField(f) | PetError::MissingField(f) => Some(f),
            PetError::WrongType { field, .. } => Some(field),
            PetError::Name(_) => Some("name"),
            PetError::CategoryId(_) => Some("categoryId"),
            PetError::Status => Some("status"),
        }
    }
}
