//! API keys: 401s and their challenges, SHA-256 entries, reload with
//! SIGHUP, startup errors of the keys file, `keygen`.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::{
    assert_error, assert_has_ratelimit_headers, default_keys, sha256_hex, wait_until, x_ratelimit,
    Server, ServerBuilder, CHALLENGE, CHALLENGE_INVALID, FREE_KEY, HASHED_KEY, KEY,
};
use serde_json::{json, Value};

const PET: &[u8] = br#"{"name":"Rex","categoryId":1}"#;

fn with_auth(server: &Server, method: &str, path: &str, authorization: &str) -> common::Response {
    let mut headers = vec![("Authorization", authorization)];
    let body = (method == "POST").then_some(PET);
    if body.is_some() {
        headers.push(("Content-Type", "application/json"));
    }
    server.request(method, path, &headers, body)
}

const OPERATIONS: [(&str, &str); 4] = [
    ("GET", "/v1/pets"),
    ("POST", "/v1/pets"),
    ("GET", "/v1/pets/1"),
    ("GET", "/v1/store/orders"),
];

#[test]
fn missing_key_is_401_with_the_bare_challenge() {
    let server = Server::start(&[]);
    for (method, path) in OPERATIONS {
        let body = (method == "POST").then_some(PET);
        let headers: &[(&str, &str)] = if body.is_some() {
            &[("Content-Type", "application/json")]
        } else {
            &[]
        };
        let resp = server.request(method, path, headers, body);
        assert_error(&resp, 401, "unauthorized");
        assert_eq!(
            resp.single("www-authenticate"),
            CHALLENGE,
            "{method} {path}"
        );
        assert_has_ratelimit_headers(&resp);
    }
    let (ids, _) = server.list_ids("/v1/pets");
    assert!(ids.is_empty(), "the refused POST stored nothing");
}

#[test]
fn malformed_or_unknown_key_is_401_invalid_token() {
    let server = Server::start(&[]);
    let hash_as_key = format!("Bearer {}", sha256_hex(HASHED_KEY));
    let values = [
        "Bearer nope".to_owned(),
        "Bearer test-key-mai".to_owned(),
        "Bearer test-key-mainx".to_owned(),
        "Bearer TEST-KEY-MAIN".to_owned(),
        format!("Bearer {KEY} extra"),
        "Bearer".to_owned(),
        "Bearer ".to_owned(),
        format!("Bearer{KEY}"),
        format!("Basic {KEY}"),
        "Basic dGVzdDp0ZXN0".to_owned(),
        format!("Token {KEY}"),
        KEY.to_owned(),
        hash_as_key,
    ];
    for value in &values {
        for (method, path) in OPERATIONS {
            let resp = with_auth(&server, method, path, value);
            assert_error(&resp, 401, "unauthorized");
            assert_eq!(
                resp.single("www-authenticate"),
                CHALLENGE_INVALID,
                "Authorization: {value:?} on {method} {path}"
            );
        }
    }
    let (ids, _) = server.list_ids("/v1/pets");
    assert!(ids.is_empty());
}

#[test]
fn bearer_scheme_is_case_insensitive_and_keys_are_not() {
    let server = Server::start(&[]);
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let resp = with_auth(&server, "GET", "/v1/pets", &format!("{scheme} {KEY}"));
        assert_eq!(resp.status, 200, "scheme {scheme}: {}", resp.describe());
        assert!(resp.header("www-authenticate").is_none());
    }
    // Header names are case-insensitive too.
    for name in ["authorization", "AUTHORIZATION"] {
        let value = format!("Bearer {KEY}");
        let resp = server.request("GET", "/v1/pets", &[(name, value.as_str())], None);
        assert_eq!(resp.status, 200, "header {name}: {}", resp.describe());
    }
}

