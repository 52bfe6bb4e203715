//! [`AppState`]: what every request handler shares: the inventory, the
//! key table in force, the clock and the server's options.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use hyper::body::Bytes;
use hyper::header::HeaderValue;
use parking_lot::RwLock;
use petstore_core::{Clock, Inventory};

use crate::keys::{Keys, KeysError};
use crate::metrics::Metrics;

/// Options of the HTTP layer that handlers need.
#[derive(Clone, Debug)]
pub struct Options {
    /// Public base address including `/v1`, without a trailing `/`;
    /// `"/v1"` when none is configured (relative links).
    pub base_url: String,
    /// Origins allowed by CORS; empty: CORS off.
    pub cors_origins: Vec<String>,
    /// Serve `GET /metrics`.
    pub metrics: bool,
    /// Write one access-log line per request on stderr.
    pub access_log: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            base_url: "/v1".into(),
            cors_origins: Vec::new(),
            metrics: true,
            access_log: false,
        }
    }
}

/// The state shared by all requests.
#[derive(Debug)]
pub struct AppState {
    /// The pets.
    pub inventory: Arc<Inventory>,
    /// The clock of the rate limiter.
    pub clock: Arc<dyn Clock>,
    /// HTTP options.
    pub options: Options,
    /// The metrics, unless turned off.
    pub metrics: Option<Arc<Metrics>>,
    /// The key table in force. A read lock is held only for one lookup
    /// (a connection's first request with a key, or one without a valid
    /// key); a reload builds the new table outside the lock and swaps it
    /// in.
    keys: RwLock<Arc<Keys>>,
    /// Bumped after every reload, so that connections know the key entry
    /// they remember may be stale (`connection.rs`).
    keys_generation: AtomicU64,
    keys_path: Option<PathBuf>,
    successor_link: HeaderValue,
    openapi: Bytes,
}

impl AppState {
    /// State over `inventory` with the key table `keys`, reloadable from
    /// `keys_path` when given.
    pub fn new(
        inventory: Arc<Inventory>,
        keys: Keys,
        keys_path: Option<PathBuf>,
        clock: Arc<dyn Clock>,
        options: Options,
    ) -> Self {
        AppState {
            successor_link: crate::headers::successor_link(&options.base_url),
            openapi: crate::routes::openapi_document(&options.base_url),
            metrics: options
                .metrics
                .then(|| Arc::new(Metrics::new(inventory.clone()))),
            inventory,
            clock,
            options,
            keys: RwLock::new(Arc::new(keys)),
            keys_generation: AtomicU64::new(0),
            keys_path,
        }
    }

    /// `getPet`'s successor-version `Link` value.
    pub fn successor_link(&self) -> &HeaderValue {
        &self.successor_link
    }

    /// The OpenAPI document as served: its server URL is the configured
    /// base address (built once, here, not per request).
    pub fn openapi(&self) -> &Bytes {
        &self.openapi
    }

    /// The key table in force.
    pub fn keys(&self) -> parking_lot::RwLockReadGuard<'_, Arc<Keys>> {
        self.keys.read()
    }

    /// Changes with every reload of the key table.
    pub fn keys_generation(&self) -> u64 {
        self.keys_generation.load(Ordering::Acquire)
    }

    /// Re-reads the keys file. On error the old table stays in force.
    /// Returns the number of keys now in force, or `None` when the server
    /// has no keys file.
    pub fn reload_keys(&self) -> Result<Option<usize>, KeysError> {
        let Some(path) = &self.keys_path else {
            return Ok(None);
        };
        let previous = self.keys.read().clone();
        let fresh = Keys::load(path, Some(&previous))?;
        let count = fresh.len();
        *self.keys.write() = Arc::new(fresh);
        // Release: a connection that sees the new generation and looks
        // the key up again finds the new table.
        self.keys_generation.fetch_add(1, Ordering::Release);
        Ok(Some(count))
    }
}
