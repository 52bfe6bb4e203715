//! The data directory's lock: one process per directory, because a
//! second writer would give out the same ids.

use std::fs::{self, File, OpenOptions};
use std::path::Path;

use super::files::LOCK_FILE;
use crate::inventory::error::OpenError;

/// Takes the data directory's lock (creating [`LOCK_FILE`]); the lock
/// lasts as long as the returned file is open.
pub(crate) fn lock_dir(dir: &Path) -> Result<File, OpenError> {
    let lock = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock)
        .map_err(|source| OpenError::Io {
            path: lock.clone(),
            source,
        })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(fs::TryLockError::WouldBlock) => Err(OpenError::Locked {
            dir: dir.to_path_buf(),
            lock,
        }),
        Err(fs::TryLockError::Error(source)) => Err(OpenError::Io { path: lock, source }),
    }
}
