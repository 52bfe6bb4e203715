//! `GET /metrics`: Prometheus metrics in the OpenMetrics text format, with
//! the Prometheus project's Rust client (`prometheus-client`).
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `petstore_requests` | counter | `route`, `method`, `status` |
//! | `petstore_request_duration_seconds` | histogram | `route` |
//! | `petstore_rate_limit_refusals` | counter | `reason` (`rate_limited`, `key_banned`) |
//! | `petstore_pets` | gauge | |
//! | `petstore_storage_writable` | gauge: 1 while pets can be stored, 0 once they cannot | |
//! | `petstore_journal_fsync_duration_seconds` | histogram | |
//! | `petstore_journal_batch_size` | histogram (pets per group commit) | |
//! | `petstore_connections_refused` | counter (over `--max-connections-per-address`) | |
//! | `petstore_redis_fallbacks` | counter (`--redis`: requests decided in process because Redis failed or the breaker was open) | |
//! | `petstore_redis_decisions` | counter (`--redis`: requests decided in Redis; over the histogram's count, the mean batch) | |
//! | `petstore_redis_duration_seconds` | histogram (`--redis`: one script call's round trip, deciding a batch of one state's requests) | |
//! | `petstore_postgres_up` | gauge: 1 while PostgreSQL answers (`--postgres`) | |
//! | `petstore_postgres_commit_duration_seconds` | histogram: one batch's transaction, connection included | |
//! | `petstore_postgres_tail_duration_seconds` | histogram: one query of new pets for the read copy | |
//! | `petstore_postgres_batch_size` | histogram (creates per transaction) | |
//! | `petstore_postgres_copy_behind` | gauge: committed pets the read copy does not hold yet, as far as known | |
//! | `petstore_postgres_errors` | counter | `op` (`commit`, `tail`, `queue_full`) |
//!
//! The first three are counted by a [`Recorder`] (per-thread shards of
//! plain atomics, cheap on the hot path) and summed at scrape time; the
//! last four are read from the inventory at scrape time, so the write
//! path pays nothing for them.

use std::fmt::Write as _;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use petstore_core::{Inventory, BATCH_BUCKETS, FSYNC_BUCKETS};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::limits::redis::Stats as RedisStats;
use crate::recorder::Recorder;
use crate::store::postgres;
use crate::store::stats::Op;
use crate::store::Store;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: &'static str,
    method: &'static str,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabel {
    route: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

/// The server's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    recorder: Arc<Recorder>,
    anonymous_clients: Gauge,
    redis: Arc<OnceLock<Arc<RedisStats>>>,
}

impl Metrics {
    /// Metrics of a server over `inventory`.
    pub fn new(inventory: Arc<Inventory>) -> Self {
        Self::for_store(Store::local(inventory))
    }

    /// Metrics of a server over `store`.
    pub fn for_store(store: Store) -> Self {
        let mut registry = Registry::with_prefix("petstore");
        let recorder = Arc::new(Recorder::default());
        registry.register_collector(Box::new(RequestCollector {
            recorder: recorder.clone(),
        }));
        let anonymous_clients = Gauge::default();
        registry.register(
            "anonymous_clients",
            "Client addresses the limiter of requests without a valid key remembers (bounded)",
            anonymous_clients.clone(),
        );
        registry.register_collector(Box::new(InventoryCollector { store }));
        registry.register_collector(Box::new(RefusedConnections));
        let redis = Arc::new(OnceLock::new());
        registry.register_collector(Box::new(RedisCollector(redis.clone())));
        Metrics {
            registry,
            recorder,
            anonymous_clients,
            redis,
        }
    }

    /// Exports the Redis limiter's latency and fallbacks (`--redis`);
    /// without it they are left out.
    pub fn set_redis(&self, stats: Arc<RedisStats>) {
        let _ = self.redis.set(stats);
    }

    /// Counts one answered request.
    pub fn observe(
        &self,
        route: &'static str,
        method: &'static str,
        status: u16,
        refusal: Option<&'static str>,
        elapsed: Duration,
    ) {
        self.recorder
            .observe(route, method, status, refusal, elapsed);
    }

    /// The OpenMetrics text of every metric; `anonymous_clients` is the
    /// anonymous limiter's current count, read by the caller at scrape time.
    pub fn encode(&self, anonymous_clients: usize) -> String {
        self.anonymous_clients
            .set(i64::try_from(anonymous_clients).unwrap_or(i64::MAX));
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            // Writing into a String cannot fail; keep the scrape readable.
            text.clear();
            let _ = writeln!(text, "# EOF");
        }
        text
    }
}

/// Sums the [`Recorder`]'s shards at scrape time.
#[derive(Debug)]
struct RequestCollector {
    recorder: Arc<Recorder>,
}

