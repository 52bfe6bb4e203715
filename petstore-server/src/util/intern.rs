//! Interned strings: text that lives as long as the process, leaked once
//! per distinct value.
//!
//! Why: values that every request hands on (a key's `RateLimit-Policy`,
//! its entry name for the access log, the successor `Link`) would
//! otherwise be reference-counted, and a shared reference count is an
//! atomic that every worker thread writes, bouncing its cache line
//! between cores on every request. A `&'static str` is copied for free.
//! Interning (the same text always gives the same leaked string) keeps
//! memory bounded across key reloads: one string per distinct value ever
//! loaded, not one per reload.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

/// The process-lifetime copy of `text`.
///
/// # Examples
///
/// ```
/// use petstore_server::util::intern::intern;
///
/// let a = intern("shop-frontend");
/// let b = intern(&String::from("shop-frontend"));
/// assert!(std::ptr::eq(a, b));
/// ```
pub fn intern(text: &str) -> &'static str {
    static INTERNED: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut set = INTERNED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    match set.get(text) {
        Some(existing) => existing,
        None => {
            let leaked: &'static str = Box::leak(text.to_owned().into_boxed_str());
            set.insert(leaked);
            leaked
        }
    }
}
