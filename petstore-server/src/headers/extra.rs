//! [`Extra`]: what a 2xx operation response carries after the
//! rate-limit headers (a next `Link`, the deprecation headers, a
//! `Location`, or nothing), and that value made for one response.

use hyper::header::HeaderValue;
use petstore_core::inventory::OrderQuery;
use petstore_core::order::OrderId;
use petstore_core::{ListQuery, PetId};

use super::joined::joined;
use super::last_values::{NextLink, LAST_NEXT};
use super::never_indexed::never_indexed;

/// What a 2xx operation response carries after the rate-limit headers.
#[derive(Clone, Copy, Debug)]
pub enum Extra<'a> {
    /// A list page, and the query of the next page if there is one: its
    /// `Link: <{base_url}/pets?limit=N[&status=S]&after=ID>; rel="next"`.
    Next {
        /// The public base address, including `/v1`.
        base_url: &'a str,
        /// The next page's query; `None` on the last page (no `Link`).
        next: Option<ListQuery>,
        /// Whether the request asked for a page after the first (`after`):
        /// a client walking the pages, whose next `Link` is new on every
        /// response, so it is kept out of HTTP/2's header table
        /// (`never_indexed.rs`). A first page's is what a polling client
        /// gets again and again, and stays indexed.
        walking: bool,
    },
    /// `getPet`: `Deprecation`, `Sunset`, and this successor `Link`.
    Deprecated(&'a HeaderValue),
    /// A page of orders: its `Link: rel="next"` when more follow.
    OrderNext {
        base_url: &'a str,
        next: Option<OrderQuery>,
    },
    /// A page of events: its `Link: rel="next"`, on every page, the
    /// last page's too (following it is how a client keeps following).
    EventsNext {
        base_url: &'a str,
        limit: usize,
        /// `wait`, in seconds, when the request had one.
        wait: Option<u64>,
        after: u64,
    },
    /// A placed order: its `Location: {base_url}/store/orders/{id}`.
    OrderLocation { base_url: &'a str, id: OrderId },
    /// A created pet: its `Location: {base_url}/pets/{id}`.
    Location {
        /// The public base address, including `/v1`.
        base_url: &'a str,
        /// The created pet's id.
        id: PetId,
    },
    /// Nothing after the rate-limit headers: a pet that changed status,
    /// whose address the client already used.
    Nothing,
}

impl Extra<'_> {
    /// Makes the value of the response's own last header (`Link` next,
    /// `Location`) in one allocation; `None` when it has none that changes
    /// per request. Digits by `itoa`, no `fmt`: this is on every list and
    /// create response.
    fn make_value(&self) -> Option<HeaderValue> {
        let bytes = match *self {
            Extra::Next {
                base_url,
                next: Some(next),
                ..
            } => next_link(
                base_url,
                b"/pets",
                next.limit.get(),
                next.status.map(|s| s.as_str()),
                next.after.map(PetId::get),
            ),
            Extra::Location { base_url, id } => location(base_url, b"/pets/", id.get()),
            Extra::OrderNext {
                base_url,
                next: Some(next),
            } => next_link(
                base_url,
                b"/store/orders",
                next.limit.get(),
                next.status.map(|s| s.as_str()),
                next.after.map(OrderId::get),
            ),
            Extra::OrderLocation { base_url, id } => {
                location(base_url, b"/store/orders/", id.get())
            }
            Extra::EventsNext {
                base_url,
                limit,
                wait,
                after,
            } => events_link(base_url, limit, wait, after),
            Extra::Next { next: None, .. }
            | Extra::OrderNext { next: None, .. }
            | Extra::Deprecated(_)
            | Extra::Nothing => return None,
        };
        HeaderValue::from_maybe_shared(bytes).ok()
    }

    /// The value of the response's own last header (`Link` next,
    /// `Location`); `None` when it has none that changes per request (or
    /// it is not a valid header value). A first page's next `Link` equal
    /// to the last one this thread made is that one again
    /// ([`LAST_NEXT`]); a later page's is made, never-indexed, and not
    /// remembered: it will not come again, and remembering it would push
    /// out the link a polling client gets again.
    pub(super) fn value(&self) -> Option<HeaderValue> {
        match *self {
            Extra::Next {
                base_url,
                next: Some(next),
                walking: false,
            } => self.remembered_next(base_url, next),
            Extra::Next { walking: true, .. } => {
                let mut value = self.make_value()?;
                never_indexed([&mut value]);
                Some(value)
            }
            _ => self.make_value(),
        }
    }

    /// The next `Link` for `next`, the last one this thread made when it
    /// is that one again ([`LAST_NEXT`]).
    fn remembered_next(&self, base_url: &str, next: ListQuery) -> Option<HeaderValue> {
        let key = NextLink {
            base_len: base_url.len(),
            next,
        };
        // The value starts `<{base_url}`: a link of another base address
        // (another server in the process) is not taken for this one.
        let last = LAST_NEXT.try_with(|last| match &*last.borrow() {
            Some((made_of, value))
                if *made_of == key
                    && value.as_bytes().get(1..1 + base_url.len()) == Some(base_url.as_bytes()) =>
            {
                Some(value.clone())
            }
            _ => None,
        });
        if let Ok(Some(value)) = last {
            return Some(value);
        }
        let value = self.make_value()?;
        let _ = LAST_NEXT.try_with(|last| *last.borrow_mut() = Some((key, value.clone())));
        Some(value)
    }
}

/// `<{base_url}{path}?limit=N[&status=S][&after=A]>; rel="next"`: the next
/// link of a list of pets or of orders, in one allocation.
fn next_link(
    base_url: &str,
    path: &[u8],
    limit: usize,
    status: Option<&str>,
    after: Option<u64>,
) -> hyper::body::Bytes {
    let mut limit_digits = itoa::Buffer::new();
    let mut after_digits = itoa::Buffer::new();
    let after = after.map(|id| after_digits.format(id).as_bytes());
    joined([
        b"<",
        base_url.as_bytes(),
        path,
        b"?limit=",
        limit_digits.format(limit).as_bytes(),
        if status.is_some() { b"&status=" } else { b"" },
        status.map(str::as_bytes).unwrap_or_default(),
        if after.is_some() { b"&after=" } else { b"" },
        after.unwrap_or_default(),
        b">; rel=\"next\"",
    ])
}

/// `<{base_url}/events?limit=N[&wait=W]&after=A>; rel="next"`.
fn events_link(base_url: &str, limit: usize, wait: Option<u64>, after: u64) -> hyper::body::Bytes {
    let mut limit_digits = itoa::Buffer::new();
    let mut wait_digits = itoa::Buffer::new();
    let mut after_digits = itoa::Buffer::new();
    let wait = wait.map(|secs| wait_digits.format(secs).as_bytes());
    joined([
        b"<",
        base_url.as_bytes(),
        b"/events?limit=",
        limit_digits.format(limit).as_bytes(),
        if wait.is_some() { b"&wait=" } else { b"" },
        wait.unwrap_or_default(),
        b"&after=",
        after_digits.format(after).as_bytes(),
        b">; rel=\"next\"",
    ])
}

/// `{base_url}{path}{id}`: the `Location` of a created pet or a placed order.
fn location(base_url: &str, path: &[u8], id: u64) -> hyper::body::Bytes {
    let mut digits = itoa::Buffer::new();
    joined([base_url.as_bytes(), path, digits.format(id).as_bytes()])
}
