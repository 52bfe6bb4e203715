//! [`Recorder`]: the hot-path half of the metrics. Every answered request
//! adds to a few plain atomic counters in its worker thread's own shard;
//! `GET /metrics` sums the shards (`metrics.rs`).
//!
//! Why not `prometheus-client`'s own `Family` and `Histogram` on the hot
//! path: a `Family` lookup takes a read lock and hashes the labels, and a
//! `Histogram` takes a mutex, on every request; with every worker thread
//! writing the same lock words and counters, their cache lines bounce
//! between cores, which costs list throughput measurably
//! (`scripts/bench/load`; docs/performance.md has the figures).
//! Here the labels are indices into fixed tables (the routes, methods and
//! statuses the server can answer are known), and each thread writes only
//! its own shard, so a request costs three uncontended increments.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

/// The route templates (`paths.rs`); the last is for requests that match
/// no route.
use crate::paths::TEMPLATES as ROUTES;

/// Method labels; the last is for any other method (a client must not be
/// able to mint label values).
pub const METHODS: [&str; 10] = [
    "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "TRACE", "CONNECT", "other",
];

/// The statuses the handler answers. Another status (none today) is
/// counted in a locked map off the fast path.
pub const STATUSES: [u16; 15] = [
    200, 201, 204, 400, 401, 404, 405, 408, 409, 413, 415, 429, 500, 501, 503,
];

/// Refusal reasons of `petstore_rate_limit_refusals`: the `code` of the
/// two 429 errors (`ApiError::code`).
pub const REFUSALS: [&str; 2] = ["rate_limited", "key_banned"];

/// Upper bounds of the latency buckets: 50 µs doubling to about 1.6 s
/// (16 buckets; slower requests land in `+Inf`).
pub const LATENCY_BUCKETS: usize = 16;
const FIRST_BOUND_NANOS: u64 = 50_000;

/// Shards: more than the worker threads of a small machine, so that two
/// threads rarely share one. A thread takes the next shard round-robin at
/// its first request.
const SHARDS: usize = 8;

const COUNTERS: usize = ROUTES.len() * METHODS.len() * STATUSES.len();

/// One thread's counters, on cache lines of their own.
#[repr(align(128))]
struct Shard {
    requests: [AtomicU64; COUNTERS],
    /// Per route: the buckets (the last is `+Inf`), then the sum in ns.
    latency: [[AtomicU64; LATENCY_BUCKETS + 2]; ROUTES.len()],
    refusals: [AtomicU64; REFUSALS.len()],
}

impl Shard {
    fn new() -> Self {
        Shard {
            requests: std::array::from_fn(|_| AtomicU64::new(0)),
            latency: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            refusals: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// Counts of answered requests, by route, method and status, their
/// latency by route, and 429s by reason.
pub struct Recorder {
    shards: Box<[Shard]>,
    /// Statuses outside [`STATUSES`].
    other: Mutex<HashMap<(usize, usize, u16), u64>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").finish_non_exhaustive()
    }
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            shards: (0..SHARDS).map(|_| Shard::new()).collect(),
            other: Mutex::default(),
        }
    }
}

/// A request's count, as summed over the shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestCount {
    /// The route template.
    pub route: &'static str,
    /// The method label.
    pub method: &'static str,
    /// The status.
    pub status: u16,
    /// How many.
    pub count: u64,
}

/// One route's latency, summed over the shards.
#[derive(Clone, Debug, PartialEq)]
pub struct Latency {
    /// The route template.
    pub route: &'static str,
    /// Total seconds.
    pub sum: f64,
    /// Requests.
    pub count: u64,
    /// `(upper bound in seconds, requests in this bucket)`, not
    /// cumulative (the OpenMetrics encoder sums them); the last bound is
    /// `+Inf`.
    pub buckets: Vec<(f64, u64)>,
}

fn route_index(route: &str) -> usize {
    ROUTES
        .iter()
        .position(|r| *r == route)
        .unwrap_or(ROUTES.len() - 1)
}

