//! [`Connection`]: what the server keeps for one client connection: the
//! state, the client's address, and the key entry of the last valid
//! `Authorization` header the connection presented.
//!
//! Why remember the key: finding a key's entry takes a SHA-256 of the
//! presented key (the table is indexed by digest, so the keys file can
//! hold digests only). That was the largest single cost of a request
//! (`scripts/bench/profile`; docs/performance.md has the figures). A
//! keep-alive client sends the same key on
//! every request of its connection, so the connection remembers it and
//! pays the digest once. It remembers the whole header value, so that a
//! repeated header is not even parsed again.
//!
//! What keeps this safe:
//! - The presented header is compared with the remembered one in
//!   constant time, as the digests are: a connection shared by several
//!   clients (a proxy's) must not learn another client's key from
//!   response timing.
//! - Only headers with a valid key are remembered; any other header is
//!   parsed and looked up (and refused) every time.
//! - A reload of the keys file bumps the state's key generation; a
//!   remembered entry from an older generation is looked up again, so a
//!   revoked key stops working on open connections too.
//!
//! A key other than the connection's last may still be known to the
//! worker thread (`key_cache.rs`: a proxy's pooled connections carry
//! many clients' keys), under the same rules.

use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;

use super::api::Api;
use super::auth::bearer_token;
use super::key_cache;
use crate::keys::KeyEntry;
use crate::state::AppState;
use crate::util::same_bytes::same_bytes;

/// One client connection.
#[derive(Debug)]
pub struct Connection {
    /// What all requests share.
    pub state: Arc<AppState>,
    /// The contract's configuration.
    pub api: Arc<Api>,
    /// The client's address (the limits of requests without a key).
    pub peer: IpAddr,
    // A mutex although a connection's requests are answered one at a time
    // (HTTP/1): the future of each request must be `Send`. It is never
    // contended.
    remembered: Mutex<Option<Remembered>>,
}

#[derive(Debug)]
struct Remembered {
    /// The whole `Authorization` value, e.g. `Bearer ps_1f...`.
    header: Box<[u8]>,
    generation: u64,
    entry: Arc<KeyEntry>,
}

impl Connection {
    /// A connection from `peer`, remembering nothing yet.
    pub fn new(state: Arc<AppState>, api: Arc<Api>, peer: IpAddr) -> Self {
        Connection {
            state,
            api,
            peer,
            remembered: Mutex::new(None),
        }
    }

    /// Calls `f` with the entry of the key in `authorization` (the raw
    /// `Authorization` header value) when it holds a valid bearer key: the
    /// remembered entry when the header is byte for byte the one this
    /// connection presented last (and no reload happened since), else the
    /// key table's. Returns `None`, without calling `f`, for a header
    /// that holds no valid key.
    ///
    /// The header is remembered whole, not the key in it, so that a
    /// keep-alive client's next request costs one comparison: neither
    /// the parse of `Bearer <token68>` nor the digest.
    pub fn with_key<R>(
        &self,
        authorization: &[u8],
        f: impl FnOnce(&Arc<KeyEntry>) -> R,
    ) -> Option<R> {
        let generation = self.state.keys_generation();
        let mut remembered = self.remembered.lock();
        if let Some(r) = remembered.as_ref() {
            if r.generation == generation && same_bytes(&r.header, authorization) {
                return Some(f(&r.entry));
            }
        }
        // Another key than this connection's last: perhaps one this
        // thread saw lately on another connection (a proxy's pooled
        // connections carry many clients' keys), else the digest.
        let entry = match key_cache::get(authorization, generation) {
            Some(entry) => entry,
            None => {
                let key = bearer_token(authorization)?;
                let entry = self.state.keys().lookup(key).cloned()?;
                key_cache::remember(authorization, generation, &entry);
                entry
            }
        };
        let result = f(&entry);
        match remembered.as_mut() {
            // A header of the same length (a proxy's pooled connection
            // carries many clients' keys, all of one length) is copied
            // into the one remembered: an allocation and a free less on
            // every request whose key differs from the one before.
            Some(r) if r.header.len() == authorization.len() => {
                r.header.copy_from_slice(authorization);
                r.generation = generation;
                r.entry = entry;
            }
            _ => {
                *remembered = Some(Remembered {
                    header: authorization.into(),
                    generation,
                    entry,
                })
            }
        }
        Some(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Keys;
    use crate::ratelimit::RateLimits;
    use crate::store::Store;
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
        connection.with_key(format!("Bearer {key}").as_bytes(), |entry| entry.name)
    }

    #[test]
    fn remembers_valid_keys_only_and_forgets_them_on_reload() {
        let dir = std::env::temp_dir().join(format!("petstore-connection-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("keys.json");
        keys_file(&path, &[("one", "key-a"), ("two", "key-b")]);
        let state = AppState::new(
            Store::local(Arc::new(Inventory::in_memory())),
            RateLimits::Local,
            Keys::load(&path, None).unwrap(),
            Some(path.clone()),
            Arc::new(SystemClock::new()),
            None,
        );
        let connection = Connection::new(
            Arc::new(state),
            Arc::new(Api::default()),
            IpAddr::V4(Ipv4Addr::LOCALHOST),
        );

        assert_eq!(name_of(&connection, "key-a"), Some("one"));
        assert_eq!(name_of(&connection, "key-a"), Some("one"));
        // A different key on the same connection is its own key, valid or not.
        assert_eq!(name_of(&connection, "key-b"), Some("two"));
        // Keys of one length taking turns (a proxy's pooled connection):
        // each is remembered as itself.
        assert_eq!(name_of(&connection, "key-a"), Some("one"));
        assert_eq!(name_of(&connection, "key-b"), Some("two"));
        assert_eq!(name_of(&connection, "key-b-"), None);
        assert_eq!(name_of(&connection, "key-"), None);
        assert_eq!(name_of(&connection, ""), None);
        assert_eq!(name_of(&connection, "key-b"), Some("two"));
        // The same key written another way is the same key; a header that
        // only starts like the remembered one is not.
        let with = |header: &[u8]| connection.with_key(header, |entry| entry.name);
        assert_eq!(with(b"bearer   key-b"), Some("two"));
        assert_eq!(with(b"bearer   key-b "), None);
        assert_eq!(with(b"Basic key-b"), None);
        assert_eq!(with(b""), None);

        // Another connection on this thread finds key-b without its
        // digest (`key_cache.rs`), and its last key is key-a.
        let pooled = Connection::new(
            connection.state.clone(),
            connection.api.clone(),
            IpAddr::V4(Ipv4Addr::LOCALHOST),
        );
        assert_eq!(name_of(&pooled, "key-a"), Some("one"));
        assert_eq!(name_of(&pooled, "key-b"), Some("two"));

        // Revoked by a reload: refused on this open connection too, and on
        // the other, whose thread remembered it as well.
        keys_file(&path, &[("one", "key-a"), ("three", "key-c")]);
        connection.state.reload_keys().unwrap();
        assert_eq!(name_of(&connection, "key-b"), None);
        assert_eq!(name_of(&pooled, "key-a"), Some("one"));
        assert_eq!(name_of(&pooled, "key-b"), None);
        assert_eq!(name_of(&connection, "key-c"), Some("three"));
        assert_eq!(name_of(&connection, "key-a"), Some("one"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
