//! [`Binding`]: what the rate-limit headers of a response say of its
//! decision, and those values written as digits.

use hyper::body::{Buf as _, Bytes};
use hyper::header::HeaderValue;
use petstore_core::Decision;

use super::joined::joined;

/// What the values of [`changing_values`](super::last_values::changing_values) are made of: equal inputs, equal
/// values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Changing {
    pub(super) name: &'static str,
    pub(super) remaining: u32,
    pub(super) reset: u64,
    pub(super) after: u64,
}

/// What the rate-limit headers of a response say of its [`Decision`]:
/// the binding window's name, limit, remaining requests, reset time and
/// seconds to full: a fraction of the whole decision's size.
///
/// Why: an admitted request carries it to its response, and the request
/// (`Admitted`) is moved by value several times on its way there (into
/// and out of the driver's `catch_unwind`, through the admission's and
/// the answer's enums); each move of the whole decision was a call to
/// `memcpy` (`scripts/bench/profile`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Binding {
    pub(super) changing: Changing,
    pub(super) limit: u32,
}

impl From<&Decision> for Binding {
    fn from(decision: &Decision) -> Self {
        let binding = decision.binding();
        Binding {
            changing: Changing {
                name: binding.name,
                remaining: binding.remaining,
                reset: binding.reset_at.unix_secs_ceil(),
                after: decision.reset_after_secs(),
            },
            limit: binding.limit,
        }
    }
}

pub(super) fn make_changing(
    key: &Changing,
    [remaining_slot, reset_slot, current_slot]: [&mut HeaderValue; 3],
) {
    let mut remaining = itoa::Buffer::new();
    let remaining = remaining.format(key.remaining).as_bytes();
    let mut reset = itoa::Buffer::new();
    let reset = reset.format(key.reset).as_bytes();
    let mut after = itoa::Buffer::new();
    let after = after.format(key.after).as_bytes();
    // `{reset}"{name}";r={remaining};t={after}`: the Reset value, then the
    // RateLimit value, whose `r=` digits are the Remaining value too
    // (written once, and one slice of the buffer fewer to count).
    let name = key.name.as_bytes();
    let mut bytes = joined([reset, b"\"", name, b"\";r=", remaining, b";t=", after]);
    let at = reset.len() + 1 + name.len() + 4;
    let value = |bytes: Bytes| {
        HeaderValue::from_maybe_shared(bytes).unwrap_or_else(|_| HeaderValue::from_static(""))
    };
    *remaining_slot = match bytes.get(at..at + remaining.len()) {
        Some(_) => value(bytes.slice(at..at + remaining.len())),
        None => HeaderValue::from_static(""),
    };
    let split = reset.len().min(bytes.len());
    *reset_slot = value(bytes.slice(..split));
    bytes.advance(split);
    *current_slot = value(bytes);
}
