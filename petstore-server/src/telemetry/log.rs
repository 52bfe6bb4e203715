//! Log lines on stderr, in one of two formats ([`Format`], `--log-format`):
//! plain text, `2026-11-22T11:52:00.123Z LEVEL message`, or one JSON
//! object per line, `{"ts":"...","level":"INFO","msg":"..."}`, which log
//! collectors parse without a pattern (the access log's lines then carry
//! the same three fields). A key is never logged, only its entry's name.

use std::fmt;
#[cfg(not(test))]
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use petstore_core::clock::rfc3339_utc;

/// The format of every log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `TIME LEVEL message` (the default).
    Text,
    /// One JSON object per line with `ts`, `level` and `msg`.
    Json,
}

/// Whether lines are JSON: set once at start, read by every line.
static JSON: AtomicBool = AtomicBool::new(false);

/// Sets the format of every line from now on (once, at start).
pub fn set_format(format: Format) {
    JSON.store(format == Format::Json, Ordering::Relaxed);
}

/// The format in force.
pub fn format() -> Format {
    if JSON.load(Ordering::Relaxed) {
        Format::Json
    } else {
        Format::Text
    }
}

#[derive(Serialize)]
struct JsonLine<'a> {
    ts: &'a str,
    level: &'a str,
    msg: &'a str,
}

/// Writes one log line, in one `write` (lines of concurrent tasks never
/// interleave).
pub fn write(level: &str, message: fmt::Arguments<'_>) {
    let line = render(format(), level, message);
    // In the unit tests, through libtest's capture: shown with the test
    // that logged it when that test fails.
    #[cfg(test)]
    {
        tests::capture(&line);
        eprint!("{}", String::from_utf8_lossy(&line));
    }
    #[cfg(not(test))]
    let _ = std::io::stderr().lock().write_all(&line);
}

/// One log line in `format`, its newline included.
pub fn render(format: Format, level: &str, message: fmt::Arguments<'_>) -> Vec<u8> {
    let ts = rfc3339_now();
    let mut line = match format {
        Format::Text => format!("{ts} {level} {message}").into_bytes(),
        Format::Json => {
            let msg = message.to_string();
            // Three strings into a Vec cannot fail.
            serde_json::to_vec(&JsonLine {
                ts: &ts,
                level,
                msg: &msg,
            })
            .unwrap_or_default()
        }
    };
    line.push(b'\n');
    line
}

/// Logs at INFO.
#[macro_export]
macro_rules! log_info {
    ($($arg:tt)*) => { $crate::telemetry::log::write("INFO", format_args!($($arg)*)) };
}

/// Logs at ERROR.
#[macro_export]
macro_rules! log_error {
    ($($arg:tt)*) => { $crate::telemetry::log::write("ERROR", format_args!($($arg)*)) };
}

/// The current time, RFC 3339 in UTC with milliseconds.
pub fn now() -> String {
    rfc3339_now()
}

fn rfc3339_now() -> String {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(since.as_secs(), since.subsec_millis())
}

/// UTC date and time of a Unix time, with milliseconds.
fn rfc3339(secs: u64, millis: u32) -> String {
    rfc3339_utc(secs, Some(millis))
}

#[cfg(test)]
pub(crate) mod tests {
    use parking_lot::Mutex;

    /// Every line the unit tests' process logged, for a test to look for
    /// its own.
    static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

    pub(super) fn capture(line: &[u8]) {
        LINES
            .lock()
            .push(String::from_utf8_lossy(line).into_owned());
    }

    /// The lines logged so far that contain `needle`.
    pub(crate) fn logged(needle: &str) -> Vec<String> {
        LINES
            .lock()
            .iter()
            .filter(|line| line.contains(needle))
            .cloned()
            .collect()
    }

    /// What [`logs_a_line_and_passes`] logs.
    const PASSING_TESTS_LINE: &str = "a line a passing unit test logged";

    /// Logs a line and passes: libtest keeps the line with the test's
    /// other output and drops it, so it never reaches the terminal.
    #[test]
    fn logs_a_line_and_passes() {
        crate::log_error!("{PASSING_TESTS_LINE}");
        assert_eq!(logged(PASSING_TESTS_LINE).len(), 1);
    }

    /// A line written past libtest's capture shows in the output of a
    /// run whose tests all pass, with no test's name beside it, and reads
    /// as a server's: the driver's test of a deliberate panic logs
    /// "handler panicked ... on GET /v1/pets; answered 500". This runs
    /// the test binary itself, with only [`logs_a_line_and_passes`], and
    /// looks for the line in all it printed.
    #[test]
    fn a_passing_tests_log_lines_stay_in_libtests_capture() {
        let exe = std::env::current_exe().expect("the test binary's path");
        let out = std::process::Command::new(exe)
            .args(["--exact", "telemetry::log::tests::logs_a_line_and_passes"])
            .env_remove("RUST_TEST_NOCAPTURE")
            .output()
            .expect("the test binary runs");
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{printed}");
        assert!(printed.contains("1 passed"), "{printed}");
        assert!(!printed.contains(PASSING_TESTS_LINE), "{printed}");
    }

    #[test]
    fn formats_utc() {
        assert_eq!(super::rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(super::rfc3339(1_922_659_200, 5), "2030-12-05T00:00:00.005Z");
        assert_eq!(
            super::rfc3339(951_782_400 + 3_661, 999),
            "2000-02-29T01:01:01.999Z"
        );
    }
}
