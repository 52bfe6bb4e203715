//! Rate limiting of requests without a valid key, per client address:
//! [`AnonymousLimiter`]. It stops anyone from guessing keys at speed.
//!
//! # Why two generations
//!
//! A flood from many distinct addresses must not grow memory without
//! bound. Entries live in two maps, `current` and `previous`; a lookup
//! moves an entry into `current`, and when `current` reaches half the
//! capacity, `previous` is dropped and `current` takes its place. So at
//! most `capacity` entries exist, an address seen in the last generation
//! keeps its bucket, and an idle one disappears after at most two
//! generations. The cost of eviction is O(1) amortised (a whole map is
//! dropped at once), not a scan per insert. Under a flood wider than the
//! capacity, old entries are forgotten early, which only ever gives a
//! forgotten address a fresh bucket: memory stays bounded either way.
//!
//! IPv6 clients are limited per /64, the block one host or one customer
//! usually holds, so rotating addresses inside it gains nothing.

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;

use parking_lot::Mutex;

use super::bucket::Bucket;
use super::decision::{Decision, Outcome};
use super::limiter::{window, MINUTE};
use crate::clock::Timestamp;

/// Per-client-address minute buckets with bounded memory.
///
/// # Examples
///
/// ```
/// use std::num::NonZeroU32;
/// use petstore_core::{Timestamp, limit::AnonymousLimiter};
/// let limiter = AnonymousLimiter::new(NonZeroU32::new(2).unwrap(), 10_000);
/// let ip = "192.0.2.1".parse().unwrap();
/// let t = Timestamp::from_unix_secs(0);
/// assert!(limiter.check(ip, t).is_allowed());
/// assert!(limiter.check(ip, t).is_allowed());
/// assert!(!limiter.check(ip, t).is_allowed());
/// assert!(limiter.check("192.0.2.2".parse().unwrap(), t).is_allowed());
/// ```
#[derive(Debug)]
pub struct AnonymousLimiter {
    bucket: Bucket,
    half_capacity: usize,
    maps: Mutex<Generations>,
}

#[derive(Debug, Default)]
struct Generations {
    current: HashMap<u128, u128>,
    previous: HashMap<u128, u128>,
}

/// The client a request or a connection is counted against: an IPv4
/// address whole (IPv4-mapped IPv6 ones too), an IPv6 address by its /64
/// prefix (the block one host or one customer usually gets: counted per
/// address, one host could spread over 2^64 of them). The two kinds cannot
/// collide: bit 32 marks an IPv6 prefix. The anonymous limiter and the
/// server's per-address connection cap count by the same key.
///
/// # Examples
///
/// ```
/// use std::net::IpAddr;
/// use petstore_core::limit::client_key;
///
/// let a: IpAddr = "2001:db8::1".parse().unwrap();
/// let b: IpAddr = "2001:db8::ffff:1".parse().unwrap();
/// assert_eq!(client_key(a), client_key(b)); // one /64
/// let v4: IpAddr = "192.0.2.1".parse().unwrap();
/// let mapped: IpAddr = "::ffff:192.0.2.1".parse().unwrap();
/// assert_eq!(client_key(v4), client_key(mapped));
/// ```
pub fn client_key(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => u128::from(u32::from(v4)),
            None => (u128::from(v6) >> 64 << 64) | 1 << 32,
        },
    }
}

impl AnonymousLimiter {
    /// `per_minute` requests per client; at most `capacity` clients
    /// remembered (at least 2).
    pub fn new(per_minute: NonZeroU32, capacity: usize) -> Self {
        AnonymousLimiter {
            bucket: Bucket::new(per_minute.get(), MINUTE),
            half_capacity: (capacity / 2).max(1),
            maps: Mutex::new(Generations::default()),
        }
    }

    /// The per-minute limit.
    pub fn per_minute(&self) -> u32 {
        self.bucket.capacity()
    }

    /// The most clients remembered at once.
    pub fn capacity(&self) -> usize {
        self.half_capacity * 2
    }

    /// How many clients are remembered now (never more than the capacity).
    pub fn tracked(&self) -> usize {
        let maps = self.maps.lock();
        maps.current.len() + maps.previous.len()
    }

