//! [`FeedError`]: why the feed cannot answer from a cursor.

use super::id::EventId;

/// A cursor the feed cannot resume from: the client lists again, then
/// follows from the list's position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FeedError {
    /// Events after the cursor are no longer kept (older than the
    /// retention).
    #[error("events after {after} are no longer kept; the oldest kept follows {oldest}")]
    Expired {
        /// The cursor asked for.
        after: EventId,
        /// The oldest cursor the feed can resume from now.
        oldest: EventId,
    },
    /// The cursor is beyond the newest event: not a position of this
    /// feed (a store restored from an older copy, say).
    #[error("{after} is beyond the newest event, {head}")]
    Ahead {
        /// The cursor asked for.
        after: EventId,
        /// The newest event's position.
        head: EventId,
    },
}
