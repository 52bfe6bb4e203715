//! When the served TLS certificate expires
//! (`petstore_tls_certificate_expiry_timestamp_seconds`): the earliest
//! `notAfter` of the chain in force, set when it is loaded and when a
//! reload puts a new one in force.
//!
//! Why a metric: a certificate that is not renewed (a renewal job that
//! failed, a reload never sent) breaks every client at one instant, and
//! nothing a request measures moves before it; an alert on this gauge
//! minus `time()` tells the operator weeks ahead. Process-wide, as the
//! reload counters are: the TLS loader (`net/tls.rs`) needs no handle on
//! the registry.

use std::sync::atomic::{AtomicI64, Ordering};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;

/// No certificate (no `--tls-cert`), or none whose expiry could be read.
const UNKNOWN: i64 = i64::MIN;

static NOT_AFTER: AtomicI64 = AtomicI64::new(UNKNOWN);

/// The chain now in force expires at `not_after` (Unix seconds); `None`
/// when its expiry could not be read, which takes the series away.
pub fn certificate_in_force(not_after: Option<i64>) {
    NOT_AFTER.store(not_after.unwrap_or(UNKNOWN), Ordering::Relaxed);
}

/// `/metrics`' view of it: the gauge while a certificate's expiry is
/// known, no series otherwise (a server without TLS has none to watch).
#[derive(Debug)]
pub(super) struct CertificateExpiry;

impl Collector for CertificateExpiry {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let not_after = NOT_AFTER.load(Ordering::Relaxed);
        if not_after == UNKNOWN {
            return Ok(());
        }
        let gauge = ConstGauge::new(not_after);
        let metric = encoder.encode_descriptor(
            "tls_certificate_expiry_timestamp_seconds",
            "When the served TLS certificate chain expires: its earliest notAfter, Unix seconds",
            None,
            gauge.metric_type(),
        )?;
        gauge.encode(metric)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    fn scrape() -> String {
        let mut registry = Registry::with_prefix("petstore");
        registry.register_collector(Box::new(CertificateExpiry));
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        text
    }

    #[test]
    fn the_gauge_is_there_while_an_expiry_is_known() {
        certificate_in_force(Some(1_936_742_400));
        let text = scrape();
        assert!(text.contains("# TYPE petstore_tls_certificate_expiry_timestamp_seconds gauge"));
        assert!(
            text.contains("\npetstore_tls_certificate_expiry_timestamp_seconds 1936742400\n"),
            "{text}"
        );
        certificate_in_force(None);
        assert!(!scrape().contains("tls_certificate"));
    }
}