fn method_index(method: &str) -> usize {
    METHODS
        .iter()
        .position(|m| *m == method)
        .unwrap_or(METHODS.len() - 1)
}

/// The bucket of a latency: the first whose bound it does not exceed.
fn latency_bucket(elapsed: Duration) -> usize {
    let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
    // In units of the first bound, rounded up; bucket i holds up to 2^i.
    let units = nanos.div_ceil(FIRST_BOUND_NANOS);
    if units <= 1 {
        return 0;
    }
    let i = (u64::BITS - (units - 1).leading_zeros()) as usize;
    i.min(LATENCY_BUCKETS)
}

/// The upper bound of bucket `i` in seconds (`+Inf` for the last).
fn bucket_bound(i: usize) -> f64 {
    if i >= LATENCY_BUCKETS {
        f64::INFINITY
    } else {
        (FIRST_BOUND_NANOS << i) as f64 / 1e9
    }
}

thread_local! {
    static SHARD: usize = {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS
    };
}

impl Recorder {
    /// Counts one answered request.
    pub fn observe(
        &self,
        route: &str,
        method: &str,
        status: u16,
        refusal: Option<&str>,
        elapsed: Duration,
    ) {
        let shard = &self.shards[SHARD.with(|s| *s)];
        let r = route_index(route);
        let m = method_index(method);
        match STATUSES.iter().position(|s| *s == status) {
            Some(s) => {
                let i = (r * METHODS.len() + m) * STATUSES.len() + s;
                shard.requests[i].fetch_add(1, Ordering::Relaxed);
            }
            None => *self.other.lock().entry((r, m, status)).or_default() += 1,
        }
        let latency = &shard.latency[r];
        latency[latency_bucket(elapsed)].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        latency[LATENCY_BUCKETS + 1].fetch_add(nanos, Ordering::Relaxed);
        if let Some(reason) = refusal {
            if let Some(i) = REFUSALS.iter().position(|r| *r == reason) {
                shard.refusals[i].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn sum(&self, counter: impl Fn(&Shard) -> &AtomicU64) -> u64 {
        self.shards
            .iter()
            .map(|shard| counter(shard).load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }

    /// Every (route, method, status) seen, with its count.
    pub fn requests(&self) -> Vec<RequestCount> {
        let mut out = Vec::new();
        for (r, route) in ROUTES.iter().enumerate() {
            for (m, method) in METHODS.iter().enumerate() {
                for (s, status) in STATUSES.iter().enumerate() {
                    let i = (r * METHODS.len() + m) * STATUSES.len() + s;
                    let count = self.sum(|shard| &shard.requests[i]);
                    if count > 0 {
                        out.push(RequestCount {
                            route,
                            method,
                            status: *status,
                            count,
                        });
                    }
                }
            }
        }
        let other = self.other.lock();
        for (&(r, m, status), &count) in other.iter() {
            out.push(RequestCount {
                route: ROUTES[r],
                method: METHODS[m],
                status,
                count,
            });
        }
        out
    }

    /// The latency histogram of every route seen.
    pub fn latency(&self) -> Vec<Latency> {
        let mut out = Vec::new();
        for (r, route) in ROUTES.iter().enumerate() {
            let buckets: Vec<(f64, u64)> = (0..=LATENCY_BUCKETS)
                .map(|i| (bucket_bound(i), self.sum(|shard| &shard.latency[r][i])))
                .collect();
            let total = buckets.iter().map(|(_, n)| n).sum();
            if total == 0 {
                continue;
            }
            let nanos = self.sum(|shard| &shard.latency[r][LATENCY_BUCKETS + 1]);
            out.push(Latency {
                route,
                sum: nanos as f64 / 1e9,
                count: total,
                buckets,
            });
        }
        out
    }

    /// 429s by reason.
    pub fn refusals(&self) -> [(&'static str, u64); REFUSALS.len()] {
        std::array::from_fn(|i| (REFUSALS[i], self.sum(|shard| &shard.refusals[i])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn buckets_match_their_bounds() {
        // Every bound, and one nanosecond either side of it.
        for i in 0..LATENCY_BUCKETS {
            let bound = FIRST_BOUND_NANOS << i;
            for (nanos, want) in [(bound - 1, i), (bound, i), (bound + 1, i + 1)] {
                let got = latency_bucket(Duration::from_nanos(nanos));
                let want = if nanos < FIRST_BOUND_NANOS { 0 } else { want };
                assert_eq!(got, want, "{nanos} ns");
                assert!(nanos as f64 / 1e9 <= bucket_bound(got));
                if got > 0 {
                    assert!(nanos as f64 / 1e9 > bucket_bound(got - 1));
                }
            }
        }
        assert_eq!(latency_bucket(Duration::ZERO), 0);
        assert_eq!(latency_bucket(Duration::from_secs(3600)), LATENCY_BUCKETS);
        assert_eq!(latency_bucket(Duration::MAX), LATENCY_BUCKETS);
    }

    #[test]
    fn refusal_labels_are_the_429_codes() {
        use crate::http::ApiError;
        let retry_after = Duration::from_secs(1);
        assert_eq!(
            REFUSALS,
            [
                ApiError::RateLimited { retry_after }.code(),
                ApiError::KeyBanned { retry_after }.code(),
            ]
        );
    }

    #[test]
    fn sums_every_thread() {
        let recorder = Recorder::default();
        std::thread::scope(|scope| {
            for _ in 0..(SHARDS + 3) {
                scope.spawn(|| {
                    for _ in 0..1000 {
                        recorder.observe("/v1/pets", "GET", 200, None, Duration::from_micros(60));
                    }
                });
            }
        });
        recorder.observe("/v1/pets", "BREW", 418, None, Duration::from_secs(9));
        recorder.observe("/nowhere", "GET", 429, Some("key_banned"), Duration::ZERO);
        let requests = recorder.requests();
        let count = |route, method, status| {
            requests
                .iter()
                .find(|c| c.route == route && c.method == method && c.status == status)
                .map(|c| c.count)
        };
        let threads = (SHARDS + 3) as u64;
        assert_eq!(count("/v1/pets", "GET", 200), Some(1000 * threads));
        assert_eq!(count("/v1/pets", "other", 418), Some(1));
        assert_eq!(count("unknown", "GET", 429), Some(1));
        assert_eq!(requests.len(), 3);
        assert_eq!(
            recorder.refusals(),
            [("rate_limited", 0), ("key_banned", 1)]
        );

        let latency = recorder.latency();
        let pets = latency.iter().find(|l| l.route == "/v1/pets").unwrap();
        assert_eq!(pets.count, 1000 * threads + 1);
        // 60 µs is in the 100 µs bucket; the 9 s request in +Inf.
        let mut want = vec![0; LATENCY_BUCKETS + 1];
        want[1] = 1000 * threads;
        want[LATENCY_BUCKETS] = 1;
        let counts: Vec<u64> = pets.buckets.iter().map(|(_, n)| *n).collect();
        assert_eq!(counts, want);
        assert_eq!(pets.buckets[0].0, 50e-6);
        assert_eq!(pets.buckets[LATENCY_BUCKETS].0, f64::INFINITY);
        assert!((pets.sum - (0.06 * threads as f64 + 9.0)).abs() < 1e-6);
    }

    #[test]
    fn requests_and_refusals_are_counted_by_their_labels() {
        let recorder = Recorder::default();
        recorder.observe("/v1/pets", "GET", 200, None, Duration::from_micros(80));
        recorder.observe(
            "/v1/pets",
            "GET",
            429,
            Some("rate_limited"),
            Duration::from_micros(20),
        );
        let counts = recorder.requests();
        assert_eq!(counts.len(), 2);
        assert_eq!(
            recorder.refusals(),
            [("rate_limited", 1), ("key_banned", 0)]
        );
    }
}
