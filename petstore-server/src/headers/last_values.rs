//! The values this worker thread made last, handed out again when a
//! response's values come again.

use std::cell::RefCell;

use hyper::header::HeaderValue;
use petstore_core::ListQuery;

use super::binding::{make_changing, Binding, Changing};
use super::never_indexed::never_indexed;

/// The `Link` of a next page: equal inputs (and the same `base_url`,
/// which the value itself holds), equal values.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct NextLink {
    pub(super) base_len: usize,
    pub(super) next: ListQuery,
}

thread_local! {
    /// The values this thread made last, by what they were made of.
    ///
    /// Why: a client below its limit finds its buckets (nearly) full on
    /// each request, so its responses carry the same `Remaining`,
    /// `RateLimit` and, within a second, `Reset` time after time, and a
    /// client polling the first page gets the same next `Link`. Handing
    /// out a clone of the last values (a reference count) skips their
    /// digits, their validation as header values and their allocation,
    /// a good share of a list response (`scripts/bench/profile`).
    /// A miss (a draining bucket, another page) costs a comparison, and
    /// the clones kept here when the values may come again
    /// ([`at_an_end`]). One entry each, per worker thread: bounded, and
    /// no lock.
    static LAST_CHANGING: RefCell<Option<(Changing, [HeaderValue; 3])>> =
        const { RefCell::new(None) };
    pub(super) static LAST_NEXT: RefCell<Option<(NextLink, HeaderValue)>> = const { RefCell::new(None) };
}

/// The values of a response that change with the decision:
/// `X-RateLimit-Remaining`, `X-RateLimit-Reset`, `RateLimit`. The last
/// ones again when they are the same ([`LAST_CHANGING`]); else written as
/// digits, without `fmt`, into one allocation ([`joined`](super::joined::joined)) and handed out
/// as slices of it.
pub(super) fn changing_values(binding: &Binding, slots: [&mut HeaderValue; 3]) {
    let key = binding.changing;
    let [remaining, reset, current] = slots;
    let found = LAST_CHANGING.try_with(|last| match &*last.borrow() {
        Some((made_of, [r, s, c])) if *made_of == key => {
            (*remaining, *reset, *current) = (r.clone(), s.clone(), c.clone());
            true
        }
        _ => false,
    });
    if found == Ok(true) {
        return;
    }
    make_changing(&key, [&mut *remaining, &mut *reset, &mut *current]);
    if at_an_end(binding) {
        let values = [remaining.clone(), reset.clone(), current.clone()];
        let _ = LAST_CHANGING.try_with(|last| *last.borrow_mut() = Some((key, values)));
    } else {
        // Values that will not come again: kept out of HTTP/2's header
        // table. At an end they come again, and are indexed.
        never_indexed([remaining, reset, current]);
    }
}

/// Whether the binding window's bucket is at one of its ends: full but
/// for this request's token, or empty. Only there do a response's values
/// come again: a client below its rate finds its bucket full each time,
/// and a client refused finds it empty, with the same reset time, until
/// a token is back. In between every admitted request takes a token, so
/// `Remaining` is new each time (a busy key, as under `scripts/bench/load`),
/// and keeping those values for [`LAST_CHANGING`] was three reference
/// counts up and three down again per request for nothing
/// (`scripts/bench/profile`).
fn at_an_end(binding: &Binding) -> bool {
    let remaining = binding.changing.remaining;
    remaining == 0 || remaining.saturating_add(1) >= binding.limit
}

#[cfg(test)]
mod tests {
    use hyper::header::LINK;
    use petstore_core::{BanPolicy, Decision, KeyLimiter, ListQuery, PetId, Quota, Timestamp};

    use crate::headers::names::{RATELIMIT, X_RATELIMIT_REMAINING, X_RATELIMIT_RESET};
    use crate::headers::{Extra, QuotaHeaders};