#[test]
fn sha256_entries_and_plain_entries_both_work() {
    let server = Server::start(&[]);
    let resp = server.get("/v1/pets", Some(HASHED_KEY));
    assert_eq!(resp.status, 200, "{}", resp.describe());
    assert_eq!(x_ratelimit(&resp).0, 300, "the hashed key is on pro");
    let resp = server.post("/v1/pets", Some(HASHED_KEY), Some("application/json"), PET);
    assert_eq!(resp.status, 201, "{}", resp.describe());
    let resp = server.get("/v1/pets/1", Some(HASHED_KEY));
    assert_eq!(resp.status, 200, "{}", resp.describe());

    let resp = server.get("/v1/pets", Some(FREE_KEY));
    assert_eq!(resp.status, 200);
    assert_eq!(x_ratelimit(&resp).0, 3, "free plan overridden to 3/min");
    let resp = server.get("/v1/pets", Some(KEY));
    assert_eq!(resp.status, 200);
    assert_eq!(x_ratelimit(&resp).0, 1_000_000, "enterprise perMinute");
}

fn reload_keys(keep_plain: &str, extra: &[Value]) -> Value {
    let mut keys = vec![
        json!({"name": "main", "key": KEY, "plan": "enterprise",
               "perMinute": 1_000_000, "perDay": 100_000_000}),
        json!({"name": "keep", "key": keep_plain, "plan": "free"}),
    ];
    keys.extend_from_slice(extra);
    json!({
        "keys": keys,
        "plans": {"free": {"perMinute": 3, "perDay": 1000}},
        "ban": {"strikes": 3, "windowSeconds": 60, "banSeconds": 600},
        "anonymousPerMinute": 1000
    })
}

#[test]
fn sighup_adds_changes_and_revokes_keys_and_keeps_unchanged_limiter_state() {
    let initial = reload_keys(
        "keep-key",
        &[
            json!({"name": "gone", "key": "gone-key", "plan": "pro"}),
            json!({"name": "change", "key": "change-key", "plan": "free"}),
        ],
    );
    let server = Server::builder().keys(initial).start();
    let resp = server.get("/v1/pets", Some("keep-key"));
    assert_eq!(resp.status, 200);
    assert_eq!(x_ratelimit(&resp).0, 3);
    assert_eq!(x_ratelimit(&resp).1, 2, "first request of a 3/min key");
    assert_eq!(server.get("/v1/pets", Some("gone-key")).status, 200);
    assert_eq!(server.get("/v1/pets", Some("new-key")).status, 401);
    let resp = server.get("/v1/pets", Some("change-key"));
    assert_eq!(x_ratelimit(&resp).0, 3);

    server.write_keys(&reload_keys(
        "keep-key",
        &[
            json!({"name": "change", "key": "change-key", "plan": "pro"}),
            json!({"name": "new", "sha256": sha256_hex("new-key"), "plan": "business"}),
        ],
    ));
    server.signal("HUP");
    assert!(
        wait_until(Duration::from_secs(10), || server
            .get("/v1/pets", Some("new-key"))
            .status
            == 200),
        "the added key never worked; stderr:\n{}",
        server.stderr_text()
    );
    let resp = server.get("/v1/pets", Some("new-key"));
    assert_eq!(x_ratelimit(&resp).0, 1000, "business plan");
    let resp = server.get("/v1/pets", Some("gone-key"));
    assert_error(&resp, 401, "unauthorized");
    assert_eq!(resp.single("www-authenticate"), CHALLENGE_INVALID);
    let resp = server.get("/v1/pets", Some("change-key"));
    assert_eq!(resp.status, 200);
    assert_eq!(x_ratelimit(&resp).0, 300, "the changed key is now pro");

    let resp = server.get("/v1/pets", Some("keep-key"));
    assert_eq!(resp.status, 200, "{}", resp.describe());
    assert_eq!(
        x_ratelimit(&resp).1,
        1,
        "an unchanged key keeps its limiter state across a reload: {}",
        resp.describe()
    );
    assert_eq!(server.get("/v1/pets", Some("keep-key")).status, 200);
    let resp = server.get("/v1/pets", Some("keep-key"));
    assert_error(&resp, 429, "rate_limited");
    assert_eq!(server.get("/v1/pets", Some(KEY)).status, 200);
}

/// Rewrites the keys file, sends HUP and waits for the server to log its
/// refusal (or at most 5 s).
fn broken_reload(server: &Server, text: &str) {
    let refusals = || {
        server
            .stderr_text()
            .matches("; the previous keys stay in force")
            .count()
    };
    let before = refusals();
    server.write_keys_text(text);
    server.signal("HUP");
    let logged = wait_until(Duration::from_secs(5), || refusals() > before);
    assert!(
        logged,
        "a failed reload must be logged on stderr; stderr:\n{}",
        server.stderr_text()
    );
}

