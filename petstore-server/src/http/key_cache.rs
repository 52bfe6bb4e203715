//! The keys presented lately on this worker thread, by their whole
//! `Authorization` header: the entry of a valid key without its SHA-256,
//! when the connection's own memory (`connection.rs`) holds another, as
//! behind a proxy that pools its connections.
//!
//! Under the connection's rules: valid keys only, compared in constant
//! time, emptied by a reload; bounded ([`SLOTS`] headers in sets of
//! [`WAYS`]), with no lock. Why, and what keeps it safe: docs/http.md,
//! "Keys".

use std::cell::RefCell;
use std::sync::Arc;

use crate::keys::KeyEntry;
use crate::util::mix::mix64;
use crate::util::same_bytes::same_bytes;

/// Headers remembered per worker thread: [`SLOTS`] / [`WAYS`] sets. About
/// 96 KB of slots, and the headers held (about 64 bytes each), per worker
/// thread.
///
/// Why 4,096 in sets of 4: with 1,024 slots in pairs, 1,000 keys in turn
/// (a proxy's pooled connections, `scripts/bench/profile-keys` with
/// `PROFILE_KEYS=1000`) left so many pairs with three keys or more that
/// a large share of the requests paid the digest, and even 64 keys over
/// 512 pairs often had a pair of three. Over 1,024 sets of 4, 1,000 keys
/// put one in a set on average and more than four rarely, so nearly
/// every request finds its header (docs/performance.md has the
/// figures).
pub const SLOTS: usize = 4096;

/// Slots per set: a header is looked for in the [`WAYS`] slots of its
/// set, the one used last first.
///
/// Why sets: with one slot per header, keys that land on one slot take
/// it from each other on every turn: with a few dozen keys over a few
/// hundred single slots, a good share of them share one, and each of
/// their requests pays the digest again (`scripts/bench/profile-keys`). Keys
/// that take turns on more headers than their set holds miss every time
/// (each replaces the one used least lately, which is the next to come),
/// so a set must rarely get more keys than it has slots: see [`SLOTS`].
pub const WAYS: usize = 4;

// Every set lies whole inside the slots (`set_of`).
const _: () = assert!(SLOTS.is_multiple_of(WAYS));

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

/// The first slot of `header`'s set: its last eight bytes (a key's
/// random tail, so honest keys spread evenly) folded with its length,
/// mixed.
fn set_of(header: &[u8]) -> usize {
    let tail = header
        .get(header.len().saturating_sub(8)..)
        .unwrap_or_default();
    let folded = tail.iter().fold(header.len() as u64, |h, b| {
        (h << 8 | u64::from(*b)) ^ (h >> 56)
    });
    mix64(folded) as usize % (SLOTS / WAYS) * WAYS
}

/// The entry remembered for `header` in key generation `generation`, if
/// this thread has it.
pub fn get(header: &[u8], generation: u64) -> Option<Arc<KeyEntry>> {
    REMEMBERED
        .try_with(|remembered| {
            let mut remembered = remembered.borrow_mut();
            let first = set_of(header);
            let set = remembered.of(generation).get_mut(first..first + WAYS)?;
            let found = set
                .iter()
                .position(|slot| slot.as_ref().is_some_and(|s| same_bytes(&s.header, header)))?;
            // The one used last goes first and the others keep their
            // order, so the set's last slot is the one used least lately
            // (the one a new header replaces).
            let used = set.get_mut(..=found)?;
            used.rotate_right(1);
            used.first()?.as_ref().map(|slot| slot.entry.clone())
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
        let first = set_of(header);
        if let Some(set) = slots.get_mut(first..first + WAYS) {
            // The one used least lately (the last) goes; the header is
            // not there (the caller missed it in `get`).
            set.rotate_right(1);
            if let Some(slot) = set.first_mut() {
                *slot = Some(Slot {
                    header: header.into(),
                    entry: entry.clone(),
                });
            }
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
    }

    #[test]
    fn a_full_set_gives_up_the_header_used_least_lately() {
        // One tail and one length: one set.
        let keys: Vec<String> = (0..=WAYS)
            .map(|i| format!("ps_key_{i}_0123456789abcdef"))
            .collect();
        let headers: Vec<Vec<u8>> = keys
            .iter()
            .map(|key| format!("Bearer {key}").into_bytes())
            .collect();
        assert!(headers.iter().all(|h| set_of(h) == set_of(&headers[0])));
        let entries: Vec<Arc<KeyEntry>> = keys.iter().map(|key| entry(key)).collect();
        // The set holds WAYS of them, each found as itself.
        for (header, entry) in headers.iter().zip(&entries).take(WAYS) {
            assert!(get(header, 1).is_none());
            remember(header, 1, entry);
        }
        for (header, entry) in headers.iter().zip(&entries).take(WAYS) {
            assert!(Arc::ptr_eq(&get(header, 1).unwrap(), entry));
        }
        // The first used again: the second is now the one used least
        // lately, and the next new header takes its slot.
        assert!(get(&headers[0], 1).is_some());
        remember(&headers[WAYS], 1, &entries[WAYS]);
        assert!(
            get(&headers[1], 1).is_none(),
            "the one used least lately went"
        );
        for i in (0..=WAYS).filter(|i| *i != 1) {
            assert!(
                Arc::ptr_eq(&get(&headers[i], 1).unwrap(), &entries[i]),
                "{i}"
            );
        }
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
    fn a_thousand_keys_in_turn_are_nearly_all_found() {
        // A proxy's pooled connections carrying 1,000 clients' keys, in
        // turn: once each has been seen, nearly every header is found
        // (1,024 slots in pairs missed 561 of them).
        let any = entry("ps_key_any_0123456789abcdef");
        let headers: Vec<String> = (0..1000u64)
            .map(|i| format!("Bearer ps_{:016x}", i.wrapping_mul(0x2545_F491_4F6C_DD1D)))
            .collect();
        for header in &headers {
            remember(header.as_bytes(), 3, &any);
        }
        for _ in 0..2 {
            let missed = headers
                .iter()
                .filter(|header| get(header.as_bytes(), 3).is_none())
                .inspect(|header| remember(header.as_bytes(), 3, &any))
                .count();
            assert!(missed <= 20, "{missed} of 1,000 missed");
        }
    }
}
