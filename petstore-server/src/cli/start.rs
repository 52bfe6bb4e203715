//! The start-up wiring of `petstore-server` (serve): the one place that
//! names every backend. It reads the keys, opens the store (in memory,
//! the journal in `--data`, or PostgreSQL), picks where the rate limits
//! live (in process with the state file, or Redis), builds the shared
//! state and the contract's options, and runs the accept loop until
//! SIGINT or SIGTERM.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use petstore_core::journal::CompactionPolicy;
use petstore_core::{
    Clock, FsyncPolicy, Inventory, JournalOptions, OpenError, Plan, Plans, SystemClock,
};
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};

use super::flags::Cli;
use super::keygen;
use crate::http::{Api, Options, Role};
use crate::keys::Keys;
use crate::net::{self, ConnLimits, ConnectionsByProtocol, PerAddress, RefusedConnections, Tls};
use crate::ratelimit::in_redis::RedisLimits;
use crate::ratelimit::{snapshot_file, RateLimits};
use crate::state::AppState;
use crate::store::{Postgres, Store};
use crate::telemetry::reloads::{reload_failed, Reloaded};
use crate::telemetry::Metrics;
use crate::{log_error, log_info};

pub(super) async fn serve(cli: Cli) -> Result<(), String> {
    let dev_key;
    let keys = match &cli.keys {
        Some(path) => {
            let keys = Keys::load(path, None).map_err(|e| e.to_string())?;
            log_info!("loaded {} key(s) from {}", keys.len(), path.display());
            dev_key = None;
            keys
        }
        None => {
            // Kept in the data directory of a durable server, so that a
            // restart prints the same key; a new one each time otherwise.
            let key = if cli.in_memory || cli.postgres.is_some() {
                keygen::new_key().map_err(|e| format!("cannot make a development key: {e}"))?
            } else {
                crate::keys::dev_key(&cli.data, keygen::new_key)?
            };
            let quota = Plans::default()
                .quota(Plan::Pro, None)
                .map_err(|e| e.to_string())?;
            let keys = Keys::single("development", &key, quota);
            dev_key = Some(key);
            keys
        }
    };
    let keys =
        keys.with_anonymous_capacity(usize::try_from(cli.anonymous_capacity).unwrap_or(usize::MAX));
    // Before the listener: a missing or broken pair refuses the start.
    let tls = match (&cli.tls_cert, &cli.tls_key) {
        (Some(cert), Some(key)) => {
            let tls = Tls::load(cert, key).map_err(|e| e.to_string())?;
            log_info!("TLS: certificate {}, ALPN h2 and http/1.1", cert.display());
            Some(Arc::new(tls))
        }
        _ => None,
    };
    let listener = TcpListener::bind(&cli.addr)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", cli.addr))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;

    let admin_listener = match &cli.admin_addr {
        Some(addr) => Some(
            TcpListener::bind(addr)
                .await
                .map_err(|e| format!("cannot listen on --admin-addr {addr}: {e}"))?,
        ),
        None => None,
    };
    let options = Options {
        base_url: cli.base_url.clone().unwrap_or_else(|| "/v1".into()),
        cors_origins: cli.cors_origins.clone(),
        access_log: cli.access_log,
        role: if admin_listener.is_some() {
            Role::Public
        } else {
            Role::All
        },
        tls: tls.is_some(),
        hsts_max_age: cli.hsts_max_age,
        docs: !cli.no_docs,
    };
    let admin = match admin_listener {
        Some(listener) => {
            let at = listener.local_addr().map_err(|e| e.to_string())?;
            let api = Arc::new(Api::new(Options {
                role: Role::Admin,
                tls: false,
                ..options.clone()
            }));
            Some((listener, api, at))
        }
        None => None,
    };
    let api = Arc::new(Api::new(options));
    let max_connections = usize::try_from(cli.max_connections).unwrap_or(usize::MAX);
    let conn_limits = ConnLimits {
        header_timeout: Duration::from_secs(cli.header_timeout),
        write_timeout: Duration::from_secs(cli.write_timeout),
        body_timeout: Duration::from_secs(cli.body_timeout),
        max_connections,
        max_connections_per_address: cli
            .max_connections_per_address
            .map_or(PerAddress::default_cap(max_connections), |n| {
                usize::try_from(n).unwrap_or(usize::MAX)
            }),
        shutdown_grace: Duration::from_secs(10),
        // After a drain, a second for the connections accepted just before
        // the listener closed to send their request (within the header
        // timeout, which would close them anyway).
        settle: if cli.shutdown_delay > 0 {
            Duration::from_secs(1).min(Duration::from_secs(cli.header_timeout))
        } else {
            Duration::ZERO
        },
        proxy_protocol: cli.proxy_protocol,
    };
    let postgres = match &cli.postgres {
        Some(url) => Some(Postgres::open(url).await.map_err(|e| e.to_string())?),
        None => None,
    };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
    // Limiter state outlives the process, in the data directory.
    let limits_file =
        (!cli.in_memory && postgres.is_none()).then(|| cli.data.join(snapshot_file::FILE_NAME));
    let restored =
        (limits_file.as_deref()).and_then(|p| snapshot_file::restore(p, &keys, clock.now()));
    let store = match postgres {
        Some(pg) => Store::Postgres(pg),
        None => Store::local(Arc::new(open_local(&cli)?)),
    };
    store.inventory().set_event_retention(cli.events_retention);
    let redis_timeout = Duration::from_millis(cli.redis_timeout);
    let limits = match &cli.redis {
        Some(url) => {
            log_info!("rate limits: shared with the other replicas in Redis (--redis)");
            let redis = RedisLimits::new(url, clock.clone(), redis_timeout)?;
            tokio::spawn(redis.clone().check_eviction());
            RateLimits::Redis(redis)
        }
        None if !cli.redis_cluster.is_empty() => {
            log_info!(
                "rate limits: shared with the other replicas in a Redis Cluster (--redis-cluster, {} seed node(s))",
                cli.redis_cluster.len()
            );
            let redis = RedisLimits::cluster(&cli.redis_cluster, clock.clone(), redis_timeout)?;
            tokio::spawn(redis.clone().check_eviction());
            RateLimits::Redis(redis)
        }
        None => RateLimits::Local,
    };
    let metrics = cli.metrics.then(|| {
        let mut metrics = Metrics::new();
        metrics.register(Box::new(RefusedConnections));
        metrics.register(Box::new(ConnectionsByProtocol));
        metrics
    });
    let state = Arc::new(AppState::new(
        store,
        limits,
        keys,
        cli.keys.clone(),
        clock.clone(),
        metrics,
    ));
    if let Some(lapses) = state.store.lapses(clock.clone()) {
        tokio::spawn(lapses);
    }
    if let Some(compactions) = state.store.compactions() {
        tokio::spawn(compactions);
    }
    let limits_writer = match limits_file {
        Some(path) => {
            let state = state.clone();
            let keys = move || state.keys().clone();
            Some(
                snapshot_file::Writer::spawn(keys, clock, path, restored)
                    .map_err(|e| format!("cannot start the limiter state writer: {e}"))?,
            )
        }
        None => None,
    };

    let mut hangup = signal(SignalKind::hangup()).map_err(|e| e.to_string())?;
    let reloading = state.clone();
    let reloading_tls = tls.clone();
    tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            // Off the runtime's workers: the file may block (a FIFO).
            reloading.request_reload();
            if let Some(tls) = reloading_tls.clone() {
                tokio::task::spawn_blocking(move || reload_tls(&tls));
            }
        }
    });
    let mut terminate = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    let delay = Duration::from_secs(cli.shutdown_delay);
    let draining = state.clone();
    // The first signal starts the drain (`--shutdown-delay`): `/healthz`
    // answers 503 and every response closes its connection while new
    // connections are still served, so that a load balancer notices and
    // stops sending before the listener closes. Then (or at a second
    // signal) this future ends, and `net::run` stops accepting and
    // finishes the requests in flight, which still close their
    // connections.
    let shutdown = async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => log_info!("SIGINT received"),
            _ = terminate.recv() => log_info!("SIGTERM received"),
        }
        draining.drain();
        if !delay.is_zero() {
            log_info!(
                "draining for {} s: /healthz answers 503, every response closes its connection; a second signal stops at once",
                delay.as_secs()
            );
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                _ = tokio::signal::ctrl_c() => log_info!("SIGINT received again: the drain ends"),
                _ = terminate.recv() => log_info!("SIGTERM received again: the drain ends"),
            }
        }
    };

    let scheme = if tls.is_some() { "https" } else { "http" };
    if let Some(key) = dev_key {
        println!("dev key: {key}");
        println!("try: curl -H 'Authorization: Bearer {key}' {scheme}://{local}/v1/pets");
    }
    if let Some(path) = state.inventory.journal_path() {
        println!("journal: {}", path.display());
    }
    if let Some((_, _, at)) = &admin {
        println!("admin (/healthz, /metrics) on http://{at}");
    }
    println!("listening on {scheme}://{local}");
    let admin = admin.map(|(listener, api, _)| (listener, api));
    net::run(listener, tls, state, api, conn_limits, shutdown, admin).await;
    if let Some(writer) = limits_writer {
        // A blocking join (one last write) after the last request.
        writer.finish();
    }
    // "stopped" is logged by `cli::main` once the runtime is down too.
    Ok(())
}

