//! `petstore-server`: parses flags, sets up the state, and runs
//! [`petstore_server::server::run`] until SIGINT or SIGTERM.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use petstore_core::{FsyncPolicy, Inventory, JournalOptions, Plan, Plans, SystemClock};
use petstore_server::cli::{Cli, Command};
use petstore_server::keys::Keys;
use petstore_server::per_address::PerAddress;
use petstore_server::server::{self, Limits};
use petstore_server::state::{AppState, Options};
use petstore_server::{keygen, log_error, log_info};
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Command::Keygen { plan, name }) = &cli.command {
        return match keygen::new_key() {
            Ok(key) => {
                println!("key: {key}");
                println!("entry: {}", keygen::entry(&key, name, *plan));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("cannot read random bytes from the operating system: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let runtime = match server::runtime() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            log_error!("{message}");
            ExitCode::from(2)
        }
    }
}

async fn serve(cli: Cli) -> Result<(), String> {
    let dev_key;
    let keys = match &cli.keys {
        Some(path) => {
            let keys = Keys::load(path, None).map_err(|e| e.to_string())?;
            log_info!("loaded {} key(s) from {}", keys.len(), path.display());
            dev_key = None;
            keys
        }
        None => {
            let key =
                keygen::new_key().map_err(|e| format!("cannot make a development key: {e}"))?;
            let quota = Plans::default()
                .quota(Plan::Pro, None)
                .map_err(|e| e.to_string())?;
            let keys = Keys::single("development", &key, quota);
            dev_key = Some(key);
            keys
        }
    };
    let listener = TcpListener::bind(&cli.addr)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", cli.addr))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;

    let options = Options {
        base_url: cli.base_url.clone().unwrap_or_else(|| "/v1".into()),
        cors_origins: cli.cors_origins.clone(),
        metrics: cli.metrics,
        access_log: cli.access_log,
    };
    let max_connections = usize::try_from(cli.max_connections).unwrap_or(usize::MAX);
    let limits = Limits {
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
    };
    let inventory = if cli.in_memory {
        log_info!("inventory: in memory (pets are lost when the server stops)");
        Inventory::in_memory()
    } else {
        let options = JournalOptions { fsync: cli.fsync };
        let inventory = Inventory::open(&cli.data, options).map_err(|e| e.to_string())?;
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
                    "WARNING: the journal ended in a torn record (line {}, {} bytes, left by a crash during a write); \
                     it was cut off, and the file as it was is kept at {}",
                    torn.line,
                    torn.bytes_dropped,
                    torn.copy.display()
                );
            }
        }
        inventory
    };
    let inventory = Arc::new(inventory);
    let state = Arc::new(AppState::new(
        inventory,
        keys,
        cli.keys.clone(),
        Arc::new(SystemClock::new()),
        options,
    ));

    let mut hangup = signal(SignalKind::hangup()).map_err(|e| e.to_string())?;
    let reloading = state.clone();
    tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            match reloading.reload_keys() {
                Ok(Some(count)) => log_info!("SIGHUP: reloaded keys file, {count} key(s) in force"),
                Ok(None) => log_info!("SIGHUP: no keys file to reload"),
                Err(e) => log_error!("SIGHUP: {e}; the previous keys stay in force"),
            }
        }
    });
    let mut terminate = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    let shutdown = async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => log_info!("SIGINT received"),
            _ = terminate.recv() => log_info!("SIGTERM received"),
        }
    };

    if let Some(key) = dev_key {
        println!("dev key: {key}");
        println!("try: curl -H 'Authorization: Bearer {key}' http://{local}/v1/pets");
    }
    if let Some(path) = state.inventory.journal_path() {
        println!("journal: {}", path.display());
    }
    println!("listening on http://{local}");
    server::run(listener, state, limits, shutdown).await;
    log_info!("stopped");
    Ok(())
}
