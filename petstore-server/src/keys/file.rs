//! The keys file (docs/contract.md, "Keys and plans"): reading it
//! safely, and checking every entry with a message that names the entry
//! and never a key.

use std::collections::{HashMap, HashSet};
use std::num::NonZeroU32;
use std::path::Path;
use std::sync::Arc;

use petstore_core::{
    limit::AnonymousLimiter, BanPolicy, KeyLimiter, Plan, Plans, Quota, Timestamp,
};
use serde_json::error::Category;
use serde_json::{Map, Value};

use super::expiry::parse_rfc3339;
use super::scope::{Scope, Scopes};
use super::table::{
    anonymous_headers, digest, key_headers, Access, KeyEntry, Keys, ANONYMOUS_CAPACITY,
    ANONYMOUS_PER_MINUTE,
};
use crate::log_error;
use crate::util::file_read::{read_regular_file, FileError};
use crate::util::hex::parse_digest;

/// The largest keys file read: a thousand keys take about 150 KB, and a
/// cap keeps a wrong path (a log, a device) from filling memory.
pub const KEYS_FILE_CAP: u64 = 1 << 20;

/// The largest `perMinute` and `perDay` (100,000,000): the bound under
/// which a shared limiter's arithmetic in doubles stays exact (every
/// intermediate below 2^53; the Redis script, `ratelimit/in_redis/limit.lua`).
/// Enforced with or without a shared limiter, so that turning one on
/// never makes a keys file invalid.
pub const MAX_QUOTA: u32 = 100_000_000;

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

/// The fields of the file, of an entry, of a plan and of `ban`.
const FILE_FIELDS: &[&str] = &["keys", "plans", "ban", "anonymousPerMinute"];
const ENTRY_FIELDS: &[&str] = &[
    "name",
    "key",
    "sha256",
    "plan",
    "perMinute",
    "perDay",
    "scopes",
    "expiresAt",
];
const PLAN_FIELDS: &[&str] = &["perMinute", "perDay"];
const BAN_FIELDS: &[&str] = &["strikes", "windowSeconds", "banSeconds"];

struct KeyFileEntry {
    name: String,
    key: Option<String>,
    /// One digest, or the two of a key being rotated.
    sha256: Vec<String>,
    plan: String,
    per_minute: Option<u32>,
    per_day: Option<u32>,
    scopes: Scopes,
    expires_at: Option<Timestamp>,
}

/// The secrets an entry may hold at once: the key in use and, while it
/// is rotated, its successor (docs/operating.md, "Rotating a key").
pub const MAX_SECRETS: usize = 2;

// Why the file is walked by hand rather than with `serde` derives:
// serde's messages quote the value at fault (`invalid type: string
// "sk-live-...", expected u32`, `unknown field `...``), and a key pasted
// one line off would land in the log. Every message here names the place
// (the entry, the field) and the expected type, and only the *type* of
// what was found, never a value or an unknown field's name.

/// What kind of JSON value this is, for messages (never the value).
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_u64() => "a number out of range",
        Value::Number(_) => "a negative or fractional number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn object<'v>(v: &'v Value, at: &str, what: &str) -> Result<&'v Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| format!("{at} must be {what} (a JSON object), found {}", kind(v)))
}

/// An unknown field, without its name (it could be a key); a known field
/// one typo away is suggested.
fn unknown_field(at: &str, name: &str, known: &[&str]) -> String {
    let hint = known
        .iter()
        .map(|k| (edit_distance(name, k), k))
        .filter(|(d, _)| *d <= 3)
        .min()
        .map(|(_, k)| format!(", perhaps a misspelt `{k}`"))
        .unwrap_or_default();
    format!(
        "{at} has an unknown field{hint} (the fields are {}; an unknown field's name is not printed, it could be a key)",
        known.join(", ")
    )
}

/// Levenshtein distance, for the typo hint; names longer than 64
/// characters are never near a field.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a.len() > 64 {
        return usize::MAX;
    }
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

fn check_fields(obj: &Map<String, Value>, at: &str, known: &[&str]) -> Result<(), String> {
    match obj.keys().find(|k| !known.contains(&k.as_str())) {
        Some(name) => Err(unknown_field(at, name, known)),
        None => Ok(()),
    }
}

