//! [`Connection`]: what the server keeps for one client connection: the
//! state, the client's address, and the key entry of the last valid key
//! the connection presented.
//!
//! Why remember the key: finding a key's entry takes a SHA-256 of the
//! presented key (the table is indexed by digest, so the keys file can
//! hold digests only). That was the largest single cost of a request
//! (about 3,600 of the 12,000 instructions `respond` took for a list
//! page; `scripts/profile`). A keep-alive client sends the same key on
//! every request of its connection, so the connection remembers it and
//! pays the digest once.
//!
//! What keeps this safe:
//! - The presented key is compared with the remembered one in constant
//!   time, as the digests are: a connection shared by several clients (a
//!   proxy's) must not learn another client's key from response timing.
//! - Only valid keys are remembered; an invalid key is looked up (and
//!   refused) every time.
//! - A reload of the keys file bumps the state's key generation; a
//!   remembered entry from an older generation is looked up again, so a
//!   revoked key stops working on open connections too.

use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use subtle::{Choice, ConstantTimeEq};

use crate::keys::KeyEntry;
use crate::state::AppState;

/// One client connection.
#[derive(Debug)]
pub struct Connection {
    /// What all requests share.
    pub state: Arc<AppState>,
    /// The client's address (the limits of requests without a key).
    pub peer: IpAddr,
    // A mutex although a connection's requests are answered one at a time
    // (HTTP/1): the future of each request must be `Send`. It is never
    // contended.
    remembered: Mutex<Option<Remembered>>,
}

#[derive(Debug)]
struct Remembered {
    key: Box<[u8]>,
    generation: u64,
    entry: Arc<KeyEntry>,
}

impl Connection {
    /// A connection from `peer`, remembering nothing yet.
    pub fn new(state: Arc<AppState>, peer: IpAddr) -> Self {
        Connection {
            state,
            peer,
            remembered: Mutex::new(None),
        }
    }

    /// Calls `f` with the entry of `key` when the key is valid: the
    /// remembered entry when `key` is the one this connection presented
    /// last (and no reload happened since), else the key table's.
    /// Returns `None`, without calling `f`, for an invalid key.
    pub fn with_key<R>(&self, key: &str, f: impl FnOnce(&KeyEntry) -> R) -> Option<R> {
        let generation = self.state.keys_generation();
        let mut remembered = self.remembered.lock();
        if let Some(r) = remembered.as_ref() {
            if r.generation == generation && same_key(&r.key, key.as_bytes()) {
                return Some(f(&r.entry));
            }
        }
        let entry = self.state.keys().lookup(key).cloned()?;
        let result = f(&entry);
        *remembered = Some(Remembered {
            key: key.as_bytes().into(),
            generation,
            entry,
        });
        Some(result)
    }
}

/// Constant-time equality of two keys (their lengths are not secret).
/// Compared a word at a time: `subtle`'s byte-slice comparison does a
/// masked select per byte, which cost 900 instructions a request
/// (`scripts/profile`); eight bytes per step cost a ninth of that and
/// are just as free of data-dependent branches.
fn same_key(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let word = |chunk: &[u8]| {
        let mut bytes = [0u8; 8];
        bytes[..chunk.len()].copy_from_slice(chunk);
        u64::from_le_bytes(bytes)
    };
    let equal = a
        .chunks(8)
        .zip(b.chunks(8))
        .fold(Choice::from(1), |equal, (x, y)| {
            equal & word(x).ct_eq(&word(y))
        });
    bool::from(equal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Keys;
    use crate::state::Options;
    use petstore_core::{Inventory, SystemClock};
    use std::net::Ipv4Addr;
    use std::path::Path;

    fn keys_file(path: &Path, entries: &[(&str, &str)]) {
        let entries: Vec<String> = entries
            .iter()
            .map(|(name, key)| format!(r#"{{"name":"{name}","key":"{key}","plan":"pro"}}"#))
            .collect();
        std::fs::write(path, format!(r#"{{"keys":[{}]}}"#, entries.join(","))).unwrap();
    }

    fn name_of(connection: &Connection, key: &str) -> Option<&'static str> {
        connection.with_key(key, |entry| entry.name)
    }

    #[test]
    fn same_key_is_equality() {
        let keys: [&[u8]; 7] = [
            b"",
            b"a",
            b"b",
            b"abcdefgh",
            b"abcdefgi",
            b"abcdefghi",
            b"abcdefghj",
        ];
        for a in keys {
            for b in keys {
                assert_eq!(same_key(a, b), a == b, "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn remembers_valid_keys_only_and_forgets_them_on_reload() {
        let dir = std::env::temp_dir().join(format!("petstore-connection-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("keys.json");
        keys_file(&path, &[("one", "key-a"), ("two", "key-b")]);
        let state = AppState::new(
            Arc::new(Inventory::in_memory()),
            Keys::load(&path, None).unwrap(),
            Some(path.clone()),
            Arc::new(SystemClock::new()),
            Options::default(),
        );
        let connection = Connection::new(Arc::new(state), IpAddr::V4(Ipv4Addr::LOCALHOST));

        assert_eq!(name_of(&connection, "key-a"), Some("one"));
        assert_eq!(name_of(&connection, "key-a"), Some("one"));
        // A different key on the same connection is its own key, valid or not.
        assert_eq!(name_of(&connection, "key-b"), Some("two"));
        assert_eq!(name_of(&connection, "key-b-"), None);
        assert_eq!(name_of(&connection, "key-"), None);
        assert_eq!(name_of(&connection, ""), None);
        assert_eq!(name_of(&connection, "key-b"), Some("two"));

        // Revoked by a reload: refused on this open connection too.
        keys_file(&path, &[("one", "key-a"), ("three", "key-c")]);
        connection.state.reload_keys().unwrap();
        assert_eq!(name_of(&connection, "key-b"), None);
        assert_eq!(name_of(&connection, "key-c"), Some("three"));
        assert_eq!(name_of(&connection, "key-a"), Some("one"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