    /// The buckets that are not full at `now`, as plain numbers (a full
    /// bucket is the same as a forgotten one): what a restart needs to go
    /// on where this limiter is. See [`AnonymousState`].
    pub fn state(&self, now: Timestamp) -> AnonymousState {
        let full = u128::from(now.as_unix_nanos()) * u128::from(self.bucket.capacity());
        let maps = self.maps.lock();
        // Older generation first, so that a restore fills the new
        // `current` in the order the entries were last seen.
        let clients = maps
            .previous
            .iter()
            .chain(maps.current.iter())
            .filter(|(_, tat)| **tat > full)
            .map(|(client, tat)| (*client, *tat))
            .collect();
        AnonymousState {
            per_minute: self.bucket.capacity(),
            clients,
        }
    }

    /// Goes on from `state` (see [`AnonymousLimiter::state`]), taken from
    /// a limiter with the same per-minute limit; returns how many clients
    /// it restored (none when the limit differs: the numbers would mean
    /// something else). `now` bounds a damaged state: no bucket emptier
    /// than empty. The capacity holds as for requests.
    pub fn restore(&self, state: &AnonymousState, now: Timestamp) -> usize {
        if state.per_minute != self.bucket.capacity() {
            return 0;
        }
        let cap = u128::from(self.bucket.capacity());
        let empty = u128::from(now.as_unix_nanos()) * cap
            + u128::from(self.bucket.period().as_nanos() as u64) * cap;
        let mut maps = self.maps.lock();
        for (client, tat) in &state.clients {
            if maps.current.len() >= self.half_capacity {
                maps.previous = std::mem::take(&mut maps.current);
            }
            maps.previous.remove(client);
            maps.current.insert(*client, (*tat).min(empty));
        }
        state.clients.len()
    }

    /// Decides one request from `ip` at `now`. The decision has a minute
    /// window only.
    pub fn check(&self, ip: IpAddr, now: Timestamp) -> Decision {
        let key = client_key(ip);
        let mut maps = self.maps.lock();
        let tat = match maps.current.get(&key) {
            Some(tat) => *tat,
            None => {
                let tat = maps.previous.remove(&key).unwrap_or(0);
                if maps.current.len() >= self.half_capacity {
                    maps.previous = std::mem::take(&mut maps.current);
                }
                tat
            }
        };
        let judgement = self.bucket.judge(tat, now);
        let (outcome, remaining, full_at, stored) = if judgement.allowed {
            (
                Outcome::Allowed,
                judgement.remaining,
                judgement.full_at,
                judgement.next_tat,
            )
        } else {
            let retry_after = judgement.wait;
            (
                Outcome::Limited { retry_after },
                judgement.remaining,
                judgement.full_at.max(now),
                tat,
            )
        };
        maps.current.insert(key, stored);
        Decision {
            outcome,
            at: now,
            minute: window("minute", &self.bucket, remaining, full_at),
            day: None,
            ban_started: false,
        }
    }
}

