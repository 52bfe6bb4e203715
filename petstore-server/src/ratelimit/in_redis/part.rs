//! A call's parts ([`Part`]): the requests a round took for one shard,
//! grouped by state, with the bans this replica started alone while Redis
//! was away riding along.

use std::sync::Arc;
use std::time::Instant;

use super::breaker::Shard;
use super::limits::RedisLimits;
use super::queue::{Queued, Waiters};
use super::script::{Params, Previous};

/// One state's part of a call: its requests (or none, when the part only
/// carries a ban this replica started while Redis was away).
pub(super) struct Part {
    pub(super) name: Arc<str>,
    pub(super) params: Params,
    pub(super) waiters: Waiters,
    /// The end (ms since the Unix epoch) of a ban this replica started
    /// alone, 0 for none.
    pub(super) ban_until_ms: u64,
    /// Where the state's previous form is, should it have no `:v3` (or
    /// `:v2`) form.
    pub(super) previous: Previous,
}

impl RedisLimits {
    /// The bans carried by `parts`, not decided, go back for the next call.
    pub(super) fn give_back_bans(&self, parts: &[Part]) {
        let mut bans = self.inner.local_bans.lock();
        for part in parts.iter().filter(|p| p.ban_until_ms > 0) {
            bans.entry(part.name.clone())
                .or_insert((part.params, part.ban_until_ms));
        }
    }

    /// `taken`'s requests grouped by state (and arguments: a reload that
    /// changes a key's ban policy but not its quota keeps the name), in
    /// the order each state first arrived, with the bans this replica
    /// started alone in `shard` while Redis was away. Empties `taken`.
    pub(super) fn parts(&self, shard: Shard, taken: &mut Vec<Queued>) -> Vec<Part> {
        let mut parts: Vec<Part> = Vec::with_capacity(taken.len());
        let now = Instant::now();
        let recent = self.inner.recent.lock();
        for queued in taken.drain(..) {
            // Usually one state, or a few: a linear search beats a map.
            // By the name's identity (one `Arc` per key entry, and per
            // address on each worker thread), not its text: comparing
            // texts of one length was a `memcmp` per state already in the
            // call. Two `Arc`s of one text (a key's entry before and after
            // a reload, an address named on two threads) go as two parts,
            // which the script decides in turn, as it does a state whose
            // ban policy changed.
            match parts
                .iter_mut()
                .find(|p| Arc::ptr_eq(&p.name, &queued.name) && p.params == queued.params)
            {
                Some(part) => part.waiters.push(queued.waiter),
                None => parts.push(Part {
                    previous: if recent.has(&queued.name, now) {
                        Previous::Unnamed
                    } else {
                        self.inner.link.previous()
                    },
                    name: queued.name,
                    params: queued.params,
                    waiters: Waiters::one(queued.waiter),
                    ban_until_ms: 0,
                }),
            }
        }
        drop(recent);
        let mut bans = self.inner.local_bans.lock();
        if !bans.is_empty() {
            bans.retain(|name, (params, until)| {
                if self.inner.link.shard(name) != shard {
                    return true;
                }
                match parts.iter_mut().find(|p| p.name == *name) {
                    Some(part) => part.ban_until_ms = *until,
                    None => parts.push(Part {
                        name: name.clone(),
                        params: *params,
                        waiters: Waiters::default(),
                        ban_until_ms: *until,
                        previous: self.inner.link.previous(),
                    }),
                }
                false
            });
        }
        parts
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use petstore_core::SystemClock;

    use super::super::queue::queued;
    use super::*;

    #[tokio::test]
    async fn a_calls_requests_go_by_state_in_the_order_each_state_first_arrived() {
        // Lazy: nothing connects, and nothing here calls Redis.
        let limits = RedisLimits::new(
            "redis://127.0.0.1:1",
            Arc::new(SystemClock::new()),
            Duration::from_secs(1),
        )
        .unwrap();
        let p = Params::anonymous(60);
        let (a, b): (Arc<str>, Arc<str>) = ("{aa}:m60".into(), "{bb}:m60".into());
        // The same text in another `Arc` (a key entry after a reload).
        let a_again: Arc<str> = String::from(&*a).into();
        let mut taken = Vec::new();
        let mut receivers = Vec::new();
        for (name, params) in [
            (&a, p),
            (&b, p),
            (&a, p),
            (&a_again, p),
            (&a, Params::anonymous(7)),
        ] {
            let (q, rx) = queued(name, params);
            taken.push(q);
            receivers.push(rx);
        }
        let parts = limits.parts(None, &mut taken);
        assert!(taken.is_empty());
        let seen: Vec<(&str, u32, usize)> = parts
            .iter()
            .map(|p| (&*p.name, p.params.per_minute, p.waiters.len()))
            .collect();
        assert_eq!(
            seen,
            [
                ("{aa}:m60", 60, 2),
                ("{bb}:m60", 60, 1),
                ("{aa}:m60", 60, 1),
                ("{aa}:m60", 7, 1)
            ]
        );
        assert!(Arc::ptr_eq(&parts[0].name, &a) && Arc::ptr_eq(&parts[2].name, &a_again));
    }
}
