//! `petstore_key_expires_in_seconds{key="NAME"}`: how long each key entry
//! with an `expiresAt` has left (negative once it passed), read from the
//! key table in force and the clock at each scrape, so a reload or the
//! time passing needs no update of its own.
//!
//! Why a metric: a key that lapses breaks its client at one instant,
//! and nothing a request measures moves before it; an alert on this
//! gauge tells the operator 14 days ahead (docs/operating.md). Only
//! entries with an expiry have a series; their names are the operator's
//! (the keys file), never a client's.

use std::sync::Arc;

use parking_lot::RwLock;
use petstore_core::Clock;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

use super::table::Keys;

/// The collector: the table in force (shared with the state that swaps
/// it on reload) and the clock requests are judged by.
#[derive(Debug)]
pub struct KeyExpiry {
    keys: Arc<RwLock<Arc<Keys>>>,
    clock: Arc<dyn Clock>,
}

impl KeyExpiry {
    /// The collector of the table `keys` holds, at `clock`'s time.
    pub fn new(keys: Arc<RwLock<Arc<Keys>>>, clock: Arc<dyn Clock>) -> Self {
        KeyExpiry { keys, clock }
    }
}

impl Collector for KeyExpiry {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let keys = self.keys.read().clone();
        let now = self.clock.now().as_unix_nanos() as i128;
        let mut left: Vec<(&'static str, i64)> = keys
            .entries()
            .filter_map(|entry| {
                let at = entry.access.expires_at?.as_unix_nanos() as i128;
                Some((entry.name, ((at - now) / 1_000_000_000) as i64))
            })
            .collect();
        if left.is_empty() {
            return Ok(());
        }
        left.sort_unstable();
        let mut family = encoder.encode_descriptor(
            "key_expires_in_seconds",
            "Seconds until the key entry's expiresAt (negative once passed), for entries that have one",
            None,
            MetricType::Gauge,
        )?;
        for (name, seconds) in left {
            ConstGauge::new(seconds).encode(family.encode_family(&[("key", name)])?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use petstore_core::{FakeClock, Timestamp};
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;
    use std::time::Duration;

    #[test]
    fn only_entries_with_an_expiry_have_a_series_and_it_counts_down() {
        let keys = Keys::parse(
            br#"{"keys":[
                {"name":"partner","key":"k1","plan":"pro","expiresAt":"2027-01-01T00:00:00Z"},
                {"name":"forever","key":"k2","plan":"pro"}]}"#,
            None,
        )
        .unwrap();
        let clock = Arc::new(FakeClock::new(Timestamp::from_unix_secs(1_798_675_200)));
        let mut registry = Registry::with_prefix("petstore");
        registry.register_collector(Box::new(KeyExpiry::new(
            Arc::new(RwLock::new(Arc::new(keys))),
            clock.clone(),
        )));
        let scrape = || {
            let mut text = String::new();
            encode(&mut text, &registry).unwrap();
            text
        };
        // 2026-12-31T00:00:00Z: one day left.
        assert!(
            scrape().contains("petstore_key_expires_in_seconds{key=\"partner\"} 86400\n"),
            "{}",
            scrape()
        );
        assert!(!scrape().contains("forever"));
        clock.advance(Duration::from_secs(86_400 + 10));
        assert!(scrape().contains("petstore_key_expires_in_seconds{key=\"partner\"} -10\n"));
    }
}
