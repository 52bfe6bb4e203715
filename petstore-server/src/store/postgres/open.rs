//! Opening the PostgreSQL store ([`Postgres::open`]): the connection
//! pool, the schema made ready, the read copy loaded, and the committers,
//! the tail, the listener and the expiry started.

use std::str::FromStr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use petstore_core::{Clock, Inventory, SystemClock};
use tokio::sync::Notify;
use tokio_postgres::Config;

use super::connect::{connecting, Connector, Servers, CONNECT_TIMEOUT};

use super::copy::load;
use super::describe::{describe, pool_error};
use super::health::Health;
use super::schema;
use super::stats::PostgresStats;
use super::Postgres;
use super::{idempotency, step, write};
use crate::log_info;
use crate::store::committer::{self, Committer};

/// Connections in the pool: the committer, the tail, catch-ups, the load.
const POOL_SIZE: usize = 8;

/// Why the PostgreSQL store could not start.
#[derive(Debug, thiserror::Error)]
pub enum PostgresOpenError {
    /// The URL does not parse.
    #[error("--postgres: not a valid PostgreSQL URL or connection string: {0}")]
    Url(String),
    /// No connection could be made.
    #[error("cannot connect to PostgreSQL at {target}: {cause}")]
    Connect {
        /// Every host with its port, and the database (never the
        /// password).
        target: String,
        /// Why.
        cause: String,
    },
    /// The schema could not be made ready, or is too new.
    #[error(transparent)]
    Schema(#[from] schema::SchemaError),
    /// Loading the read copy failed.
    #[error("cannot load the pets from PostgreSQL: {0}")]
    Load(String),
}

impl Postgres {
    /// Connects to `url`, creates or migrates the schema, loads the read
    /// copy, and starts the committer, the tail and the listener. Call
    /// from inside the tokio runtime.
    pub async fn open(url: &str) -> Result<Arc<Postgres>, PostgresOpenError> {
        let mut config = Config::from_str(url).map_err(|e| PostgresOpenError::Url(describe(&e)))?;
        config.connect_timeout(CONNECT_TIMEOUT);
        if config.get_application_name().is_none() {
            config.application_name("petstore-server");
        }
        let servers = Arc::new(Servers::new(&config));
        let target = tried(&config, &servers);
        let manager = Manager::from_connect(
            config.clone(),
            Connector {
                servers: Arc::clone(&servers),
            },
            ManagerConfig {
                // A connection is checked with a query each time it is
                // taken: one that died with a PostgreSQL restart is
                // replaced, never handed to a create to fail.
                recycling_method: RecyclingMethod::Verified,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(CONNECT_TIMEOUT))
            .create_timeout(Some(connecting(&config)))
            .recycle_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| PostgresOpenError::Connect {
                target: target.clone(),
                cause: e.to_string(),
            })?;
        let mut client = pool.get().await.map_err(|e| PostgresOpenError::Connect {
            target: target.clone(),
            cause: pool_error(&e),
        })?;
        let was = schema::migrate(&mut client).await?;
        if was < schema::VERSION {
            log_info!(
                "PostgreSQL {}: schema migrated from version {was} to {}",
                servers.current(),
                schema::VERSION
            );
        }
        drop(client);

        let copy = Arc::new(Inventory::in_memory());
        let started = Instant::now();
        let changes = load(&pool, &copy).await.map_err(PostgresOpenError::Load)?;
        log_info!(
            "inventory: PostgreSQL {}, {} pet(s) loaded into the read copy in {} ms",
            servers.current(),
            copy.len(),
            started.elapsed().as_millis()
        );

        let (queue, pending) = Committer::new(write::QUEUE);
        let (steps, pending_steps) = Committer::new(step::QUEUE);
        let (keyed_creates, pending_keyed_creates) = Committer::new(idempotency::QUEUE);
        let (lookups, pending_lookups) = Committer::new(idempotency::QUEUE);
        let pg = Arc::new(Postgres {
            latest: AtomicU64::new(copy.len() as u64),
            copy,
            pool,
            queue,
            steps,
            keyed_creates,
            inflight: Default::default(),
            lookups,
            lookup: Default::default(),
            health: Health::new(servers),
            stats: PostgresStats::default(),
            tail: tokio::sync::Mutex::new(()),
            tails_started: AtomicU64::new(0),
            wake: Notify::new(),
            events_wake: Notify::new(),
            changes_applied: AtomicU64::new(changes),
            latest_change: AtomicU64::new(changes),
        });
        tokio::spawn(committer::run(Arc::clone(&pg), pending, write::MAX_BATCH));
        tokio::spawn(committer::run(
            Arc::clone(&pg),
            pending_steps,
            step::MAX_BATCH,
        ));
        tokio::spawn(committer::run(
            Arc::clone(&pg),
            pending_keyed_creates,
            idempotency::MAX_BATCH,
        ));
        tokio::spawn(committer::run(
            Arc::clone(&pg),
            pending_lookups,
            idempotency::MAX_BATCH,
        ));
        // The wall clock of `created_at` and of expiry: Unix time, as the
        // requests' keys are stamped.
        let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
        tokio::spawn(Arc::clone(&pg).prune_loop(clock));
        tokio::spawn(Arc::clone(&pg).tail_loop());
        tokio::spawn(Arc::clone(&pg).expire_loop());
        tokio::spawn(Arc::clone(&pg).events_loop());
        tokio::spawn(Arc::clone(&pg).listen_loop(config));
        Ok(pg)
    }
}

/// Where a failed start tried, for its message: every host with its
/// port, and the database (never the password). With several hosts,
/// tokio-postgres tries each in turn and reports the last one's error.
fn tried(config: &Config, servers: &Servers) -> String {
    if config.get_hosts().len().max(config.get_hostaddrs().len()) > 1 {
        format!(
            "{} (each host in turn; the last one's error)",
            servers.named()
        )
    } else {
        servers.named().to_owned()
    }
}
