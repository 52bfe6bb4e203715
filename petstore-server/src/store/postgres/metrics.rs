//! The PostgreSQL store's own metrics, read at scrape time.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

use super::stats::Op;
use super::Postgres;

/// Reads a [`Postgres`] store's state and counters at scrape time.
#[derive(Debug)]
pub(super) struct PostgresCollector(pub(super) Arc<Postgres>);

impl Collector for PostgresCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        encode_postgres(&self.0, &mut encoder)
    }
}

/// The PostgreSQL store's metrics, read at scrape time.
fn encode_postgres(pg: &Postgres, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
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
    let behind = ConstGauge::new(i64::try_from(pg.changes_behind()).unwrap_or(i64::MAX));
    let metric = encoder.encode_descriptor(
        "postgres_copy_changes_behind",
        "Committed status changes the read copy has not applied yet, as far as this replica knows",
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
        (
            "postgres_transition_duration_seconds",
            "Time of each batch of transitions: a connection, one transaction",
            &stats.transition,
        ),
        (
            "postgres_transition_batch_size",
            "Transitions decided per PostgreSQL transaction",
            &stats.transition_batch,
        ),
        (
            "postgres_idempotency_lookup_duration_seconds",
            "Time of each lookup of an idempotency key in PostgreSQL",
            &stats.lookup,
        ),
    ] {
        let (sum, count, buckets) = histogram.snapshot();
        let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
        metric.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)?;
    }
    let keys =
        ConstGauge::new(i64::try_from(stats.kept_keys.load(Ordering::Relaxed)).unwrap_or(i64::MAX));
    let metric = encoder.encode_descriptor(
        "postgres_idempotency_keys",
        "Idempotency keys kept in PostgreSQL (all replicas), counted at the end of the last prune pass",
        None,
        keys.metric_type(),
    )?;
    keys.encode(metric)?;
    for (name, help, value) in [
        (
            "postgres_idempotency_kept",
            "Keyed answers this replica committed (201, 200 and kept 409s)",
            &stats.kept,
        ),
        (
            "postgres_idempotency_pruned",
            "Expired idempotency keys this replica's prune task deleted",
            &stats.pruned,
        ),
    ] {
        let counter = ConstCounter::new(value.load(Ordering::Relaxed));
        let metric = encoder.encode_descriptor(name, help, None, counter.metric_type())?;
        counter.encode(metric)?;
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
