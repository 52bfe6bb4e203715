//! The keys file as something that can go wrong: replaced by a FIFO
//! (a reload must not freeze the server), too large, writable by others,
//! or holding a key where an entry or a number belongs (the log must name
//! the place, never the value).

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::Duration;

use common::{default_keys, wait_until, Server, ServerBuilder, TempDir, KEY};
use serde_json::json;

/// Requests answered one after another. No writer ever opens the FIFO:
/// a server whose reload blocked on it would block for good, and the
/// harness's read bound ([`common::IO_TIMEOUT`]) catches that without
/// holding a quick machine to a time.
fn answered(server: &Server, count: usize) {
    for i in 0..count {
        let resp = server.get("/v1/pets", Some(KEY));
        assert_eq!(resp.status, 200, "request {i}: {}", resp.describe());
    }
}

#[test]
fn a_keys_file_replaced_by_a_fifo_is_refused_and_requests_go_on() {
    let server = Server::start(&[]);
    let path = server.keys_path().to_owned();
    std::fs::remove_file(&path).unwrap();
    let status = Command::new("mkfifo").arg(&path).status().unwrap();
    assert!(status.success(), "mkfifo failed");

    for round in 1..=2 {
        server.signal("HUP");
        // Opening a FIFO for reading blocks until a writer comes: the
        // reload must refuse it, and requests must go on meanwhile.
        answered(&server, 10);
        let refused = |s: &str| {
            s.matches("it is not a regular file (it is a FIFO); the previous keys stay in force")
                .count()
        };
        assert!(
            wait_until(Duration::from_secs(15), || refused(&server.stderr_text())
                == round),
            "reload {round} was not refused naming the FIFO; stderr:\n{}",
            server.stderr_text()
        );
    }
    assert!(server
        .stderr_text()
        .contains(&format!("cannot read keys file {}", path.display())));
    answered(&server, 5);
}

#[test]
fn a_keys_file_over_a_mebibyte_or_not_a_file_is_refused_at_start() {
    let dir = TempDir::new();
    let big = dir.join("big.json");
    let mut text = default_keys().to_string();
    text.push_str(&" ".repeat(1 << 20));
    std::fs::write(&big, text).unwrap();
    let failure = ServerBuilder::default()
        .keys_path(&big)
        .expect_startup_failure();
    assert!(!failure.status.success());
    assert!(
        failure
            .stderr
            .contains("it is larger than the limit of 1048576 bytes"),
        "{}",
        failure.stderr
    );

    let failure = ServerBuilder::default()
        .keys_path(&dir)
        .expect_startup_failure();
    assert!(
        failure
            .stderr
            .contains("it is not a regular file (it is a directory)"),
        "{}",
        failure.stderr
    );
}

#[test]
fn a_keys_file_writable_by_group_or_others_is_warned_about() {
    let dir = TempDir::new();
    let path = dir.join("keys.json");
    std::fs::write(&path, default_keys().to_string()).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let server = Server::builder().keys_path(&path).start();
    assert!(
        !server.stderr_text().contains("WARNING: keys file"),
        "{}",
        server.stderr_text()
    );

    // Made writable by others while running: the reload warns.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    server.signal("HUP");
    let warning = format!(
        "WARNING: keys file {} is writable by group and others (mode 666)",
        path.display()
    );
    assert!(
        wait_until(Duration::from_secs(15), || server
            .stderr_text()
            .contains(&warning)),
        "{}",
        server.stderr_text()
    );
    drop(server);

    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o620)).unwrap();
    let server = Server::builder().keys_path(&path).start();
    assert!(
        server.stderr_text().contains(&format!(
            "WARNING: keys file {} is writable by its group (mode 620)",
            path.display()
        )),
        "{}",
        server.stderr_text()
    );
    drop(server);
}

#[test]
fn a_reload_with_a_key_in_the_wrong_place_names_the_place_not_the_key() {
    let server = Server::start(&[]);
    let secret = "sk-live-reload-0xC0FFEE";
    let mut keys = default_keys();
    keys["keys"].as_array_mut().unwrap().push(json!(secret));
    let cases = [
        (keys, "keys[3] must be an entry (a JSON object), found a string"),
        (
            json!({"keys": [{"name": "main", "key": KEY, "plan": "pro", "perMinute": secret}]}),
            "keys[0] (name \"main\"): perMinute must be a whole number from 0 to 100000000, found a string",
        ),
    ];
    for (i, (file, want)) in cases.iter().enumerate() {
        server.write_keys(file);
        server.signal("HUP");
        assert!(
            wait_until(Duration::from_secs(15), || server
                .stderr_text()
                .matches("the previous keys stay in force")
                .count()
                == i + 1),
            "{}",
            server.stderr_text()
        );
        let stderr = server.stderr_text();
        assert!(stderr.contains(want), "{stderr}");
        assert!(!stderr.contains(secret), "the key was logged:\n{stderr}");
        assert_eq!(server.get("/v1/pets", Some(KEY)).status, 200);
    }
}
