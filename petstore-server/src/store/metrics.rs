//! The store's metrics, read at scrape time so that the write path pays
//! nothing for them: the pet count, whether pets can be stored, the
//! idempotency keys kept, the journal's group commits, and its size and
//! compactions. The PostgreSQL backend adds its own
//! (`postgres/metrics.rs`).

use petstore_core::journal::{CompactionStats, BATCH_BUCKETS, FSYNC_BUCKETS};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

use super::Store;
use crate::telemetry::metrics::buckets;

/// Reads the pet count and the journal's histograms at scrape time.
#[derive(Debug)]
pub(super) struct InventoryCollector {
    pub(super) store: Store,
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
        if let Some(kept) = self.store.kept_keys() {
            let kept = ConstGauge::new(i64::try_from(kept).unwrap_or(i64::MAX));
            let metric = encoder.encode_descriptor(
                "idempotency_keys_kept",
                "Idempotency keys kept with their answers (each for 24 hours from its first request)",
                None,
                kept.metric_type(),
            )?;
            kept.encode(metric)?;
        }

        if let Some(stats) = inventory.compaction_stats() {
            encode_compaction(&mut encoder, &stats)?;
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

/// The journal's size, its newest snapshot and its compactions.
fn encode_compaction(
    encoder: &mut DescriptorEncoder,
    stats: &CompactionStats,
) -> Result<(), std::fmt::Error> {
    let gauge = |n: u64| ConstGauge::new(i64::try_from(n).unwrap_or(i64::MAX));
    for (name, help, value) in [
        (
            "journal_bytes",
            "Bytes a start reads: the snapshot, the closed segments after it and the live journal",
            stats.journal_bytes,
        ),
        (
            "journal_snapshot_bytes",
            "Size of the newest snapshot of the journal (0 before the first compaction)",
            stats.snapshot_bytes,
        ),
    ] {
        let value = gauge(value);
        let metric = encoder.encode_descriptor(name, help, None, value.metric_type())?;
        value.encode(metric)?;
    }
    if let Some(at) = stats.snapshot_time {
        let value = gauge(at);
        let metric = encoder.encode_descriptor(
            "journal_snapshot_timestamp_seconds",
            "When the newest snapshot of the journal was written (Unix seconds)",
            None,
            value.metric_type(),
        )?;
        value.encode(metric)?;
    }
    for (name, help, value) in [
        (
            "journal_compactions",
            "Compactions of the journal finished since the server started",
            stats.compactions,
        ),
        (
            "journal_compaction_failures",
            "Compactions of the journal that failed since the server started (see the log)",
            stats.failures,
        ),
    ] {
        let value = ConstCounter::new(value);
        let metric = encoder.encode_descriptor(name, help, None, value.metric_type())?;
        value.encode(metric)?;
    }
    let took = ConstGauge::new(stats.last_duration.as_secs_f64());
    let metric = encoder.encode_descriptor(
        "journal_last_compaction_duration_seconds",
        "How long the last finished compaction of the journal took",
        None,
        took.metric_type(),
    )?;
    took.encode(metric)
}
