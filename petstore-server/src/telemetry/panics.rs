//! Panics as log lines: every panic of the process (caught by the request
//! driver or not) is one ERROR line naming its place (`file:line:col`),
//! its thread and its message, in the log's format, instead of the
//! standard hook's plain text, which a JSON log collector cannot parse and
//! a test's failure output may not keep. The driver's own line for a
//! caught panic ("handler panicked ...") follows it and names the place
//! again ([`take_last_place`]).
//!
//! The message is the panic's own, cut to [`MAX_MESSAGE`] characters: the
//! server's panics are its own `panic!`, `unwrap` and index messages, and
//! none formats a request's header, so no key reaches the log.

use std::cell::RefCell;
use std::panic::PanicHookInfo;
use std::sync::Once;

use crate::log_error;

/// The longest part of a panic's message that is logged.
pub const MAX_MESSAGE: usize = 300;

thread_local! {
    /// Where this thread panicked last, for the driver's line.
    static LAST_PLACE: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs the hook in place of the standard one, once per process
/// (later calls do nothing).
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| std::panic::set_hook(Box::new(log_panic)));
}

/// The unit tests' [`install`]: the hook, then the one in force (libtest
/// shows a failing test's panic through it).
#[cfg(test)]
pub(crate) fn install_for_tests() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            log_panic(info);
            previous(info);
        }));
    });
}

/// Where this thread panicked last, taken (`None` when it has not since
/// the last call, or the hook is not installed).
pub fn take_last_place() -> Option<String> {
    LAST_PLACE
        .try_with(|last| last.try_borrow_mut().ok()?.take())
        .ok()
        .flatten()
}

/// The hook: one log line, and the place kept for [`take_last_place`].
fn log_panic(info: &PanicHookInfo<'_>) {
    let place = info.location().map_or_else(
        || "an unknown place".to_owned(),
        |at| format!("{}:{}:{}", at.file(), at.line(), at.column()),
    );
    let thread = std::thread::current();
    let thread = thread.name().unwrap_or("unnamed");
    log_error!("{}", line(&place, thread, message(payload_text(info))));
    let _ = LAST_PLACE.try_with(|last| {
        if let Ok(mut last) = last.try_borrow_mut() {
            *last = Some(place);
        }
    });
}

/// A panic's message, when it is text: `panic!` with arguments carries a
/// `String`, with a literal a `&str`.
fn payload_text<'a>(info: &'a PanicHookInfo<'_>) -> Option<&'a str> {
    let payload = info.payload();
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
}

/// The text of a panic's log line.
fn line(place: &str, thread: &str, message: &str) -> String {
    format!("panicked at {place} (thread '{thread}'): {message}")
}

/// A panic's message as logged: at most [`MAX_MESSAGE`] characters.
fn message(payload: Option<&str>) -> &str {
    let Some(text) = payload else {
        return "(a panic without a text message)";
    };
    match text.char_indices().nth(MAX_MESSAGE) {
        Some((cut, _)) => &text[..cut],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::log::{render, Format};

    #[test]
    fn a_panic_line_names_its_place_in_both_formats() {
        let text = line("src/http/finish.rs:12:9", "tokio-runtime-worker", "boom");
        for format in [Format::Text, Format::Json] {
            let rendered =
                String::from_utf8(render(format, "ERROR", format_args!("{text}"))).unwrap();
            assert!(rendered.contains("ERROR"), "{rendered}");
            assert!(
                rendered.contains(
                    "panicked at src/http/finish.rs:12:9 (thread 'tokio-runtime-worker'): boom"
                ),
                "{rendered}"
            );
            assert_eq!(rendered.matches('\n').count(), 1, "one line: {rendered}");
        }
    }

    #[test]
    fn a_long_message_is_cut() {
        let long = "é".repeat(MAX_MESSAGE + 10);
        assert_eq!(message(Some(&long)).chars().count(), MAX_MESSAGE);
        assert_eq!(message(Some("short")), "short");
        assert_eq!(message(None), "(a panic without a text message)");
    }
}