impl Collector for RequestCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut metric = encoder.encode_descriptor(
            "requests",
            "HTTP requests answered",
            None,
            MetricType::Counter,
        )?;
        for c in self.recorder.requests() {
            let labels = RequestLabels {
                route: c.route,
                method: c.method,
                status: c.status,
            };
            metric
                .encode_family(&labels)?
                .encode_counter::<NoLabelSet, _, u64>(&c.count, None)?;
        }
        let mut metric = encoder.encode_descriptor(
            "request_duration_seconds",
            "Time from the request's head to its response, body reading included",
            None,
            MetricType::Histogram,
        )?;
        for l in self.recorder.latency() {
            let labels = RouteLabel { route: l.route };
            metric
                .encode_family(&labels)?
                .encode_histogram::<NoLabelSet>(l.sum, l.count, &l.buckets, None)?;
        }
        let mut metric = encoder.encode_descriptor(
            "rate_limit_refusals",
            "Requests refused with 429, by reason",
            None,
            MetricType::Counter,
        )?;
        for (reason, count) in self.recorder.refusals() {
            metric
                .encode_family(&ReasonLabel { reason })?
                .encode_counter::<NoLabelSet, _, u64>(&count, None)?;
        }
        Ok(())
    }
}

/// Reads the pet count and the journal's histograms at scrape time.
#[derive(Debug)]
struct InventoryCollector {
    store: Store,
}

impl Collector for InventoryCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let inventory = self.store.inventory();
        let pets = ConstGauge::new(inventory.len() as i64);
        let metric =
            encoder.encode_descriptor("pets", "Pets in the inventory", None, pets.metric_type())?;
        pets.encode(metric)?;
        let writable = ConstGauge::new(i64::from(self.store.failure().is_none()));
        let metric = encoder.encode_descriptor(
            "storage_writable",
            "1 while pets can be stored, 0 once the journal failed or was deleted (see /healthz and the log)",
            None,
            writable.metric_type(),
        )?;
        writable.encode(metric)?;

        if let Store::Postgres(pg) = &self.store {
            return encode_postgres(pg, &mut encoder);
        }
        let Some(stats) = inventory.journal_stats() else {
            return Ok(());
        };
        let fsync_bounds: Vec<f64> = FSYNC_BUCKETS.iter().copied().chain([f64::MAX]).collect();
        let mut metric = encoder.encode_descriptor(
            "journal_fsync_duration_seconds",
            "Time of each journal write and fsync (one per group commit)",
            None,
            MetricType::Histogram,
        )?;
        metric.encode_histogram::<NoLabelSet>(
            stats.fsync_time.as_secs_f64(),
            stats.batches,
            &buckets(&fsync_bounds, &stats.fsync_buckets),
            None,
        )?;
        let batch_bounds: Vec<f64> = BATCH_BUCKETS
            .iter()
            .map(|b| *b as f64)
            .chain([f64::MAX])
            .collect();
        let mut metric = encoder.encode_descriptor(
            "journal_batch_size",
            "Pets written per group commit",
            None,
            MetricType::Histogram,
        )?;
        metric.encode_histogram::<NoLabelSet>(
            stats.records as f64,
            stats.batches,
            &buckets(&batch_bounds, &stats.batch_buckets),
            None,
        )
    }
}

/// The PostgreSQL store's metrics, read at scrape time.
fn encode_postgres(
    pg: &postgres::Postgres,
    encoder: &mut DescriptorEncoder,
) -> Result<(), std::fmt::Error> {
    let up = ConstGauge::new(i64::from(pg.is_up()));
    let metric = encoder.encode_descriptor(
        "postgres_up",
        "1 while PostgreSQL answers, 0 while it fails (creates answer 503)",
        None,
        up.metric_type(),
    )?;
    up.encode(metric)?;
    let behind = ConstGauge::new(i64::try_from(pg.behind()).unwrap_or(i64::MAX));
    let metric = encoder.encode_descriptor(
        "postgres_copy_behind",
        "Committed pets the read copy does not hold yet, as far as this replica knows",
        None,
        behind.metric_type(),
    )?;
    behind.encode(metric)?;
    let stats = pg.stats();
    for (name, help, histogram) in [
        (
            "postgres_commit_duration_seconds",
            "Time of each batch of creates: a connection, one transaction",
            &stats.commit,
        ),
        (
            "postgres_tail_duration_seconds",
            "Time of each query of new pets for the read copy",
            &stats.tail,
        ),
        (
            "postgres_batch_size",
            "Creates written per PostgreSQL transaction",
            &stats.batch,
        ),
    ] {
        let (sum, count, buckets) = histogram.snapshot();
        let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
        metric.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)?;
    }
    let mut metric = encoder.encode_descriptor(
        "postgres_errors",
        "Failed PostgreSQL operations, by operation",
        None,
        MetricType::Counter,
    )?;
    for op in Op::ALL {
        metric
            .encode_family(&OpLabel { op: op.label() })?
            .encode_counter::<NoLabelSet, _, u64>(&stats.errors(op), None)?;
    }
    Ok(())
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OpLabel {
    op: &'static str,
}

