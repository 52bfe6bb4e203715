//! A journal path that is a FIFO or a device: refused, never read (a
//! read of a FIFO would wait forever).
//!
//! A test binary of its own, not a module of `core_api`: it runs
//! `mkfifo`, and a spawned child holds a copy of the parent's open files
//! until it executes its program. A test beside it that closes a
//! journal's directory and opens it again could then find the directory
//! still locked by that copy, on a machine slow enough to stretch the
//! window.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "core_api/scratch.rs"]
mod scratch;

use std::fs;

use petstore_core::{
    journal::{check_journal, repair_journal, JOURNAL_FILE},
    Inventory, JournalOptions, OpenError,
};

use scratch::scratch;

/// Runs `f` on a thread of its own and gives its result, or fails when it
/// does not return within a bound far above its real cost: a reader stuck
/// on a FIFO never returns.
fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("{what} hung"))
}

#[test]
fn a_journal_that_is_a_fifo_or_a_device_is_refused_not_read() {
    let fifo_dir = scratch("fifo-journal");
    fs::create_dir_all(&fifo_dir).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(fifo_dir.join(JOURNAL_FILE))
        .status()
        .expect("run mkfifo");
    assert!(status.success());
    let zero_dir = scratch("zero-journal");
    fs::create_dir_all(&zero_dir).unwrap();
    std::os::unix::fs::symlink("/dev/zero", zero_dir.join(JOURNAL_FILE)).unwrap();
    for dir in [fifo_dir, zero_dir] {
        let refused = |e: OpenError| match e {
            OpenError::Io { source, .. } => {
                assert_eq!(source.kind(), std::io::ErrorKind::InvalidInput, "{source}");
                assert!(
                    source.to_string().contains("not a regular file"),
                    "{source}"
                );
            }
            other => panic!("{other:?}"),
        };
        let d = dir.clone();
        let opened = bounded("Inventory::open", move || {
            Inventory::open(&d, JournalOptions::default()).err()
        });
        refused(opened.expect("opened a journal that is not a regular file"));
        let d = dir.clone();
        let checked = bounded("check_journal", move || check_journal(&d).err());
        refused(checked.expect("checked a journal that is not a regular file"));
        let d = dir.clone();
        let repaired = bounded("repair_journal", move || repair_journal(&d).err());
        refused(repaired.expect("repaired a journal that is not a regular file"));
        fs::remove_dir_all(&dir).unwrap();
    }
}
