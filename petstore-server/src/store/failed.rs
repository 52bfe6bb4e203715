//! [`CreateFailed`]: why a create was not stored.

/// Why a create was not stored (or may not have been: a commit whose
/// outcome is unknown). Every cause answers the same 503; the cause is
/// logged once by the backend, when it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the pet could not be stored")]
pub struct CreateFailed;
