//! The keys presented lately on this worker thread, by their whole
//! `Authorization` header: the entry of a valid key without its SHA-256,
//! when the connection's own memory (`connection.rs`) holds another.
//!
//! Why: a connection remembers the last key it carried, which serves a
//! client that keeps its connection. Behind a proxy that pools its
//! connections to the replicas (HAProxy's `http-reuse`, on by default),
//! one connection carries many clients' requests, and every request whose
//! key differs from the one before paid the digest: about 4,200 of the
//! 29,000 instructions a request of a replica took with 64 keys taken in
//! turn over 64 connections (callgrind, `scripts/redis-cost`'s traffic).
//!
//! What keeps this safe, as the connection's memory:
//! - Only headers with a valid key are remembered (a client cannot fill
//!   it with guesses); a header is compared with the remembered one in
//!   constant time.
//! - The cache belongs to one key generation: the first request after a
//!   reload empties it, so a revoked key stops working at once and no
//!   header of an older table stays in memory (the thread's headers are
//!   held as long as a connection holds its last one, or until another
//!   header takes the slot).
//! - Bounded: [`SLOTS`] headers per worker thread, in pairs: a header's
//!   pair is chosen by its last bytes (the key's random tail), and a
//!   header that finds both of its pair's slots taken replaces the one
//!   used less lately. No lock: each thread has its own.
//!
//! Why pairs: with one slot per header, keys that land on one slot take
//! it from each other on every turn. 64 keys over 256 single slots left
//! about a fifth of them sharing one, and under `scripts/profile-keys`
//! (64 keys in turn over 64 connections) 12.7% of a replica's requests
//! paid the digest, about 870 instructions a request on average. A pair
//! holds two such keys.

use std::cell::RefCell;
use std::sync::Arc;

use crate::keys::KeyEntry;
use crate::util::mix::mix64;
use crate::util::same_bytes::same_bytes;

/// Headers remembered per worker thread (about 90 KB with 64-byte
/// headers, and a few worker threads per process): [`SLOTS`] / 2 pairs.
///
/// Why 512 pairs: keys that take turns on three slots of a pair miss
/// every time (each replaces the one used least lately, which is the
/// next to come), and with 64 keys over 256 pairs a pair held three
/// often enough that 7% of the requests still paid the digest; over 512
/// pairs that is rare.
pub const SLOTS: usize = 1024;

#[derive(Debug)]
struct Slot {
    header: Box<[u8]>,
    entry: Arc<KeyEntry>,
}

/// One thread's headers, all of key generation `generation`.
#[derive(Debug)]
struct Remembered {
    generation: u64,
    slots: Vec<Option<Slot>>,
}

impl Remembered {
    /// The slots, emptied first when they are of another generation.
    fn of(&mut self, generation: u64) -> &mut Vec<Option<Slot>> {
        if self.generation != generation {
            self.slots.clear();
            self.generation = generation;
        }
        &mut self.slots
    }
}

thread_local! {
    static REMEMBERED: RefCell<Remembered> = const {
        RefCell::new(Remembered { generation: 0, slots: Vec::new() })
    };
}

/// The first slot of `header`'s pair (the second is the next one): its
/// last eight bytes (a key's random tail, so honest keys spread evenly)
/// folded with its length, mixed.
fn slot_of(header: &[u8]) -> usize {
    let tail = header
        .get(header.len().saturating_sub(8)..)
        .unwrap_or_default();
    let folded = tail.iter().fold(header.len() as u64, |h, b| {
        (h << 8 | u64::from(*b)) ^ (h >> 56)
    });
    mix64(folded) as usize % (SLOTS / 2) * 2
}

/// The entry remembered for `header` in key generation `generation`, if
/// this thread has it.
pub fn get(header: &[u8], generation: u64) -> Option<Arc<KeyEntry>> {
    REMEMBERED
        .try_with(|remembered| {
            let mut remembered = remembered.borrow_mut();
            let first = slot_of(header);
            let pair = remembered.of(generation).get_mut(first..first + 2)?;
            let found = pair
                .iter()
                .position(|slot| slot.as_ref().is_some_and(|s| same_bytes(&s.header, header)))?;
            // The one used last goes first: a new header replaces the
            // other.
            pair.swap(0, found);
            pair[0].as_ref().map(|slot| slot.entry.clone())
        })
        .ok()
        .flatten()
}

