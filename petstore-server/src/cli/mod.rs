//! The command line: flags, the start-up wiring (the only place that
//! names every backend), `keygen`, and `journal check|repair`.
//!
//! | file | holds |
//! |---|---|
//! | `mod.rs` | [`main`]: which command runs |
//! | `flags.rs` | [`Cli`]: every flag and its environment variable |
//! | `start.rs` | the server's start-up wiring and its run until a signal |
//! | `keygen.rs` | `petstore-server keygen` |
//! | `journal_cmd.rs` | `petstore-server journal check` and `journal repair` |
//!
//! May use: `*`.
//! Only the binary (`main.rs`) uses it.

mod flags;
mod journal_cmd;
mod keygen;
mod start;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

pub use flags::{Cli, Command, JournalAction};

use crate::{log_error, log_info, net};

/// The longest the runtime's own tasks and threads are waited for after
/// the server stopped (a blocking call still running is abandoned).
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// The binary: parses the arguments and runs the command they name.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    crate::telemetry::log::set_format(cli.log_format);
    if let Some(Command::Keygen {
        plan,
        name,
        per_minute,
        per_day,
    }) = &cli.command
    {
        let key = match keygen::new_key() {
            Ok(key) => key,
            Err(e) => {
                eprintln!("cannot read random bytes from the operating system: {e}");
                return ExitCode::FAILURE;
            }
        };
        return match keygen::entry(&key, name, *plan, *per_minute, *per_day) {
            Ok(entry) => {
                println!("key: {key}");
                println!("entry: {entry}");
                ExitCode::SUCCESS
            }
            Err(message) => {
                eprintln!(
                    "keygen: the server would refuse this entry: {message} (--per-minute, --per-day)"
                );
                ExitCode::from(2)
            }
        };
    }
    if let Some(Command::Journal { action }) = &cli.command {
        return journal_cmd::run(action);
    }
    let runtime = match net::runtime() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let served = runtime.block_on(start::serve(cli));
    // The runtime's own tasks and threads end here (a Redis or PostgreSQL
    // connection, the blocking pool's threads): "stopped" is said once
    // they have, so that it is true when a supervisor reads it.
    runtime.shutdown_timeout(SHUTDOWN_TIMEOUT);
    match served {
        Ok(()) => {
            log_info!("stopped");
            ExitCode::SUCCESS
        }
        Err(message) => {
            log_error!("{message}");
            ExitCode::from(2)
        }
    }
}
