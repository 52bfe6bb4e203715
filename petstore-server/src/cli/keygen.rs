//! `petstore-server keygen`: a new random key and its keys-file entry.

use petstore_core::Plan;

use crate::keys::{digest, Keys};
use crate::util::hex::hex;

/// A new key: `ps_` and 64 hex digits, 256 bits from the operating system.
pub fn new_key() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(format!("ps_{}", hex(&bytes)))
}

/// The keys-file entry holding the key's SHA-256 (never the key itself),
/// with the entry's own limits when given (`enterprise` needs both).
/// Checked as the server would check it in a keys file: an entry the
/// server would refuse is an error, with the server's own message, never
/// printed for an operator to paste.
pub fn entry(
    key: &str,
    name: &str,
    plan: Plan,
    per_minute: Option<u32>,
    per_day: Option<u32>,
) -> Result<String, String> {
    let mut entry = serde_json::json!({
        "name": name,
        "sha256": hex(&digest(key)),
        "plan": plan.as_str(),
    });
    if let Some(n) = per_minute {
        entry["perMinute"] = n.into();
    }
    if let Some(n) = per_day {
        entry["perDay"] = n.into();
    }
    let file = serde_json::json!({ "keys": [&entry] }).to_string();
    Keys::parse(file.as_bytes(), None)?;
    Ok(entry.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_random_and_their_entries_work() {
        let a = new_key().unwrap();
        let b = new_key().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 3 + 64);
        let file = format!(
            r#"{{"keys":[{}]}}"#,
            entry(&a, "shop", Plan::Pro, None, None).unwrap()
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
            let refused = entry(&key, "bigco", Plan::Enterprise, minute, day).unwrap_err();
            assert!(refused.contains("needs perMinute and perDay"), "{refused}");
        }
        // Over the bound of a quota.
        let refused = entry(&key, "huge", Plan::Enterprise, Some(1), Some(200_000_000));
        assert!(refused.is_err());
        // With both, an entry the server takes, limits included.
        let ok = entry(&key, "bigco", Plan::Enterprise, Some(5000), Some(2_000_000)).unwrap();
        let file = format!(r#"{{"keys":[{ok}]}}"#);
        let keys = Keys::parse(file.as_bytes(), None).unwrap();
        let quota = keys.lookup(&key).unwrap().limiter.quota();
        assert_eq!(
            (quota.per_minute().get(), quota.per_day().get()),
            (5000, 2_000_000)
        );
    }
}
