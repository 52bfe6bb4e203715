//! The PostgreSQL store's counters, read by `/metrics`: plain atomics,
//! so a batch or a tail query pays a few relaxed additions and nothing
//! is locked.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What failed, for the error counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// A create's transaction.
    Commit,
    /// A query of new pets.
    Tail,
    /// A create refused because the committer's queue was full.
    Queue,
}

impl Op {
    /// Every operation, as the metrics label them.
    pub const ALL: [Op; 3] = [Op::Commit, Op::Tail, Op::Queue];

    /// The label.
    pub fn label(self) -> &'static str {
        match self {
            Op::Commit => "commit",
            Op::Tail => "tail",
            Op::Queue => "queue_full",
        }
    }
}

/// Counters of the PostgreSQL store, read by `/metrics`.
#[derive(Debug, Default)]
pub struct Stats {
    /// Time of each batch's transaction, connection included.
    pub commit: Histogram,
    /// Time of each tail query.
    pub tail: Histogram,
    /// Creates per transaction.
    pub batch: Histogram,
    errors: [AtomicU64; 3],
}

impl Stats {
    pub(crate) fn count_error(&self, op: Op) {
        self.errors[op as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Failures of `op` so far.
    pub fn errors(&self, op: Op) -> u64 {
        self.errors[op as usize].load(Ordering::Relaxed)
    }
}

/// Upper bounds of [`Histogram`]'s buckets for durations, in seconds; the
/// last bucket is everything above.
pub const SECONDS_BUCKETS: [f64; 11] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
];
/// Upper bounds of the batch-size buckets.
pub const BATCH_BUCKETS: [f64; 11] = [
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
];

/// A histogram of plain atomics: a sum, a count and 12 buckets (11
/// bounds and everything above), the bounds given when it is read.
#[derive(Debug, Default)]
pub struct Histogram {
    sum_micros: AtomicU64,
    count: AtomicU64,
    buckets: [AtomicU64; 12],
}

impl Histogram {
    pub(crate) fn observe(&self, elapsed: Duration) {
        let micros = elapsed.as_micros().min(u128::from(u64::MAX)) as u64;
        let secs = elapsed.as_secs_f64();
        self.add(micros, SECONDS_BUCKETS.iter().position(|b| secs <= *b));
    }

    pub(crate) fn observe_count(&self, n: u64) {
        // Counts are kept in the micros field as whole units.
        self.add(n, BATCH_BUCKETS.iter().position(|b| n as f64 <= *b));
    }

    fn add(&self, amount: u64, bucket: Option<usize>) {
        self.sum_micros.fetch_add(amount, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.buckets[bucket.unwrap_or(11)].fetch_add(1, Ordering::Relaxed);
    }

    /// The sum (microseconds for a duration, units for a count), the count
    /// and the per-bucket counts.
    pub fn read(&self) -> (u64, u64, [u64; 12]) {
        let buckets = std::array::from_fn(|i| self.buckets[i].load(Ordering::Relaxed));
        (
            self.sum_micros.load(Ordering::Relaxed),
            self.count.load(Ordering::Relaxed),
            buckets,
        )
    }
}