/// SIGHUP: the certificate and key read again; new connections get the
/// new pair, open ones keep theirs. A broken pair leaves the old one.
fn reload_tls(tls: &Tls) {
    match tls.reload() {
        Ok(()) => log_info!(
            "SIGHUP: reloaded the TLS certificate {} and its key",
            tls.cert_path().display()
        ),
        Err(e) => {
            reload_failed(Reloaded::Tls);
            log_error!("SIGHUP: {e}; the previous certificate and key stay in force");
        }
    }
}

/// The inventory of a single node: in memory, or the journal in `--data`
/// recovered (what it recovered, and a torn tail, logged).
fn open_local(cli: &Cli) -> Result<Inventory, String> {
    if cli.in_memory {
        log_info!("inventory: in memory (pets are lost when the server stops)");
        return Ok(Inventory::in_memory());
    }
    let compaction = CompactionPolicy {
        min_bytes: cli.compact_min_size,
        ratio: NonZeroU32::new(cli.compact_ratio).unwrap_or(NonZeroU32::MIN),
        ..CompactionPolicy::default()
    };
    let options = JournalOptions {
        fsync: cli.fsync,
        compaction,
    };
    let inventory = Inventory::open(&cli.data, options).map_err(|e| open_failed(&e, cli))?;
    // Logged once, with the details, when it starts: every refused
    // create after it answers 503 without them.
    inventory.on_storage_failure(|failure| {
        log_error!(
            "the inventory can no longer store pets: {failure}. Creates answer 503, reads go on, \
             /healthz answers 503; restart the server once the cause is fixed (it recovers what is on disk)"
        );
    });
    if let Some(recovery) = inventory.recovery() {
        log_info!(
            "inventory: journal {} (fsync {}), {} pet(s) recovered",
            recovery.path.display(),
            match cli.fsync {
                FsyncPolicy::Always => "always",
                FsyncPolicy::Never => "never",
            },
            recovery.pets
        );
        if let Some(torn) = &recovery.torn_tail {
            log_error!(
                "WARNING: the journal ended in a torn record (line {}, {} bytes without a newline), \
                 left by a crash in the middle of a write or by a full disk; it was never acknowledged. \
                 It was cut off, and its bytes are kept at {}",
                torn.line,
                torn.bytes_dropped,
                torn.copy.display()
            );
        }
    }
    Ok(inventory)
}

/// Why the inventory could not open, with what the operator can do.
fn open_failed(e: &OpenError, cli: &Cli) -> String {
    let data = cli.data.display();
    match e {
        OpenError::Corrupt { .. } => format!(
            "{e}. To list the damaged records: petstore-server journal check --data {data}; \
             to move them into a side file and start again: petstore-server journal repair --data {data}"
        ),
        OpenError::Locked { .. } => format!(
            "{e}: another petstore-server (or a journal repair) runs on this directory; \
             refusing to start, as two servers on one journal would give out the same ids"
        ),
        _ => e.to_string(),
    }
}
