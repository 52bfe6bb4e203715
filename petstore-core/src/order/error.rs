//! [`OrderError`]: why a `placeOrder` body is refused, naming the field.

/// Why a `placeOrder` body is refused. Each names what was wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OrderError {
    /// No body at all.
    #[error("request body is empty; expected a JSON object with petId")]
    Empty,
    /// Not valid JSON.
    #[error("request body is not valid JSON: {0}")]
    Malformed(String),
    /// Valid JSON, but not an object.
    #[error("request body must be a JSON object")]
    NotAnObject,
    /// A field the schema does not have.
    #[error(
        "unknown field `{}`; allowed fields are petId, holdSeconds",
        crate::quote::quote(.0)
    )]
    UnknownField(String),
    /// The same field twice.
    #[error("field `{0}` appears more than once")]
    DuplicateField(&'static str),
    /// `petId` is absent.
    #[error("field `petId` is required")]
    MissingPetId,
    /// `petId` is not an integer from 1 to 2^63 - 1.
    #[error("field `petId` must be an integer from 1 to 9223372036854775807")]
    BadPetId,
    /// `holdSeconds` is not an integer from 60 to 86,400.
    #[error("field `holdSeconds` must be an integer from 60 to 86400")]
    BadHold,
}
