//! Limiter state outlives the process (docs/contract.md, "Rate limits"): a
//! restart after SIGTERM or kill -9 neither refills a day quota nor lifts
//! a ban, the state file never holds a key, and editing one key's entry or
//! the `ban` section leaves the other keys' buckets alone.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{assert_error, sha256_hex, wait_until, x_ratelimit, Server, TempDir};
use serde_json::{json, Value};

/// perDay 10: the day window binds from the first request.
const DAILY: &str = "state-key-daily";
/// perDay 20, another key that must keep its buckets through edits.
const OTHER: &str = "state-key-other";
/// perMinute 1: refused at once, banned at the second strike.
const BANNED: &str = "state-key-banned";

fn keys(other_per_day: u32, strikes: u32) -> Value {
    json!({
        "keys": [
            {"name": "daily", "key": DAILY, "plan": "enterprise", "perMinute": 100, "perDay": 10},
            {"name": "other", "key": OTHER, "plan": "enterprise", "perMinute": 100, "perDay": other_per_day},
            {"name": "banned", "key": BANNED, "plan": "enterprise", "perMinute": 1, "perDay": 1000}
        ],
        "ban": {"strikes": strikes, "windowSeconds": 60, "banSeconds": 600},
        "anonymousPerMinute": 3
    })
}

struct Setup {
    dir: TempDir,
    keys: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let dir = TempDir::new();
        let keys_path = dir.join("keys.json");
        std::fs::write(&keys_path, keys(20, 2).to_string()).unwrap();
        Setup {
            dir,
            keys: keys_path,
        }
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn state_file(&self) -> PathBuf {
        self.data().join("limits.state")
    }

    fn start(&self) -> Server {
        Server::builder()
            .keys_path(&self.keys)
            .data(&self.data())
            .start()
    }
}

/// `X-RateLimit-Remaining` of one allowed request (the binding window).
fn remaining(server: &Server, key: &str) -> u64 {
    let resp = server.get("/v1/pets", Some(key));
    assert_eq!(resp.status, 200, "{}", resp.describe());
    x_ratelimit(&resp).1
}

fn stop(mut server: Server) {
    server.signal("TERM");
    assert!(server.wait_exit(Duration::from_secs(20)).success());
}

/// Day tokens the state file says `key` has used (perDay `per_day`), or
/// `None` when the file has no record of it.
fn day_tokens_in_file(path: &Path, key: &str, per_day: u128) -> Option<u128> {
    let file: Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    let digest = sha256_hex(key);
    let record = file["keys"]
        .as_array()?
        .iter()
        .find(|k| k["sha256"] == digest.as_str())?;
    let tat: u128 = record["dayTat"].as_str()?.parse().ok()?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    // Units of 1 ns / capacity: a token is 86,400 s in ns; the debt
    // rounds up.
    let token = 86_400_000_000_000;
    Some(tat.saturating_sub(now * per_day).div_ceil(token))
}

fn assert_no_key_in(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap();
    for key in [DAILY, OTHER, BANNED] {
        assert!(!text.contains(key), "the state file holds the key {key}");
    }
}

#[test]
fn a_day_quota_survives_a_graceful_restart() {
    let setup = Setup::new();
    let server = setup.start();
    for want in [9, 8, 7, 6] {
        assert_eq!(remaining(&server, DAILY), want);
    }
    stop(server);
    assert_eq!(
        day_tokens_in_file(&setup.state_file(), DAILY, 10),
        Some(4),
        "written at shutdown"
    );
    assert_no_key_in(&setup.state_file());

    let server = setup.start();
    assert_eq!(remaining(&server, DAILY), 5);
    // A key never seen before is fresh.
    assert_eq!(remaining(&server, OTHER), 19);
    server.stderr_once_logged("limits: restored 1 key(s)");
}

#[test]
fn a_day_quota_survives_kill_9_once_the_state_is_written() {
    let setup = Setup::new();
    let mut server = setup.start();
    for want in [9, 8, 7, 6] {
        assert_eq!(remaining(&server, DAILY), want);
    }
    // The writer takes a snapshot at least every second: wait for the
    // one with all four requests, then crash. (The bound only cuts off a
    // writer that never writes.)
    assert!(
        wait_until(Duration::from_secs(30), || day_tokens_in_file(
            &setup.state_file(),
            DAILY,
            10
        ) == Some(4)),
        "the state file never recorded 4 requests within 30 s"
    );
    server.signal("KILL");
    server.wait_exit(Duration::from_secs(10));
    drop(server);
    assert_no_key_in(&setup.state_file());

    let server = setup.start();
    assert_eq!(remaining(&server, DAILY), 5);
}

#[test]
fn a_ban_survives_a_restart() {
    let setup = Setup::new();
    let server = setup.start();
    assert_eq!(server.get("/v1/pets", Some(BANNED)).status, 200);
    // Refused; then two requests before Retry-After are two strikes, and
    // the second one bans (strikes: 2).
    assert_error(&server.get("/v1/pets", Some(BANNED)), 429, "rate_limited");
    assert_error(&server.get("/v1/pets", Some(BANNED)), 429, "rate_limited");
    // The ban's 600 s count from this request: taken before it, the time
    // since bounds what the restart may have used of them (a stop and a
    // start take what they take on a loaded machine).
    let banned_at = Instant::now();
    let banned = server.get("/v1/pets", Some(BANNED));
    assert_error(&banned, 429, "key_banned");
    assert_eq!(banned.header_u64("retry-after"), 600);
    stop(server);

    let server = setup.start();
    let resp = server.get("/v1/pets", Some(BANNED));
    assert_error(&resp, 429, "key_banned");
    let retry = resp.header_u64("retry-after");
    let passed = banned_at.elapsed().as_secs();
    assert!(
        (600u64.saturating_sub(passed + 1)..=600).contains(&retry),
        "Retry-After {retry}, {passed} s after the ban"
    );
    assert_eq!(x_ratelimit(&resp).1, 0, "nothing remains while banned");
}

