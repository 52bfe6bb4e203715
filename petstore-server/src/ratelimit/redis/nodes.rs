//! [`Nodes`]: which master of a Redis Cluster holds each group's slot, as
//! the cluster last said (`CLUSTER SLOTS`), so that one round carries the
//! calls of every group of one master.
//!
//! Why: each group's call is small (a twelfth of the queue: 2.4 requests
//! a call at 1,000 keys), and a master's fixed cost per round trip (its
//! read, its reply, its append-only write) weighed as much as the
//! requests. The groups of one master go in one pipeline, one write and
//! one read, so the master pays that cost once per round for all its
//! groups. Measured with one group per master (the same shape, 3 masters,
//! 1,000 keys, `scripts/redis-cost`): the busiest master's CPU per
//! request fell from 0.76 to 0.52 of one Redis's, the masters' sum from
//! 37.0 to 24.3 µs a request, and the replica rose from 0.30 to 0.43 of
//! the single node.
//!
//! The map is a hint, never trusted for correctness: a round goes to the
//! master of its first group's slot as redis-rs knows it, and a group
//! that has moved since answers MOVED there (the round then falls back
//! and the map is read again). Until the map is known, each group is a
//! lane of its own, as before.

use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::cluster_async::ClusterConnection;
use ::redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use ::redis::{ConnectionAddr, ConnectionInfo, Value};
use parking_lot::RwLock;

use super::groups::{group_slot, GROUPS};

/// A group whose master is not known.
const UNKNOWN: u16 = u16::MAX;

/// Per group, the index of its master (masters numbered in the order of
/// their addresses), or unknown; and a connection to each master.
pub(super) struct Nodes {
    groups: [AtomicU16; GROUPS as usize],
    /// Each master's address and a connection of its own, for the
    /// rounds. Not redis-rs's cluster connection: a pipeline sent there
    /// is sent again whole when one of its calls is redirected (running
    /// again the calls that ran), and its other replies are lost. A plain
    /// connection returns every reply, a redirection among them.
    masters: RwLock<Vec<(String, ConnectionManager)>>,
    /// A reading of `CLUSTER SLOTS` is under way: at most one at a time.
    reading: AtomicBool,
    /// The seed's connection settings (credentials, database), for the
    /// masters' connections.
    seed: ConnectionInfo,
    timeout: Duration,
}

impl std::fmt::Debug for Nodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nodes")
            .field("groups", &self.groups)
            .finish_non_exhaustive()
    }
}

impl Nodes {
    /// No master known yet; the masters' connections will take `seed`'s
    /// settings, and `timeout` bounds each connection and reply.
    pub(super) fn new(seed: ConnectionInfo, timeout: Duration) -> Nodes {
        Nodes {
            groups: std::array::from_fn(|_| AtomicU16::new(UNKNOWN)),
            masters: RwLock::new(Vec::new()),
            reading: AtomicBool::new(false),
            seed,
            timeout,
        }
    }

    /// The master of `group`, when known.
    pub(super) fn master(&self, group: usize) -> Option<u16> {
        let master = self.groups.get(group)?.load(Ordering::Relaxed);
        (master != UNKNOWN).then_some(master)
    }

    /// The connection to master `index`, as last read.
    pub(super) fn connection(&self, index: u16) -> Option<ConnectionManager> {
        let masters = self.masters.read();
        masters
            .get(usize::from(index))
            .map(|(_, connection)| connection.clone())
    }

    /// Reads the cluster's slots again (a task of its own, one at a time),
    /// after a round failed or found a group moved, or before the first.
    pub(super) fn read_again(self: &Arc<Self>, cluster: &ClusterConnection) {
        if self.reading.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.reading.store(false, Ordering::Release);
            return;
        };
        let (nodes, mut cluster) = (self.clone(), cluster.clone());
        runtime.spawn(async move {
            let mut command = ::redis::cmd("CLUSTER");
            command.arg("SLOTS");
            let asked = cluster.route_command(
                command,
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::RandomPrimary),
            );
            // Unreadable or slow: every group becomes a lane of its own,
            // which is always right, until the next reading.
            let (addresses, groups) = match tokio::time::timeout(nodes.timeout, asked).await {
                Ok(Ok(reply)) => masters_of(&reply),
                _ => (Vec::new(), [UNKNOWN; GROUPS as usize]),
            };
            nodes.learn(addresses, groups);
            nodes.reading.store(false, Ordering::Release);
        });
    }

    /// Keeps what a reading found: the masters (a connection to each,
    /// the one it had for an address seen before) and each group's.
    fn learn(&self, addresses: Vec<(String, u16)>, groups: [u16; GROUPS as usize]) {
        let mut masters = self.masters.write();
        let mut known = std::mem::take(&mut *masters);
        let mut groups = groups;
        for (host, port) in addresses {
            let address = format!("{host}:{port}");
            let connection = match known.iter().position(|(a, _)| *a == address) {
                Some(i) => Some(known.swap_remove(i).1),
                None => self.connect(host, port),
            };
            let Some(connection) = connection else {
                // No connection to make (a malformed address): every
                // group is a lane of its own.
                masters.clear();
                groups = [UNKNOWN; GROUPS as usize];
                break;
            };
            masters.push((address, connection));
        }
        for (slot, master) in self.groups.iter().zip(groups) {
            slot.store(master, Ordering::Relaxed);
        }
    }

    /// A lazy connection to the master at `host:port`, with the seed's
    /// settings.
    fn connect(&self, host: String, port: u16) -> Option<ConnectionManager> {
        let info = self.seed.clone().set_addr(ConnectionAddr::Tcp(host, port));
        let client = ::redis::Client::open(info).ok()?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            .set_number_of_retries(1);
        ConnectionManager::new_lazy_with_config(client, config).ok()
    }

    /// Reads the slots unless a group's master is known already.
    pub(super) fn read_if_unknown(self: &Arc<Self>, cluster: &ClusterConnection) {
        if self.master(0).is_none() {
            self.read_again(cluster);
        }
    }
}

