//! The Redis limiter's own metrics: latency, decisions, fallbacks and
//! open breakers, registered with `/metrics` by the limiter itself.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

use crate::telemetry::histogram::Histogram;

/// Redis latency and fallbacks, for `/metrics`.
#[derive(Debug)]
pub struct RedisStats {
    pub(super) fallbacks: AtomicU64,
    /// Requests Redis decided (over the calls: the mean batch).
    pub(super) decisions: AtomicU64,
    /// Each call that got the script's reply.
    pub(super) latency: Histogram,
    /// Calls that failed on one state alone (or reset it).
    pub(super) state_errors: AtomicU64,
}

impl Default for RedisStats {
    fn default() -> RedisStats {
        RedisStats {
            fallbacks: AtomicU64::new(0),
            decisions: AtomicU64::new(0),
            latency: Histogram::seconds(&LATENCY_BOUNDS),
            state_errors: AtomicU64::new(0),
        }
    }
}

/// Upper bounds (seconds) of the Redis latency histogram; `+Inf` follows.
pub static LATENCY_BOUNDS: [f64; 7] = [0.000_25, 0.000_5, 0.001, 0.002, 0.005, 0.01, 0.025];

impl RedisStats {
    /// Requests decided by the in-process limiter because Redis failed or
    /// the breaker was open.
    pub fn fallbacks(&self) -> u64 {
        self.fallbacks.load(Ordering::Relaxed)
    }

    /// Requests whose limit Redis decided.
    pub fn decisions(&self) -> u64 {
        self.decisions.load(Ordering::Relaxed)
    }

    /// The latency histogram, one observation per call.
    pub fn latency(&self) -> &Histogram {
        &self.latency
    }
}

/// Reads the Redis limiter's [`RedisStats`] and breakers at scrape time.
pub(super) struct RedisCollector {
    pub(super) stats: Arc<RedisStats>,
    /// How many breakers are open now: a reader of the limiter's
    /// breakers, given by `limits.rs` (which imports this file, not the
    /// other way round).
    pub(super) open_breakers: Box<dyn Fn() -> usize + Send + Sync>,
}

impl std::fmt::Debug for RedisCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisCollector")
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Collector for RedisCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let stats = &self.stats;
        // A gauge, not the fallbacks' rate: it says the breaker is open
        // even while no request arrives to fall back.
        let open = (self.open_breakers)();
        let open = ConstGauge::new(i64::try_from(open).unwrap_or(i64::MAX));
        let metric = encoder.encode_descriptor(
            "redis_breakers_open",
            "Shards (one Redis, or a cluster's hash slots) whose breaker is open: their limits are decided by this replica alone",
            None,
            open.metric_type(),
        )?;
        open.encode(metric)?;
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
            "Requests whose rate limit Redis decided (over the calls: requests per call)",
            None,
            decisions.metric_type(),
        )?;
        decisions.encode(metric)?;
        let state_errors = ConstCounter::new(stats.state_errors.load(Ordering::Relaxed));
        let metric = encoder.encode_descriptor(
            "redis_state_errors",
            "Calls that failed on one limiter state alone (a state of another type is reset); only that state's requests fell back",
            None,
            state_errors.metric_type(),
        )?;
        state_errors.encode(metric)?;
        let (sum, count, buckets) = stats.latency().snapshot();
        let mut metric = encoder.encode_descriptor(
            "redis_duration_seconds",
            "Round trip of one rate-limit script call in Redis (the requests queued for one shard), for the calls that got an answer",
            None,
            MetricType::Histogram,
        )?;
        metric.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }
}
