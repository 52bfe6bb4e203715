//! [`AppState`]: what every request shares: the store and its inventory,
//! the rate limits, the key table in force, the clock and the metrics. No
//! HTTP and no backend: those are `http/` and the seams' own business.
//!
//! May use: `util`, `telemetry`, `keys/mod.rs`, `store/mod.rs`, `ratelimit/mod.rs`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use petstore_core::{Clock, Inventory};

use crate::keys::{KeyExpiry, Keys, KeysError, Rerun};
use crate::ratelimit::RateLimits;
use crate::store::{Feed, Store};
use crate::telemetry::reloads::{reload_failed, Reloaded};
use crate::telemetry::Metrics;
use crate::{log_error, log_info};

/// The state shared by all requests.
#[derive(Debug)]
pub struct AppState {
    /// The pets every read is answered from: the store's in-memory
    /// inventory (with PostgreSQL, its read copy).
    pub inventory: Arc<Inventory>,
    /// Where pets are stored: creates, transitions, and whether they can
    /// be.
    pub store: Store,
    /// The clock of the rate limiter.
    pub clock: Arc<dyn Clock>,
    /// The metrics, unless turned off.
    pub metrics: Option<Metrics>,
    /// Where the rate limits are decided.
    pub limits: RateLimits,
    /// The requests waiting for events (beta).
    pub feed: Arc<Feed>,
    /// The key table in force. A read lock is held only for one lookup
    /// (a connection's first request with a key, or one without a valid
    /// key); a reload builds the new table outside the lock and swaps it
    /// in.
    keys: Arc<RwLock<Arc<Keys>>>,
    /// Bumped after every reload, so that connections know the key entry
    /// they remember may be stale (`http/connection.rs`).
    keys_generation: AtomicU64,
    keys_path: Option<PathBuf>,
    reloads: Rerun,
    /// Set once a signal asked the server to stop: `/healthz` says so and
    /// every response closes its connection, so that a load balancer
    /// takes the instance out and reuses none of its connections.
    draining: AtomicBool,
    /// Test-only: the next list request panics, as a bug would (the
    /// driver's `catch_unwind` and the panic's log line under test).
    #[cfg(test)]
    pub panic_on_next_list: AtomicBool,
}

impl AppState {
    /// State over `store` (reads come from its inventory) and `limits`,
    /// with the key table `keys`, reloadable from `keys_path` when given,
    /// and `metrics` (with the store's and the limits' own collectors
    /// registered here), unless turned off.
    pub fn new(
        store: Store,
        limits: RateLimits,
        keys: Keys,
        keys_path: Option<PathBuf>,
        clock: Arc<dyn Clock>,
        metrics: Option<Metrics>,
    ) -> Self {
        let inventory = store.inventory().clone();
        let keys = Arc::new(RwLock::new(Arc::new(keys)));
        let feed = Arc::new(store.feed());
        let metrics = metrics.map(|mut metrics| {
            metrics.register(feed.collector(inventory.clone()));
            metrics.register(Box::new(KeyExpiry::new(keys.clone(), clock.clone())));
            for collector in store.collectors() {
                metrics.register(collector);
            }
            if let Some(collector) = limits.collector() {
                metrics.register(collector);
            }
            metrics
        });
        AppState {
            metrics,
            feed,
            store,
            inventory,
            clock,
            limits,
            keys,
            keys_generation: AtomicU64::new(0),
            keys_path,
            reloads: Rerun::default(),
            draining: AtomicBool::new(false),
            #[cfg(test)]
            panic_on_next_list: AtomicBool::new(false),
        }
    }

    /// From now on, the server is stopping: see [`is_draining`](Self::is_draining).
    pub fn drain(&self) {
        self.draining.store(true, Ordering::Relaxed);
        self.feed.drain();
    }

    /// Whether a signal asked the server to stop: `/healthz` answers 503
    /// `draining`, and every response closes its connection.
    pub fn is_draining(&self) -> bool {
        // Relaxed: a response that misses the flag by a moment is one
        // more that keeps its connection, which the drain's delay covers.
        self.draining.load(Ordering::Relaxed)
    }

    /// The key table in force.
    pub fn keys(&self) -> parking_lot::RwLockReadGuard<'_, Arc<Keys>> {
        self.keys.read()
    }

    /// Changes with every reload of the key table.
    pub fn keys_generation(&self) -> u64 {
        self.keys_generation.load(Ordering::Acquire)
    }

    /// Reloads the keys file (on SIGHUP) on a thread of its own and
    /// returns at once: reading it may block (a FIFO swapped in after the
    /// file check, a hung network mount), and must not take a runtime
    /// worker while requests go on with the keys in force. At most one
    /// reload thread exists: a request while one runs is logged and makes
    /// it read the file once more when it ends, so a stuck read does not
    /// pile up threads. The outcome is logged.
    pub fn request_reload(self: &Arc<Self>) {
        if !self.reloads.request() {
            log_error!(
                "SIGHUP: the previous reload is still reading the keys file (a hung mount? a FIFO?); \
                 the file will be read again when it ends, and the previous keys stay in force meanwhile"
            );
            return;
        }
        let state = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("keys-reload".into())
            .spawn(move || state.reloads.run(|| state.log_reload()));
        if let Err(e) = spawned {
            self.reloads.abandon();
            log_error!(
                "SIGHUP: cannot start the reload thread: {e}; the previous keys stay in force"
            );
        }
    }

    fn log_reload(&self) {
        match self.reload_keys() {
            Ok(Some(count)) => log_info!("SIGHUP: reloaded keys file, {count} key(s) in force"),
            Ok(None) => log_info!("SIGHUP: no keys file to reload"),
            Err(e) => {
                reload_failed(Reloaded::Keys);
                log_error!("SIGHUP: {e}; the previous keys stay in force");
            }
        }
    }

    /// Re-reads the keys file, blocking. On error the old table stays in force.
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
