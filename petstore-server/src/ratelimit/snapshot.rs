//! [`Snapshot`]: all the limiter state of a server at one instant, as
//! plain numbers (what the state file holds).

use petstore_core::limit::{AnonymousState, KeyLimiterState};

use crate::keys::StateId;

/// All the limiter state of a server at one instant: the keys whose state
/// differs from a new limiter's, and the client addresses whose bucket is
/// not full.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Per key.
    pub keys: Vec<(StateId, KeyLimiterState)>,
    /// Per client address.
    pub anonymous: AnonymousState,
}