#[test]
fn a_broken_reload_keeps_the_old_keys() {
    let server = Server::start(&[]);
    let resp = server.get("/v1/pets", Some(FREE_KEY));
    assert_eq!(x_ratelimit(&resp).1, 2);

    let unknown_plan = json!({
        "keys": [
            {"name": "main", "key": KEY, "plan": "enterprise",
             "perMinute": 1_000_000, "perDay": 100_000_000},
            {"name": "newcomer", "key": "newcomer-key", "plan": "free"},
            {"name": "gold", "key": "gold-key", "plan": "gold"}
        ]
    })
    .to_string();
    let duplicate = json!({
        "keys": [
            {"name": "main", "key": KEY, "plan": "enterprise",
             "perMinute": 1_000_000, "perDay": 100_000_000},
            {"name": "newcomer", "key": "newcomer-key", "plan": "free"},
            {"name": "twin", "key": "newcomer-key", "plan": "pro"}
        ]
    })
    .to_string();
    for text in [
        "{ this is not json",
        "",
        unknown_plan.as_str(),
        duplicate.as_str(),
    ] {
        broken_reload(&server, text);
        for key in [KEY, HASHED_KEY] {
            let resp = server.get("/v1/pets", Some(key));
            assert_eq!(
                resp.status,
                200,
                "old key {key} after a broken reload of {text:?}: {}",
                resp.describe()
            );
        }
        let resp = server.get("/v1/pets", Some("newcomer-key"));
        assert_eq!(
            resp.status, 401,
            "a broken file is not applied in part ({text:?})"
        );
    }
    // The free key's state survived the failed reloads too.
    let resp = server.get("/v1/pets", Some(FREE_KEY));
    assert_eq!(resp.status, 200);
    assert_eq!(x_ratelimit(&resp).1, 1);

    // A good file afterwards is applied.
    let mut good = default_keys();
    good["keys"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "newcomer", "key": "newcomer-key", "plan": "free"}));
    server.write_keys(&good);
    server.signal("HUP");
    assert!(wait_until(Duration::from_secs(10), || server
        .get("/v1/pets", Some("newcomer-key"))
        .status
        == 200));
    assert_eq!(server.get("/v1/pets", Some(KEY)).status, 200);
}

fn file_with(keys: Value) -> String {
    json!({"keys": keys}).to_string()
}