/// Per-bucket counts as the `(upper bound, count)` pairs the encoder
/// takes (it makes them cumulative itself); the last bound becomes `+Inf`.
fn buckets(bounds: &[f64], counts: &[u64]) -> Vec<(f64, u64)> {
    bounds
        .iter()
        .zip(counts)
        .enumerate()
        .map(|(i, (bound, count))| {
            let bound = if i + 1 == bounds.len() {
                f64::INFINITY
            } else {
                *bound
            };
            (bound, *count)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use petstore_core::{CategoryId, JournalOptions, NewPet};

    #[test]
    fn exports_requests_refusals_pets_and_journal() {
        let dir = std::env::temp_dir().join(format!("petstore-metrics-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let inventory = Arc::new(Inventory::open(&dir, JournalOptions::default()).unwrap());
        inventory
            .create(NewPet::new("Rex", CategoryId::MIN).unwrap())
            .unwrap();
        let metrics = Metrics::new(inventory);
        metrics.observe("/v1/pets", "GET", 200, None, Duration::from_millis(1));
        metrics.observe(
            "/v1/pets",
            "GET",
            429,
            Some("rate_limited"),
            Duration::from_micros(30),
        );
        let text = metrics.encode(3);
        for want in [
            r#"petstore_requests_total{route="/v1/pets",method="GET",status="200"} 1"#,
            r#"petstore_requests_total{route="/v1/pets",method="GET",status="429"} 1"#,
            r#"petstore_rate_limit_refusals_total{reason="rate_limited"} 1"#,
            r#"petstore_request_duration_seconds_count{route="/v1/pets"} 2"#,
            // Cumulative: 30 µs is under 50 µs, 1 ms under 1.6 ms.
            r#"petstore_request_duration_seconds_bucket{le="0.00005",route="/v1/pets"} 1"#,
            r#"petstore_request_duration_seconds_bucket{le="0.0008",route="/v1/pets"} 1"#,
            r#"petstore_request_duration_seconds_bucket{le="0.0016",route="/v1/pets"} 2"#,
            r#"petstore_request_duration_seconds_bucket{le="1.6384",route="/v1/pets"} 2"#,
            r#"petstore_request_duration_seconds_bucket{le="+Inf",route="/v1/pets"} 2"#,
            "petstore_pets 1",
            "petstore_storage_writable 1",
            "petstore_anonymous_clients 3",
            "petstore_journal_fsync_duration_seconds_count 1",
            r#"petstore_journal_batch_size_bucket{le="1.0"} 1"#,
            r#"petstore_journal_batch_size_bucket{le="+Inf"} 1"#,
            "# EOF",
        ] {
            // Whole lines: `... 1` must not pass for `... 12`.
            assert!(
                text.lines().any(|line| line == want),
                "missing {want:?} in\n{text}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn last_bucket_is_infinity() {
        assert_eq!(
            buckets(&[1.0, 2.0, f64::MAX], &[1, 0, 2]),
            [(1.0, 1), (2.0, 0), (f64::INFINITY, 2)]
        );
    }
}

/// Reads [`crate::per_address::refused_total`] at scrape time.
#[derive(Debug)]
struct RefusedConnections;

impl Collector for RefusedConnections {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let refused = ConstCounter::new(crate::per_address::refused_total());
        let metric = encoder.encode_descriptor(
            "connections_refused",
            "Connections closed at accept for being over --max-connections-per-address",
            None,
            refused.metric_type(),
        )?;
        refused.encode(metric)
    }
}

/// Reads the Redis limiter's [`RedisStats`] at scrape time, when there is
/// one.
#[derive(Debug)]
struct RedisCollector(Arc<OnceLock<Arc<RedisStats>>>);

impl Collector for RedisCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(stats) = self.0.get() else {
            return Ok(());
        };
        let fallbacks = ConstCounter::new(stats.fallbacks());
        let metric = encoder.encode_descriptor(
            "redis_fallbacks",
            "Requests whose rate limit this replica decided alone: Redis failed, was slow, or the breaker was open",
            None,
            fallbacks.metric_type(),
        )?;
        fallbacks.encode(metric)?;
        let decisions = ConstCounter::new(stats.decisions());
        let metric = encoder.encode_descriptor(
            "redis_decisions",
            "Requests whose rate limit Redis decided, in batches of one state's requests per call",
            None,
            decisions.metric_type(),
        )?;
        decisions.encode(metric)?;
        let (sum, count, buckets) = stats.latency().snapshot();
        let mut metric = encoder.encode_descriptor(
            "redis_duration_seconds",
            "Round trip of one rate-limit script call in Redis (a batch of one state's requests), for the calls that got an answer",
            None,
            MetricType::Histogram,
        )?;
        metric.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }
}
