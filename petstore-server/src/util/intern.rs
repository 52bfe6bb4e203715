//! Interned values: made once per distinct text and leaked, so that they
//! live as long as the process.
//!
//! Why: values that every request hands on (a key's `RateLimit-Policy`
//! and its header templates, its entry name for the access log, the
//! successor `Link`) would otherwise be reference-counted, and a shared
//! reference count is an atomic that every worker thread writes,
//! bouncing its cache line between cores on every request. A
//! `&'static` reference is copied for free. Interning (the same text
//! always gives the same leaked value) keeps memory bounded across key
//! reloads: one value per distinct text ever loaded, not one per reload.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// Values of type `V` made once per distinct text key and leaked. Meant
/// for a `static`; a lookup takes a lock, so it belongs where values are
/// made (at load), not on the request path.
#[derive(Debug)]
pub struct Interner<V: ?Sized + 'static> {
    made: Mutex<Option<HashMap<&'static str, &'static V>>>,
}

impl<V: ?Sized + 'static> Interner<V> {
    /// An empty interner (usable in a `static`).
    pub const fn new() -> Self {
        Interner {
            made: Mutex::new(None),
        }
    }

    /// The value of `key`: made by `make` the first time, from the key's
    /// own process-lifetime copy (`make` leaks what it makes, or hands
    /// back that copy itself), and the same reference ever after.
    pub fn get_or_make(
        &self,
        key: &str,
        make: impl FnOnce(&'static str) -> &'static V,
    ) -> &'static V {
        // A panic while the lock was held left the map as it was before
        // or after one insert: still a valid map.
        let mut made = self.made.lock().unwrap_or_else(PoisonError::into_inner);
        let made = made.get_or_insert_with(HashMap::new);
        if let Some(value) = made.get(key) {
            return value;
        }
        let key: &'static str = Box::leak(Box::from(key));
        let value = make(key);
        made.insert(key, value);
        value
    }
}

impl<V: ?Sized + 'static> Default for Interner<V> {
    fn default() -> Self {
        Self::new()
    }
}

/// The process-lifetime copy of `text`.
pub fn intern(text: &str) -> &'static str {
    static INTERNED: Interner<str> = Interner::new();
    INTERNED.get_or_make(text, |leaked| leaked)
}

#[cfg(test)]
mod tests {
    use super::intern;

    #[test]
    fn one_text_is_interned_once() {
        let a = intern("shop-frontend");
        let b = intern(&String::from("shop-frontend"));
        assert!(std::ptr::eq(a, b));
    }
}
