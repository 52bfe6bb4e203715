//! Reloads (SIGHUP) that failed, by file: the keys file, and the TLS
//! certificate with its key (`petstore_reload_failures_total{file}`).
//!
//! Why a metric beside the log line: a failed reload changes nothing the
//! clients see (the previous keys, or the previous certificate, stay in
//! force), so no request-level figure moves; only a counter lets an alert
//! tell the operator before a renewed certificate's predecessor expires.
//! Process-wide, as the connection counters are: the reload paths
//! (`state.rs`, `cli/start.rs`) need no handle on the registry.

use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::MetricType;

/// A file the server reads again on SIGHUP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reloaded {
    /// `--keys`.
    Keys,
    /// `--tls-cert` and `--tls-key`, read together.
    Tls,
}

impl Reloaded {
    const ALL: [Reloaded; 2] = [Reloaded::Keys, Reloaded::Tls];

    /// The `file` label.
    fn label(self) -> &'static str {
        match self {
            Reloaded::Keys => "keys",
            Reloaded::Tls => "tls",
        }
    }
}

static FAILED: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];

/// Counts one reload of `file` that failed (the previous one stays in force).
pub fn reload_failed(file: Reloaded) {
    FAILED[file as usize].fetch_add(1, Ordering::Relaxed);
}

/// `/metrics`' view of the failed reloads: both files, 0 until one fails,
/// so that an alert's `increase()` has a series to start from.
#[derive(Debug)]
pub(super) struct ReloadFailures;

impl Collector for ReloadFailures {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(
            "reload_failures",
            "Reloads (SIGHUP) that failed, by file; the previous one stays in force",
            None,
            MetricType::Counter,
        )?;
        for file in Reloaded::ALL {
            let counter = ConstCounter::new(FAILED[file as usize].load(Ordering::Relaxed));
            counter.encode(family.encode_family(&[("file", file.label())])?)?;
        }
        Ok(())
    }
}
