//! [`JournalStats`]: the journal's counters for metrics, with the bounds
//! of their histogram buckets.

use std::time::Duration;

/// Upper bounds, in seconds, of the buckets of
/// [`JournalStats::fsync_buckets`]; a last, unbounded bucket follows.
pub const FSYNC_BUCKETS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];

/// Upper bounds of the buckets of [`JournalStats::batch_buckets`] (records
/// per batch: pets and transitions); a last, unbounded bucket follows.
pub const BATCH_BUCKETS: [u64; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/// Counters of the journal, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JournalStats {
    /// Batches written (each one write and, with `FsyncPolicy::Always`,
    /// one fsync).
    pub batches: u64,
    /// Records written: created pets and transitions.
    pub records: u64,
    /// Time spent in fsync, in total.
    pub fsync_time: Duration,
    /// How many fsyncs took at most each bound of [`FSYNC_BUCKETS`] (and
    /// more than the previous one); the last entry counts the slower ones.
    pub fsync_buckets: [u64; 13],
    /// How many batches held at most each bound of [`BATCH_BUCKETS`] records
    /// (and more than the previous one); the last entry counts larger ones.
    pub batch_buckets: [u64; 10],
}

impl JournalStats {
    pub(super) fn record(&mut self, records: usize, fsync_time: Duration) {
        self.batches += 1;
        self.records += records as u64;
        self.fsync_time += fsync_time;
        let secs = fsync_time.as_secs_f64();
        let slot = FSYNC_BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(FSYNC_BUCKETS.len());
        self.fsync_buckets[slot] += 1;
        let slot = BATCH_BUCKETS
            .iter()
            .position(|b| records as u64 <= *b)
            .unwrap_or(BATCH_BUCKETS.len());
        self.batch_buckets[slot] += 1;
    }
}

/// The journal's size and its compactions, for metrics
/// ([`Inventory::compaction_stats`](crate::Inventory::compaction_stats)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactionStats {
    /// Bytes a start reads: the snapshot, the closed segments after it
    /// and the live journal.
    pub journal_bytes: u64,
    /// The newest snapshot's size in bytes (0 without one).
    pub snapshot_bytes: u64,
    /// When the newest snapshot was written (Unix seconds); `None`
    /// without one.
    pub snapshot_time: Option<u64>,
    /// Compactions finished since open.
    pub compactions: u64,
    /// Compactions that failed since open.
    pub failures: u64,
    /// How long the last finished compaction took.
    pub last_duration: Duration,
}

/// What one compaction did
/// ([`Inventory::compact`](crate::Inventory::compact)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compaction {
    /// The snapshot written.
    pub snapshot: std::path::PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// Bytes of the history it replaced (the snapshot before it and the
    /// segments it covers).
    pub replaced_bytes: u64,
    /// Pets it holds.
    pub pets: u64,
    /// How long the whole sequence took.
    pub took: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_count_each_batch_in_the_bucket_of_its_bounds() {
        let mut stats = JournalStats::default();
        // On a bound: that bucket (the bounds are inclusive).
        stats.record(1, Duration::from_micros(100));
        stats.record(2, Duration::from_micros(250));
        // Past every bound: the last, unbounded bucket.
        stats.record(300, Duration::from_secs(2));
        assert_eq!(&stats.fsync_buckets[..2], [1, 1]);
        assert_eq!(stats.fsync_buckets[FSYNC_BUCKETS.len()], 1);
        assert_eq!(stats.fsync_buckets.iter().sum::<u64>(), 3);
        assert_eq!(&stats.batch_buckets[..2], [1, 1]);
        assert_eq!(stats.batch_buckets[BATCH_BUCKETS.len()], 1);
        assert_eq!((stats.batches, stats.records), (3, 303));
        assert_eq!(stats.fsync_time, Duration::from_micros(2_000_350));
    }
}