/// The masters that `CLUSTER SLOTS` (`reply`) lists, in the order of
/// their addresses, and per group the index of the one that holds its
/// slot (unknown for a slot it does not list).
fn masters_of(reply: &Value) -> (Vec<(String, u16)>, [u16; GROUPS as usize]) {
    // Each range: [start, end, [host, port, id, ...], replicas...].
    let mut ranges: Vec<(i64, i64, (String, u16))> = Vec::new();
    if let Value::Array(items) = reply {
        for item in items {
            let Value::Array(range) = item else { continue };
            let (Some(Value::Int(start)), Some(Value::Int(end)), Some(Value::Array(master))) =
                (range.first(), range.get(1), range.get(2))
            else {
                continue;
            };
            let host = match master.first() {
                Some(Value::BulkString(host)) => String::from_utf8_lossy(host).into_owned(),
                Some(Value::SimpleString(host)) => host.clone(),
                _ => continue,
            };
            let Some(port) = master.get(1).and_then(|port| match port {
                Value::Int(port) => u16::try_from(*port).ok(),
                _ => None,
            }) else {
                continue;
            };
            ranges.push((*start, *end, (host, port)));
        }
    }
    let mut addresses: Vec<(String, u16)> = ranges.iter().map(|(_, _, a)| a.clone()).collect();
    addresses.sort_unstable();
    addresses.dedup();
    let groups = std::array::from_fn(|group| {
        let slot = i64::from(group_slot(group));
        ranges
            .iter()
            .find(|(start, end, _)| (*start..=*end).contains(&slot))
            .and_then(|(_, _, address)| addresses.iter().position(|a| a == address))
            .and_then(|i| u16::try_from(i).ok())
            .unwrap_or(UNKNOWN)
    });
    (addresses, groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(start: i64, end: i64, port: i64) -> Value {
        Value::Array(vec![
            Value::Int(start),
            Value::Int(end),
            Value::Array(vec![
                Value::BulkString(b"127.0.0.1".to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ]),
        ])
    }

    #[test]
    fn each_group_gets_the_master_of_its_slot() {
        let reply = Value::Array(vec![
            range(10923, 16383, 7002),
            range(0, 5460, 7000),
            range(5461, 10922, 7001),
        ]);
        let (addresses, masters) = masters_of(&reply);
        assert_eq!(
            addresses,
            [7000, 7001, 7002].map(|port| ("127.0.0.1".to_owned(), port))
        );
        for (group, master) in masters.iter().enumerate() {
            let slot = group_slot(group);
            let expected = if slot <= 5460 {
                0
            } else if slot <= 10922 {
                1
            } else {
                2
            };
            assert_eq!(*master, expected, "group {group}, slot {slot}");
        }
        // The groups spread one per share: every master holds some.
        for m in 0..3 {
            assert!(masters.contains(&m));
        }
    }

    #[test]
    fn a_slot_no_range_holds_or_a_malformed_reply_leaves_groups_unknown() {
        let (_, masters) = masters_of(&Value::Array(vec![range(0, 5460, 7000)]));
        for (group, master) in masters.iter().enumerate() {
            let known = group_slot(group) <= 5460;
            assert_eq!(*master != UNKNOWN, known, "group {group}");
        }
        assert_eq!(masters_of(&Value::Nil).1, [UNKNOWN; GROUPS as usize]);
        assert_eq!(
            masters_of(&Value::Array(vec![Value::Int(3)])).1,
            [UNKNOWN; GROUPS as usize]
        );
        // A port out of range is no address.
        assert_eq!(
            masters_of(&Value::Array(vec![range(0, 16383, 70000)])).1,
            [UNKNOWN; GROUPS as usize]
        );
    }
}
