//! Command-line flags, each with an environment variable, grouped under
//! the headings `--help`, the man page and the shell completions show.
//!
//! A flag's doc comment is its help: the first paragraph is the one line
//! of `-h`, the rest adds the details that `--help` and the man page
//! print. Every flag names its heading (`help_heading`): a flag without
//! one would land under a bare "Options", which `tests/ops/command_line.rs`
//! refuses.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use petstore_core::{FsyncPolicy, Plan};

use crate::http::DEFAULT_HSTS_MAX_AGE;
use crate::keys::{parse_duration, Scope};
use crate::telemetry::log::Format as LogFormat;

/// Where the server listens, its TLS, and what it tells clients about
/// its address and origins.
const LISTENING: &str = "Listening and TLS";
/// Where the pets are kept and how durably.
const STORAGE: &str = "Storage";
/// Who may call, and where their rate limits are decided.
const RATE_LIMITS: &str = "Keys and rate limits";
/// What one client, or all of them, may take of the server.
const CLIENT_LIMITS: &str = "Limits on clients";
/// Health, metrics, logs and stopping.
const OPERATIONS: &str = "Operations";

/// The petstore HTTP/JSON server.
#[derive(Debug, Parser)]
#[command(name = "petstore-server", version, about, long_about = None)]
pub struct Cli {
    /// A subcommand; without one, the server runs.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Address to listen on, HOST:PORT.
    ///
    /// Port 0 picks a free port; the bound address is printed as
    /// `listening on http://IP:PORT`. HTTP/1.1 and HTTP/2 on the same port.
    #[arg(long, env = "PETSTORE_ADDR", default_value = "127.0.0.1:8080",
          value_name = "HOST:PORT", help_heading = LISTENING)]
    pub addr: String,

    /// Serve TLS with this certificate chain (PEM); needs --tls-key.
    ///
    /// The server's certificate first. ALPN offers h2 and http/1.1; TLS
    /// 1.2 and 1.3. SIGHUP reloads it with the key (and the keys file); a
    /// broken pair is reported and the old one stays.
    #[arg(
        long,
        env = "PETSTORE_TLS_CERT",
        value_name = "FILE",
        requires = "tls_key",
        help_heading = LISTENING
    )]
    pub tls_cert: Option<PathBuf>,

    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(
        long,
        env = "PETSTORE_TLS_KEY",
        value_name = "FILE",
        requires = "tls_cert",
        help_heading = LISTENING
    )]
    pub tls_key: Option<PathBuf>,

    /// Seconds a browser is told to use HTTPS only; 0 sends none.
    ///
    /// `Strict-Transport-Security: max-age=…` on every TLS response, never
    /// over plaintext. Default: two years.
    #[arg(long, env = "PETSTORE_HSTS_MAX_AGE", value_name = "SECONDS",
          default_value_t = DEFAULT_HSTS_MAX_AGE, help_heading = LISTENING)]
    pub hsts_max_age: u64,

    /// Public base address including `/v1`, used in `Location` and `Link`.
    ///
    /// For example `https://petstore.example.com/v1`. Default: relative
    /// paths (`/v1/...`).
    #[arg(long, env = "PETSTORE_BASE_URL", value_parser = parse_base_url,
          value_name = "URL", help_heading = LISTENING)]
    pub base_url: Option<String>,

    /// An origin allowed by CORS, e.g. `https://shop.example.com`.
    ///
    /// Repeatable; in the environment variable, comma-separated. CORS is
    /// off without it.
    #[arg(
        long = "cors-origin",
        env = "PETSTORE_CORS_ORIGINS",
        value_delimiter = ',',
        value_name = "ORIGIN",
        help_heading = LISTENING
    )]
    pub cors_origins: Vec<String>,

    /// Every connection starts with a PROXY protocol header (v1 or v2).
    ///
    /// As a load balancer's `send-proxy-v2` sends it; its source address is
    /// the client's (anonymous limits, per-address cap, logs). A connection
    /// without one is closed.
    #[arg(long, env = "PETSTORE_PROXY_PROTOCOL", help_heading = LISTENING)]
    pub proxy_protocol: bool,

    /// Directory of the durable inventory (`pets.journal`), the limiter
    /// state and the development key.
    ///
    /// Created if missing.
    #[arg(
        long,
        env = "PETSTORE_DATA",
        default_value = "./petstore-data",
        value_name = "DIR",
        conflicts_with = "in_memory",
        help_heading = STORAGE
    )]
    pub data: PathBuf,

    /// How long the feed of events (beta) keeps an event.
    ///
    /// A cursor older than this is 410 `cursor_expired`. Seconds, or a
    /// number with a unit: `90s`, `30m`, `36h`, `7d`. Each event kept
    /// costs 16 bytes of memory.
    #[arg(long, env = "PETSTORE_EVENTS_RETENTION", default_value = "7d",
          value_parser = retention, value_name = "DURATION", help_heading = STORAGE)]
    pub events_retention: Duration,

    /// Compact the journal once it is over this size (and --compact-ratio
    /// times its last snapshot).
    ///
    /// Bytes, or a number with a unit: `512KiB`, `64MiB`, `2GiB`. A
    /// compaction replaces the history with a snapshot of what is held,
    /// while writes go on; `journal compact` runs one on a stopped
    /// server's directory.
    #[arg(long, env = "PETSTORE_COMPACT_MIN_SIZE", default_value = "64MiB",
          value_parser = size, value_name = "SIZE", help_heading = STORAGE)]
    pub compact_min_size: u64,

    /// Compact the journal once it is this many times its last snapshot
    /// (and over --compact-min-size).
    ///
    /// 1 compacts whenever anything was written since the last snapshot
    /// (checked each second): for tests of compaction under load.
    #[arg(long, env = "PETSTORE_COMPACT_RATIO", default_value_t = 2,
          value_parser = clap::value_parser!(u32).range(1..=1000),
          value_name = "N", help_heading = STORAGE)]
    pub compact_ratio: u32,

    /// Keep the inventory in memory only: pets are lost when the server
    /// stops.
    ///
    /// For tests and demos.
    #[arg(long, env = "PETSTORE_IN_MEMORY", help_heading = STORAGE)]
    pub in_memory: bool,

    /// Keep the inventory in PostgreSQL, shared by any number of replicas.
    ///
    /// A URL such as `postgres://user:password@host/db`, or a `key=value`
    /// connection string. Each replica keeps a read copy in memory. Cannot
    /// be combined with --data or --in-memory.
    #[arg(long, env = "PETSTORE_POSTGRES", value_name = "URL",
          conflicts_with_all = ["data", "in_memory"], help_heading = STORAGE)]
    pub postgres: Option<String>,

    /// When created pets reach the disk: `always` or `never`.
    ///
    /// `always`: fsync before the 201, a pet survives a crash of the
    /// process or the machine. `never`: the OS flushes when it likes, so
    /// pets created in the last seconds can be lost on power loss (for
    /// benchmarks).
    #[arg(long, env = "PETSTORE_FSYNC", default_value = "always", value_parser = parse_fsync,
          value_name = "always|never", help_heading = STORAGE)]
    pub fsync: FsyncPolicy,

    /// The JSON keys file; reloaded on SIGHUP.
    ///
    /// Format in docs/contract.md, "Keys and plans". Without it, a random
    /// development key on the `pro` plan is made and printed (and kept in
    /// the data directory, so a restart prints the same one).
    #[arg(long, env = "PETSTORE_KEYS", value_name = "FILE", help_heading = RATE_LIMITS)]
    pub keys: Option<PathBuf>,

    /// Client addresses whose anonymous rate limit is remembered at most.
    ///
    /// About 50 bytes each; under a flood of more addresses the oldest are
    /// forgotten first, and start over with a full bucket.
    #[arg(long, env = "PETSTORE_ANONYMOUS_CAPACITY", default_value_t = 100_000,
          value_parser = clap::value_parser!(u64).range(2..=100_000_000),
          value_name = "N", help_heading = RATE_LIMITS)]
    pub anonymous_capacity: u64,

    /// Share the rate limits with the other replicas in this Redis.
    ///
    /// `redis://host:port/db`: the limits of keys and client addresses, one
    /// plan across all replicas. When Redis does not answer within
    /// --redis-timeout, each replica limits alone at the full plan until
    /// it does.
    #[arg(long, env = "PETSTORE_REDIS", value_name = "URL", help_heading = RATE_LIMITS)]
    pub redis: Option<String>,

    /// Share the rate limits in a Redis Cluster instead (its seed nodes).
    ///
    /// `redis://host:port`, comma-separated. Each key's state stays in one
    /// hash slot; a shard that does not answer makes only the keys it holds
    /// fall back to each replica's own limits. Cannot be combined with
    /// --redis.
    #[arg(
        long,
        env = "PETSTORE_REDIS_CLUSTER",
        value_name = "URL[,URL...]",
        value_delimiter = ',',
        conflicts_with = "redis",
        help_heading = RATE_LIMITS
    )]
    pub redis_cluster: Vec<String>,

    /// Milliseconds a request waits for Redis before its replica decides
    /// alone.
    ///
    /// With --redis or --redis-cluster; also the bound of a connection
    /// attempt. Raise it for a Redis far away on the network.
    #[arg(long, env = "PETSTORE_REDIS_TIMEOUT", default_value_t = 50, value_name = "MS",
          value_parser = clap::value_parser!(u64).range(1..=10_000),
          help_heading = RATE_LIMITS)]
    pub redis_timeout: u64,

    /// Most connections served at once; more wait in the listen backlog.
    #[arg(long, env = "PETSTORE_MAX_CONNECTIONS", default_value_t = 1024,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000),
          value_name = "N", help_heading = CLIENT_LIMITS)]
    pub max_connections: u64,

    /// Most connections served at once from one client address.
    ///
    /// One more is closed as soon as it is accepted. Default: an eighth of
    /// --max-connections (at least 1), so one address cannot take every
    /// slot.
    #[arg(long, env = "PETSTORE_MAX_CONNECTIONS_PER_ADDRESS",
          value_parser = clap::value_parser!(u64).range(1..=1_000_000),
          value_name = "N", help_heading = CLIENT_LIMITS)]
    pub max_connections_per_address: Option<u64>,

    /// Seconds a client has to send a request's headers; then the
    /// connection is closed.
    ///
    /// Also how long an idle keep-alive connection may wait before its next
    /// request.
    #[arg(long, env = "PETSTORE_HEADER_TIMEOUT", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=3600),
          value_name = "SECONDS", help_heading = CLIENT_LIMITS)]
    pub header_timeout: u64,

    /// Seconds a client has to send a request's body; then 408.
    #[arg(long, env = "PETSTORE_BODY_TIMEOUT", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=3600),
          value_name = "SECONDS", help_heading = CLIENT_LIMITS)]
    pub body_timeout: u64,

    /// Seconds a write to a client may make no progress; then the
    /// connection is closed.
    ///
    /// A client that stopped reading cannot hold a connection forever.
    #[arg(long, env = "PETSTORE_WRITE_TIMEOUT", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3600),
          value_name = "SECONDS", help_heading = CLIENT_LIMITS)]
    pub write_timeout: u64,

    /// Serve `/metrics` and `/healthz` on this second address instead.
    ///
    /// The public address then answers them 404, so a public front end
    /// cannot expose them. Never expects a PROXY header.
    #[arg(long, env = "PETSTORE_ADMIN_ADDR", value_name = "HOST:PORT",
          help_heading = OPERATIONS)]
    pub admin_addr: Option<String>,

    /// Serve Prometheus metrics at `GET /metrics` (no key needed).
    #[arg(long, env = "PETSTORE_METRICS", default_value_t = true, action = clap::ArgAction::Set,
          value_name = "BOOL", help_heading = OPERATIONS)]
    pub metrics: bool,

    /// Write one JSON line per request on stderr.
    ///
    /// Time, method, route template, status, microseconds, key name, client
    /// address; never the key.
    #[arg(long, env = "PETSTORE_ACCESS_LOG", help_heading = OPERATIONS)]
    pub access_log: bool,

    /// Do not serve the docs page (`GET /docs`): 404, as any unknown path.
    ///
    /// The page is Swagger UI on the served OpenAPI document.
    #[arg(long, env = "PETSTORE_NO_DOCS", help_heading = OPERATIONS)]
    pub no_docs: bool,

    /// Log lines as `text` or `json`.
    ///
    /// `text`: `TIME LEVEL message`. `json`: one object per line with `ts`,
    /// `level`, `msg`; access-log lines too, with their fields.
    #[arg(long, env = "PETSTORE_LOG_FORMAT", default_value = "text", value_parser = parse_log_format,
          value_name = "text|json", help_heading = OPERATIONS)]
    pub log_format: LogFormat,

    /// Seconds to drain on SIGTERM or SIGINT before stopping.
    ///
    /// `/healthz` answers 503 `draining` (so a load balancer takes the
    /// instance out), every response says `Connection: close`, new
    /// connections are still served. Then the listener closes and the
    /// requests in flight finish. A second signal ends the drain at once.
    /// Behind a balancer: more than its time to notice (HAProxy: fall x
    /// inter).
    #[arg(long, env = "PETSTORE_SHUTDOWN_DELAY", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=3600),
          value_name = "SECONDS", help_heading = OPERATIONS)]
    pub shutdown_delay: u64,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a new random API key and the keys-file entry (with its
    /// SHA-256, not the key) to paste into the keys file; or, with
    /// --rotate, add a new key to an entry of a keys file in place.
    Keygen {
        /// The plan: free, pro, business or enterprise.
        #[arg(long, value_parser = parse_plan, required_unless_present = "rotate",
              conflicts_with = "rotate")]
        plan: Option<Plan>,
        /// The entry's name, logged instead of the key.
        #[arg(long, required_unless_present = "rotate", conflicts_with = "rotate")]
        name: Option<String>,
        /// The entry's own per-minute limit (required with enterprise).
        #[arg(long, conflicts_with = "rotate")]
        per_minute: Option<u32>,
        /// The entry's own per-day limit (required with enterprise).
        #[arg(long, conflicts_with = "rotate")]
        per_day: Option<u32>,
        /// A scope of the new entry: pets:read, pets:write, orders,
        /// orders:all or events (repeatable; without any, all of them).
        #[arg(long = "scope", value_name = "SCOPE", value_parser = parse_scope,
              conflicts_with = "rotate")]
        scopes: Vec<Scope>,
        /// The entry's key expires after this long (90d, 12h, 30m, 45s):
        /// its expiresAt. With --rotate, sets the rotated entry's.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        expires_in: Option<Duration>,
        /// Add a new key to the entry NAME of the keys file --keys, in
        /// place (both keys valid until the old one is removed), and
        /// print the new key once.
        #[arg(long, value_name = "NAME", requires = "keys_file")]
        rotate: Option<String>,
        /// The keys file of --rotate (written atomically).
        #[arg(
            long = "keys",
            id = "keys_file",
            value_name = "FILE",
            requires = "rotate"
        )]
        keys_file: Option<PathBuf>,
    },
    /// Check or repair the journal of a data directory, for when the
    /// server refuses to start on a damaged one.
    Journal {
        /// What to do.
        #[command(subcommand)]
        action: JournalAction,
    },
    /// Print the completion script of a shell, made from these flags.
    ///
    /// For example `petstore-server completions bash >
    /// /etc/bash_completion.d/petstore-server`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), made from these flags.
    ///
    /// For example `petstore-server man | man -l -`.
    Man,
    /// Ask a running server's `GET /healthz`; exit 0 when it answers 200.
    ///
    /// For a container's health check, where there may be no curl. Plain
    /// HTTP only. Without --url it asks --admin-addr if set, else --addr
    /// (with a PROXY header under --proxy-protocol), read from the same
    /// flags or environment variables as the server's, so in a container
    /// configured by `PETSTORE_*` variables it finds the server alone; a
    /// wildcard host (`0.0.0.0`, `[::]`) is asked on loopback. Exit status:
    /// 0 healthy, 1 not (a 503 while draining or degraded, no answer, a
    /// timeout), 2 nothing it can ask (an https URL, or TLS on --addr
    /// without --admin-addr).
    Healthcheck {
        /// The health URL, `http://HOST:PORT/healthz`.
        #[arg(long, value_name = "URL")]
        url: Option<String>,
        /// Seconds the whole check may take.
        #[arg(long, default_value_t = 5, value_name = "SECONDS",
              value_parser = clap::value_parser!(u64).range(1..=3600))]
        timeout: u64,
    },
}

