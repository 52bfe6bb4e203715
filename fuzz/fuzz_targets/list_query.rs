//! `list_query`, `events_query` and `percent_decode` on any UTF-8 text:
//! never panic; an accepted list query has a limit of 1..=100 and an
//! `after` of 1..=2^63-1, an accepted feed query a limit of 1..=1000 and a
//! `wait` of 1..=30 s, and decoding inverts a full percent-encoding.
#![no_main]

use std::borrow::Cow;
use std::fmt::Write as _;

use libfuzzer_sys::fuzz_target;
use petstore_server::http::query_string::{events_query, list_query, percent_decode};

/// Every byte as `%XX`, but unreserved characters; spaces as `+`.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(char::from(b));
            }
            b' ' => out.push('+'),
            _ => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };

    if let Ok(q) = list_query(Some(s)) {
        let limit = q.limit.get();
        assert!((1..=100).contains(&limit), "limit {limit} from {s:?}");
        if let Some(after) = q.after {
            assert!(
                (1..=i64::MAX as u64).contains(&after.get()),
                "after {after} from {s:?}"
            );
        }
    }

    if let Ok(q) = events_query(Some(s)) {
        let limit = q.query.limit.get();
        assert!((1..=1000).contains(&limit), "limit {limit} from {s:?}");
        if let Some(wait) = q.wait {
            assert!((1..=30).contains(&wait.as_secs()), "wait {wait:?} from {s:?}");
        }
    }

    for plus_is_space in [false, true] {
        let decoded = percent_decode(s, plus_is_space);
        let escapes = s.contains('%') || (plus_is_space && s.contains('+'));
        if !escapes {
            assert!(
                matches!(decoded, Some(Cow::Borrowed(d)) if d == s),
                "text without escapes changed: {s:?} -> {decoded:?}"
            );
        }
        if let Some(d) = decoded {
            assert!(d.len() <= s.len(), "decoding grew {s:?} to {d:?}");
        }
    }
    let encoded = encode(s);
    let decoded = percent_decode(&encoded, true);
    assert_eq!(
        decoded.as_deref(),
        Some(s),
        "percent_decode(encode(s)) != s for encoded {encoded:?}"
    );
});
