//! The checker's own tests: each check fails on a small tree that
//! breaks its rule, and passes on one that keeps it.

use super::tree::{Lines, Tree};

fn fake(files: &[(&str, &str)]) -> Tree {
    Tree::parse(files)
}

#[test]
fn a_forbidden_import_is_found_in_a_group_and_not_in_comments_strings_or_tests() {
    let tree = fake(&[
        ("lib.rs", "pub mod util; pub mod http; pub mod store;"),
        ("util/mod.rs", "//! May use: nothing.\npub mod hex;"),
        (
            "util/hex.rs",
            "// crate::http::x\nconst S: &str = \"crate::http\";\n#[cfg(test)]\nmod tests { use crate::http::Thing; }",
        ),
        ("store/mod.rs", "//! May use: nothing.\npub mod postgres;"),
        ("store/postgres.rs", "pub struct Pg;"),
        (
            "http/mod.rs",
            "//! May use: `util`, `store/mod.rs`.\nuse crate::{util::hex,\n    store::{postgres::Pg}};",
        ),
    ]);
    assert_eq!(
        tree.rule_faults(Lines::Required),
        ["http/mod.rs:3: imports `store::postgres::Pg` (store/postgres.rs); room `http` may use: util, store/mod.rs (http/mod.rs)"]
    );
    assert!(tree.circles().is_empty());
}

#[test]
fn a_super_path_and_an_exported_macro_resolve_to_their_files() {
    let tree = fake(&[
        ("lib.rs", "pub mod telemetry; pub mod util;"),
        ("telemetry/mod.rs", "//! May use: `util`.\npub mod log;"),
        (
            "telemetry/log.rs",
            "#[macro_export]\nmacro_rules! log_info { () => {} }",
        ),
        ("util/mod.rs", "//! May use: nothing.\npub mod a;"),
        (
            "util/a.rs",
            "fn f() { let _ = super::super::telemetry::X; crate::log_info!(); }",
        ),
    ]);
    let faults = tree.rule_faults(Lines::Required);
    assert_eq!(faults.len(), 2, "{faults:?}");
    assert!(faults[0].starts_with("util/a.rs:1: imports `log_info` (telemetry/log.rs)"));
    assert!(faults[1].starts_with("util/a.rs:1: imports `telemetry::X` (telemetry/mod.rs)"));
}

#[test]
fn a_room_without_its_line_or_with_a_bad_one_fails() {
    let files = [
        ("lib.rs", "mod a; mod b; mod c; mod d;"),
        ("a/mod.rs", "//! The a room.\nmod x;"),
        ("a/x.rs", ""),
        ("b.rs", ""),
        ("c.rs", "//! May use: util."),
        ("d.rs", "//! May use: `nowhere`."),
    ];
    let faults = fake(&files).rule_faults(Lines::Required);
    assert_eq!(faults.len(), 4, "{faults:?}");
    assert!(
        faults[0].starts_with("a/mod.rs: room `a` has no"),
        "{faults:?}"
    );
    assert!(
        faults[1].starts_with("b.rs: room `b.rs` has no"),
        "{faults:?}"
    );
    assert!(
        faults[2].starts_with("c.rs:1: `May use:` wants"),
        "{faults:?}"
    );
    assert!(
        faults[3].contains("names `nowhere`, neither a room nor a file"),
        "{faults:?}"
    );
    // The core's one-file rooms may go without.
    let faults = fake(&files).rule_faults(Lines::RequiredInFolders);
    assert_eq!(faults.len(), 3, "{faults:?}");
}

#[test]
fn a_circle_among_rooms_fails_even_when_each_import_is_allowed() {
    let tree = fake(&[
        ("lib.rs", "mod keys; mod http;"),
        ("keys/mod.rs", "//! May use: `http`.\nmod table;"),
        ("keys/table.rs", "use crate::http::headers::Quota;"),
        (
            "http/mod.rs",
            "//! May use: `keys/mod.rs`.\nmod headers;\nmod admit;",
        ),
        ("http/headers.rs", "pub struct Quota;"),
        ("http/admit.rs", "\n\nuse crate::keys::Keys;"),
    ]);
    assert!(tree.rule_faults(Lines::Required).is_empty());
    let circles = tree.circles();
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert!(circles[0].starts_with("import circle among rooms: http -> keys -> http ("));
    assert!(circles[0].contains("http/admit.rs:3 imports `keys::Keys` (keys/mod.rs)"));
    assert!(circles[0].contains("keys/table.rs:1 imports `http::headers::Quota` (http/headers.rs)"));
}

#[test]
fn a_circle_among_files_fails_through_a_facade_and_a_child_use() {
    let tree = fake(&[
        ("lib.rs", "pub mod store;"),
        (
            "store/mod.rs",
            "mod journal;\npub use journal::Journal;\npub struct Failed;",
        ),
        (
            "store/journal.rs",
            "use super::Failed;\npub struct Journal;",
        ),
    ]);
    let circles = tree.circles();
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert!(circles[0].contains("store/journal.rs:1 imports `store::Failed` (store/mod.rs)"));
    assert!(circles[0].contains("store/mod.rs:2 imports `store::journal::Journal`"));
}

#[test]
fn a_socket_or_runtime_in_http_fails_and_test_code_may_use_one() {
    let tree = fake(&[
        ("lib.rs", "mod http; mod net;"),
        (
            "http/mod.rs",
            "use std::net::IpAddr;\nuse tokio::{io, net::TcpStream};\n#[cfg(test)]\nmod tests;\nfn f() { let _ = tokio::spawn(async {}); }\n#[cfg(test)]\nfn g() { tokio::runtime::Builder::new_current_thread(); }",
        ),
        ("http/tests.rs", "use hyper_util::rt::TokioIo;"),
        ("net/mod.rs", "use tokio::net::TcpListener;"),
    ]);
    let faults = tree.sockets_in("http");
    assert_eq!(faults.len(), 2, "{faults:?}");
    assert!(faults[0].starts_with("http/mod.rs:2: names `tokio::net::TcpStream`"));
    assert!(faults[1].starts_with("http/mod.rs:5: names `tokio::spawn`"));
}

#[test]
fn a_backend_named_outside_its_rooms_fails() {
    let tree = fake(&[
        ("lib.rs", "mod state; mod store;"),
        (
            "state.rs",
            "// redis is fine in a comment\nfn f() { let _ = \"postgres\"; g!(Redis::x); }",
        ),
        ("store/mod.rs", "mod postgres;"),
        ("store/postgres.rs", ""),
    ]);
    let faults = tree.backend_names();
    assert_eq!(
        faults,
        ["state.rs:2: names a backend (`redis`) outside [\"store\", \"ratelimit\", \"cli\"]"]
    );
}

#[test]
fn the_binary_may_use_cli_only() {
    let tree = fake(&[
        ("main.rs", "fn main() { petstore_server::cli::main(); }"),
        ("lib.rs", "pub mod cli;"),
    ]);
    assert!(tree.binary_faults().is_empty());
    let tree = fake(&[("main.rs", "use petstore_server::net;\nfn main() {}")]);
    assert_eq!(
        tree.binary_faults(),
        ["main.rs:1: uses `petstore_server::net`; the binary uses only `cli`"]
    );
}
