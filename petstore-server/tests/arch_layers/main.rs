//! The architecture test: the top-level folders (and files) of a crate's
//! `src/` are rooms, each with one line of its `//!` overview saying what
//! it may import (``May use: `util`, `keys/mod.rs`.``), and no import runs
//! in a circle, between rooms or between files. The rules, what counts as
//! an import, and every check made in each crate: docs/architecture.md,
//! "The rooms and their rules".
//!
//! | file | holds |
//! |---|---|
//! | `tree.rs` | a crate's files, parsed: modules, macros, rules, imports |
//! | `reader.rs` | what one file imports and names (a `syn` visitor) |
//! | `rules.rs` | the `May use` line and a file's module path |
//! | `checks.rs` | the checks, and the circles among rooms and files |
//! | `self_tests.rs` | each check failing on a small tree that breaks it |

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod checks;
mod reader;
mod rules;
mod self_tests;
mod tree;

use std::path::Path;

use tree::{Lines, Tree};

fn src(krate: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(krate)
        .join("src")
}

#[test]
fn the_server_keeps_its_rooms_and_seams() {
    let tree = Tree::read(&src("petstore-server"));
    assert!(tree.files.len() > 50, "read {} files", tree.files.len());
    let mut faults = tree.rule_faults(Lines::Required);
    faults.extend(tree.circles());
    faults.extend(tree.sockets_in("http"));
    faults.extend(tree.backend_names());
    faults.extend(tree.binary_faults());
    assert!(
        faults.is_empty(),
        "architecture faults:\n{}",
        faults.join("\n")
    );
}

#[test]
fn the_core_keeps_its_rooms_and_has_no_import_circle() {
    let tree = Tree::read(&src("petstore-core"));
    assert!(tree.files.len() > 10, "read {} files", tree.files.len());
    let mut faults = tree.rule_faults(Lines::RequiredInFolders);
    faults.extend(tree.circles());
    assert!(faults.is_empty(), "core faults:\n{}", faults.join("\n"));
}

/// Time is a room of its own: `clock.rs` uses nothing, so the inventory,
/// the journal and idempotency read the time without being allowed into
/// the rate limiter's room, which only the limiter itself needs.
#[test]
fn the_core_keeps_time_in_a_room_of_its_own() {
    let tree = Tree::read(&src("petstore-core"));
    let clock = tree
        .files
        .get("clock.rs")
        .expect("petstore-core/src/clock.rs, the clock's room");
    assert!(
        matches!(&clock.rule, Some((_, Ok(entries))) if entries.is_empty()),
        "clock.rs must carry `//! May use: nothing.`"
    );
    for (room, rule_file) in tree.rooms() {
        let Some((line, Ok(entries))) = &tree.files[&rule_file].rule else {
            continue;
        };
        assert!(
            room == "limit" || !entries.iter().any(|e| e == "limit"),
            "{rule_file}:{line}: room `{room}` may use `limit`; the time it reads is `clock.rs`'s"
        );
    }
}
