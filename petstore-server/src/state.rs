//! [`AppState`]: what every request handler shares: the inventory, the
//! key table in force, the clock and the server's options.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use hyper::body::Bytes;
use hyper::header::HeaderValue;
use parking_lot::RwLock;
use petstore_core::{Clock, Inventory};

use crate::keys::{Keys, KeysError};
use crate::limits::redis::RedisLimits;
use crate::metrics::Metrics;
use crate::store::Store;
use crate::{log_error, log_info};

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
    /// The pets every read is answered from: the store's in-memory
    /// inventory (with PostgreSQL, its read copy).
    pub inventory: Arc<Inventory>,
    /// Where pets are stored: creates, and whether they can be.
    pub store: Store,
    /// The clock of the rate limiter.
    pub clock: Arc<dyn Clock>,
    /// HTTP options.
    pub options: Options,
    /// The metrics, unless turned off.
    pub metrics: Option<Arc<Metrics>>,
    /// The shared limiter of replicas (`--redis`); `None`: each key's
    /// limiter in process decides.
    pub redis: Option<RedisLimits>,
    /// The key table in force. A read lock is held only for one lookup
    /// (a connection's first request with a key, or one without a valid
    /// key); a reload builds the new table outside the lock and swaps it
    /// in.
    keys: RwLock<Arc<Keys>>,
    /// Bumped after every reload, so that connections know the key entry
    /// they remember may be stale (`connection.rs`).
    keys_generation: AtomicU64,
    keys_path: Option<PathBuf>,
    reloads: Rerun,
    successor_link: HeaderValue,
    openapi: Bytes,
}

impl AppState {
    /// State over `store` (reads come from its inventory, and the
    /// metrics watch it) with the key table `keys`, reloadable from
    /// `keys_path` when given.
    pub fn new(
        store: Store,
        keys: Keys,
        keys_path: Option<PathBuf>,
        clock: Arc<dyn Clock>,
        options: Options,
    ) -> Self {
        let inventory = store.inventory().clone();
        AppState {
            successor_link: crate::headers::successor_link(&options.base_url),
            openapi: crate::routes::openapi_document(&options.base_url),
            metrics: options
                .metrics
                .then(|| Arc::new(Metrics::for_store(store.clone()))),
            store,
            inventory,
            clock,
            options,
            redis: None,
            keys: RwLock::new(Arc::new(keys)),
            keys_generation: AtomicU64::new(0),
            keys_path,
            reloads: Rerun::default(),
        }
    }

    /// Limits shared with other replicas in the Redis of `limits`
    /// (`--redis`), its latency and fallbacks in the metrics.
    pub fn with_redis(mut self, limits: RedisLimits) -> Self {
        if let Some(metrics) = &self.metrics {
            metrics.set_redis(limits.stats());
        }
        self.redis = Some(limits);
        self
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
                "SIGHUP: the previous reload is still reading the keys file (a hung mount? a FIFO?);                  the file will be read again when it ends, and the previous keys stay in force meanwhile"
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
            Err(e) => log_error!("SIGHUP: {e}; the previous keys stay in force"),
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

/// One job at a time, run again once if asked while it runs: how reloads
/// of the keys file are serialised without queueing a thread per signal.
#[derive(Debug, Default)]
struct Rerun {
    running: AtomicBool,
    again: AtomicBool,
}

impl Rerun {
    /// Asks for a run; true when the caller must start the runner (none
    /// runs), false when the running one will run the job again.
    fn request(&self) -> bool {
        self.again.store(true, Ordering::SeqCst);
        !self.running.swap(true, Ordering::SeqCst)
    }

    /// The runner could not be started.
    fn abandon(&self) {
        self.running.store(false, Ordering::SeqCst);
    }

    /// The runner: runs `job` until no request is left.
    fn run(&self, mut job: impl FnMut()) {
        loop {
            self.again.store(false, Ordering::SeqCst);
            job();
            if self.again.load(Ordering::SeqCst) {
                continue;
            }
            self.running.store(false, Ordering::SeqCst);
            // A request between the check above and the store saw a
            // runner still running: take it over, unless a new runner did.
            if !self.again.load(Ordering::SeqCst) || self.running.swap(true, Ordering::SeqCst) {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn a_stuck_job_is_never_run_twice_at_once_and_runs_again_once_after() {
        let rerun = Arc::new(Rerun::default());
        let (release, released) = mpsc::channel::<()>();
        let (started, starts) = mpsc::channel::<()>();
        assert!(rerun.request());
        let runner = {
            let rerun = Arc::clone(&rerun);
            std::thread::spawn(move || {
                rerun.run(|| {
                    started.send(()).unwrap();
                    released.recv().unwrap();
                })
            })
        };
        starts.recv().unwrap();
        // While the first run is stuck, more requests start nothing new.
        for _ in 0..5 {
            assert!(!rerun.request());
        }
        release.send(()).unwrap();
        // One more run for all of them, then the runner ends.
        starts.recv().unwrap();
        release.send(()).unwrap();
        runner.join().unwrap();
        assert!(starts.try_recv().is_err());
        // Idle again: the next request starts a runner.
        assert!(rerun.request());
    }
}
