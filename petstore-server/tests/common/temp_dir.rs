//! A temporary directory of a test's own: the one way the tests make one.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsStr;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{SystemTime, UNIX_EPOCH};

/// A fresh, empty directory under the system temp dir, removed with all
/// it holds when dropped.
///
/// Its name joins the process id, a counter and the clock's nanoseconds,
/// so that tests running beside each other in one binary, and binaries
/// running at once, never share one, and a leftover of an earlier run
/// (a pid reused) is not picked up. Dropped while the test panics, it is
/// kept and its path printed: what the server wrote there (its journal,
/// its state file) is what explains the failure.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates the directory.
    pub fn new() -> TempDir {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let path =
            std::env::temp_dir().join(format!("petstore-it-{}-{n}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
        TempDir { path }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Default for TempDir {
    fn default() -> Self {
        TempDir::new()
    }
}

impl Deref for TempDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

// As an argument of a command (`Command::arg`), as a `PathBuf` is.
impl AsRef<OsStr> for TempDir {
    fn as_ref(&self) -> &OsStr {
        self.path.as_os_str()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!("kept for inspection: {}", self.path.display());
        } else {
            // Best effort: a test that already removed it, or left a
            // mount point busy, must not fail on its way out.
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}
