//! API keys (docs/contract.md, "Keys and plans"): the keys file, parsed
//! into a [`Keys`] table that maps the SHA-256 of a presented key to its
//! entry, and the name of a key's limiter state outside the process.
//!
//! Why hash every presented key: the file may hold only hashes (the
//! preferred form), the table never holds a usable key, and a lookup by
//! digest leaks nothing useful through timing; the final comparison is
//! constant-time anyway (`subtle`).
//!
//! | file | holds |
//! |---|---|
//! | `table.rs` | [`Keys`], [`KeyEntry`], [`Access`], [`digest`] |
//! | `scope.rs` | [`Scope`], [`Scopes`]: what a key may do |
//! | `expiry_metric.rs` | [`KeyExpiry`]: `/metrics`' seconds left of each entry with an expiry |
//! | `expiry.rs` | `expiresAt`'s RFC 3339 date-times, `keygen --expires-in`'s durations |
//! | `file.rs` | reading and checking the keys file; [`MAX_QUOTA`] |
//! | `state_id.rs` | [`StateId`]: a key's limiter state as named outside the process |
//! | `rotate.rs` | [`rotate`](fn@rotate): `keygen --rotate`'s edit of one entry, in place |
//! | `reload.rs` | [`Rerun`]: one reload at a time, run again once if asked meanwhile |
//! | `dev_key.rs` | the development key kept in the data directory |
//!
//! May use: `util`, `telemetry`, `headers`.
//!
//! `headers`: each entry keeps its quota's header values and 2xx
//! templates, built once per reload rather than per request.

mod dev_key;
mod expiry;
mod expiry_metric;
mod file;
mod reload;
mod rotate;
mod scope;
mod state_id;
mod table;

pub use dev_key::{load_or_create as dev_key, DEV_KEY_FILE};
pub use expiry::{format_rfc3339, parse_duration, parse_rfc3339};
pub use expiry_metric::KeyExpiry;
pub use file::{KeysError, KEYS_FILE_CAP, MAX_QUOTA, MAX_SECRETS};
pub use reload::Rerun;
pub use rotate::rotate;
pub use scope::{Scope, Scopes};
pub use state_id::StateId;
pub use table::{digest, Access, KeyEntry, Keys, ANONYMOUS_CAPACITY, ANONYMOUS_PER_MINUTE};
