//! The one way a test gets a temporary directory.

use std::path::PathBuf;

/// A fresh, empty directory path (not created) under the system's
/// temporary one, unique to this process and `name`: whatever an earlier
/// run left there is removed first. Tests of one binary run in parallel
/// threads of one process, so `name` must differ between tests.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("petstore-core-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}
