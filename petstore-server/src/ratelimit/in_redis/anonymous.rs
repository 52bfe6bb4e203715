//! [`state_name`]: the Redis name of a client address's state, made once
//! per address and worker thread rather than once per request.
//!
//! Why: a key's state name is one `Arc` for the life of its key table,
//! but an anonymous request's was a `format!` and a new `Arc` every
//! time. Besides the allocation, that made every anonymous state a
//! stranger to `recent.rs`, which knows a state by the address of its
//! name: it went to Redis with all three names on every request. A
//! thread's table hands the same `Arc` to an address's requests while
//! the address keeps its slot.

use std::cell::RefCell;
use std::net::IpAddr;
use std::sync::Arc;

use petstore_core::limit::client_key;

use super::script::anonymous_name;
use crate::util::mix::mix64;

/// Slots per worker thread: a power of two. Addresses are the client's
/// to choose, so the table is a cache that forgets, never a map that
/// grows: an address that loses its slot gets its name made again.
const SLOTS: usize = 1024;

/// A direct-mapped table of names by (address as the limiter groups it,
/// per minute).
struct Names {
    slots: Vec<Option<(u128, u32, Arc<str>)>>,
}

impl Names {
    fn new() -> Self {
        Names {
            slots: vec![None; SLOTS],
        }
    }

    fn get(&mut self, ip: IpAddr, per_minute: u32) -> Arc<str> {
        let key = client_key(ip);
        let made = || Arc::from(anonymous_name(ip, per_minute));
        let Some(slot) = self.slots.get_mut(slot(key, per_minute)) else {
            return made();
        };
        match slot {
            Some((k, m, name)) if *k == key && *m == per_minute => name.clone(),
            _ => {
                let name: Arc<str> = made();
                *slot = Some((key, per_minute, name.clone()));
                name
            }
        }
    }
}

/// The slot of an address and quota: both folded into 64 bits, mixed.
fn slot(key: u128, per_minute: u32) -> usize {
    let folded = (key as u64) ^ ((key >> 64) as u64).rotate_left(17) ^ u64::from(per_minute);
    (mix64(folded) as usize) & (SLOTS - 1)
}

thread_local! {
    /// This worker thread's names: no lock, and bounded.
    static NAMES: RefCell<Names> = RefCell::new(Names::new());
}

/// The state name of the client address `ip` under a limit of
/// `per_minute` ([`anonymous_name`]): the same `Arc` as this thread's
/// last request from that address (and its IPv6 /64), while it keeps its
/// slot.
pub(super) fn state_name(ip: IpAddr, per_minute: u32) -> Arc<str> {
    NAMES
        .try_with(|names| names.borrow_mut().get(ip, per_minute))
        .unwrap_or_else(|_| Arc::from(anonymous_name(ip, per_minute)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_gets_the_same_name_while_it_keeps_its_slot() {
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let a = state_name(ip, 60);
        let b = state_name(ip, 60);
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(&*a, anonymous_name(ip, 60));
        // Another limit is another state.
        let c = state_name(ip, 61);
        assert_eq!(&*c, anonymous_name(ip, 61));
        // The same /64 is the same state, as the limiter groups it.
        let v6: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let same: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        assert!(Arc::ptr_eq(&state_name(v6, 60), &state_name(same, 60)));
    }

    #[test]
    fn a_slot_taken_over_makes_the_name_again() {
        let mut names = Names::new();
        let first: IpAddr = "198.51.100.1".parse().unwrap();
        let key = client_key(first);
        let rival = (2..=u32::MAX)
            .map(|n| IpAddr::from(std::net::Ipv4Addr::from(n)))
            .find(|ip| slot(client_key(*ip), 60) == slot(key, 60))
            .unwrap();
        let a = names.get(first, 60);
        let r = names.get(rival, 60);
        assert_eq!(&*r, anonymous_name(rival, 60));
        let again = names.get(first, 60);
        assert!(!Arc::ptr_eq(&a, &again), "made again");
        assert_eq!(a, again);
    }

    #[test]
    fn addresses_spread_over_the_slots() {
        let used: std::collections::HashSet<usize> = (0..4 * SLOTS as u32)
            .map(|n| slot(client_key(IpAddr::from(std::net::Ipv4Addr::from(n))), 60))
            .collect();
        assert!(used.len() > SLOTS * 9 / 10, "{} slots used", used.len());
    }
}
