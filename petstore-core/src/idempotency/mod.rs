//! Idempotency keys (the IETF httpapi draft's `Idempotency-Key`): a write
//! sent again with the same key gets the first one's answer, and nothing
//! runs twice.
//!
//! | file | holds |
//! |---|---|
//! | `key.rs` | [`IdempotencyKey`]: a header value checked (quoted or not), [`KeyError`] |
//! | `fingerprint.rs` | [`Fingerprint`]: the digest of a key's request |
//! | `keyed.rs` | [`Keyed`]: a key, its [`Scope`], its request's fingerprint and time; [`RETENTION`] |
//! | `answer.rs` | [`Answer`]: what is kept; [`Seen`]: what a lookup finds; [`KeyedOutcome`] |
//! | `kept.rs` | `KeptKeys`: keys in flight and kept, their expiry; [`Claim`] |
//!
//! The inventory holds one `KeptKeys` and writes each kept key into
//! the same journal record as what it answered (`inventory/journal/`).
//!
//! May use: `pet`, `order`, `clock.rs`, `quote.rs`.

mod answer;
mod fingerprint;
mod kept;
mod key;
mod keyed;

pub use answer::{Answer, KeyedOutcome, Seen};
pub use fingerprint::Fingerprint;
pub use kept::Claim;
pub(crate) use kept::KeptKeys;
pub use key::{IdempotencyKey, KeyError, MAX_KEY_CHARS};
pub use keyed::{Keyed, Scope, MAX_SCOPE_BYTES, RETENTION};
