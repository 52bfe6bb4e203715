//! The PostgreSQL store's counters, read by `/metrics`: plain atomics
//! ([`Histogram`]), so a batch or a tail query pays a few relaxed
//! additions and nothing is locked.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::telemetry::histogram::Histogram;

/// What failed, for the error counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// A create's transaction.
    Commit,
    /// A query of new pets.
    Tail,
    /// A create or a transition refused because its committer's queue
    /// was full.
    Queue,
    /// A batch of steps' transaction (orders, and pet transitions).
    Transition,
    /// The lookup of an idempotency key.
    Lookup,
    /// A pass of pruning expired idempotency keys.
    Prune,
    /// A transaction expiring lapsed holds.
    Expire,
    /// A query of the feed's new events, or a pass pruning old ones.
    Events,
}

impl Op {
    /// Every operation, as the metrics label them.
    pub const ALL: [Op; 8] = [
        Op::Commit,
        Op::Tail,
        Op::Queue,
        Op::Transition,
        Op::Lookup,
        Op::Prune,
        Op::Expire,
        Op::Events,
    ];

    /// The label.
    pub fn label(self) -> &'static str {
        match self {
            Op::Commit => "commit",
            Op::Tail => "tail",
            Op::Queue => "queue_full",
            Op::Transition => "transition",
            Op::Lookup => "idempotency_lookup",
            Op::Prune => "idempotency_prune",
            Op::Expire => "expire",
            Op::Events => "events",
        }
    }
}

/// Counters of the PostgreSQL store, read by `/metrics`.
#[derive(Debug)]
pub struct PostgresStats {
    /// Time of each batch's transaction, connection included.
    pub commit: Histogram,
    /// Time of each tail query.
    pub tail: Histogram,
    /// Creates per transaction.
    pub batch: Histogram,
    /// Time of each batch of transitions' transaction, connection
    /// included.
    pub transition: Histogram,
    /// Transitions per transaction.
    pub transition_batch: Histogram,
    /// Time of each lookup of an idempotency key.
    pub lookup: Histogram,
    /// Keyed answers this replica committed (kept in the table).
    pub kept: AtomicU64,
    /// Expired keys this replica's prune task deleted.
    pub pruned: AtomicU64,
    /// Rows in `petstore_idempotency` at the end of the last prune pass.
    pub kept_keys: AtomicU64,
    errors: [AtomicU64; Op::ALL.len()],
}

impl Default for PostgresStats {
    fn default() -> PostgresStats {
        PostgresStats {
            commit: Histogram::seconds(&SECONDS_BUCKETS),
            tail: Histogram::seconds(&SECONDS_BUCKETS),
            batch: Histogram::counts(&BATCH_BUCKETS),
            transition: Histogram::seconds(&SECONDS_BUCKETS),
            transition_batch: Histogram::counts(&BATCH_BUCKETS),
            lookup: Histogram::seconds(&SECONDS_BUCKETS),
            kept: AtomicU64::new(0),
            pruned: AtomicU64::new(0),
            kept_keys: AtomicU64::new(0),
            errors: Default::default(),
        }
    }
}

impl PostgresStats {
    pub(crate) fn count_error(&self, op: Op) {
        self.errors[op as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Failures of `op` so far.
    pub fn errors(&self, op: Op) -> u64 {
        self.errors[op as usize].load(Ordering::Relaxed)
    }
}

/// Upper bounds of the duration histograms' buckets, in seconds; the last
/// bucket is everything above.
pub static SECONDS_BUCKETS: [f64; 11] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
];
/// Upper bounds of the batch-size buckets.
pub static BATCH_BUCKETS: [f64; 11] = [
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
];
