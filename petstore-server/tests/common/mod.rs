//! Black-box test harness: spawns the `petstore-server` binary and talks
//! HTTP/1.1 to it over plain `std::net::TcpStream`s, so every test controls
//! the exact bytes on the wire.
//!
//! | file | holds |
//! |---|---|
//! | `mod.rs` | constants, keys files, `wait_until` |
//! | `temp_dir.rs` | `TempDir`: a test's own directory, removed on drop |
//! | `server.rs` | `ServerBuilder`, `Server`: a real server process, its output, its end |
//! | `client.rs` | `Conn`, `Response`, `Headers`: one client connection and what it reads |
//! | `assert.rs` | assertions on error bodies and rate-limit headers |
//! | `postgres.rs`, `redis.rs` | private PostgreSQL and Redis instances |
//! | `haproxy.rs` | `Haproxy`: HAProxy on a test's configuration |
//! | `events.rs` | the feed of events as a client reads it: a list and its cursor, the feed followed |
//! | `orders.rs` | orders' keys and requests, and the scenarios one node and replicas share |
//! | `transport.rs` | HTTP/2 and TLS through hyper's client; a test certificate authority |

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub mod redis;

mod assert;
mod client;
mod server;
mod temp_dir;

// Not every test binary uses every part.
#[allow(unused_imports)]
pub use assert::*;
#[allow(unused_imports)]
pub use client::*;
#[allow(unused_imports)]
pub use server::*;
pub use temp_dir::TempDir;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

pub mod events;
pub mod haproxy;
pub mod orders;
pub mod postgres;
pub mod transport;

/// The server binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_petstore-server");

/// How long the server may take to print its `listening on` line.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);

/// Read timeout of an ordinary request.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Enterprise key with limits no test reaches.
pub const KEY: &str = "test-key-main";
/// Free-plan key; the default keys file overrides the free plan to 3/min.
pub const FREE_KEY: &str = "test-key-free";
/// Pro-plan key stored in the keys file only as its SHA-256.
pub const HASHED_KEY: &str = "test-key-hashed";

/// The exact `WWW-Authenticate` of a request without credentials.
pub const CHALLENGE: &str = r#"Bearer realm="petstore""#;
/// The exact `WWW-Authenticate` of a request with a bad or unknown key.
pub const CHALLENGE_INVALID: &str = r#"Bearer realm="petstore", error="invalid_token""#;

/// Lower-case hex SHA-256 of `s`.
pub fn sha256_hex(s: &str) -> String {
    let digest = Sha256::digest(s.as_bytes());
    let mut out = String::with_capacity(64);
    for b in digest {
        write!(out, "{b:02x}").unwrap();
    }
    out
}

/// The keys file most tests run with.
pub fn default_keys() -> Value {
    json!({
        "keys": [
            {"name": "main", "key": KEY, "plan": "enterprise",
             "perMinute": 1_000_000, "perDay": 100_000_000},
            {"name": "free", "key": FREE_KEY, "plan": "free"},
            {"name": "hashed", "sha256": sha256_hex(HASHED_KEY), "plan": "pro",
             "expiresAt": "2099-01-01T00:00:00Z"}
        ],
        "plans": {"free": {"perMinute": 3, "perDay": 1000}},
        "ban": {"strikes": 3, "windowSeconds": 60, "banSeconds": 600},
        "anonymousPerMinute": 1000
    })
}

/// Seconds since the Unix epoch.
pub fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A loopback port that was free a moment ago (a private PostgreSQL, a
/// replica that must come back on its own port).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Polls `cond` every 20 ms until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

#[derive(Debug, Clone)]
enum KeysSpec {
    None,
    Json(Value),
    Text(String),
    Path(PathBuf),
}