    #[test]
    fn values_made_again_or_remembered_are_the_same() {
        let limiter = KeyLimiter::new(Quota::new(60, 1000).unwrap(), BanPolicy::default());
        let t = Timestamp::from_unix_secs(1_000_000);
        let quota = QuotaHeaders::of(&limiter.check(t));
        let first = ListQuery::new().after(PetId::new(20).unwrap());
        let page = |base_url, next| Extra::Next {
            base_url,
            next: Some(next),
            walking: false,
        };
        // The same decision twice (a remembered value), then others.
        let d = limiter.check(t);
        for _ in 0..2 {
            let h = quota.success(&d, page("/v1", first));
            assert_eq!(h[&X_RATELIMIT_REMAINING], "58");
            assert_eq!(h[&X_RATELIMIT_RESET], "1000002");
            assert_eq!(h[&RATELIMIT], r#""minute";r=58;t=2"#);
            assert_eq!(h[LINK], "</v1/pets?limit=20&after=20>; rel=\"next\"");
        }
        let d = limiter.check(t);
        let h = quota.success(&d, page("/v1", first));
        assert_eq!(h[&X_RATELIMIT_REMAINING], "57");
        assert_eq!(h[&X_RATELIMIT_RESET], "1000003");
        assert_eq!(h[&RATELIMIT], r#""minute";r=57;t=3"#);
        // Another base address of the same length is not the last one's.
        let h = quota.success(&d, page("/v2", first));
        assert_eq!(h[LINK], "</v2/pets?limit=20&after=20>; rel=\"next\"");
        let second = ListQuery::new().after(PetId::new(40).unwrap());
        let h = quota.success(&d, page("/v2", second));
        assert_eq!(h[LINK], "</v2/pets?limit=20&after=40>; rel=\"next\"");
        // A value longer than the inline room.
        let base = format!("https://{}.example/v1", "x".repeat(200));
        let h = quota.success(&d, page(&base, second));
        assert_eq!(
            h[LINK],
            format!("<{base}/pets?limit=20&after=40>; rel=\"next\"").as_str()
        );
    }

    #[test]
    fn values_are_remembered_at_a_buckets_ends_only() {
        // Another thread: this one's last values are its own.
        std::thread::spawn(|| {
            let limiter = KeyLimiter::new(Quota::new(3, 1000).unwrap(), BanPolicy::default());
            let t = Timestamp::from_unix_secs(1_000_000);
            let quota = QuotaHeaders::of(&limiter.check(t));
            let extra = Extra::Location {
                base_url: "/v1",
                id: PetId::new(1).unwrap(),
            };
            // The same values twice: the same bytes (remembered), or a
            // value made again.
            let twice = |d: &Decision| {
                let [a, b] = [(); 2].map(|()| quota.success(d, extra));
                let remembered =
                    a[&RATELIMIT].as_bytes().as_ptr() == b[&RATELIMIT].as_bytes().as_ptr();
                (
                    a[&X_RATELIMIT_REMAINING].to_str().unwrap().to_owned(),
                    remembered,
                )
            };
            // Full but for this token: remembered. Empty after taking
            // the last one: remembered. One left, in between: made again.
            // Empty and refused: remembered.
            let full = KeyLimiter::new(Quota::new(3, 1000).unwrap(), BanPolicy::default());
            assert_eq!(twice(&full.check(t)), ("2".to_owned(), true));
            let _ = limiter.check(t);
            assert_eq!(twice(&limiter.check(t)), ("0".to_owned(), true));
            let middle = KeyLimiter::new(Quota::new(3, 1000).unwrap(), BanPolicy::default());
            let _ = middle.check(t);
            assert_eq!(twice(&middle.check(t)), ("1".to_owned(), false));
            let refused = limiter.check(t);
            assert!(matches!(
                refused.outcome,
                petstore_core::Outcome::Limited { .. }
            ));
            assert_eq!(twice(&refused), ("0".to_owned(), true));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_walking_clients_links_are_never_indexed_and_leave_the_remembered_one() {
        // Another thread: this one's last link is its own.
        std::thread::spawn(|| {
            let limiter = KeyLimiter::new(Quota::new(60, 1000).unwrap(), BanPolicy::default());
            let t = Timestamp::from_unix_secs(1_000_000);
            let quota = QuotaHeaders::of(&limiter.check(t));
            let d = limiter.check(t);
            let link = |after: u64, walking| {
                let next = ListQuery::new().after(PetId::new(after).unwrap());
                let extra = Extra::Next {
                    base_url: "/v1",
                    next: Some(next),
                    walking,
                };
                quota.success(&d, extra)[LINK].clone()
            };
            let polled = link(20, false);
            assert!(!polled.is_sensitive());
            // Pages after the first, in between: each made and marked.
            for after in [40, 60] {
                let walked = link(after, true);
                assert!(walked.is_sensitive());
                assert_eq!(
                    walked,
                    format!("</v1/pets?limit=20&after={after}>; rel=\"next\"").as_str()
                );
            }
            // The first page's link is still the remembered one: the
            // same bytes, indexed.
            let again = link(20, false);
            assert_eq!(again.as_bytes().as_ptr(), polled.as_bytes().as_ptr());
            assert!(!again.is_sensitive());
        })
        .join()
        .unwrap();
    }
}