/// `petstore-server journal ...`.
#[derive(Debug, Subcommand)]
pub enum JournalAction {
    /// List every record that does not check out; change nothing. Exit
    /// status 0 when the server can start on the journal, 1 when it is
    /// damaged, 2 when it cannot be read.
    Check {
        /// The data directory.
        #[arg(long, env = "PETSTORE_DATA", default_value = "./petstore-data")]
        data: PathBuf,
    },
    /// Move the first damaged record, and every record after it, into a
    /// side file in the data directory, and print what was moved. Refuses
    /// while a server uses the directory.
    Repair {
        /// The data directory.
        #[arg(long, env = "PETSTORE_DATA", default_value = "./petstore-data")]
        data: PathBuf,
    },
    /// Replace the journal's history with a snapshot of what it holds, on
    /// a stopped server's directory (a running server compacts by
    /// itself). Refuses while a server uses the directory.
    Compact {
        /// The data directory.
        #[arg(long, env = "PETSTORE_DATA", default_value = "./petstore-data")]
        data: PathBuf,
    },
}

fn parse_scope(s: &str) -> Result<Scope, String> {
    Scope::parse(s).ok_or_else(|| {
        let known: Vec<&str> = Scope::ALL.iter().map(|s| s.as_str()).collect();
        format!("not a scope (the scopes are {})", known.join(", "))
    })
}