/// The state of an [`AnonymousLimiter`] as plain numbers, for keeping it
/// outside the process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AnonymousState {
    /// The per-minute limit the buckets were counted under.
    pub per_minute: u32,
    /// `(client, tat)`: the client (an IPv4 address as its 32 bits; an
    /// IPv6 /64 as its prefix in the high 64 bits with bit 32 set) and
    /// its bucket's theoretical arrival time, in units of
    /// `1 ns / per_minute` since the Unix epoch (see
    /// [`crate::limit::KeyLimiterState`]).
    pub clients: Vec<(u128, u128)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn memory_stays_bounded_under_a_flood_of_addresses() {
        let limiter = AnonymousLimiter::new(NonZeroU32::MIN, 1_000);
        let t = Timestamp::from_unix_secs(0);
        for i in 0..100_000u32 {
            limiter.check(IpAddr::V4(Ipv4Addr::from(i)), t);
            assert!(limiter.tracked() <= 1_000);
        }
        // A recently seen address keeps its (empty) bucket.
        let last = IpAddr::V4(Ipv4Addr::from(99_999u32));
        assert!(!limiter.check(last, t).is_allowed());
    }

    #[test]
    fn state_round_trips_and_leaves_out_full_buckets() {
        let limiter = AnonymousLimiter::new(NonZeroU32::new(2).unwrap_or(NonZeroU32::MIN), 100);
        let t = Timestamp::from_unix_secs(1_000);
        let a = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
        let b = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2));
        limiter.check(a, t);
        limiter.check(a, t);
        limiter.check(b, t + std::time::Duration::from_secs(50));
        let at = t + std::time::Duration::from_secs(60);
        // `a` is full again 60 s later, `b` is not.
        let state = limiter.state(at);
        assert_eq!(state.clients.len(), 1);
        let restored = AnonymousLimiter::new(NonZeroU32::new(2).unwrap_or(NonZeroU32::MIN), 100);
        assert_eq!(restored.restore(&state, at), 1);
        assert_eq!(restored.check(b, at).minute.remaining, 0);
        assert_eq!(restored.check(a, at).minute.remaining, 1);
        // Another limit: nothing restored.
        let other = AnonymousLimiter::new(NonZeroU32::new(3).unwrap_or(NonZeroU32::MIN), 100);
        assert_eq!(other.restore(&state, at), 0);
    }

    #[test]
    fn limit_and_capacity_are_what_was_asked() {
        let limiter = AnonymousLimiter::new(NonZeroU32::new(7).unwrap_or(NonZeroU32::MIN), 1_000);
        assert_eq!(limiter.per_minute(), 7);
        assert_eq!(limiter.capacity(), 1_000);
        // An odd capacity is kept in two halves: one less, never more.
        let odd = AnonymousLimiter::new(NonZeroU32::MIN, 9);
        assert_eq!(odd.capacity(), 8);
    }

    #[test]
    fn a_damaged_state_is_bounded_and_holds_the_capacity() {
        let limiter = AnonymousLimiter::new(NonZeroU32::new(2).unwrap_or(NonZeroU32::MIN), 10);
        let now = Timestamp::from_unix_secs(1_000);
        // Every client far in the future: a damaged (or hostile) file.
        let clients = (0..40u128).map(|c| (c, u128::MAX / 4)).collect();
        let state = AnonymousState {
            per_minute: 2,
            clients,
        };
        assert_eq!(limiter.restore(&state, now), 40);
        // Restored as requests are remembered: the newest ten, in two
        // generations of five; the ones before them forgotten.
        assert_eq!(limiter.tracked(), limiter.capacity());
        let forgotten = IpAddr::V4(Ipv4Addr::from(29u32));
        assert!(limiter.check(forgotten, now).is_allowed());
        // The last client restored is remembered, its bucket at worst
        // empty: refused now, and waiting no more than one period.
        let last = IpAddr::V4(Ipv4Addr::from(39u32));
        match limiter.check(last, now).outcome {
            Outcome::Limited { retry_after } => {
                assert_eq!(retry_after, std::time::Duration::from_secs(30));
            }
            other => panic!("{other:?}"),
        }
        // And it is full again a minute later: the damage did not outlast
        // one window (the bucket bounds each wait, not the stored time).
        assert!(limiter
            .check(last, now + std::time::Duration::from_secs(60))
            .is_allowed());
    }

    #[test]
    fn an_ipv6_prefix_never_meets_an_ipv4_address() {
        // `::/64` holds `::1`, whose prefix is all zeros, like 0.0.0.0.
        let zero_v6: IpAddr = IpAddr::V6(Ipv6Addr::LOCALHOST);
        let zero_v4: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        assert_ne!(client_key(zero_v6), client_key(zero_v4));
        let limiter = AnonymousLimiter::new(NonZeroU32::MIN, 100);
        let t = Timestamp::from_unix_secs(0);
        assert!(limiter.check(zero_v4, t).is_allowed());
        assert!(limiter.check(zero_v6, t).is_allowed());
    }

    #[test]
    fn ipv6_is_limited_per_64() {
        let limiter = AnonymousLimiter::new(NonZeroU32::MIN, 100);
        let t = Timestamp::from_unix_secs(0);
        let a: Ipv6Addr = "2001:db8:1:2::1".parse().unwrap_or(Ipv6Addr::LOCALHOST);
        let b: Ipv6Addr = "2001:db8:1:2:ffff::9"
            .parse()
            .unwrap_or(Ipv6Addr::LOCALHOST);
        let c: Ipv6Addr = "2001:db8:1:3::1".parse().unwrap_or(Ipv6Addr::LOCALHOST);
        assert!(limiter.check(a.into(), t).is_allowed());
        assert!(!limiter.check(b.into(), t).is_allowed());
        assert!(limiter.check(c.into(), t).is_allowed());
        // An IPv4-mapped address is the IPv4 client.
        let v4: IpAddr = "10.0.0.1"
            .parse()
            .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert!(limiter.check(v4, t).is_allowed());
        let mapped = "::ffff:10.0.0.1"
            .parse()
            .unwrap_or(IpAddr::V6(Ipv6Addr::LOCALHOST));
        assert!(!limiter.check(mapped, t).is_allowed());
    }
}
