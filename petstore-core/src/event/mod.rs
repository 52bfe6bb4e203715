//! Events (beta): the feed of every committed change, in commit order,
//! that a client follows instead of polling. Each event has a position
//! (its [`EventId`], the cursor a client resumes from), a type, a time and
//! what the change left: the Pet or the Order after it. The rules:
//! docs/contract.md, "Events (beta)".
//!
//! | file | holds |
//! |---|---|
//! | `id.rs` | [`EventId`]: a position in the feed, and its one spelling |
//! | `event.rs` | [`Event`], [`EventType`], [`EventData`]; an event's JSON |
//! | `query.rs` | [`EventQuery`], [`EventLimit`], [`EventPage`], [`JsonEvents`] |
//! | `log.rs` | `EventLog`: the kept events, 16 bytes each, and their retention |
//! | `error.rs` | [`FeedError`]: a cursor the feed cannot resume from |
//!
//! The inventory keeps the log (`inventory/feed.rs`): it appends to it
//! when it publishes a change, in the order it publishes them, and a
//! durable inventory rebuilds it from its journal on open, so positions
//! survive a restart.
//!
//! May use: `pet`, `order`, `clock.rs`.

mod error;
#[allow(clippy::module_inception)]
pub(crate) mod event;
mod id;
pub(crate) mod log;
mod query;

pub use error::FeedError;
pub use event::{Event, EventData, EventType};
pub use id::EventId;
pub use log::DEFAULT_RETENTION;
pub use query::{EventLimit, EventPage, EventQuery, JsonEvents, Recorded};