#[test]
fn editing_one_entry_or_the_ban_section_leaves_the_other_keys_buckets_alone() {
    let setup = Setup::new();
    let server = setup.start();
    for want in [9, 8, 7, 6] {
        assert_eq!(remaining(&server, DAILY), want);
    }
    for want in [19, 18] {
        assert_eq!(remaining(&server, OTHER), want);
    }

    // Another ban policy: every key keeps its buckets.
    let reloads = |server: &Server| server.stderr_text().matches("SIGHUP: reloaded").count();
    server.write_keys(&keys(20, 5));
    server.signal("HUP");
    assert!(wait_until(Duration::from_secs(10), || reloads(&server) == 1));
    assert_eq!(remaining(&server, DAILY), 5);
    assert_eq!(remaining(&server, OTHER), 17);

    // One entry's quota changes: that key starts fresh, no other does.
    server.write_keys(&keys(30, 5));
    server.signal("HUP");
    assert!(wait_until(Duration::from_secs(10), || reloads(&server) == 2));
    assert_eq!(remaining(&server, OTHER), 29);
    assert_eq!(remaining(&server, DAILY), 4);

    // And all of it survives a restart.
    stop(server);
    let server = setup.start();
    assert_eq!(remaining(&server, DAILY), 3);
    assert_eq!(remaining(&server, OTHER), 28);
}

#[test]
fn a_damaged_state_file_is_moved_aside_and_the_limits_start_fresh() {
    let setup = Setup::new();
    std::fs::create_dir_all(setup.data()).unwrap();
    std::fs::write(setup.state_file(), b"{\"version\":1,").unwrap();
    let server = setup.start();
    server.stderr_once_logged(&format!(
        "limiter state file {} is unreadable",
        setup.state_file().display()
    ));
    assert_eq!(remaining(&server, DAILY), 9);
    let aside = setup.data().join("limits.state.corrupt");
    assert_eq!(std::fs::read(aside).unwrap(), b"{\"version\":1,");
}

#[test]
fn an_address_without_a_key_keeps_its_bucket_across_a_restart() {
    // 3 a minute: a token back every 20 s, counted from the first request.
    // The restart takes what it takes, so the tokens that came back
    // meanwhile are allowed for, from the time measured since before the
    // first request: a bucket that restarted full would still show.
    const TOKEN_SECS: u64 = 20;
    let setup = Setup::new();
    let server = setup.start();
    let started = Instant::now();
    for want in [2, 1] {
        let resp = server.get("/v1/pets", None);
        assert_error(&resp, 401, "unauthorized");
        assert_eq!(x_ratelimit(&resp).1, want);
    }
    stop(server);
    let server = setup.start();
    let resp = server.get("/v1/pets", None);
    assert_error(&resp, 401, "unauthorized");
    let refilled = started.elapsed().as_secs() / TOKEN_SECS;
    // Kept: 0 left after the third request (a full bucket would say 2),
    // plus what refilled.
    assert!(
        x_ratelimit(&resp).1 <= refilled,
        "{refilled} token(s) back since the first request: {}",
        resp.describe()
    );
    // And the bucket runs out: across the restart, no more requests went
    // through than the 3 of the bucket and what refilled.
    let mut allowed = 3;
    loop {
        let resp = server.get("/v1/pets", None);
        if resp.status == 429 {
            assert_error(&resp, 429, "rate_limited");
            break;
        }
        assert_error(&resp, 401, "unauthorized");
        allowed += 1;
        let most = 3 + started.elapsed().as_secs() / TOKEN_SECS;
        assert!(
            allowed <= most,
            "{allowed} requests without a key went through, the bucket and its refills are {most}"
        );
    }
}

#[test]
fn a_symlink_at_the_temporary_name_is_never_written_through() {
    // Planted before the start: `limits.state.tmp` pointing at another
    // file of the server's user (CWE-59). The writer must remove the link
    // and write a file of its own, never truncate the target.
    let setup = Setup::new();
    std::fs::create_dir_all(setup.data()).unwrap();
    let victim = setup.dir.join("victim.txt");
    std::fs::write(&victim, b"not the server's to write").unwrap();
    let tmp = setup.data().join("limits.state.tmp");
    std::os::unix::fs::symlink(&victim, &tmp).unwrap();
    let server = setup.start();
    for _ in 0..3 {
        assert_eq!(server.get("/v1/pets", Some(DAILY)).status, 200);
    }
    // The writer runs at least every second once the state changed.
    assert!(
        wait_until(Duration::from_secs(20), || setup.state_file().exists()),
        "the state file was never written"
    );
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        b"not the server's to write",
        "the writer wrote through the symlink"
    );
    let tmp_meta = std::fs::symlink_metadata(&tmp);
    assert!(
        tmp_meta.map_or(true, |m| !m.file_type().is_symlink()),
        "the symlink is still there"
    );
    drop(server);
}
