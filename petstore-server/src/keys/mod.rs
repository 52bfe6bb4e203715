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
//! | `table.rs` | [`Keys`], [`KeyEntry`], [`digest`] |
//! | `file.rs` | reading and checking the keys file; [`MAX_QUOTA`] |
//! | `state_id.rs` | [`StateId`]: a key's limiter state as named outside the process |
//! | `reload.rs` | [`Rerun`]: one reload at a time, run again once if asked meanwhile |
//! | `dev_key.rs` | the development key kept in the data directory |
//!
//! May use: `util`, `telemetry`, `headers`.
//!
//! `headers`: each entry keeps its quota's header values and 2xx
//! templates, built once per reload rather than per request.

mod dev_key;
mod file;
mod reload;
mod state_id;
mod table;

pub use dev_key::{load_or_create as dev_key, DEV_KEY_FILE};
pub use file::{KeysError, KEYS_FILE_CAP, MAX_QUOTA};
pub use reload::Rerun;
pub use state_id::StateId;
pub use table::{digest, KeyEntry, Keys, ANONYMOUS_CAPACITY, ANONYMOUS_PER_MINUTE};
