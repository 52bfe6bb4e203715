//! Disks that fail, against the real server binary: a journal deleted
//! under a running server, a second server on the same data directory, a
//! full disk (on a real 256 KiB tmpfs), and a damaged journal with the
//! `journal check` / `journal repair` way out.
//!
//! The tmpfs tests mount a filesystem, which needs root (CI runs as root).
//! Without it they fail with a message saying so; they never skip.

use crate::common;

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

/// The one message of every 503 (docs/contract.md, "Errors").
const UNAVAILABLE: &str = "pets cannot be stored right now; reading pets still works";

/// Runs `petstore-server ARGS` to its end (at most 20 s).
fn run_cli(args: &[&str], data: &Path) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .arg("--data")
        .arg(data)
        .env_remove("PETSTORE_DATA")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("petstore-server {args:?} did not end within 20 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn post_pet(server: &Server, body: &Value) -> Response {
    server.post(
        "/v1/pets",
        Some(KEY),
        Some("application/json"),
        body.to_string().as_bytes(),
    )
}

fn metrics(server: &Server) -> String {
    let resp = server.get("/metrics", None);
    assert_eq!(resp.status, 200, "{}", resp.describe());
    resp.text()
}

/// Asserts a 503 with the generic message: no path, no error number.
fn assert_unavailable(resp: &Response) {
    let message = assert_error(resp, 503, "unavailable");
    assert_eq!(message, UNAVAILABLE);
}