fn parse_plan(s: &str) -> Result<Plan, String> {
    s.parse()
        .map_err(|e: petstore_core::limit::UnknownPlan| e.to_string())
}

fn parse_log_format(s: &str) -> Result<LogFormat, String> {
    match s {
        "text" => Ok(LogFormat::Text),
        "json" => Ok(LogFormat::Json),
        _ => Err("must be text or json".into()),
    }
}

fn parse_fsync(s: &str) -> Result<FsyncPolicy, String> {
    match s {
        "always" => Ok(FsyncPolicy::Always),
        "never" => Ok(FsyncPolicy::Never),
        _ => Err("must be always or never".into()),
    }
}

fn parse_base_url(s: &str) -> Result<String, String> {
    let trimmed = s.trim_end_matches('/');
    let scheme_ok = trimmed.starts_with("http://")
        || trimmed.starts_with("https://")
        || trimmed.starts_with('/');
    let chars_ok = trimmed
        .bytes()
        .all(|b| b.is_ascii_graphic() && !matches!(b, b'<' | b'>' | b'"' | b'?' | b'#'));
    if scheme_ok && chars_ok && !trimmed.is_empty() {
        Ok(trimmed.to_owned())
    } else {
        Err("must be an http(s) URL or an absolute path, without query or fragment, e.g. https://petstore.example.com/v1".into())
    }
}

