//! `petstore-server keygen`: a new random key and its keys-file entry;
//! with `--rotate`, a new key added to an entry of a keys file in place
//! (docs/operating.md, "Rotating a key").

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use petstore_core::{Plan, Timestamp};

use crate::keys::{digest, format_rfc3339, rotate, Keys, Scope, Scopes, KEYS_FILE_CAP};
use crate::util::file_read::read_regular_file;
use crate::util::hex::hex;

/// A new key: `ps_` and 64 hex digits, 256 bits from the operating system.
pub fn new_key() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(format!("ps_{}", hex(&bytes)))
}

/// What a new entry says besides its key: the keygen flags.
#[derive(Debug)]
pub struct NewEntry<'a> {
    /// `--name`.
    pub name: &'a str,
    /// `--plan`.
    pub plan: Plan,
    /// `--per-minute`.
    pub per_minute: Option<u32>,
    /// `--per-day`.
    pub per_day: Option<u32>,
    /// `--scope`s; none: the entry lists none, and has all.
    pub scopes: &'a [Scope],
    /// `--expires-in`, as the instant it ends at.
    pub expires_at: Option<Timestamp>,
}

impl<'a> NewEntry<'a> {
    /// An entry of `plan` named `name`, with nothing else said.
    pub fn new(name: &'a str, plan: Plan) -> Self {
        NewEntry {
            name,
            plan,
            per_minute: None,
            per_day: None,
            scopes: &[],
            expires_at: None,
        }
    }
}

/// The keys-file entry holding the key's SHA-256 (never the key itself),
/// with the entry's own limits, scopes and expiry when given
/// (`enterprise` needs both limits). Checked as the server would check
/// it in a keys file: an entry the server would refuse is an error, with
/// the server's own message, never printed for an operator to paste.
pub fn entry(key: &str, new: &NewEntry<'_>) -> Result<String, String> {
    let mut entry = serde_json::json!({
        "name": new.name,
        "sha256": hex(&digest(key)),
        "plan": new.plan.as_str(),
    });
    if let Some(n) = new.per_minute {
        entry["perMinute"] = n.into();
    }
    if let Some(n) = new.per_day {
        entry["perDay"] = n.into();
    }
    if !new.scopes.is_empty() {
        let set = new.scopes.iter().fold(Scopes::NONE, |set, s| set.with(*s));
        entry["scopes"] = set.iter().map(Scope::as_str).collect::<Vec<_>>().into();
    }
    if let Some(at) = new.expires_at {
        entry["expiresAt"] = format_rfc3339(at).into();
    }
    let file = serde_json::json!({ "keys": [&entry] }).to_string();
    Keys::parse(file.as_bytes(), None)?;
    Ok(entry.to_string())
}

/// The instant `after` from now, in whole seconds.
pub fn expires_after(after: Duration) -> Timestamp {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    Timestamp::from_unix_secs(now) + after
}

/// `keygen --rotate NAME --keys FILE`: a new key added to the entry's
/// secrets (and its expiry set, when given), the file replaced
/// atomically (a temporary file beside it, synced, renamed over it, with
/// the file's permissions), and the new key printed once.
pub fn rotate_in_file(path: &Path, name: &str, expires_at: Option<Timestamp>) -> ExitCode {
    let fail = |message: String| {
        eprintln!("keygen --rotate: {message}");
        ExitCode::from(2)
    };
    let (bytes, meta) = match read_regular_file(path, KEYS_FILE_CAP) {
        Ok(read) => read,
        Err(e) => return fail(format!("cannot read {}: {e}", path.display())),
    };
    let Ok(text) = String::from_utf8(bytes) else {
        return fail(format!("{} is not UTF-8", path.display()));
    };
    let key = match new_key() {
        Ok(key) => key,
        Err(e) => {
            return fail(format!(
                "cannot read random bytes from the operating system: {e}"
            ))
        }
    };
    let at = expires_at.map(format_rfc3339);
    let rotated = match rotate(&text, name, &hex(&digest(&key)), at.as_deref()) {
        Ok(rotated) => rotated,
        Err(e) => return fail(format!("{}: {e}; the file is unchanged", path.display())),
    };
    if let Err(e) = replace_file(path, rotated.as_bytes(), meta.permissions()) {
        return fail(format!(
            "cannot write {}: {e}; the file is unchanged",
            path.display()
        ));
    }
    println!("key: {key}");
    println!(
        "the entry {name:?} of {} now holds it beside its old key: send SIGHUP to each server that reads the file, move the clients to the new key, then remove the old one and send SIGHUP again",
        path.display()
    );
    ExitCode::SUCCESS
}

