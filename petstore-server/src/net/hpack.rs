//! Which responses of an HTTP/2 connection let HPACK index their
//! changing rate-limit values.
//!
//! Those values are made never-indexed while they will not come again
//! (`headers/never_indexed.rs` says why), and a never-indexed value
//! refers to its name by the table's index only when the name is in the
//! connection's table. So one response indexes its values: the
//! connection's first that has them, and then the first after each
//! [`REINDEX`], so that the names are back should other entries have
//! pushed them out of the table (the peer's table is a few KiB, and the
//! `Date` header alone adds an entry a second). Between those, each
//! name has one or two values in the table, so the encoder's walk over
//! a name's values is short.
//!
//! Why a flag the connection's task raises at its looks, not a clock read
//! per response: a stream only loads a flag ([`IndexChanging::prepare`]),
//! and the task, which looks at its watchdog's counts anyway
//! ([`Look`](super::h2::Look)), raises it when due (its timer is set no
//! later than that, whatever the watchdog's timeouts).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hyper::header::HeaderMap;
use tokio::time::Instant;

use crate::http::index_changing;

/// The time from one turn to index the changing values to the next.
/// Seconds long: each turn adds an entry per name to the table, and a
/// name's entries are what the encoder walks; short enough that the
/// names are back before the `Date` entries alone push them out.
pub(super) const REINDEX: Duration = Duration::from_secs(30);

/// One connection's turn to index the changing values: raised at first,
/// taken by the next response, raised again by the connection's task.
#[derive(Debug)]
pub(super) struct IndexChanging {
    due: AtomicBool,
}

impl IndexChanging {
    /// A new connection: its first response indexes.
    pub(super) fn new() -> Self {
        IndexChanging {
            due: AtomicBool::new(true),
        }
    }

    /// A response about to be sent: indexes its changing values when it is
    /// the connection's turn, and takes the turn if it has them (a
    /// response without them, a `/healthz`, leaves the turn to the next).
    pub(super) fn prepare(&self, headers: &mut HeaderMap) {
        // A load first: the turn is rare, and a write on every response
        // would write the line the connection's streams share.
        if self.due.load(Ordering::Relaxed) && index_changing(headers) {
            self.due.store(false, Ordering::Relaxed);
        }
    }

    /// The connection's task at `now`: raises the turn once `next` (when
    /// it was last raised, plus [`REINDEX`]) has come.
    pub(super) fn look(&self, next: &mut Instant, now: Instant) {
        if now >= *next {
            self.due.store(true, Ordering::Relaxed);
            *next = now + REINDEX;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::{HeaderName, HeaderValue};

    /// A response's headers: its changing values never-indexed, as
    /// `headers/` makes them, and one fixed value.
    fn headers() -> HeaderMap {
        let mut map = HeaderMap::new();
        for name in ["x-ratelimit-remaining", "x-ratelimit-reset", "ratelimit"] {
            let mut value = HeaderValue::from_static("1");
            value.set_sensitive(true);
            map.insert(HeaderName::from_static(name), value);
        }
        map.insert("x-ratelimit-limit", HeaderValue::from_static("60"));
        map
    }

    fn indexes(turn: &IndexChanging) -> bool {
        let mut map = headers();
        turn.prepare(&mut map);
        map.values().all(|value| !value.is_sensitive())
    }

    #[test]
    fn a_response_without_the_values_leaves_the_turn_to_the_next() {
        let turn = IndexChanging::new();
        let mut health = HeaderMap::new();
        health.insert("content-type", HeaderValue::from_static("application/json"));
        turn.prepare(&mut health);
        assert!(indexes(&turn));
        assert!(!indexes(&turn));
    }

    #[test]
    fn the_first_response_indexes_and_then_one_per_reindex() {
        let start = Instant::now();
        let turn = IndexChanging::new();
        let mut next = start + REINDEX;
        assert!(indexes(&turn), "the connection's first response");
        assert!(!indexes(&turn));
        // Looks before the time raise nothing.
        turn.look(&mut next, start + REINDEX / 2);
        assert!(!indexes(&turn));
        // Due: one response indexes, the next does not.
        turn.look(&mut next, start + REINDEX);
        assert_eq!(next, start + REINDEX * 2);
        assert!(indexes(&turn));
        assert!(!indexes(&turn));
        // A late look counts the next time from itself.
        let late = start + REINDEX * 5;
        turn.look(&mut next, late);
        assert_eq!(next, late + REINDEX);
        assert!(indexes(&turn));
    }
}
