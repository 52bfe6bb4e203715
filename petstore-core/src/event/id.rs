//! [`EventId`]: an event's position in the feed, which is also the
//! cursor a client resumes from.

use std::fmt;

/// A position in the feed: the first event is 1, the next 2, and so on,
/// in commit order, never reused. Position 0 is before the first event.
/// Clients see it as an opaque string (the decimal digits), so a later
/// version may change its spelling.
///
/// # Examples
///
/// ```
/// use petstore_core::event::EventId;
/// let id = EventId::parse("17").unwrap();
/// assert_eq!(id.get(), 17);
/// assert_eq!(id.to_string(), "17");
/// assert_eq!(EventId::parse("0"), Some(EventId::START));
/// // One spelling: no sign, no leading zero, no spaces.
/// assert_eq!(EventId::parse("017"), None);
/// assert_eq!(EventId::parse("+1"), None);
/// assert_eq!(EventId::parse(""), None);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventId(u64);

impl EventId {
    /// Before the first event: following from here gives every event kept.
    pub const START: EventId = EventId(0);

    /// The position `n`.
    pub const fn new(n: u64) -> Self {
        EventId(n)
    }

    /// The position as a number.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// A cursor as a client sends it: decimal digits, no leading zero
    /// (but `0` itself), at most `u64::MAX`; `None` otherwise.
    pub fn parse(text: &str) -> Option<EventId> {
        let bytes = text.as_bytes();
        if bytes.is_empty() || (bytes[0] == b'0' && bytes.len() > 1) {
            return None;
        }
        if !bytes.iter().all(u8::is_ascii_digit) {
            return None;
        }
        text.parse().ok().map(EventId)
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