fn string(obj: &Map<String, Value>, at: &str, field: &str) -> Result<Option<String>, String> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(format!("{at}: {field} must be a string, found {}", kind(v))),
    }
}

fn whole<T: TryFrom<u64>>(
    obj: &Map<String, Value>,
    at: &str,
    field: &str,
    max: u64,
) -> Result<Option<T>, String> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .filter(|n| *n <= max)
            .and_then(|n| T::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| {
                format!(
                    "{at}: {field} must be a whole number from 0 to {max}, found {}",
                    kind(v)
                )
            }),
    }
}

/// `sha256`: one digest, or an array of the digests of a key being
/// rotated.
fn digests(obj: &Map<String, Value>, at: &str) -> Result<Vec<String>, String> {
    let many = |v: &Value| {
        format!(
            "{at}: sha256 must be a string or an array of strings, found {}",
            kind(v)
        )
    };
    match obj.get("sha256") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(v @ Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned).ok_or_else(|| many(v)))
            .collect(),
        Some(v) => Err(many(v)),
    }
}

/// `scopes`: an array of scope names; all of them when absent. An
/// unknown one is named (a scope name is no secret) with the known ones.
fn scopes(obj: &Map<String, Value>, at: &str) -> Result<Scopes, String> {
    let known = || {
        Scope::ALL
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match obj.get("scopes") {
        None | Some(Value::Null) => Ok(Scopes::ALL),
        Some(Value::Array(items)) => items.iter().try_fold(Scopes::NONE, |set, item| {
            let name = item.as_str().ok_or_else(|| {
                format!("{at}: scopes must be an array of strings, found {} in it", kind(item))
            })?;
            // Not printed: a value one line off could be a key.
            let scope = Scope::parse(name).ok_or_else(|| {
                format!(
                    "{at}: scopes holds an unknown scope (the scopes are {}; an unknown one is not printed, it could be a key)",
                    known()
                )
            })?;
            Ok(set.with(scope))
        }),
        Some(v) => Err(format!(
            "{at}: scopes must be an array of strings, found {}",
            kind(v)
        )),
    }
}

/// `expiresAt`: an RFC 3339 date-time.
fn expires_at(obj: &Map<String, Value>, at: &str) -> Result<Option<Timestamp>, String> {
    string(obj, at, "expiresAt")?
        .map(|text| {
            parse_rfc3339(&text).ok_or_else(|| {
                format!(
                    "{at}: expiresAt must be an RFC 3339 date-time such as 2027-02-26T10:00:00Z"
                )
            })
        })
        .transpose()
}

fn required<T>(v: Option<T>, at: &str, field: &str) -> Result<T, String> {
    v.ok_or_else(|| format!("{at}: {field} is missing"))
}

fn parse_plan_name(s: &str) -> Option<Plan> {
    s.parse().ok()
}

const PLAN_NAMES: &str = "free, pro, business or enterprise";

fn entry(obj: &Map<String, Value>, at: &str) -> Result<KeyFileEntry, String> {
    check_fields(obj, at, ENTRY_FIELDS)?;
    let quota_max = u64::from(MAX_QUOTA);
    Ok(KeyFileEntry {
        name: required(string(obj, at, "name")?, at, "name")?,
        key: string(obj, at, "key")?,
        sha256: digests(obj, at)?,
        plan: required(string(obj, at, "plan")?, at, "plan")?,
        per_minute: whole(obj, at, "perMinute", quota_max)?,
        per_day: whole(obj, at, "perDay", quota_max)?,
        scopes: scopes(obj, at)?,
        expires_at: expires_at(obj, at)?,
    })
}

/// A JSON syntax error: serde_json's syntax messages name the problem
/// and the position, never the text.
fn syntax_error(e: &serde_json::Error) -> String {
    match e.classify() {
        Category::Syntax | Category::Eof => format!("not valid JSON: {e}"),
        Category::Io | Category::Data => {
            format!("not valid JSON at line {} column {}", e.line(), e.column())
        }
    }
}

impl Keys {
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
        let root: Value = serde_json::from_slice(text).map_err(|e| syntax_error(&e))?;
        let file = object(&root, "the file", "the keys file")?;
        check_fields(file, "the file", FILE_FIELDS)?;
        let mut plans = Plans::default();
        if let Some(v) = file.get("plans") {
            for (name, limits) in object(v, "plans", "an object of plans")? {
                // The plan's name is not printed: it could be a key.
                let plan = parse_plan_name(name)
                    .ok_or_else(|| format!("plans: a plan name is not {PLAN_NAMES}"))?;
                let at = format!("plans.{}", plan.as_str());
                let limits = object(limits, &at, "a plan's limits")?;
                check_fields(limits, &at, PLAN_FIELDS)?;
                let max = u64::from(MAX_QUOTA);
                let minute = required(whole(limits, &at, "perMinute", max)?, &at, "perMinute")?;
                let day = required(whole(limits, &at, "perDay", max)?, &at, "perDay")?;
                let quota = Quota::new(minute, day).map_err(|e| format!("{at}: {e}"))?;
                plans.set(plan, quota);
            }
        }
        let ban = match file.get("ban") {
            None | Some(Value::Null) => BanPolicy::default(),
            Some(v) => {
                let b = object(v, "ban", "the ban policy")?;
                check_fields(b, "ban", BAN_FIELDS)?;
                let strikes = required(
                    whole(b, "ban", "strikes", u64::from(u32::MAX))?,
                    "ban",
                    "strikes",
                )?;
                let window = required(
                    whole(b, "ban", "windowSeconds", u64::MAX)?,
                    "ban",
                    "windowSeconds",
                )?;
                let secs = required(
                    whole(b, "ban", "banSeconds", u64::MAX)?,
                    "ban",
                    "banSeconds",
                )?;
                BanPolicy::new(strikes, window, secs).map_err(|e| format!("ban: {e}"))?
            }
        };
        let anonymous_per_minute: Option<u32> =
            whole(file, "the file", "anonymousPerMinute", u64::from(u32::MAX))?;
        let anonymous_per_minute =
            NonZeroU32::new(anonymous_per_minute.unwrap_or(ANONYMOUS_PER_MINUTE))
                .ok_or("anonymousPerMinute must be at least 1")?;
        let entries = match file.get("keys") {
            Some(Value::Array(entries)) => entries,
            Some(v) => {
                return Err(format!(
                    "keys must be an array of entries, found {}",
                    kind(v)
                ))
            }
            None => return Err("the file: keys is missing".into()),
        };

        let mut names = HashSet::new();
        let mut digests = HashSet::new();
        let mut staged = Vec::new();
        for (i, raw) in entries.iter().enumerate() {
            let at = match raw.get("name").and_then(Value::as_str) {
                Some(name) => format!("keys[{i}] (name {name:?})"),
                None => format!("keys[{i}]"),
            };
            let entry = entry(object(raw, &at, "an entry")?, &at)?;
            if entry.name.trim().is_empty() {
                return Err(format!("keys[{i}]: name must not be empty"));
            }
            if !names.insert(entry.name.clone()) {
                return Err(format!("{at}: duplicate name"));
            }
            // Its secrets, in their order: the first names the entry's
            // limiter state outside the process (`state_id.rs`).
            let mut secrets = Vec::with_capacity(MAX_SECRETS);
            if let Some(key) = &entry.key {
                if key.is_empty() {
                    return Err(format!("{at}: key must not be empty"));
                }
                secrets.push(digest(key));
            }
            for hash in &entry.sha256 {
                secrets.push(
                    parse_digest(hash)
                        .ok_or_else(|| format!("{at}: sha256 must be 64 hex digits"))?,
                );
            }
            if secrets.is_empty() || secrets.len() > MAX_SECRETS {
                return Err(format!(
                    "{at}: give one secret (key or sha256), or two while the key is rotated"
                ));
            }
            // The value is not printed: it could be a key.
            let plan = parse_plan_name(&entry.plan)
                .ok_or_else(|| format!("{at}: plan is not {PLAN_NAMES}"))?;
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
            // Found by any of its secrets: a rotation that drops the old
            // secret (the one that was first) finds the entry by the new
            // one, which the table in force holds too, and keeps its
            // buckets.
            let limiter = previous
                .and_then(|p| secrets.iter().find_map(|d| p.by_digest.get(d)))
                .filter(|old| old.limiter.quota() == quota)
                .map(|old| old.limiter.clone())
                .unwrap_or_else(|| Arc::new(KeyLimiter::new(quota, ban)));
            for secret in &secrets {
                if !digests.insert(*secret) {
                    return Err(format!(
                        "{at}: duplicate key (same key as an earlier entry, or twice in this one)"
                    ));
                }
            }
            let access = Access {
                scopes: entry.scopes,
                expires_at: entry.expires_at,
            };
            staged.push((entry.name, secrets, plan, quota, limiter, access));
        }
        // Only a file that is valid as a whole interns its names and
        // policies (interned text lives as long as the process), and
        // changes the ban policy of limiters still shared with the table
        // in force.
        let mut by_digest = HashMap::new();
        for (name, secrets, plan, quota, limiter, access) in staged {
            if limiter.ban_policy() != ban {
                limiter.set_ban_policy(ban);
            }
            let entry = KeyEntry::new(&name, plan, limiter, key_headers(quota, ban), secrets[0])
                .with_access(access);
            // Every secret of the entry finds the one entry: one
            // identity, one set of buckets.
            let entry = Arc::new(entry);
            for secret in secrets {
                by_digest.insert(secret, entry.clone());
            }
        }
        let capacity = previous.map_or(ANONYMOUS_CAPACITY, |p| p.anonymous.capacity());
        let anonymous = previous
            .map(|p| p.anonymous.clone())
            .filter(|a| a.per_minute() == anonymous_per_minute.get())
            .unwrap_or_else(|| Arc::new(AnonymousLimiter::new(anonymous_per_minute, capacity)));
        Ok(Keys {
            by_digest,
            anonymous_headers: anonymous_headers(&anonymous),
            anonymous,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::hex::hex;

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
                "keys[0] (name \"a\"): plan is not free, pro, business or enterprise",
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
                "keys[0] (name \"a\") has an unknown field (the fields are name, key, sha256, plan, perMinute, perDay, scopes, expiresAt;",
            ),
            (
                r#"{"keys":[],"anonymousPerMinutes":1}"#,
                "the file has an unknown field, perhaps a misspelt `anonymousPerMinute`",
            ),
            (
                r#"{"keys":[{"name":"a","sha256":"abc","plan":"free"}]}"#,
                "keys[0] (name \"a\"): sha256 must be 64 hex digits",
            ),
            (
                r#"{"keys":[{"name":"a","plan":"free"}]}"#,
                "keys[0] (name \"a\"): give one secret (key or sha256), or two while the key is rotated",
            ),
            (
                r#"{"keys":[{"name":"a","key":"k","sha256":["0000000000000000000000000000000000000000000000000000000000000001","0000000000000000000000000000000000000000000000000000000000000002"],"plan":"free"}]}"#,
                "keys[0] (name \"a\"): give one secret (key or sha256), or two while the key is rotated",
            ),
            (
                r#"{"keys":[{"name":"a","sha256":["0000000000000000000000000000000000000000000000000000000000000001","0000000000000000000000000000000000000000000000000000000000000001"],"plan":"free"}]}"#,
                "keys[0] (name \"a\"): duplicate key (same key as an earlier entry, or twice in this one)",
            ),
            (
                r#"{"keys":[{"name":"a","key":"k","plan":"free","scopes":["pets:read","ps_live_secret"]}]}"#,
                "keys[0] (name \"a\"): scopes holds an unknown scope (the scopes are pets:read, pets:write, orders, orders:all, events; an unknown one is not printed",
            ),
            (
                r#"{"keys":[{"name":"a","key":"k","plan":"free","scopes":"orders"}]}"#,
                "keys[0] (name \"a\"): scopes must be an array of strings, found a string",
            ),
            (
                r#"{"keys":[{"name":"a","key":"k","plan":"free","expiresAt":"next week"}]}"#,
                "keys[0] (name \"a\"): expiresAt must be an RFC 3339 date-time",
            ),
            (
                r#"{"keys":[{"name":"a","key":"k","plan":"free","perMinute":0}]}"#,
                "keys[0] (name \"a\"): a rate limit must allow",
            ),
            (
                r#"{"keys":[],"plans":{"silver":{"perMinute":1,"perDay":1}}}"#,
                "plans: a plan name is not free, pro, business or enterprise",
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
    fn errors_name_the_place_and_the_type_never_the_value() {
        let secret = "sk-live-0123456789abcdef";
        let cases = [
            (format!(r#"{{"keys":["{secret}"]}}"#), "keys[0] must be an entry (a JSON object), found a string"),
            (format!(r#"{{"keys":"{secret}"}}"#), "keys must be an array of entries, found a string"),
            (
                format!(r#"{{"keys":[{{"name":"a","key":"k","plan":"free","perMinute":"{secret}"}}]}}"#),
                "keys[0] (name \"a\"): perMinute must be a whole number from 0 to 100000000, found a string",
            ),
            (
                format!(r#"{{"keys":[{{"name":"a","key":"k","plan":"{secret}"}}]}}"#),
                "keys[0] (name \"a\"): plan is not free",
            ),
            (
                format!(r#"{{"keys":[{{"name":"a","key":"k","plan":"free","{secret}":1}}]}}"#),
                "keys[0] (name \"a\") has an unknown field (the fields",
            ),
            // The bound of the Redis script's exact arithmetic (MAX_QUOTA).
            (
                r#"{"keys":[{"name":"big","key":"k","plan":"free","perDay":100000001}]}"#.to_owned(),
                "keys[0] (name \"big\"): perDay must be a whole number from 0 to 100000000, found a number out of range",
            ),
            (
                r#"{"keys":[],"plans":{"pro":{"perMinute":100000001,"perDay":1}}}"#.to_owned(),
                "plans.pro: perMinute must be a whole number from 0 to 100000000, found a number out of range",
            ),
            (
                r#"{"keys":[{"name":"a","key":"k","plan":"free","perDay":-1}]}"#.to_owned(),
                "perDay must be a whole number from 0 to 100000000, found a negative or fractional number",
            ),
            (
                format!(r#"{{"keys":[],"plans":{{"{secret}":{{"perMinute":1,"perDay":1}}}}}}"#),
                "plans: a plan name is not",
            ),
            (
                format!(r#"{{"keys":[],"plans":{{"free":{{"perMinute":"{secret}","perDay":1}}}}}}"#),
                "plans.free: perMinute must be a whole number",
            ),
            (
                format!(r#"{{"keys":[],"ban":{{"strikes":1,"windowSeconds":"{secret}","banSeconds":1}}}}"#),
                "ban: windowSeconds must be a whole number",
            ),
            (
                format!(r#"{{"keys":[],"anonymousPerMinute":"{secret}"}}"#),
                "the file: anonymousPerMinute must be a whole number",
            ),
            (format!(r#"["{secret}"]"#), "the file must be the keys file (a JSON object), found an array"),
            (format!(r#"{{"keys":[{secret}]}}"#), "not valid JSON: expected value at line 1 column 10"),
            (format!(r#"{{"keys":["{secret}]}}"#), "not valid JSON: EOF while parsing a string"),
            (format!(r#"{{"keys":[{{"name":"a","key":"k","plan":"free","perDay":1{secret}}}]}}"#), "not valid JSON"),
        ];
        for (json, want) in cases {
            let err = parse(&json).unwrap_err();
            assert!(err.contains(want), "{json}: got {err:?}, want {want:?}");
            assert!(!err.contains("sk-live"), "{json}: the value is in {err:?}");
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
        assert_eq!(parse_digest(&hex(&d)), Some(d));
        assert_eq!(parse_digest(&"zz".repeat(32)), None);
        // from_str_radix alone would take a sign.
        assert_eq!(parse_digest(&"+f".repeat(32)), None);
    }
}
