//! Response headers that the contract puts on many responses: the
//! rate-limit headers (both the `X-RateLimit-*` trio and the IETF
//! `RateLimit`/`RateLimit-Policy` fields), `getPet`'s deprecation
//! headers, and the idempotency headers' names.
//!
//! A room of its own, below both `keys/` and `http/`: each key's entry
//! keeps its quota's [`QuotaHeaders`], made once per reload rather than
//! per request, and the contract fills them in on every response.
//!
//! | file | holds |
//! |---|---|
//! | `names.rs` | the header names, as constants |
//! | `quota.rs` | [`QuotaHeaders`]: a quota's values and 2xx templates; [`rate_limit`] for errors |
//! | `binding.rs` | [`Binding`]: what the headers say of a decision, written as digits |
//! | `last_values.rs` | the values this worker thread made last, handed out again |
//! | `never_indexed.rs` | the changing values kept out of HTTP/2's header compression table |
//! | `extra.rs` | [`Extra`]: a response's own last header (`Link`, `Location`, deprecation) |
//! | `static_text.rs` | header texts interned for the life of the process |
//! | `joined.rs` | byte strings made of parts in one allocation |
//! | `deprecation.rs` | `getPet`'s `Deprecation`, `Sunset` and successor `Link` |
//!
//! May use: `util`.

mod binding;
mod deprecation;
mod extra;
mod joined;
mod last_values;
mod names;
mod never_indexed;
mod quota;
mod static_text;

pub use binding::Binding;
pub use deprecation::{deprecation, successor_link};
pub use extra::Extra;
pub use names::{EVENTS_CURSOR, IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED, LAST_EVENT_ID};
pub use never_indexed::index_changing;
pub use quota::{rate_limit, QuotaHeaders};