/// Asserts `/healthz` is 503 degraded with this reason (and no path).
fn assert_degraded(server: &Server, reason: &str) {
    let resp = server.get("/healthz", None);
    assert_eq!(resp.status, 503, "{}", resp.describe());
    assert_eq!(
        resp.json(),
        json!({"status": "degraded", "reason": format!("pets cannot be stored: {reason}")})
    );
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

fn lines_of(bytes: &[u8]) -> Vec<Vec<u8>> {
    bytes
        .split_inclusive(|b| *b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

/// Files in `dir` whose names start with `prefix`.
fn files_starting(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .collect()
}

#[test]
fn a_journal_deleted_under_a_running_server_stops_creates_not_reads() {
    let dir = TempDir::new();
    let data = dir.join("data");
    let server = ServerBuilder::default().data(&data).start();
    let rex = server.create_pet(&json!({"name": "Rex", "categoryId": 1}));
    let health = server.get("/healthz", None);
    assert_eq!(
        (health.status, health.json()),
        (200, json!({"status": "ok"}))
    );
    assert!(metrics(&server)
        .lines()
        .any(|l| l == "petstore_storage_writable 1"));

    fs::remove_file(data.join("pets.journal")).unwrap();

    // Never a 201 into the unlinked file: the next create and every later
    // one are 503, with the generic message.
    for i in 0..3 {
        let resp = post_pet(
            &server,
            &json!({"name": format!("Tom {i}"), "categoryId": 1}),
        );
        assert_unavailable(&resp);
    }
    // Reads go on.
    let got = server.get("/v1/pets/1", Some(KEY));
    assert_eq!((got.status, got.json()), (200, rex));
    assert_eq!(server.list_ids("/v1/pets").0, [1]);
    assert_degraded(&server, "the journal file was deleted or replaced");
    assert!(metrics(&server)
        .lines()
        .any(|l| l == "petstore_storage_writable 0"));

    // The cause is logged once, with the path; no line per 503.
    let stderr = server.stderr_once_logged("can no longer store pets");
    assert_eq!(
        count(&stderr, "can no longer store pets"),
        1,
        "stderr:\n{stderr}"
    );
    assert!(
        stderr.contains(&data.join("pets.journal").display().to_string()),
        "{stderr}"
    );
    assert_eq!(count(&stderr, "answered 503"), 0, "stderr:\n{stderr}");

    // A second server on the same directory refuses to start, although
    // the journal (and any lock on it) is gone.
    let second = ServerBuilder::default()
        .data(&data)
        .expect_startup_failure();
    assert_eq!(second.status.code(), Some(2), "{}", second.stderr);
    assert!(
        second.stderr.contains("is in use by another process"),
        "{}",
        second.stderr
    );
    assert!(!data.join("pets.journal").exists(), "it created nothing");
    drop(server);
}

#[test]
fn a_journal_deleted_under_a_running_server_stops_transitions_as_creates() {
    let dir = TempDir::new();
    let data = dir.join("data");
    let server = ServerBuilder::default().data(&data).start();
    let rex = server.create_pet(&json!({"name": "Rex", "categoryId": 1}));
    let transition =
        |action: &str| server.post(&format!("/v1/pets/1/{action}"), Some(KEY), None, b"");
    assert_eq!(transition("reserve").status, 200);

    fs::remove_file(data.join("pets.journal")).unwrap();

    // Never a 200 into the unlinked file: the next transition and every
    // later one are 503, with a create's message, and change nothing.
    for action in ["release", "sell", "release"] {
        assert_unavailable(&transition(action));
    }
    let got = server.get("/v1/pets/1", Some(KEY)).json();
    assert_eq!(got["status"], "pending", "{got}");
    assert_eq!(got["name"], rex["name"]);
    assert_unavailable(&post_pet(&server, &json!({"name": "Tom", "categoryId": 1})));
    assert_degraded(&server, "the journal file was deleted or replaced");
    let stderr = server.stderr_once_logged("can no longer store pets");
    assert_eq!(count(&stderr, "answered 503"), 0, "stderr:\n{stderr}");
}

#[test]
fn a_health_check_notices_a_replaced_journal_before_any_create() {
    let dir = TempDir::new();
    let data = dir.join("data");
    let server = ServerBuilder::default().data(&data).start();
    server.create_pet(&json!({"name": "Rex", "categoryId": 1}));
    // Replaced by another file (a restore from backup, an editor's save).
    let copy = dir.join("copy");
    fs::copy(data.join("pets.journal"), &copy).unwrap();
    fs::rename(&copy, data.join("pets.journal")).unwrap();
    assert_degraded(&server, "the journal file was deleted or replaced");
    assert_unavailable(&post_pet(&server, &json!({"name": "Tom", "categoryId": 1})));
    assert_eq!(server.get("/v1/pets/1", Some(KEY)).status, 200);
    // The file on disk did not grow: the 503 wrote nothing into it (one
    // pet, after the time record that dates it).
    let lines = lines_of(&fs::read(data.join("pets.journal")).unwrap());
    assert_eq!(lines.len(), 2);
    assert!(lines[0].starts_with(br#"{"time":"#));
    let stderr = server.stderr_once_logged("can no longer store pets");
    assert_eq!(count(&stderr, "can no longer store pets"), 1, "{stderr}");
    drop(server);
}

#[test]
fn a_second_server_on_a_data_directory_in_use_refuses_to_start() {
    let dir = TempDir::new();
    let data = dir.join("data");
    let first = ServerBuilder::default().data(&data).start();
    let second = ServerBuilder::default()
        .data(&data)
        .expect_startup_failure();
    assert_eq!(second.status.code(), Some(2));
    assert!(
        second
            .stderr
            .contains(&format!("the data directory {} is in use", data.display())),
        "{}",
        second.stderr
    );
    // The first one is unharmed.
    first.create_pet(&json!({"name": "Rex", "categoryId": 1}));
    drop(first);
    let again = ServerBuilder::default().data(&data).start();
    assert_eq!(again.list_ids("/v1/pets").0, [1]);
    drop(again);
}

/// Creates pets on a fresh durable server in `data` and stops it; the
/// journal is left one line a pet, without the time records that date
/// them (as a release before them wrote it), so that line numbers are
/// the same whichever seconds the creates fell in.
fn journal_of(data: &Path, names: &[&str]) -> Vec<Value> {
    let mut server = ServerBuilder::default().data(data).start();
    let pets = names
        .iter()
        .map(|n| server.create_pet(&json!({"name": n, "categoryId": 1})))
        .collect();
    server.signal("TERM");
    assert!(server.wait_exit(Duration::from_secs(20)).success());
    let path = data.join("pets.journal");
    let lines = lines_of(&fs::read(&path).unwrap());
    let pets_only: Vec<Vec<u8>> = lines
        .into_iter()
        .filter(|line| !line.starts_with(br#"{"time":"#))
        .collect();
    fs::write(&path, pets_only.concat()).unwrap();
    pets
}

/// Line `n` (1-based) of the journal with one byte changed, its newline
/// kept: a complete record whose checksum fails.
fn damage_line(path: &Path, n: usize) -> Vec<u8> {
    let mut lines = lines_of(&fs::read(path).unwrap());
    lines[n - 1][20] ^= 0x01;
    let damaged = lines.concat();
    fs::write(path, &damaged).unwrap();
    damaged
}

#[test]
fn a_damaged_last_record_stops_the_start_and_check_and_repair_are_the_way_out() {
    let dir = TempDir::new();
    let data = dir.join("data");
    let pets = journal_of(&data, &["Rex", "Tom", "Kitty"]);
    let journal = data.join("pets.journal");
    let clean_lines = lines_of(&fs::read(&journal).unwrap());

    let check = run_cli(&["journal", "check"], &data);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stderr));
    assert!(
        text(&check.stdout).contains("clean: 3 pet(s)"),
        "{}",
        text(&check.stdout)
    );

    // The last record is complete (it ends in a newline) but its checksum
    // fails: an acknowledged pet, damaged. Not a torn write.
    let damaged = damage_line(&journal, 3);
    let refused = ServerBuilder::default()
        .data(&data)
        .expect_startup_failure();
    assert_eq!(refused.status.code(), Some(2));
    for want in [
        "pets.journal line 3 is damaged",
        "checksum mismatch",
        &format!("petstore-server journal check --data {}", data.display()),
        &format!("petstore-server journal repair --data {}", data.display()),
    ] {
        assert!(
            refused.stderr.contains(want),
            "missing {want:?}:\n{}",
            refused.stderr
        );
    }
    assert_eq!(
        fs::read(&journal).unwrap(),
        damaged,
        "refusing changed nothing"
    );

    let check = run_cli(&["journal", "check"], &data);
    let out = text(&check.stdout);
    assert_eq!(check.status.code(), Some(1), "{out}");
    assert!(out.contains("line 3 (byte "), "{out}");
    assert!(out.contains("damaged: checksum mismatch"), "{out}");
    assert!(out.contains("journal repair --data"), "{out}");
    assert_eq!(
        fs::read(&journal).unwrap(),
        damaged,
        "check changed nothing"
    );

    // Repair moves exactly the damaged last line aside.
    let repair = run_cli(&["journal", "repair"], &data);
    let out = text(&repair.stdout);
    assert_eq!(
        repair.status.code(),
        Some(0),
        "{out}{}",
        text(&repair.stderr)
    );
    assert!(out.contains("removed line 3 "), "{out}");
    assert!(out.contains("kept 2 pet(s)"), "{out}");
    let side = files_starting(&data, "pets.journal.removed-");
    assert_eq!(side.len(), 1, "{side:?}");
    assert!(out.contains(&side[0].display().to_string()), "{out}");
    assert_eq!(fs::read(&side[0]).unwrap(), lines_of(&damaged)[2]);
    assert_eq!(fs::read(&journal).unwrap(), clean_lines[..2].concat());

    let check = run_cli(&["journal", "check"], &data);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stdout));

    let server = ServerBuilder::default().data(&data).start();
    assert_eq!(server.get("/v1/pets/2", Some(KEY)).json(), pets[1]);
    assert_eq!(server.get("/v1/pets/3", Some(KEY)).status, 404);
    // While it runs, a repair refuses to touch the journal.
    let busy = run_cli(&["journal", "repair"], &data);
    assert_eq!(busy.status.code(), Some(2));
    assert!(
        text(&busy.stderr).contains("stop the server first"),
        "{}",
        text(&busy.stderr)
    );
    drop(server);
}

#[test]
fn journal_compact_replaces_a_stopped_servers_history_and_refuses_a_running_one() {
    let dir = TempDir::new();
    let data = dir.join("data");
    let pets = journal_of(&data, &["a", "b", "c"]);
    let server = ServerBuilder::default().data(&data).start();
    let sold = server.post("/v1/pets/2/sell", Some(KEY), None, b"");
    assert_eq!(sold.status, 200, "{}", sold.describe());
    // A running server holds the directory: compacting it is refused.
    let busy = run_cli(&["journal", "compact"], &data);
    assert_eq!(busy.status.code(), Some(2));
    assert!(
        text(&busy.stderr).contains("a running server compacts by itself"),
        "{}",
        text(&busy.stderr)
    );
    drop(server);

    let compact = run_cli(&["journal", "compact"], &data);
    let out = text(&compact.stdout);
    assert_eq!(
        compact.status.code(),
        Some(0),
        "{out}{}",
        text(&compact.stderr)
    );
    assert!(
        out.contains("compacted: ") && out.contains("3 pet(s)"),
        "{out}"
    );
    assert_eq!(files_starting(&data, "pets-00000001.snapshot").len(), 1);
    assert_eq!(fs::metadata(data.join("pets.journal")).unwrap().len(), 0);
    let check = run_cli(&["journal", "check"], &data);
    let out = text(&check.stdout);
    assert_eq!(check.status.code(), Some(0), "{out}");
    assert!(out.contains("read first: "), "{out}");

    // The same pets, the sale kept; ids follow on.
    let server = ServerBuilder::default().data(&data).start();
    assert_eq!(server.list_ids("/v1/pets").0, [1, 2, 3]);
    let two = server.get("/v1/pets/2", Some(KEY));
    assert_eq!(two.json()["status"], "sold", "{}", two.describe());
    assert_eq!(server.get("/v1/pets/1", Some(KEY)).json(), pets[0]);
    let next = server.create_pet(&json!({"name": "d", "categoryId": 1}));
    assert_eq!(next["id"], 4);
}

#[test]
fn repair_of_a_damaged_middle_record_moves_it_and_what_follows_and_says_so() {
    let dir = TempDir::new();
    let data = dir.join("data");
    journal_of(&data, &["a", "b", "c", "d", "e"]);
    let journal = data.join("pets.journal");
    let damaged = damage_line(&journal, 2);
    let check = run_cli(&["journal", "check"], &data);
    let out = text(&check.stdout);
    assert_eq!(check.status.code(), Some(1), "{out}");
    assert!(out.contains("1 bad line(s)"), "{out}");
    assert!(out.contains("3 intact record(s) after it"), "{out}");

    let repair = run_cli(&["journal", "repair"], &data);
    let out = text(&repair.stdout);
    assert_eq!(repair.status.code(), Some(0), "{out}");
    assert!(out.contains("removed line 2 "), "{out}");
    assert!(
        out.contains("removed 3 intact record(s) after line 2"),
        "{out}"
    );
    assert!(out.contains("lines 2 to 5"), "{out}");
    let side = files_starting(&data, "pets.journal.removed-");
    assert_eq!(
        fs::read(&side[0]).unwrap(),
        lines_of(&damaged)[1..].concat()
    );
    let server = ServerBuilder::default().data(&data).start();
    assert_eq!(server.list_ids("/v1/pets").0, [1]);
    drop(server);

    // A journal that cannot be read: exit 2, a message, nothing changed.
    let missing = dir.join("nowhere");
    let check = run_cli(&["journal", "check"], &missing);
    assert_eq!(check.status.code(), Some(2));
    assert!(
        text(&check.stderr).contains("pets.journal"),
        "{}",
        text(&check.stderr)
    );
}

/// A 256 KiB tmpfs, unmounted on drop, also when the test fails (its
/// mount point then goes with `_root`).
struct SmallDisk {
    _root: TempDir,
    mount: PathBuf,
}

impl SmallDisk {
    fn mount() -> SmallDisk {
        let root = TempDir::new();
        let mount = root.join("disk");
        fs::create_dir_all(&mount).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
            .arg(&mount)
            .output()
            .unwrap_or_else(|e| panic!("cannot run mount: {e}; this test needs root and mount(8)"));
        assert!(
            out.status.success(),
            "this test needs root to mount a 256 KiB tmpfs at {} (CI runs as root): {}",
            mount.display(),
            text(&out.stderr)
        );
        SmallDisk { _root: root, mount }
    }

    /// Fills every free byte with a file named `name`.
    fn fill(&self, name: &str) -> PathBuf {
        let path = self.mount.join(name);
        let mut file = fs::File::create(&path).unwrap();
        let chunk = [b'x'; 4096];
        // 64 + 1 pages hold more than the whole disk: bounded.
        for _ in 0..65 {
            if file.write_all(&chunk).is_err() {
                return path;
            }
        }
        panic!("wrote 260 KiB into a 256 KiB tmpfs without filling it");
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(&self.mount)
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            // Something still holds it: detach it now, freed when released.
            let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
        }
    }
}

#[test]
fn after_a_full_disk_and_kill_9_a_restart_needs_only_the_torn_bytes_free_and_keeps_every_pet() {
    let disk = SmallDisk::mount();
    // 64 KiB that the test frees again after the kill.
    let filler = disk.mount.join("filler");
    fs::write(&filler, vec![b'x'; 64 * 1024]).unwrap();
    let data = disk.mount.join("data");
    let mut server = ServerBuilder::default().data(&data).start();

    // Bounded by a count, not a time: 5,000 records of 100 bytes and more
    // are twice the disk, however long they take to write.
    let mut acknowledged = Vec::new();
    let refused = loop {
        assert!(
            acknowledged.len() < 5_000,
            "no 503 after {} pets",
            acknowledged.len()
        );
        let i = acknowledged.len();
        let name = format!("pet {i} {}", "n".repeat(60 + i % 17));
        let resp = post_pet(
            &server,
            &json!({"name": name, "categoryId": 1, "status": "sold"}),
        );
        match resp.status {
            201 => acknowledged.push(resp.json()),
            _ => break resp,
        }
    };
    assert!(acknowledged.len() > 100, "{} pets", acknowledged.len());
    assert_unavailable(&refused);
    assert_degraded(&server, "the data disk is full");
    assert_unavailable(&post_pet(
        &server,
        &json!({"name": "more", "categoryId": 1}),
    ));
    let stderr = server.stderr_once_logged("No space left on device");
    // The journal's failure, logged once. (The limiter state writer may
    // also meet the full disk, on a slow run, and says so in a line of
    // its own: not the journal's.)
    let journal_failures: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("the inventory can no longer store pets"))
        .collect();
    assert_eq!(journal_failures.len(), 1, "{stderr}");
    assert!(
        journal_failures[0].contains("No space left on device"),
        "{stderr}"
    );

    server.signal("KILL");
    server.wait_exit(Duration::from_secs(20));
    let journal = data.join("pets.journal");
    let on_disk = fs::read(&journal).unwrap();
    let journal_len = on_disk.len();
    assert!(journal_len > 128 * 1024, "{journal_len} bytes");
    fs::remove_file(&filler).unwrap();
    if on_disk.last() == Some(&b'\n') {
        // The failed write stopped exactly at a record's end: add the
        // torn bytes such a write leaves, so the cut is exercised.
        println!("the full disk left no torn bytes; adding some");
        let mut file = fs::OpenOptions::new().append(true).open(&journal).unwrap();
        file.write_all(br#"{"pet":{"id":99999,"name":"torn"#)
            .unwrap();
    }
    // Now about 64 KiB are free: far less than the journal.
    let before_restart = fs::metadata(&journal).unwrap().len();

    let server = ServerBuilder::default().data(&data).start();
    for pet in &acknowledged {
        let id = pet["id"].as_u64().unwrap();
        let got = server.get(&format!("/v1/pets/{id}"), Some(KEY));
        assert_eq!((got.status, got.json()), (200, pet.clone()), "pet {id}");
    }
    let stderr = server.stderr_once_logged("WARNING: the journal ended in a torn record");
    assert!(
        stderr.contains("WARNING: the journal ended in a torn record"),
        "{stderr}"
    );
    assert!(
        stderr.contains("a crash in the middle of a write or by a full disk"),
        "{stderr}"
    );
    let torn = files_starting(&data, "pets.journal.torn-");
    assert_eq!(torn.len(), 1, "{torn:?}");
    let kept = fs::metadata(&torn[0]).unwrap().len();
    assert!(kept > 0 && kept < 64 * 1024, "torn copy of {kept} bytes");
    let after = fs::read(&journal).unwrap();
    assert_eq!(after.last(), Some(&b'\n'));
    assert_eq!(
        after.len() as u64 + kept,
        before_restart,
        "only the torn bytes were cut"
    );
    // Ids continue after what is on disk.
    let next = server.create_pet(&json!({"name": "after", "categoryId": 1}));
    assert!(next["id"].as_u64().unwrap() > acknowledged.len() as u64);
    drop(server);
    drop(disk);
}

#[test]
fn a_torn_tail_that_does_not_fit_on_the_disk_refuses_the_start_and_leaves_no_partial_copy() {
    let disk = SmallDisk::mount();
    let data = disk.mount.join("data");
    journal_of(&data, &["Rex", "Tom"]);
    let journal = data.join("pets.journal");
    let clean = fs::read(&journal).unwrap();
    // A torn record of 60 KiB, then a full disk. (A torn tail is at most
    // one record cut short: a line longer than the longest record, 64 KiB,
    // is corruption, never a torn write, since fb1e2eb.)
    let mut torn = clean.clone();
    torn.extend_from_slice(br#"{"pet":{"id":3,"name":""#);
    torn.extend(std::iter::repeat_n(b'a', 60 * 1024));
    fs::write(&journal, &torn).unwrap();
    let filler = disk.fill("filler");

    let refused = ServerBuilder::default()
        .data(&data)
        .expect_startup_failure();
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        refused.stderr.contains("No space left on device"),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains("pets.journal.torn-"),
        "{}",
        refused.stderr
    );
    assert_eq!(
        files_starting(&data, "pets.journal.torn-"),
        Vec::<PathBuf>::new()
    );
    assert_eq!(fs::read(&journal).unwrap(), torn, "nothing was cut");

    // With room for the torn bytes (not for the journal twice), it starts.
    fs::remove_file(&filler).unwrap();
    let server = ServerBuilder::default().data(&data).start();
    assert_eq!(server.list_ids("/v1/pets").0, [1, 2]);
    let kept = files_starting(&data, "pets.journal.torn-");
    assert_eq!(fs::read(&kept[0]).unwrap(), &torn[clean.len()..]);
    assert_eq!(fs::read(&journal).unwrap(), clean);
    drop(server);
    drop(disk);
}