/// `--events-retention`: seconds, or a number with `s`, `m`, `h` or `d`;
/// from one second to 366 days.
/// A size in bytes: digits, then nothing or `KiB`, `MiB`, `GiB`.
fn size(text: &str) -> Result<u64, String> {
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, ""),
    };
    let shift = match unit {
        "" => 0,
        "KiB" => 10,
        "MiB" => 20,
        "GiB" => 30,
        _ => {
            return Err(format!(
                "{text:?}: a number of bytes, or with KiB, MiB or GiB (64MiB)"
            ))
        }
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .filter(|bytes| (1..=1 << 50).contains(bytes))
        .ok_or_else(|| format!("{text:?}: from 1 byte to 1048576GiB"))
}

fn retention(text: &str) -> Result<Duration, String> {
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let per = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => {
            return Err(format!(
                "{text:?}: a number of seconds, or with s, m, h or d (7d)"
            ))
        }
    };
    let secs = digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(per))
        .filter(|secs| (1..=366 * 86_400).contains(secs))
        .ok_or_else(|| format!("{text:?}: from 1s to 366d"))?;
    Ok(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_retention_reads_seconds_or_a_unit() {
        let secs = |text| retention(text).map(|d| d.as_secs());
        assert_eq!(secs("7d"), Ok(604_800));
        assert_eq!(secs("36h"), Ok(129_600));
        assert_eq!(secs("90"), Ok(90));
        assert_eq!(secs("30m"), Ok(1_800));
        for bad in [
            "",
            "0",
            "7w",
            "d",
            "-1s",
            "367d",
            "1.5h",
            "99999999999999999999d",
        ] {
            assert!(retention(bad).is_err(), "{bad}");
        }
        let cli = Cli::try_parse_from(["petstore-server"]).unwrap();
        assert_eq!(cli.events_retention.as_secs(), 604_800);
        assert_eq!((cli.compact_min_size, cli.compact_ratio), (64 << 20, 2));
    }

    #[test]
    fn sizes_read_bytes_or_a_binary_unit() {
        assert_eq!(size("64MiB"), Ok(64 << 20));
        assert_eq!(size("512KiB"), Ok(512 << 10));
        assert_eq!(size("2GiB"), Ok(2 << 30));
        assert_eq!(size("1000"), Ok(1000));
        for bad in ["", "0", "64MB", "MiB", "-1", "1.5GiB", "99999999999GiB"] {
            assert!(size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn flags_parse() {
        let cli = Cli::try_parse_from([
            "petstore-server",
            "--addr",
            "127.0.0.1:0",
            "--cors-origin",
            "https://a",
            "--cors-origin",
            "https://b",
        ])
        .unwrap();
        assert_eq!(cli.cors_origins, ["https://a", "https://b"]);
        assert!(Cli::try_parse_from(["petstore-server", "--header-timeout", "0"]).is_err());
        assert_eq!(cli.fsync, FsyncPolicy::Always);
        assert!(cli.metrics && !cli.access_log);
        assert_eq!(cli.hsts_max_age, 63_072_000);
        let hsts = Cli::try_parse_from(["petstore-server", "--hsts-max-age", "0"]).unwrap();
        assert_eq!(hsts.hsts_max_age, 0);
        let quiet =
            Cli::try_parse_from(["petstore-server", "--metrics", "false", "--access-log"]).unwrap();
        assert!(!quiet.metrics && quiet.access_log);
        let never = Cli::try_parse_from(["petstore-server", "--fsync", "never"]).unwrap();
        assert_eq!(never.fsync, FsyncPolicy::Never);
        assert!(Cli::try_parse_from(["petstore-server", "--fsync", "sometimes"]).is_err());
        assert!(Cli::try_parse_from(["petstore-server", "--in-memory", "--data", "x"]).is_err());
        let pg = Cli::try_parse_from(["petstore-server", "--postgres", "postgres://h/db"]).unwrap();
        assert_eq!(pg.postgres.as_deref(), Some("postgres://h/db"));
        for other in [&["--data", "x"][..], &["--in-memory"][..]] {
            let args = ["petstore-server", "--postgres", "postgres://h/db"];
            let refused = Cli::try_parse_from(args.iter().chain(other)).unwrap_err();
            assert_eq!(refused.kind(), clap::error::ErrorKind::ArgumentConflict);
        }
        let cluster = Cli::try_parse_from([
            "petstore-server",
            "--redis-cluster",
            "redis://a:7000,redis://b:7001",
        ])
        .unwrap();
        assert_eq!(cluster.redis_cluster, ["redis://a:7000", "redis://b:7001"]);
        let both = [
            "petstore-server",
            "--redis",
            "redis://a",
            "--redis-cluster",
            "redis://b",
        ];
        let refused = Cli::try_parse_from(both).unwrap_err();
        assert_eq!(refused.kind(), clap::error::ErrorKind::ArgumentConflict);
        let gen =
            Cli::try_parse_from(["petstore-server", "keygen", "--plan", "pro", "--name", "x"])
                .unwrap();
        assert!(matches!(
            gen.command,
            Some(Command::Keygen {
                plan: Some(Plan::Pro),
                ..
            })
        ));
        let check =
            Cli::try_parse_from(["petstore-server", "journal", "check", "--data", "d"]).unwrap();
        assert!(matches!(
            check.command,
            Some(Command::Journal {
                action: JournalAction::Check { ref data }
            }) if data == std::path::Path::new("d")
        ));
        assert!(matches!(
            Cli::try_parse_from(["petstore-server", "journal", "repair"])
                .unwrap()
                .command,
            Some(Command::Journal {
                action: JournalAction::Repair { .. }
            })
        ));
        assert!(Cli::try_parse_from(["petstore-server", "journal", "mend"]).is_err());
        assert!(Cli::try_parse_from([
            "petstore-server",
            "keygen",
            "--plan",
            "gold",
            "--name",
            "x"
        ])
        .is_err());
    }

    #[test]
    fn base_urls() {
        assert_eq!(
            parse_base_url("https://x.example/v1/").as_deref(),
            Ok("https://x.example/v1")
        );
        assert_eq!(parse_base_url("/api/v1").as_deref(), Ok("/api/v1"));
        for bad in ["ftp://x", "https://x/v1?a=b", "https://x y", ""] {
            assert!(parse_base_url(bad).is_err(), "{bad}");
        }
    }
}
