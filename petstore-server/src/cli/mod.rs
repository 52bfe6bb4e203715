//! The command line: flags, the start-up wiring (the only place that
//! names every backend), `keygen`, `journal check|repair`, and what is
//! made from the flags' definitions (shell completions, the man page) or
//! asks a running server (`healthcheck`).
//!
//! | file | holds |
//! |---|---|
//! | `mod.rs` | [`main`]: which command runs |
//! | `flags.rs` | [`Cli`]: every flag and its environment variable |
//! | `start.rs` | the server's start-up wiring and its run until a signal |
//! | `keygen.rs` | `petstore-server keygen` |
//! | `journal_cmd.rs` | `petstore-server journal check` and `journal repair` |
//! | `completions.rs` | `petstore-server completions SHELL` (`clap_complete`) |
//! | `man_page.rs` | `petstore-server man` (`clap_mangen`) |
//! | `healthcheck.rs` | `petstore-server healthcheck`: one `GET /healthz`, for a container |
//!
//! May use: `*`.
//! Only the binary (`main.rs`) uses it.

mod completions;
mod flags;
mod healthcheck;
mod journal_cmd;
mod keygen;
mod man_page;
mod start;

use std::io::{self, Write};
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
    crate::telemetry::panics::install();
    if let Some(Command::Keygen {
        plan,
        name,
        per_minute,
        per_day,
        scopes,
        expires_in,
        rotate,
        keys_file,
    }) = &cli.command
    {
        let expires_at = expires_in.map(keygen::expires_after);
        if let (Some(entry_name), Some(path)) = (rotate, keys_file) {
            return keygen::rotate_in_file(path, entry_name, expires_at);
        }
        // clap requires both without --rotate.
        let (Some(plan), Some(name)) = (plan, name) else {
            eprintln!("keygen: --plan and --name are needed (or --rotate NAME --keys FILE)");
            return ExitCode::from(2);
        };
        let key = match keygen::new_key() {
            Ok(key) => key,
            Err(e) => {
                eprintln!("cannot read random bytes from the operating system: {e}");
                return ExitCode::FAILURE;
            }
        };
        let new = keygen::NewEntry {
            per_minute: *per_minute,
            per_day: *per_day,
            scopes,
            expires_at,
            ..keygen::NewEntry::new(name, *plan)
        };
        return match keygen::entry(&key, &new) {
            Ok(entry) => {
                println!("key: {key}");
                println!("entry: {entry}");
                ExitCode::SUCCESS
            }
            Err(message) => {
                eprintln!(
                    "keygen: the server would refuse this entry: {message} (--per-minute, --per-day, --scope, --expires-in)"
                );
                ExitCode::from(2)
            }
        };
    }
    match &cli.command {
        Some(Command::Journal { action }) => return journal_cmd::run(action),
        Some(Command::Completions { shell }) => return completions::run(*shell),
        Some(Command::Man) => return man_page::run(),
        Some(Command::Healthcheck { url, timeout }) => {
            return healthcheck::run(&cli, url.as_deref(), Duration::from_secs(*timeout));
        }
        Some(Command::Keygen { .. }) | None => {}
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

/// Writes a generated text on stdout. A reader that stops early (`| head`)
/// is no failure; `print!` would panic on the closed pipe.
fn print(text: &[u8]) -> ExitCode {
    let mut stdout = io::stdout().lock();
    match stdout.write_all(text).and_then(|()| stdout.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cannot write to stdout: {e}");
            ExitCode::FAILURE
        }
    }
}