/// Writes `bytes` to `path` so that a reader sees the old file or the new
/// one, never a part: a temporary file in the same directory, synced,
/// then renamed over it, then the directory synced.
fn replace_file(
    path: &Path,
    bytes: &[u8],
    permissions: std::fs::Permissions,
) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{file_name}.rotate-{}", std::process::id()));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        file.set_permissions(permissions)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(name: &str, plan: Plan, per_minute: Option<u32>, per_day: Option<u32>) -> NewEntry<'_> {
        NewEntry {
            per_minute,
            per_day,
            ..NewEntry::new(name, plan)
        }
    }

    #[test]
    fn scopes_and_an_expiry_are_written_as_the_server_reads_them() {
        let key = new_key().unwrap();
        let entry = entry(
            &key,
            &NewEntry {
                scopes: &[Scope::Events, Scope::PetsRead, Scope::PetsRead],
                expires_at: Some(Timestamp::from_unix_secs(1_795_860_000)),
                ..NewEntry::new("window", Plan::Free)
            },
        )
        .unwrap();
        assert!(
            entry.contains(r#""scopes":["pets:read","events"]"#),
            "{entry}"
        );
        assert!(
            entry.contains(r#""expiresAt":"2026-11-28T10:00:00Z""#),
            "{entry}"
        );
        let keys = Keys::parse(format!(r#"{{"keys":[{entry}]}}"#).as_bytes(), None).unwrap();
        let access = keys.lookup(&key).unwrap().access;
        assert!(access.scopes.allows(Scope::Events) && !access.scopes.allows(Scope::Orders));
        assert!(access.expired(Timestamp::from_unix_secs(1_795_860_000)));
        assert!(!access.expired(Timestamp::from_unix_secs(1_795_859_999)));
    }

    #[test]
    fn keys_are_random_and_their_entries_work() {
        let a = new_key().unwrap();
        let b = new_key().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 3 + 64);
        let file = format!(
            r#"{{"keys":[{}]}}"#,
            entry(&a, &new("shop", Plan::Pro, None, None)).unwrap()
        );
        assert!(!file.contains(&a));
        let keys = Keys::parse(file.as_bytes(), None).unwrap();
        assert_eq!(keys.lookup(&a).map(|e| e.name), Some("shop"));
        assert!(keys.lookup(&b).is_none());
    }

    #[test]
    fn an_entry_the_server_would_refuse_is_refused_with_its_message() {
        let key = new_key().unwrap();
        // Enterprise has no limits of its own: the server's own refusal.
        for (minute, day) in [(None, None), (Some(5000), None), (None, Some(9))] {
            let refused = entry(&key, &new("bigco", Plan::Enterprise, minute, day)).unwrap_err();
            assert!(refused.contains("needs perMinute and perDay"), "{refused}");
        }
        // Over the bound of a quota.
        let refused = entry(
            &key,
            &new("huge", Plan::Enterprise, Some(1), Some(200_000_000)),
        );
        assert!(refused.is_err());
        // With both, an entry the server takes, limits included.
        let ok = entry(
            &key,
            &new("bigco", Plan::Enterprise, Some(5000), Some(2_000_000)),
        )
        .unwrap();
        let file = format!(r#"{{"keys":[{ok}]}}"#);
        let keys = Keys::parse(file.as_bytes(), None).unwrap();
        let quota = keys.lookup(&key).unwrap().limiter.quota();
        assert_eq!(
            (quota.per_minute().get(), quota.per_day().get()),
            (5000, 2_000_000)
        );
    }
}
