//! The architecture test: the top-level folders (and files) of a crate's
//! `src/` are rooms, each with one line saying what it may import, and
//! no import runs in a circle, between rooms or between files.
//!
//! The rules are not written here: each room's `mod.rs` (or the file
//! itself, for a one-file room) carries one line of its `//!` overview,
//! ``May use: `util`, `keys/mod.rs`.``, whose entries are a room
//! (`util`: any file in it), a file relative to `src/` (`keys/mod.rs`:
//! that file only, which is how "from outside, only `mod.rs` is visible"
//! is written), or `*`; or the words `nothing.`.
//!
//! The sources are parsed with `syn`. An import is a `use` or a path in
//! code (macro arguments included) that starts with `crate`, `super` or
//! `self`, or a `use` of a child module, resolved to the file of the
//! deepest module it names; an exported macro resolves to the file that
//! defines it. Test code (`#[cfg(test)]` items and modules, `tests/`) may
//! use anything.
//!
//! Checked in `petstore-server/src`: every room has its line and keeps
//! it; rooms and files form no circle; `http/` names no socket and no
//! runtime; backends are named only in `store/`, `ratelimit/` and `cli/`;
//! `main.rs` uses only `cli`. In `petstore-core/src`: the same rules and
//! circles, where a folder room must carry its line and a one-file room
//! may; and the clock is a room of its own (`clock.rs`) that no room has
//! to reach through the rate limiter's.
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
