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
//! - Bounded: [`SLOTS`] headers per worker thread, each placed by the
//!   last bytes of the header (the key's random tail); a key that lands
//!   on an occupied slot takes it. No lock: each thread has its own.

use std::cell::RefCell;
use std::sync::Arc;

use crate::keys::KeyEntry;
use crate::util::mix::mix64;
use crate::util::same_bytes::same_bytes;

/// Headers remembered per worker thread (about 25 KB with 64-byte
/// headers, and a few worker threads per process).
pub const SLOTS: usize = 256;

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

/// The slot of `header`: its last eight bytes (a key's random tail, so
/// honest keys spread evenly) folded with its length, mixed.
fn slot_of(header: &[u8]) -> usize {
    let tail = header
        .get(header.len().saturating_sub(8)..)
        .unwrap_or_default();
    let folded = tail.iter().fold(header.len() as u64, |h, b| {
        (h << 8 | u64::from(*b)) ^ (h >> 56)
    });
    mix64(folded) as usize % SLOTS
}

/// The entry remembered for `header` in key generation `generation`, if
/// this thread has it.
pub fn get(header: &[u8], generation: u64) -> Option<Arc<KeyEntry>> {
    REMEMBERED
        .try_with(|remembered| {
            let mut remembered = remembered.borrow_mut();
            let slot = remembered.of(generation).get(slot_of(header))?.as_ref()?;
            same_bytes(&slot.header, header).then(|| slot.entry.clone())
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
        if let Some(slot) = slots.get_mut(slot_of(header)) {
            *slot = Some(Slot {
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
        // Another header in the same slot is not taken for it.
        let other = b"Bearer ps_key_b_0123456789abcdef";
        assert_eq!(slot_of(other), slot_of(header), "same tail, same slot");
        assert!(get(other, 1).is_none());
        // It takes the slot over.
        let b = entry("ps_key_b_0123456789abcdef");
        remember(other, 1, &b);
        assert!(get(header, 1).is_none());
        assert!(Arc::ptr_eq(&get(other, 1).unwrap(), &b));
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
        // 1,000 keys over 256 slots leave few empty (about 5 expected).
        assert!(used.len() > 230, "{} slots used", used.len());
    }
}