/// Remembers that `header` holds the valid key of `entry` in key
/// generation `generation`.
pub fn remember(header: &[u8], generation: u64, entry: &Arc<KeyEntry>) {
    let _ = REMEMBERED.try_with(|remembered| {
        let mut remembered = remembered.borrow_mut();
        let slots = remembered.of(generation);
        if slots.is_empty() {
            slots.resize_with(SLOTS, || None);
        }
        let first = slot_of(header);
        if let Some(pair) = slots.get_mut(first..first + 2) {
            // The one used less lately goes (the second); the header is
            // not there (the caller missed it in `get`).
            pair.swap(0, 1);
            pair[0] = Some(Slot {
                header: header.into(),
                entry: entry.clone(),
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Keys;
    use petstore_core::Quota;

    fn entry(key: &str) -> Arc<KeyEntry> {
        let keys = Keys::single("test", key, Quota::new(60, 1000).unwrap());
        keys.lookup(key).cloned().unwrap()
    }

    #[test]
    fn a_remembered_header_is_found_in_its_generation_only() {
        let a = entry("ps_key_a_0123456789abcdef");
        let header = b"Bearer ps_key_a_0123456789abcdef";
        assert!(get(header, 1).is_none());
        remember(header, 1, &a);
        let found = get(header, 1).expect("remembered");
        assert!(Arc::ptr_eq(&found, &a));
        // After a reload (another generation) it is looked up again, and
        // the older generation's headers are gone.
        assert!(get(header, 2).is_none());
        assert!(get(header, 1).is_none());
        remember(header, 1, &a);
        // Another header of the same pair is not taken for it.
        let other = b"Bearer ps_key_b_0123456789abcdef";
        assert_eq!(slot_of(other), slot_of(header), "same tail, same pair");
        assert!(get(other, 1).is_none());
        // It takes the pair's other slot: both are found.
        let b = entry("ps_key_b_0123456789abcdef");
        remember(other, 1, &b);
        assert!(Arc::ptr_eq(&get(header, 1).unwrap(), &a));
        assert!(Arc::ptr_eq(&get(other, 1).unwrap(), &b));
        // A third replaces the one used less lately (`header`, found
        // before `other`), and keeps the other.
        let third = b"Bearer ps_key_c_0123456789abcdef";
        let c = entry("ps_key_c_0123456789abcdef");
        remember(third, 1, &c);
        assert!(get(header, 1).is_none());
        assert!(Arc::ptr_eq(&get(other, 1).unwrap(), &b));
        assert!(Arc::ptr_eq(&get(third, 1).unwrap(), &c));
        // Found again, `other` is the pair's last used: the next new
        // header replaces `third`.
        assert!(get(other, 1).is_some());
        remember(header, 1, &a);
        assert!(get(third, 1).is_none());
        assert!(get(other, 1).is_some() && get(header, 1).is_some());
    }

    #[test]
    fn each_thread_remembers_its_own() {
        let a = entry("ps_key_c_0123456789abcdef");
        let header = b"Bearer ps_key_c_0123456789abcdef";
        remember(header, 7, &a);
        std::thread::spawn(move || assert!(get(header, 7).is_none()))
            .join()
            .unwrap();
        assert!(get(header, 7).is_some());
    }

    #[test]
    fn random_tails_spread_over_the_slots() {
        let mut used = std::collections::HashSet::new();
        for i in 0..1000u64 {
            let header = format!("Bearer ps_{:016x}", i.wrapping_mul(0x2545_F491_4F6C_DD1D));
            used.insert(slot_of(header.as_bytes()));
        }
        // 1,000 keys over 512 pairs leave about 72 empty.
        assert!(used.len() > 410, "{} pairs used", used.len());
        assert!(used.iter().all(|first| first % 2 == 0 && first + 1 < SLOTS));
    }
}
