//! The states' groups in a Redis Cluster: each state's name carries one of
//! [`GROUPS`] hash tags, so that one call carries the queued requests of
//! many states (all of one group, so of one slot) instead of one state.
//!
//! Why: a call's fixed cost on Redis's thread (the call, `TIME`, the
//! reply, the read and write) is about as much as deciding a state, and
//! with the key's own SHA-256 as its hash tag every state had a slot of
//! its own, so a cluster call carried one state and paid that cost per
//! request (each master worked far more than its even share of the
//! load). Redis refuses a call
//! whose declared keys span two slots (CROSSSLOT), even on one node and
//! even with `allow-cross-slot-keys`, and undeclared keys would break
//! the cluster's guarantees: so the states of a call must share a slot,
//! and the way to have many of them is to give many states one slot.
//!
//! Why [`GROUPS`] = 12: enough that the load spreads over up to 12
//! masters, few enough that each group's call carries several requests
//! (measured on 3 masters and 1,000 keys: 16 groups carried 2.0 requests
//! a call, 6 groups 4.6); and 12 splits evenly over 2, 3, 4, 6 and 12
//! masters. Each group's tag is the first `ps<group>.<n>` whose slot lies
//! in the group's twelfth of the slot space, so a cluster whose masters
//! hold equal ranges gets equal shares. All replicas compute the same tags:
//! they are part of the names, and changing them would start every state
//! afresh (a test pins them).

use std::sync::OnceLock;

/// How many hash-tag groups a cluster's states are spread over.
pub const GROUPS: u16 = 12;

/// Redis Cluster's number of hash slots.
const SLOTS: u16 = 16_384;

/// The slot of `key` as Redis Cluster computes it: CRC16 (XModem) of the
/// hash tag (the text in the first `{...}`, when not empty) or else the
/// whole key, modulo 16,384. redis-rs's `Slot::for_key` computes the same
/// (the test checks) but does not show the number, which the tags'
/// search needs; the shards use redis-rs's.
fn slot(key: &str) -> u16 {
    let key = key.as_bytes();
    let tagged = key.iter().position(|b| *b == b'{').and_then(|open| {
        let close = key[open + 1..].iter().position(|b| *b == b'}')?;
        let tag = &key[open + 1..open + 1 + close];
        (!tag.is_empty()).then_some(tag)
    });
    crc16(tagged.unwrap_or(key)) % SLOTS
}

/// CRC16-CCITT (XModem), the checksum of Redis Cluster's key slots, a
/// byte at a time from [`CRC16`]: it runs on every request of a cluster
/// (a state's group, from its 64-digit SHA-256), where a bit at a time
/// cost eight steps a byte.
fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0, |crc, b| {
        (crc << 8) ^ CRC16[usize::from((crc >> 8) as u8 ^ b)]
    })
}

/// [`crc16`]'s table: the CRC of each byte value (polynomial 0x1021).
const CRC16: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut crc = (byte as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[byte] = crc;
        byte += 1;
    }
    table
};

/// The group whose share of the slot space holds `slot`.
fn share(slot: u16) -> u16 {
    // Below 12 * 16,384: no overflow in u32, and the result is below 12.
    u16::try_from(u32::from(slot) * u32::from(GROUPS) / u32::from(SLOTS)).unwrap_or(0)
}

/// The tags of the groups, in order: the first `ps<group>.<n>` whose slot
/// is in the group's share of the slot space.
fn tags() -> &'static [String] {
    static TAGS: OnceLock<Vec<String>> = OnceLock::new();
    TAGS.get_or_init(|| {
        (0..GROUPS)
            .map(|group| {
                (0u32..)
                    .map(|n| format!("ps{group}.{n}"))
                    .find(|tag| share(slot(tag)) == group)
                    .unwrap_or_default()
            })
            .collect()
    })
}

/// The state `name`'s own hash tag (`{tag}:rest`, as
/// [`StateId::external_name`](crate::keys::StateId::external_name) and
/// [`anonymous_name`](super::anonymous_name) write them) and the rest.
fn split(name: &str) -> (&str, &str) {
    name.strip_prefix('{')
        .and_then(|n| n.split_once('}'))
        .unwrap_or((name, ""))
}

/// The group of the state `name`, chosen by its own hash tag.
fn group(name: &str) -> usize {
    usize::from(crc16(split(name).0.as_bytes()) % GROUPS)
}

/// The hash tag of the state `name`'s group: its slot is the slot of
/// [`cluster_name`]`(name)`, found without writing the name.
pub fn group_tag(name: &str) -> &'static str {
    tags().get(group(name)).map_or("", String::as_str)
}

/// The name of the state `name` in a cluster: `{<group tag>}:<own
/// tag><rest>`, e.g. `{ps3.17}:<sha256 hex>:m60/d1000`.
pub fn cluster_name(name: &str) -> String {
    let (own, rest) = split(name);
    format!("{{{}}}:{own}{rest}", group_tag(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::cluster_routing::Slot;

    #[test]
    fn slots_are_redis_clusters() {
        for key in [
            "",
            "a",
            "foo",
            "{user1000}.following",
            "{}x",
            "x{}",
            "{a}{b}",
            "é{ü}",
        ] {
            assert_eq!(Slot::new(slot(key)), Some(Slot::for_key(key)), "{key}");
        }
        // Every byte value, in states' names as they are written.
        for i in 0..=255u8 {
            let key = format!("{{{}{}}}:m60/d1000", char::from(i), "ab".repeat(32));
            assert_eq!(Slot::new(slot(&key)), Some(Slot::for_key(&key)), "{key}");
        }
        // Redis Cluster's specification: CRC16 of "123456789" is 0x31C3.
        assert_eq!(crc16(b"123456789"), 0x31c3);
    }

    #[test]
    fn the_tags_are_pinned_and_spread_one_per_share() {
        let tags = tags();
        assert_eq!(tags.len(), usize::from(GROUPS));
        for (group, tag) in tags.iter().enumerate() {
            assert_eq!(usize::from(share(slot(tag))), group, "{tag}");
        }
        // The tags are part of every state's name: a change starts every
        // state afresh. Pinned, so that a change is deliberate.
        assert_eq!(tags.join(" "), PINNED);
    }

    const PINNED: &str =
        "ps0.1 ps1.6 ps2.3 ps3.43 ps4.20 ps5.12 ps6.0 ps7.3 ps8.1 ps9.10 ps10.0 ps11.3";

    #[test]
    fn a_cluster_name_keeps_the_name_and_takes_its_groups_tag() {
        let name = format!("{{{}}}:m60/d1000", "ab".repeat(32));
        let placed = cluster_name(&name);
        assert_eq!(slot(&placed), slot(group_tag(&name)));
        assert!(placed.ends_with(&format!(":{}:m60/d1000", "ab".repeat(32))));
        assert!(tags()
            .iter()
            .any(|t| placed.starts_with(&format!("{{{t}}}:"))));
        // Many states, every group used, no state alone in its slot.
        let mut used = std::collections::HashSet::new();
        for i in 0..1000 {
            let name = format!("{{anon:10.0.{}.{}}}:m60", i / 256, i % 256);
            assert_eq!(slot(&cluster_name(&name)), slot(group_tag(&name)));
            used.insert(slot(group_tag(&name)));
        }
        assert_eq!(used.len(), usize::from(GROUPS));
    }
}