#[test]
fn bad_keys_files_refuse_to_start_naming_the_entry() {
    let main = json!({"name": "main", "key": KEY, "plan": "pro"});
    let secret = "dup-secret-value-4711";
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "unknown plan",
            file_with(json!([main, {"name": "gold-entry", "key": "k2", "plan": "gold"}])),
            "gold-entry",
        ),
        (
            "duplicate key",
            file_with(json!([
                main,
                {"name": "first", "key": secret, "plan": "free"},
                {"name": "second", "key": secret, "plan": "pro"}
            ])),
            "second",
        ),
        (
            "duplicate key, once as sha256",
            file_with(json!([
                main,
                {"name": "plain-one", "key": secret, "plan": "free"},
                {"name": "hashed-dup", "sha256": sha256_hex(secret), "plan": "pro"}
            ])),
            "hashed-dup",
        ),
        (
            "duplicate name",
            file_with(json!([
                main,
                {"name": "twin", "key": "k2", "plan": "free"},
                {"name": "twin", "key": "k3", "plan": "free"}
            ])),
            "twin",
        ),
        (
            "enterprise without limits",
            file_with(json!([main, {"name": "big-co", "key": "k2", "plan": "enterprise"}])),
            "big-co",
        ),
        (
            "enterprise with one limit",
            file_with(json!([
                main,
                {"name": "half-co", "key": "k2", "plan": "enterprise", "perMinute": 10}
            ])),
            "half-co",
        ),
        (
            "unknown field in an entry",
            file_with(json!([
                main,
                {"name": "typo-entry", "key": "k2", "plan": "free", "perMinit": 5}
            ])),
            "typo-entry",
        ),
        (
            "entry without key or sha256",
            file_with(json!([main, {"name": "keyless", "plan": "free"}])),
            "keyless",
        ),
        (
            "unknown top-level field",
            json!({"keys": [main], "anonymousPerMinutes": 5}).to_string(),
            "the file has an unknown field, perhaps a misspelt `anonymousPerMinute`",
        ),
        (
            "unknown plan in plans",
            json!({"keys": [main], "plans": {"gold": {"perMinute": 1, "perDay": 2}}}).to_string(),
            "plans: a plan name is not free, pro, business or enterprise",
        ),
        (
            "malformed JSON",
            "{\"keys\": [".to_owned(),
            "not valid JSON: EOF while parsing a list at line 1 column 10",
        ),
        (
            "not an object",
            "[]".to_owned(),
            "the file must be the keys file (a JSON object), found an array",
        ),
        // A key pasted where an entry, a number, a plan or a field name
        // belongs: the message names the place and the type, never the
        // value (the loop below checks that `secret` is nowhere).
        (
            "a key where an entry belongs",
            file_with(json!([main, secret])),
            "keys[1] must be an entry (a JSON object), found a string",
        ),
        (
            "a key where a number belongs",
            file_with(json!([main, {"name": "num", "key": "k2", "plan": "free", "perDay": secret}])),
            "keys[1] (name \"num\"): perDay must be a whole number from 0 to 100000000, found a string",
        ),
        (
            "a key where a plan belongs",
            file_with(json!([main, {"name": "pl", "key": "k2", "plan": secret}])),
            "keys[1] (name \"pl\"): plan is not free, pro, business or enterprise",
        ),
        (
            "a key as a field name",
            format!(r#"{{"keys":[{{"name":"fld","key":"k2","plan":"free","{secret}":1}}]}}"#),
            "keys[0] (name \"fld\") has an unknown field",
        ),
        (
            "a key where the ban's number belongs",
            json!({"keys": [main], "ban": {"strikes": secret, "windowSeconds": 1, "banSeconds": 1}})
                .to_string(),
            "ban: strikes must be a whole number",
        ),
    ];
    // Every case runs; the failures are reported together.
    let mut problems = Vec::new();
    for (what, text, named) in &cases {
        let failure = ServerBuilder::default()
            .keys_text(text)
            .expect_startup_failure();
        if failure.status.success() {
            problems.push(format!("{what}: exit status {}", failure.status));
        }
        if failure.stderr.trim().is_empty() {
            problems.push(format!("{what}: nothing on stderr"));
        }
        if !failure.stderr.contains(named) {
            problems.push(format!(
                "{what}: stderr does not name `{named}`:\n{}",
                failure.stderr
            ));
        }
        if failure.stderr.contains(secret) || failure.stdout.contains(secret) {
            problems.push(format!("{what}: a key was logged:\n{}", failure.stderr));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let dir = common::TempDir::new();
    let missing = dir.join("no-such-keys.json");
    let failure = ServerBuilder::default()
        .keys_path(&missing)
        .expect_startup_failure();
    assert!(!failure.status.success());
    assert!(!failure.stderr.trim().is_empty());
}

fn extract_generated_key(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    for (i, _) in text.match_indices("ps_") {
        let hex = &bytes[i + 3..];
        let n = hex.iter().take_while(|b| b.is_ascii_hexdigit()).count();
        let before_ok = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
        if n == 64 && before_ok {
            found.push(text[i..i + 67].to_owned());
        }
    }
    assert!(!found.is_empty(), "no ps_ + 64 hex key in:\n{text}");
    assert!(
        found.iter().all(|k| k == &found[0]),
        "several different keys in:\n{text}"
    );
    found.remove(0)
}

fn keygen(plan: &str, name: &str) -> (String, Value) {
    let out = Command::new(common::BIN)
        .args(["keygen", "--plan", plan, "--name", name])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "keygen failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let key = extract_generated_key(&stdout);
    let start = stdout.find('{').expect("a JSON entry");
    let end = stdout.rfind('}').expect("a JSON entry");
    let mut entry: Value = serde_json::from_str(&stdout[start..=end])
        .unwrap_or_else(|e| panic!("keygen entry is not JSON ({e}):\n{stdout}"));
    if let Some(keys) = entry.get("keys") {
        entry = keys[0].clone();
    }
    (key, entry)
}

#[test]
fn keygen_prints_a_fresh_key_and_a_working_entry() {
    let (key, entry) = keygen("pro", "robot");
    assert_eq!(key.len(), 67);
    assert!(key.starts_with("ps_") && key[3..].bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(entry["name"], "robot", "{entry}");
    assert_eq!(entry["plan"], "pro", "{entry}");
    assert_eq!(
        entry["sha256"].as_str().map(str::to_ascii_lowercase),
        Some(sha256_hex(&key)),
        "{entry}"
    );
    assert!(entry.get("key").is_none(), "the entry holds only the hash");

    let (other, _) = keygen("pro", "robot");
    assert_ne!(key, other, "every key is new");
    let (_, free_entry) = keygen("free", "cheap");
    assert_eq!(free_entry["plan"], "free");

    let server = Server::builder().keys(json!({"keys": [entry]})).start();
    let resp = server.get("/v1/pets", Some(&key));
    assert_eq!(resp.status, 200, "{}", resp.describe());
    assert_eq!(x_ratelimit(&resp).0, 300, "pro plan");
    assert_eq!(server.get("/v1/pets", Some(&other)).status, 401);
}

#[test]
fn keys_never_appear_in_the_logs() {
    // With the access log on: one line per request, naming the entry.
    let mut server = Server::start(&["--access-log"]);
    assert_eq!(server.get("/v1/pets", Some(KEY)).status, 200);
    assert_eq!(server.get("/v1/pets", Some(HASHED_KEY)).status, 200);
    assert_eq!(
        server.get("/v1/pets", Some("guessed-secret-0815")).status,
        401
    );
    // A reload with the same file keeps the server up; wait for the log
    // line that only the handled SIGHUP writes.
    server.signal("HUP");
    assert!(
        wait_until(Duration::from_secs(10), || server
            .stderr_text()
            .contains("SIGHUP: reloaded keys file, 3 key(s) in force")),
        "the reload was never logged; stderr:\n{}",
        server.stderr_text()
    );
    assert_eq!(server.get("/v1/pets", Some(KEY)).status, 200);
    server.signal("TERM");
    server.wait_exit(Duration::from_secs(15));
    let stderr = server.stderr_text();
    // The access log is there to be scanned: four lines, with the
    // entries' names and no key.
    let access: Vec<Value> = stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&Value> = access.iter().map(|line| &line["key"]).collect();
    assert_eq!(
        names,
        [
            &json!("main"),
            &json!("hashed"),
            &Value::Null,
            &json!("main")
        ],
        "{stderr}"
    );
    let logs = format!("{stderr}\n{}", server.stdout_lines().join("\n"));
    for secret in [KEY, HASHED_KEY, "guessed-secret-0815"] {
        assert!(!logs.contains(secret), "`{secret}` was logged:\n{logs}");
    }
}

#[test]
fn keygen_for_enterprise_takes_its_limits_and_refuses_without_them() {
    // It printed an entry the server then refused ("plan enterprise needs
    // perMinute and perDay"): now it refuses, with the server's words,
    // and takes the limits.
    let refused = Command::new(common::BIN)
        .args(["keygen", "--plan", "enterprise", "--name", "bigco"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("needs perMinute and perDay"), "{stderr}");
    assert!(
        refused.stdout.is_empty(),
        "no key printed for a refused entry"
    );

    let out = Command::new(common::BIN)
        .args(["keygen", "--plan", "enterprise", "--name", "bigco"])
        .args(["--per-minute", "5000", "--per-day", "2000000"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let key = stdout
        .lines()
        .find_map(|l| l.strip_prefix("key: "))
        .unwrap()
        .to_owned();
    let entry: Value = stdout
        .lines()
        .find_map(|l| l.strip_prefix("entry: "))
        .map(|e| serde_json::from_str(e).unwrap())
        .unwrap();
    assert_eq!(
        (entry["perMinute"].as_u64(), entry["perDay"].as_u64()),
        (Some(5000), Some(2_000_000))
    );
    let server = Server::builder().keys(json!({"keys": [entry]})).start();
    let resp = server.get("/v1/pets", Some(&key));
    assert_eq!(resp.status, 200, "{}", resp.describe());
    assert_eq!(x_ratelimit(&resp).0, 5000);
}
