//! A histogram of plain atomics for `/metrics`, for what is observed off
//! the request path's per-thread recorder (`recorder.rs`): the PostgreSQL
//! store's commits, tail queries and batch sizes, and the Redis limiter's
//! calls. An observation is three relaxed additions, nothing is locked,
//! and a scrape reads the counts as they stand (a scrape during an
//! observation may see the count one ahead of a bucket; Prometheus
//! tolerates that, and it is gone by the next scrape).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The most bounds a histogram has (its buckets are one more: everything
/// above the last bound).
pub const MAX_BOUNDS: usize = 11;

/// What a histogram observes, which decides the unit of its sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    /// Durations: the sum is kept in microseconds, exported in seconds.
    Seconds,
    /// Counts: the sum is kept and exported in units.
    Count,
}

/// Counts per bucket, a count and a sum, over fixed bounds.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    unit: Unit,
    sum: AtomicU64,
    count: AtomicU64,
    buckets: [AtomicU64; MAX_BOUNDS + 1],
}

impl Histogram {
    /// A histogram of durations, bounds in seconds (ascending, at most
    /// [`MAX_BOUNDS`]: the bounds are the program's constants, so more is
    /// a bug and panics here, at start).
    pub fn seconds(bounds: &'static [f64]) -> Histogram {
        Histogram::new(bounds, Unit::Seconds)
    }

    /// A histogram of counts (a batch's size), bounds in units.
    pub fn counts(bounds: &'static [f64]) -> Histogram {
        Histogram::new(bounds, Unit::Count)
    }

    fn new(bounds: &'static [f64], unit: Unit) -> Histogram {
        assert!(bounds.len() <= MAX_BOUNDS, "at most {MAX_BOUNDS} bounds");
        Histogram {
            bounds,
            unit,
            sum: AtomicU64::new(0),
            count: AtomicU64::new(0),
            buckets: Default::default(),
        }
    }

    /// Observes a duration (in a histogram of [`seconds`](Self::seconds)).
    pub fn observe(&self, elapsed: Duration) {
        debug_assert_eq!(self.unit, Unit::Seconds);
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.add(micros, elapsed.as_secs_f64());
    }

    /// Observes a count (in a histogram of [`counts`](Self::counts)).
    pub fn observe_count(&self, n: u64) {
        debug_assert_eq!(self.unit, Unit::Count);
        self.add(n, n as f64);
    }

    fn add(&self, amount: u64, value: f64) {
        let bucket = self
            .bounds
            .iter()
            .position(|b| value <= *b)
            .unwrap_or(self.bounds.len());
        self.sum.fetch_add(amount, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
    }

    /// The sum (seconds, or units), the count, and each bucket's upper
    /// bound with its count, the last `+Inf`: what
    /// `prometheus-client`'s `encode_histogram` takes.
    pub fn snapshot(&self) -> (f64, u64, Vec<(f64, u64)>) {
        let sum = self.sum.load(Ordering::Relaxed) as f64;
        let sum = match self.unit {
            Unit::Seconds => sum / 1e6,
            Unit::Count => sum,
        };
        let buckets = self
            .bounds
            .iter()
            .copied()
            .chain([f64::INFINITY])
            .zip(&self.buckets)
            .map(|(bound, n)| (bound, n.load(Ordering::Relaxed)))
            .collect();
        (sum, self.count.load(Ordering::Relaxed), buckets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    static SIZES: [f64; 3] = [1.0, 2.0, 4.0];

    #[test]
    fn a_value_on_a_bound_counts_in_that_bound_and_above_the_last_in_inf() {
        let h = Histogram::counts(&SIZES);
        for n in [1, 2, 3, 4, 5, 100] {
            h.observe_count(n);
        }
        let (sum, count, buckets) = h.snapshot();
        assert_eq!((sum, count), (115.0, 6));
        assert_eq!(buckets, [(1.0, 1), (2.0, 1), (4.0, 2), (f64::INFINITY, 2)]);
    }

    #[test]
    fn durations_land_in_their_buckets() {
        static BOUNDS: [f64; 2] = [0.001, 0.01];
        let h = Histogram::seconds(&BOUNDS);
        h.observe(Duration::from_micros(500));
        h.observe(Duration::from_millis(20));
        let (sum, count, buckets) = h.snapshot();
        assert_eq!(count, 2);
        assert!((sum - 0.0205).abs() < 1e-9);
        assert_eq!(buckets, [(0.001, 1), (0.01, 0), (f64::INFINITY, 1)]);
    }
}
