//! API keys: the JSON keys file of decisions.md, parsed into a [`Keys`]
//! table that maps the SHA-256 of a presented key to its entry.
//!
//! Why hash every presented key: the file may hold only hashes (the
//! preferred form), the table never holds a usable key, and a lookup by
//! digest leaks nothing useful through timing; the final comparison is
//! constant-time anyway (`subtle`).

use std::collections::{HashMap, HashSet};
use std::num::NonZeroU32;
use std::path::Path;
use std::sync::Arc;

use petstore_core::{AnonymousLimiter, BanPolicy, KeyLimiter, Plan, Plans, Quota, Timestamp};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::file_read::{read_regular_file, FileError};
use crate::headers::QuotaHeaders;
use crate::intern::intern;
use crate::log_error;

/// Anonymous clients remembered at most (see `AnonymousLimiter`): about
/// 5 MB, and far more than the addresses one server sees in a minute.
const ANONYMOUS_CAPACITY: usize = 100_000;

/// The largest keys file read: a thousand keys take about 150 KB, and a
/// cap keeps a wrong path (a log, a device) from filling memory.
pub const KEYS_FILE_CAP: u64 = 1 << 20;

/// Why a keys file was refused; the message names the entry.
#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    /// The file could not be read.
    #[error("cannot read keys file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: FileError,
    },
    /// Not the documented JSON shape.
    #[error("keys file {path} is not valid: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong, naming the entry.
        message: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeysFile {
    /// Parsed one by one, so an error in an entry names the entry.
    keys: Vec<serde_json::Value>,
    #[serde(default)]
    plans: HashMap<String, PlanLimits>,
    ban: Option<BanFile>,
    #[serde(rename = "anonymousPerMinute")]
    anonymous_per_minute: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFileEntry {
    name: String,
    key: Option<String>,
    sha256: Option<String>,
    plan: String,
    #[serde(rename = "perMinute")]
    per_minute: Option<u32>,
    #[serde(rename = "perDay")]
    per_day: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanLimits {
    #[serde(rename = "perMinute")]
    per_minute: u32,
    #[serde(rename = "perDay")]
    per_day: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BanFile {
    strikes: u32,
    #[serde(rename = "windowSeconds")]
    window_seconds: u64,
    #[serde(rename = "banSeconds")]
    ban_seconds: u64,
}

/// One key's entry: who it is, its plan, and its limiter.
#[derive(Debug)]
pub struct KeyEntry {
    /// The entry's name (logged instead of the key), [`intern`]ed.
    pub name: &'static str,
    /// The plan.
    pub plan: Plan,
    /// The key's buckets; shared with the next table on reload when the
    /// entry is unchanged, so a reload does not refill them.
    pub limiter: Arc<KeyLimiter>,
    /// Its quota's rate-limit header values.
    pub quota_headers: QuotaHeaders,
    digest: [u8; 32],
}

impl KeyEntry {
    /// The SHA-256 of the key: how the key is named anywhere outside
    /// the process (the limiter state), never the key itself.
    pub fn digest(&self) -> &[u8; 32] {
        &self.digest
    }
}

/// The key table in force, and the limits of requests without a key.
#[derive(Debug)]
pub struct Keys {
    // Entries are shared so that a connection can remember the entry of
    // the key it presented (`connection.rs`) across requests.
    by_digest: HashMap<[u8; 32], Arc<KeyEntry>>,
    /// Limits of requests without a valid key, per client address.
    pub anonymous: Arc<AnonymousLimiter>,
    /// The quota's rate-limit header values of requests without a valid
    /// key.
    pub anonymous_headers: QuotaHeaders,
}

/// The policy header of a limiter, from a decision it made at time zero
/// on a throwaway copy (the numbers depend only on the quota).
fn key_headers(quota: Quota, ban: BanPolicy) -> QuotaHeaders {
    QuotaHeaders::of(&KeyLimiter::new(quota, ban).check(Timestamp::default()))
}

fn anonymous_headers(limiter: &AnonymousLimiter) -> QuotaHeaders {
    let probe = AnonymousLimiter::new(
        NonZeroU32::new(limiter.per_minute()).unwrap_or(NonZeroU32::MIN),
        2,
    );
    QuotaHeaders::of(&probe.check(std::net::IpAddr::from([0, 0, 0, 0]), Timestamp::default()))
}

/// SHA-256 of a presented key.
pub fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    out
}

fn parse_hex_digest(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in s.as_bytes().chunks(2).enumerate() {
        let text = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(text, 16).ok()?;
    }
    Some(out)
}

impl Keys {
    /// A table with one key (the development key of a server started
    /// without a keys file).
    pub fn single(name: &str, key: &str, quota: Quota) -> Keys {
        let entry = KeyEntry {
            name: intern(name),
            plan: Plan::Pro,
            limiter: Arc::new(KeyLimiter::new(quota, BanPolicy::default())),
            quota_headers: key_headers(quota, BanPolicy::default()),
            digest: digest(key),
        };
        let anonymous = AnonymousLimiter::new(
            NonZeroU32::new(60).unwrap_or(NonZeroU32::MIN),
            ANONYMOUS_CAPACITY,
        );
        Keys {
            by_digest: HashMap::from([(entry.digest, Arc::new(entry))]),
            anonymous_headers: anonymous_headers(&anonymous),
            anonymous: Arc::new(anonymous),
        }
    }

    /// Reads and checks a keys file: a regular file of at most
    /// [`KEYS_FILE_CAP`] bytes (see `file_read`: a FIFO is refused without
    /// being opened). `previous`, the table in force, lends its limiters
    /// to the entries whose quota did not change. Logs a warning when
    /// the file is writable by group or others: whoever can write it can
    /// give themselves a key.
    pub fn load(path: &Path, previous: Option<&Keys>) -> Result<Keys, KeysError> {
        use std::os::unix::fs::PermissionsExt;
        let (text, meta) =
            read_regular_file(path, KEYS_FILE_CAP).map_err(|source| KeysError::Read {
                path: path.display().to_string(),
                source,
            })?;
        let keys = Keys::parse(&text, previous).map_err(|message| KeysError::Invalid {
            path: path.display().to_string(),
            message,
        })?;
        let mode = meta.permissions().mode();
        if mode & 0o022 != 0 {
            log_error!(
                "WARNING: keys file {} is writable by {} (mode {:o}); whoever can write it can add a key: chmod go-w it",
                path.display(),
                match (mode & 0o020 != 0, mode & 0o002 != 0) {
                    (true, true) => "group and others",
                    (true, false) => "its group",
                    _ => "others",
                },
                mode & 0o7777
            );
        }
        Ok(keys)
    }

    /// Parses the keys file's JSON; the error names the entry at fault.
    pub fn parse(text: &[u8], previous: Option<&Keys>) -> Result<Keys, String> {
        let file: KeysFile = serde_json::from_slice(text).map_err(|e| e.to_string())?;
        let mut plans = Plans::default();
        for (name, limits) in &file.plans {
            let plan: Plan = name.parse().map_err(|e| format!("plans: {e}"))?;
            let quota = Quota::new(limits.per_minute, limits.per_day)
                .map_err(|e| format!("plans.{name}: {e}"))?;
            plans.set(plan, quota);
        }
        let ban = match &file.ban {
            None => BanPolicy::default(),
            Some(b) => BanPolicy::new(b.strikes, b.window_seconds, b.ban_seconds)
                .map_err(|e| format!("ban: {e}"))?,
        };
        let anonymous_per_minute = NonZeroU32::new(file.anonymous_per_minute.unwrap_or(60))
            .ok_or("anonymousPerMinute must be at least 1")?;

        let mut names = HashSet::new();
        let mut digests = HashSet::new();
        let mut staged = Vec::new();
        for (i, raw) in file.keys.into_iter().enumerate() {
            let at = match raw.get("name").and_then(serde_json::Value::as_str) {
                Some(name) => format!("keys[{i}] (name {name:?})"),
                None => format!("keys[{i}]"),
            };
            let entry: KeyFileEntry =
                serde_json::from_value(raw).map_err(|e| format!("{at}: {e}"))?;
            if entry.name.trim().is_empty() {
                return Err(format!("keys[{i}]: name must not be empty"));
            }
            if !names.insert(entry.name.clone()) {
                return Err(format!("{at}: duplicate name"));
            }
            let digest = match (&entry.key, &entry.sha256) {
                (Some(key), None) if !key.is_empty() => digest(key),
                (None, Some(hash)) => parse_hex_digest(hash)
                    .ok_or_else(|| format!("{at}: sha256 must be 64 hex digits"))?,
                _ => {
                    return Err(format!(
                        "{at}: give exactly one of key or sha256 (non-empty)"
                    ))
                }
            };
            let plan: Plan = entry.plan.parse().map_err(|e| format!("{at}: {e}"))?;
            let custom = match (entry.per_minute, entry.per_day) {
                (None, None) => None,
                (minute, day) => {
                    let base = plans.quota(plan, None).ok();
                    let minute = minute.or(base.map(|q| q.per_minute().get()));
                    let day = day.or(base.map(|q| q.per_day().get()));
                    match (minute, day) {
                        (Some(m), Some(d)) => {
                            Some(Quota::new(m, d).map_err(|e| format!("{at}: {e}"))?)
                        }
                        _ => {
                            return Err(format!("{at}: plan enterprise needs perMinute and perDay"))
                        }
                    }
                }
            };
            let quota = plans
                .quota(plan, custom)
                .map_err(|e| format!("{at}: {e}"))?;
            // Only a changed quota restarts a key's limiter: a changed
            // ban policy is set on the limiter in force below, once the
            // whole file is known to be valid, so that an edit of the
            // `ban` section refills no key.
            let limiter = previous
                .and_then(|p| p.by_digest.get(&digest))
                .filter(|old| old.limiter.quota() == quota)
                .map(|old| old.limiter.clone())
                .unwrap_or_else(|| Arc::new(KeyLimiter::new(quota, ban)));
            if !digests.insert(digest) {
                return Err(format!(
                    "{at}: duplicate key (same key as an earlier entry)"
                ));
            }
            staged.push((entry.name, digest, plan, quota, limiter));
        }
        // Only a file that is valid as a whole interns its names and
        // policies (interned text lives as long as the process), and
        // changes the ban policy of limiters still shared with the table
        // in force.
        let by_digest = staged
            .into_iter()
            .map(|(name, digest, plan, quota, limiter)| {
                if limiter.ban_policy() != ban {
                    limiter.set_ban_policy(ban);
                }
                let entry = KeyEntry {
                    name: intern(&name),
                    plan,
                    limiter,
                    quota_headers: key_headers(quota, ban),
                    digest,
                };
                (digest, Arc::new(entry))
            })
            .collect();
        let anonymous = previous
            .map(|p| p.anonymous.clone())
            .filter(|a| a.per_minute() == anonymous_per_minute.get())
            .unwrap_or_else(|| {
                Arc::new(AnonymousLimiter::new(
                    anonymous_per_minute,
                    ANONYMOUS_CAPACITY,
                ))
            });
        Ok(Keys {
            by_digest,
            anonymous_headers: anonymous_headers(&anonymous),
            anonymous,
        })
    }

    /// The entry of a presented key.
    pub fn lookup(&self, key: &str) -> Option<&Arc<KeyEntry>> {
        let presented = digest(key);
        self.by_digest
            .get(&presented)
            .filter(|entry| bool::from(entry.digest.ct_eq(&presented)))
    }

    /// Every entry, in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = &Arc<KeyEntry>> {
        self.by_digest.values()
    }

    /// How many keys are in force.
    pub fn len(&self) -> usize {
        self.by_digest.len()
    }

    /// Whether no key is in force.
    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<Keys, String> {
        Keys::parse(json.as_bytes(), None)
    }

    #[test]
    fn accepts_the_documented_example() {
        let hash = hex(&digest("secret"));
        let json = format!(
            r#"{{"keys":[
              {{"name":"shop-frontend","sha256":"{hash}","plan":"pro"}},
              {{"name":"local-dev","key":"dev-123","plan":"free"}},
              {{"name":"bigco","key":"big","plan":"enterprise","perMinute":5000,"perDay":2000000}}],
             "plans":{{"free":{{"perMinute":60,"perDay":1000}}}},
             "ban":{{"strikes":60,"windowSeconds":60,"banSeconds":600}},
             "anonymousPerMinute":60}}"#
        );
        let keys = parse(&json).unwrap();
        assert_eq!(keys.lookup("secret").map(|e| e.name), Some("shop-frontend"));
        assert_eq!(keys.lookup("dev-123").map(|e| e.plan), Some(Plan::Free));
        let big = keys.lookup("big").unwrap();
        assert_eq!(big.limiter.quota(), Quota::new(5000, 2_000_000).unwrap());
        assert!(keys.lookup("nope").is_none());
    }

    #[test]
    fn refuses_bad_files_naming_the_entry() {
        let cases = [
            (
                r#"{"keys":[{"name":"a","key":"k","plan":"gold"}]}"#,
                "keys[0] (name \"a\"): unknown plan `gold`",
            ),
            (
                r#"{"keys":[{"name":"a","key":"k","plan":"free"},{"name":"a","key":"j","plan":"free"}]}"#,
                "keys[1] (name \"a\"): duplicate name",
            ),
            (
                r#"{"keys":[{"name":"a","key":"k","plan":"free"},{"name":"b","key":"k","plan":"free"}]}"#,
                "keys[1] (name \"b\"): duplicate key",
            ),
            (
                r#"{"keys":[{"name":"a","key":"k","plan":"enterprise"}]}"#,
                "keys[0] (name \"a\"): plan `enterprise` needs perMinute and perDay",
            ),
            (
                r#"{"keys":[{"name":"a","key":"k","plan":"enterprise","perMinute":5}]}"#,
                "keys[0] (name \"a\"): plan enterprise needs perMinute and perDay",
            ),
            (
                r#"{"keys":[{"name":"a","key":"k","plan":"free","colour":1}]}"#,
                "unknown field `colour`",
            ),
            (r#"{"keys":[],"extra":1}"#, "unknown field `extra`"),
            (
                r#"{"keys":[{"name":"a","sha256":"abc","plan":"free"}]}"#,
                "keys[0] (name \"a\"): sha256 must be 64 hex digits",
            ),
            (
                r#"{"keys":[{"name":"a","key":"k","sha256":"abc","plan":"free"}]}"#,
                "keys[0] (name \"a\"): give exactly one",
            ),
            (
                r#"{"keys":[{"name":"a","key":"k","plan":"free","perMinute":0}]}"#,
                "keys[0] (name \"a\"): a rate limit must allow",
            ),
            (
                r#"{"keys":[],"plans":{"silver":{"perMinute":1,"perDay":1}}}"#,
                "plans: unknown plan `silver`",
            ),
            (
                r#"{"keys":[],"ban":{"strikes":0,"windowSeconds":1,"banSeconds":1}}"#,
                "ban: ",
            ),
            (
                r#"{"keys":[],"anonymousPerMinute":0}"#,
                "anonymousPerMinute must be at least 1",
            ),
        ];
        for (json, want) in cases {
            let err = parse(json).unwrap_err();
            assert!(err.contains(want), "{json}: got {err:?}, want {want:?}");
        }
    }

    #[test]
    fn reload_keeps_the_state_of_unchanged_keys_only() {
        let v1 = r#"{"keys":[{"name":"a","key":"ka","plan":"free"},{"name":"b","key":"kb","plan":"free"}]}"#;
        let v2 = r#"{"keys":[{"name":"a","key":"ka","plan":"free"},{"name":"b","key":"kb","plan":"pro"},{"name":"c","key":"kc","plan":"free"}]}"#;
        let old = parse(v1).unwrap();
        let new = Keys::parse(v2.as_bytes(), Some(&old)).unwrap();
        let same = |k: &str| {
            Arc::ptr_eq(
                &old.lookup(k).unwrap().limiter,
                &new.lookup(k).unwrap().limiter,
            )
        };
        assert!(same("ka"));
        assert!(!same("kb"));
        // An edit of the ban section keeps every key's limiter, with the
        // new policy.
        let v3 = r#"{"keys":[{"name":"a","key":"ka","plan":"free"},{"name":"b","key":"kb","plan":"pro"}],
                    "ban":{"strikes":2,"windowSeconds":5,"banSeconds":7}}"#;
        let newer = Keys::parse(v3.as_bytes(), Some(&new)).unwrap();
        for k in ["ka", "kb"] {
            let limiter = &newer.lookup(k).unwrap().limiter;
            assert!(Arc::ptr_eq(&new.lookup(k).unwrap().limiter, limiter));
            assert_eq!(limiter.ban_policy(), BanPolicy::new(2, 5, 7).unwrap());
        }
        assert!(Arc::ptr_eq(&old.anonymous, &new.anonymous));
        assert!(new.lookup("kc").is_some());
    }

    #[test]
    fn hex_round_trips() {
        let d = digest("x");
        assert_eq!(parse_hex_digest(&hex(&d)), Some(d));
        assert_eq!(parse_hex_digest(&"zz".repeat(32)), None);
        // from_str_radix alone would take a sign.
        assert_eq!(parse_hex_digest(&"+f".repeat(32)), None);
    }
}
