//! `petstore-server keygen`: a new random key and its keys-file entry.

use petstore_core::Plan;

use crate::keys::digest;
use crate::util::hex::hex;

/// A new key: `ps_` and 64 hex digits, 256 bits from the operating system.
pub fn new_key() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(format!("ps_{}", hex(&bytes)))
}

/// The keys-file entry holding the key's SHA-256 (never the key itself).
pub fn entry(key: &str, name: &str, plan: Plan) -> String {
    serde_json::json!({
        "name": name,
        "sha256": hex(&digest(key)),
        "plan": plan.as_str(),
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Keys;

    #[test]
    fn keys_are_random_and_their_entries_work() {
        let a = new_key().unwrap();
        let b = new_key().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 3 + 64);
        let file = format!(r#"{{"keys":[{}]}}"#, entry(&a, "shop", Plan::Pro));
        assert!(!file.contains(&a));
        let keys = Keys::parse(file.as_bytes(), None).unwrap();
        assert_eq!(keys.lookup(&a).map(|e| e.name), Some("shop"));
        assert!(keys.lookup(&b).is_none());
    }
}
