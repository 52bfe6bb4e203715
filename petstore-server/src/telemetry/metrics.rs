//! `GET /metrics`: Prometheus metrics in the OpenMetrics text format, with
//! the Prometheus project's Rust client (`prometheus-client`). Every
//! metric, its type, labels and meaning: docs/operating.md, "Operating
//! it" (`GET /metrics`).
//!
//! The metrics are registered by their owners: the requests, refusals,
//! anonymous clients and build here, with the reload failures
//! (`reloads.rs`), the certificate's expiry (`certificate.rs`) and the
//! unprefixed process figures (`process.rs`); the store's (pets, journal,
//! kept keys, PostgreSQL) by `store/`, Redis's by `ratelimit/in_redis/`,
//! the connections' by `net/`. The requests and refusals are counted by a
//! [`Recorder`] (per-thread shards of plain atomics, cheap on the hot
//! path) and summed at scrape time; the store's are read from the
//! inventory at scrape time, so the write path pays nothing for them.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::text;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, NoLabelSet};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::certificate::CertificateExpiry;
use super::process::ProcessCollector;
use super::recorder::Recorder;
use super::reloads::ReloadFailures;

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
    /// Every `petstore_` metric.
    registry: Registry,
    /// The process figures, under their usual unprefixed names.
    process: Registry,
    recorder: Arc<Recorder>,
    anonymous_clients: Gauge,
}

impl Metrics {
    /// The server's own metrics (requests, refusals, anonymous clients);
    /// each backend adds its own with [`register`](Self::register).
    pub fn new() -> Self {
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
        registry.register(
            "build",
            "The server's version",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
        );
        registry.register_collector(Box::new(ReloadFailures));
        registry.register_collector(Box::new(CertificateExpiry));
        let mut process = Registry::default();
        process.register_collector(Box::new(ProcessCollector));
        Metrics {
            registry,
            process,
            recorder,
            anonymous_clients,
        }
    }

    /// Adds the metrics `collector` reads at scrape time (a backend's,
    /// the connection counters): each part of the server that has metrics
    /// registers its own, so this file names none of them.
    pub fn register(&mut self, collector: Box<dyn Collector>) {
        self.registry.register_collector(collector);
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
        let encoded = text::encode_registry(&mut text, &self.registry)
            .and_then(|()| text::encode_registry(&mut text, &self.process))
            .and_then(|()| text::encode_eof(&mut text));
        if encoded.is_err() {
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

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// Per-bucket counts as the `(upper bound, count)` pairs the encoder
/// takes (it makes them cumulative itself); the last bound becomes `+Inf`.
pub fn buckets(bounds: &[f64], counts: &[u64]) -> Vec<(f64, u64)> {
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
    use crate::store::Store;
    use petstore_core::{CategoryId, Inventory, JournalOptions, NewPet};

    #[test]
    fn exports_requests_refusals_pets_and_journal() {
        let dir = std::env::temp_dir().join(format!("petstore-metrics-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let inventory = Arc::new(Inventory::open(&dir, JournalOptions::default()).unwrap());
        inventory
            .create(NewPet::new("Rex", CategoryId::MIN).unwrap())
            .unwrap();
        let mut metrics = Metrics::new();
        for collector in Store::local(inventory).collectors() {
            metrics.register(collector);
        }
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
        // The version, and the process figures under their usual names,
        // read from /proc (this test runs on Linux): each once, with a
        // plausible value; one end of file, at the end.
        let version = format!(
            r#"petstore_build_info{{version="{}"}} 1"#,
            env!("CARGO_PKG_VERSION")
        );
        assert!(text.lines().any(|l| l == version), "{text}");
        let value = |name: &str| -> f64 {
            let lines: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with(&format!("{name} ")))
                .collect();
            assert_eq!(lines.len(), 1, "{name} in\n{text}");
            lines[0][name.len() + 1..].parse().unwrap()
        };
        assert!(value("process_resident_memory_bytes") > 1_000_000.0);
        // A test process may not have used one tick (10 ms) yet.
        assert!(value("process_cpu_seconds_total") >= 0.0);
        assert!(value("process_open_fds") >= 3.0);
        let started = value("process_start_time_seconds");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(
            started <= now + 1.0 && started > now - 86_400.0,
            "{started}"
        );
        assert_eq!(text.matches("# EOF").count(), 1, "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
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
