//! The process figures operators graph, under the names every Prometheus
//! client uses (no `petstore_` prefix, so dashboards made for them work):
//! `process_resident_memory_bytes`, `process_cpu_seconds_total`,
//! `process_open_fds`, `process_start_time_seconds`. Read from
//! `/proc/self` at scrape time, so serving requests pays nothing for them;
//! a figure that cannot be read (not Linux, `/proc` not mounted) is left
//! out rather than reported as 0.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Clock ticks per second of `/proc`'s CPU times and start time: USER_HZ,
/// which Linux fixes at 100 in its user-space ABI (whatever the kernel's
/// own HZ), so no `sysconf` is needed.
const USER_HZ: f64 = 100.0;

/// The collector of the process figures.
#[derive(Debug)]
pub struct ProcessCollector;

/// What `/proc/self/stat` holds that is reported: CPU seconds (user and
/// system) and the start time in ticks since boot.
fn stat() -> Option<(f64, u64)> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may hold spaces:
    // count fields from after its closing one (field 3 on).
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 (utime), 15 (stime) and 22 (starttime), 1-based, are at
    // 11, 12 and 19 here.
    let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
    let cpu = (ticks(11)? + ticks(12)?) as f64 / USER_HZ;
    Some((cpu, ticks(19)?))
}

/// The boot time, in seconds since the Unix epoch (`btime` of `/proc/stat`).
fn boot_time() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

/// Resident memory in bytes (`VmRSS` of `/proc/self/status`, in kB).
fn resident_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Open file descriptors (the entries of `/proc/self/fd`, less the one
/// the listing itself holds).
fn open_fds() -> Option<u64> {
    let entries = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
    Some(entries.saturating_sub(1))
}

/// Encodes one figure under `name`.
fn figure(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    metric: &impl EncodeMetric,
) -> Result<(), std::fmt::Error> {
    let descriptor = encoder.encode_descriptor(name, help, None, metric.metric_type())?;
    metric.encode(descriptor)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some(bytes) = resident_bytes() {
            let memory = ConstGauge::new(bytes as i64);
            figure(
                &mut encoder,
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                &memory,
            )?;
        }
        if let Some((cpu, start_ticks)) = stat() {
            let cpu = ConstCounter::new(cpu);
            figure(
                &mut encoder,
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                &cpu,
            )?;
            if let Some(boot) = boot_time() {
                let start = ConstGauge::new(boot as f64 + start_ticks as f64 / USER_HZ);
                figure(
                    &mut encoder,
                    "process_start_time_seconds",
                    "Start time of the process since the Unix epoch in seconds",
                    &start,
                )?;
            }
        }
        if let Some(fds) = open_fds() {
            let fds = ConstGauge::new(fds as i64);
            figure(
                &mut encoder,
                "process_open_fds",
                "Number of open file descriptors",
                &fds,
            )?;
        }
        Ok(())
    }
}
