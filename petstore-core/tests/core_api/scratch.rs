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

/// `journal` without its time records (a batch starts with one when its
/// second is new): a test that counts lines or cuts at offsets reads the
/// rest, the same whichever second its batches fell in. A journal
/// without them is what a release before events wrote, and opens the same.
// `fifo_journal` shares this file and needs only `scratch`.
#[allow(dead_code)]
pub fn without_times(journal: &[u8]) -> Vec<u8> {
    journal
        .split_inclusive(|b| *b == b'\n')
        .filter(|line| !line.starts_with(br#"{"time":"#))
        .flatten()
        .copied()
        .collect()
}

/// Rewrites the journal in `dir` [`without_times`].
#[allow(dead_code)]
pub fn strip_times(dir: &std::path::Path) {
    let path = dir.join(petstore_core::journal::JOURNAL_FILE);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, without_times(&bytes)).unwrap();
}
