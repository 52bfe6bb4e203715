//! [`PerAddress`]: how many connections each client address has open, and
//! the cap on it (`--max-connections-per-address`).
//!
//! Why: `--max-connections` alone let one address take every slot (1,024
//! connections that never read, or a reconnecting slowloris), and then
//! every other client waited in the listen backlog. With a cap per
//! address, one address can take at most its share, and the others are
//! still served.
//!
//! An address is an IPv4 address, or an IPv6 /64: the core's
//! [`client_key`], the same key the anonymous rate limit counts by
//! (counted per IPv6 address, one host could open a cap's worth from each
//! of its 2^64 addresses).
//!
//! Cost: one short lock, one hash and one map entry per accepted
//! connection (and again when it closes); nothing per request. An entry
//! is removed when its count falls to zero, so the map never holds more
//! entries than connections are open (at most `--max-connections`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use petstore_core::limit::client_key;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;

/// Connections refused for being over their address's cap, since the
/// process started (`petstore_connections_refused_total`). A process-wide
/// count, so that `/metrics` reads it without a handle on the accept loop.
static REFUSED: AtomicU64 = AtomicU64::new(0);

/// Connections refused over the per-address cap since the process started.
pub fn refused_total() -> u64 {
    REFUSED.load(Ordering::Relaxed)
}

/// Open connections per client address, each at most `cap`.
#[derive(Debug)]
pub struct PerAddress {
    cap: usize,
    open: Mutex<HashMap<u128, usize>>,
}

/// One counted connection: dropping it gives its address's place back.
#[derive(Debug)]
pub struct Slot {
    table: Arc<PerAddress>,
    address: u128,
}

impl PerAddress {
    /// A table allowing `cap` connections per address (at least 1).
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(PerAddress {
            cap: cap.max(1),
            open: Mutex::new(HashMap::new()),
        })
    }

    /// The default cap for `max_connections` slots: an eighth, at least 1.
    /// One address then needs seven others beside it to fill the server,
    /// while a shared address (a NAT, a proxy, a load generator) still
    /// gets 128 connections at the default of 1,024.
    pub fn default_cap(max_connections: usize) -> usize {
        (max_connections / 8).max(1)
    }

    /// A slot for one more connection from `peer`, or `None` when `peer`
    /// already has `cap` open.
    pub fn take(self: &Arc<Self>, peer: IpAddr) -> Option<Slot> {
        let address = client_key(peer);
        let mut open = self.open.lock();
        let count = open.entry(address).or_insert(0);
        if *count >= self.cap {
            REFUSED.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        *count += 1;
        Some(Slot {
            table: self.clone(),
            address,
        })
    }

    /// Connections open from `peer`'s address (its /64 for IPv6).
    pub fn open(&self, peer: IpAddr) -> usize {
        self.open
            .lock()
            .get(&client_key(peer))
            .copied()
            .unwrap_or(0)
    }

    /// Addresses with a connection open (the size of the table).
    pub fn addresses(&self) -> usize {
        self.open.lock().len()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.table.open.lock();
        if let Some(count) = open.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.address);
            }
        }
    }
}

/// Reads [`refused_total`] at scrape time.
#[derive(Debug)]
pub struct RefusedConnections;

impl Collector for RefusedConnections {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let refused = ConstCounter::new(refused_total());
        let metric = encoder.encode_descriptor(
            "connections_refused",
            "Connections closed at accept for being over --max-connections-per-address",
            None,
            refused.metric_type(),
        )?;
        refused.encode(metric)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn caps_each_address_and_forgets_it_at_zero() {
        let table = PerAddress::new(2);
        let a = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
        let b = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let first = table.take(a).unwrap();
        let second = table.take(a).unwrap();
        assert!(table.take(a).is_none(), "a third from the same address");
        let other = table.take(b).unwrap();
        assert_eq!((table.open(a), table.open(b), table.addresses()), (2, 1, 2));
        drop(first);
        let third = table.take(a).unwrap();
        drop((second, third, other));
        assert_eq!(table.addresses(), 0, "entries at zero are removed");
        // A refused take leaves no entry behind either.
        let table = PerAddress::new(0);
        let only = table.take(a).unwrap();
        assert!(table.take(a).is_none());
        drop(only);
        assert_eq!(table.addresses(), 0);
    }

    #[test]
    fn ipv6_counts_per_64_and_mapped_ipv4_as_ipv4() {
        let table = PerAddress::new(1);
        let one: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let same_64: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let other_64: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        let _a = table.take(one).unwrap();
        assert!(table.take(same_64).is_none(), "the same /64");
        let _b = table.take(other_64).unwrap();
        let v4 = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        let _c = table.take(v4).unwrap();
        assert!(
            table.take(mapped).is_none(),
            "an IPv4-mapped address is its IPv4 one"
        );
    }

    #[test]
    fn default_cap_is_an_eighth_at_least_one() {
        assert_eq!(PerAddress::default_cap(1024), 128);
        assert_eq!(PerAddress::default_cap(7), 1);
        assert_eq!(PerAddress::default_cap(1), 1);
    }
}
