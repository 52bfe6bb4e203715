//! The rate-limit values that will not come again are sent never-indexed
//! in HTTP/2's header compression, except when a connection asks for them
//! to be indexed ([`index_changing`]).
//!
//! Why: HTTP/2 compresses a response's header fields against a table
//! that both ends keep (HPACK, RFC 7541). A field that is indexed goes
//! into the table, so that the same name and value later cost a byte.
//! While a key's bucket is between its ends, every admitted request takes
//! a token, so `X-RateLimit-Remaining`, and with it `RateLimit` and
//! mostly `X-RateLimit-Reset`, are new on each response, and a value
//! that never comes again gains nothing from the table. It only costs:
//! - the encoder's work: h2 finds a name's stored values by walking all
//!   of them and comparing each, then inserts the new one and evicts the
//!   oldest entries to make room (`scripts/bench/profile`'s `list_h2`: about a
//!   tenth of an HTTP/2 list request);
//! - the entries it evicts, which held the fixed headers and must be
//!   sent as literals again;
//! - the same in every proxy on the way, which RFC 7541's never-indexed
//!   form tells not to index them either.
//!
//! At a bucket's ends (full but for this request's token, as for a client
//! below its rate; or empty) the values do come again (`last_values.rs`),
//! and are indexed as any other.
//!
//! A never-indexed value still refers to its name by the table's index
//! when the name is there, and the three names are not in HPACK's static
//! table. So an HTTP/2 connection lets one response index its values now
//! and then (the first, then at most every so often: `net/hpack.rs`):
//! that puts the names in the table, and the never-indexed values of the
//! other responses refer to them.
//!
//! HTTP/1.1 ignores the mark.

use hyper::header::{HeaderMap, HeaderValue};

use super::names::{RATELIMIT, X_RATELIMIT_REMAINING, X_RATELIMIT_RESET};

/// Marks values that will not come again never-indexed: a response's
/// changing rate-limit values, a walking client's next `Link`.
pub(super) fn never_indexed<const N: usize>(values: [&mut HeaderValue; N]) {
    for value in values {
        value.set_sensitive(true);
    }
}

/// Lets HPACK index this response's changing rate-limit values (and so
/// learn their names); the response's other fields are left as they are.
/// Whether the response has them (a `/healthz` or a docs page has not).
pub fn index_changing(headers: &mut HeaderMap) -> bool {
    let mut found = false;
    for name in [X_RATELIMIT_REMAINING, X_RATELIMIT_RESET, RATELIMIT] {
        if let Some(value) = headers.get_mut(name) {
            value.set_sensitive(false);
            found = true;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headers::{rate_limit, Extra, QuotaHeaders};
    use petstore_core::{BanPolicy, Decision, KeyLimiter, PetId, Quota, Timestamp};

    use crate::headers::names::{RATELIMIT_POLICY, X_RATELIMIT_LIMIT};

    #[test]
    fn values_between_a_buckets_ends_are_never_indexed_until_indexing_is_asked() {
        // Another thread: the values this one remembers are its own.
        std::thread::spawn(|| {
            let limiter = KeyLimiter::new(Quota::new(60, 1000).unwrap(), BanPolicy::default());
            let t = Timestamp::from_unix_secs(1_000_000);
            let quota = QuotaHeaders::of(&limiter.check(t));
            let changing = [X_RATELIMIT_REMAINING, X_RATELIMIT_RESET, RATELIMIT];
            let created = Extra::Location {
                base_url: "/v1",
                id: PetId::new(7).unwrap(),
            };
            let maps = |decision: &Decision| {
                let mut error = HeaderMap::new();
                rate_limit(&mut error, decision, &quota);
                [quota.success(decision, created), error]
            };
            // Between the ends (58 of 60 left, after this request): the
            // changing values never-indexed, in a success and an error.
            for mut map in maps(&limiter.check(t)) {
                assert_eq!(map[&X_RATELIMIT_REMAINING], "58");
                for (name, value) in &map {
                    assert_eq!(
                        value.is_sensitive(),
                        changing.contains(name),
                        "{name}: never-indexed only when it changes"
                    );
                }
                assert!(index_changing(&mut map));
                assert!(map.values().all(|value| !value.is_sensitive()));
                // Indexing changes no value.
                assert_eq!(map[&X_RATELIMIT_LIMIT], "60");
                assert!(map.contains_key(RATELIMIT_POLICY));
            }
            // At the full end (a new key's first request), made and then
            // remembered: indexed.
            let full = KeyLimiter::new(Quota::new(60, 1000).unwrap(), BanPolicy::default());
            let first = full.check(t);
            for _ in 0..2 {
                for map in maps(&first) {
                    assert_eq!(map[&X_RATELIMIT_REMAINING], "59");
                    assert!(map.values().all(|value| !value.is_sensitive()));
                }
            }
        })
        .join()
        .unwrap();
    }
}
