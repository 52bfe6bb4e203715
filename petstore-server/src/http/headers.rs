//! Response headers that the contract puts on many responses: the
//! rate-limit headers (both the `X-RateLimit-*` trio and the IETF
//! `RateLimit`/`RateLimit-Policy` fields) and `getPet`'s deprecation
//! headers.

use std::cell::RefCell;
use std::fmt::Write as _;

use hyper::body::{Buf as _, Bytes};
use hyper::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE, LINK, LOCATION};
use petstore_core::{Decision, ListQuery, PetId};

use crate::util::intern::intern;

/// `X-RateLimit-Limit`.
pub const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
/// `X-RateLimit-Remaining`.
pub const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
/// `X-RateLimit-Reset`.
pub const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
/// `RateLimit` (draft-ietf-httpapi-ratelimit-headers).
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
/// `RateLimit-Policy`.
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `Deprecation` (RFC 9745).
pub const DEPRECATION: HeaderName = HeaderName::from_static("deprecation");
/// `Sunset` (RFC 8594).
pub const SUNSET: HeaderName = HeaderName::from_static("sunset");

/// When v1.0.0 declared `getPet` deprecated: 2025-12-05T00:00:00Z.
pub const GET_PET_DEPRECATED_AT: u64 = 1_764_892_800;
/// The `Deprecation` value: `@` and [`GET_PET_DEPRECATED_AT`].
pub const DEPRECATION_VALUE: &str = "@1764892800";
/// `getPet`'s announced removal.
pub const GET_PET_SUNSET: &str = "Thu, 05 Dec 2030 00:00:00 GMT";

/// The rate-limit header values of a limiter that depend only on its
/// quota: `RateLimit-Policy` (e.g. `"minute";q=60;w=60, "day";q=1000;w=86400`)
/// and each window's `X-RateLimit-Limit`. Built once per distinct policy
/// (at load), not per request, and leaked, so it is a `Copy` pointer: a
/// request hands the values to its response without formatting,
/// allocating, validating or touching a shared reference count, and
/// moves 8 bytes where the values themselves were 72 (the request's
/// `Admitted` is moved by value several times on its way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaHeaders(&'static PolicyValues);

#[derive(Debug, PartialEq, Eq)]
struct PolicyValues {
    /// `RateLimit-Policy`.
    policy_value: HeaderValue,
    /// `(limit, its X-RateLimit-Limit)` per window, minute first; a
    /// limiter without a day window repeats the minute's. Values made
    /// once: a clone of a static value is a copy, where `from_static`
    /// checks every byte again.
    limits: [(u32, HeaderValue); 2],
    templates: Templates,
}

/// The header maps of an operation's 2xx responses, with every value that
/// is the same on each response of the quota already in place. A response
/// clones one and sets the values that change by position: no header
/// name is hashed on the way. Building them by insertion took nine hashed
/// inserts per `getPet` response, the largest cost left in a request after
/// the key digest (`scripts/profile`).
///
/// Every map is, in this order: `Content-Type`, `X-RateLimit-Limit`,
/// `X-RateLimit-Remaining`, `X-RateLimit-Reset`, `RateLimit`,
/// `RateLimit-Policy`, then what the operation adds: `Link` (next page;
/// list), `Deprecation`, `Sunset` and `Link` (successor; get), or
/// `Location` (create). The last is a placeholder, set or removed.
#[derive(Debug, PartialEq, Eq)]
struct Templates {
    list: HeaderMap,
    get: HeaderMap,
    created: HeaderMap,
}

impl Templates {
    fn new(policy: &'static str) -> Self {
        let template = |extra: &[(HeaderName, &'static str)]| {
            let mut map = HeaderMap::with_capacity(6 + extra.len());
            map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            for name in [
                X_RATELIMIT_LIMIT,
                X_RATELIMIT_REMAINING,
                X_RATELIMIT_RESET,
                RATELIMIT,
            ] {
                map.insert(name, HeaderValue::from_static(""));
            }
            map.insert(RATELIMIT_POLICY, HeaderValue::from_static(policy));
            for (name, value) in extra {
                map.insert(name.clone(), HeaderValue::from_static(value));
            }
            map
        };
        Templates {
            list: template(&[(LINK, "")]),
            get: template(&[
                (DEPRECATION, DEPRECATION_VALUE),
                (SUNSET, GET_PET_SUNSET),
                (LINK, ""),
            ]),
            created: template(&[(LOCATION, "")]),
        }
    }
}

/// The values of `policy`, made (and leaked) once per distinct policy:
/// memory stays bounded across key reloads.
fn intern_policy(policy: &'static str, limits: [(u32, &'static str); 2]) -> &'static PolicyValues {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static MADE: OnceLock<Mutex<HashMap<&'static str, &'static PolicyValues>>> = OnceLock::new();
    let mut made = MADE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    made.entry(policy).or_insert_with(|| {
        Box::leak(Box::new(PolicyValues {
            policy_value: HeaderValue::from_static(policy),
            limits: limits.map(|(limit, text)| (limit, HeaderValue::from_static(text))),
            templates: Templates::new(policy),
        }))
    })
}

/// What a 2xx operation response carries after the rate-limit headers.
#[derive(Clone, Copy, Debug)]
pub enum Extra<'a> {
    /// A list page, and the query of the next page if there is one: its
    /// `Link: <{base_url}/pets?limit=N[&status=S]&after=ID>; rel="next"`.
    Next {
        /// The public base address, including `/v1`.
        base_url: &'a str,
        /// The next page's query; `None` on the last page (no `Link`).
        next: Option<ListQuery>,
    },
    /// `getPet`: `Deprecation`, `Sunset`, and this successor `Link`.
    Deprecated(&'a HeaderValue),
    /// A created pet: its `Location: {base_url}/pets/{id}`.
    Location {
        /// The public base address, including `/v1`.
        base_url: &'a str,
        /// The created pet's id.
        id: PetId,
    },
}

impl Extra<'_> {
    /// Makes the value of the response's own last header (`Link` next,
    /// `Location`) in one allocation; `None` when it has none that changes
    /// per request. Digits by `itoa`, no `fmt`: this is on every list and
    /// create response.
    fn make_value(&self) -> Option<HeaderValue> {
        let bytes = match *self {
            Extra::Next {
                base_url,
                next: Some(next),
            } => {
                let mut limit = itoa::Buffer::new();
                let mut after = itoa::Buffer::new();
                let status = next.status.map(|s| s.as_str().as_bytes());
                let after = next.after.map(|id| after.format(id.get()).as_bytes());
                joined([
                    b"<",
                    base_url.as_bytes(),
                    b"/pets?limit=",
                    limit.format(next.limit.get()).as_bytes(),
                    if status.is_some() { b"&status=" } else { b"" },
                    status.unwrap_or_default(),
                    if after.is_some() { b"&after=" } else { b"" },
                    after.unwrap_or_default(),
                    b">; rel=\"next\"",
                ])
            }
            Extra::Location { base_url, id } => {
                let mut digits = itoa::Buffer::new();
                joined([
                    base_url.as_bytes(),
                    b"/pets/",
                    digits.format(id.get()).as_bytes(),
                ])
            }
            Extra::Next { next: None, .. } | Extra::Deprecated(_) => return None,
        };
        HeaderValue::from_maybe_shared(bytes).ok()
    }
}

impl QuotaHeaders {
    /// The values of the limiter that made `decision`.
    pub fn of(decision: &Decision) -> Self {
        let mut policy = String::with_capacity(48);
        let mut limits = [(0, ""); 2];
        for (i, w) in decision.windows().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            let _ = write!(
                policy,
                "{sep}\"{}\";q={};w={}",
                w.name,
                w.limit,
                w.period.as_secs()
            );
            if let Some(slot) = limits.get_mut(i) {
                *slot = (w.limit, static_text(w.limit.to_string()));
            }
        }
        if limits[1].1.is_empty() {
            limits[1] = limits[0];
        }
        QuotaHeaders(intern_policy(static_text(policy), limits))
    }

    /// The headers of a 2xx operation response: content type, the
    /// rate-limit headers describing `decision`, and `extra`.
    pub fn success(&self, decision: impl Into<Binding>, extra: Extra<'_>) -> HeaderMap {
        let binding = decision.into();
        let templates = &self.0.templates;
        let template = match extra {
            Extra::Next { .. } => &templates.list,
            Extra::Deprecated(_) => &templates.get,
            Extra::Location { .. } => &templates.created,
        };
        let mut map = template.clone();
        let last = match extra {
            Extra::Deprecated(link) => Some(link.clone()),
            _ => extra.value(),
        };
        // The values are written into the template's slots by position
        // (see `Templates`): no name is hashed, and no value moved through
        // an array of its own (120 bytes copied twice, `scripts/profile`).
        // Slot by slot, not an array's values zipped with the slots: its
        // iterator's account of what was left to drop cost about 180
        // instructions a response (`scripts/profile`).
        let mut slots = map.values_mut();
        let _content_type = slots.next();
        // Every template has these slots (`Templates::new`).
        if let (Some(l), Some(r), Some(s), Some(c)) =
            (slots.next(), slots.next(), slots.next(), slots.next())
        {
            *l = self.limit(binding.limit);
            changing_values(&binding, [r, s, c]);
        }
        let _policy = slots.next();
        match (slots.last(), last) {
            (Some(slot), Some(value)) => *slot = value,
            (_, None) => {
                // The placeholder is the last entry; only a last page or a
                // Location that could not be built lands here.
                let name = map.keys().last().cloned();
                if let Some(name) = name {
                    map.remove(name);
                }
            }
            (None, Some(_)) => {}
        }
        map
    }

    /// The `RateLimit-Policy` value.
    pub fn policy(&self) -> HeaderValue {
        self.0.policy_value.clone()
    }

    /// The `X-RateLimit-Limit` value for a window of `limit` requests.
    fn limit(&self, limit: u32) -> HeaderValue {
        match self.0.limits.iter().find(|(l, _)| *l == limit) {
            Some((_, value)) => value.clone(),
            None => HeaderValue::from(limit),
        }
    }
}

/// `text` for the life of the process ([`intern`]ed), when it is a valid
/// static header value; else the empty string.
fn static_text(text: String) -> &'static str {
    // Exactly what `from_static` accepts (it panics on anything else; it
    // is stricter than `from_str`, which also takes bytes over 0x7f).
    if !text
        .bytes()
        .all(|b| b == b'\t' || (0x20..0x7f).contains(&b))
    {
        return "";
    }
    intern(&text)
}

/// Adds the rate-limit headers describing `decision` to an error
/// response; `quota` holds the values that depend only on the limiter's
/// quota. (A 2xx response gets them from [`QuotaHeaders::success`].)
pub fn rate_limit(headers: &mut HeaderMap, decision: impl Into<Binding>, quota: &QuotaHeaders) {
    let binding = decision.into();
    let [mut remaining, mut reset, mut current] = [(); 3].map(|()| HeaderValue::from_static(""));
    changing_values(&binding, [&mut remaining, &mut reset, &mut current]);
    headers.insert(X_RATELIMIT_LIMIT, quota.limit(binding.limit));
    headers.insert(X_RATELIMIT_REMAINING, remaining);
    headers.insert(X_RATELIMIT_RESET, reset);
    headers.insert(RATELIMIT, current);
    headers.insert(RATELIMIT_POLICY, quota.policy());
}

/// What the values of [`changing_values`] are made of: equal inputs, equal
/// values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Changing {
    name: &'static str,
    remaining: u32,
    reset: u64,
    after: u64,
}

/// What the rate-limit headers of a response say of its [`Decision`]:
/// the binding window's name, limit, remaining requests, reset time and
/// seconds to full. 40 bytes where the decision is 128.
///
/// Why: an admitted request carries it to its response, and the request
/// (`Admitted`) is moved by value several times on its way there (into
/// and out of the driver's `catch_unwind`, through the admission's and
/// the answer's enums); each move of the whole decision was a call to
/// `memcpy` (`scripts/profile`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Binding {
    changing: Changing,
    limit: u32,
}

impl From<&Decision> for Binding {
    fn from(decision: &Decision) -> Self {
        let binding = decision.binding();
        Binding {
            changing: Changing {
                name: binding.name,
                remaining: binding.remaining,
                reset: binding.reset_at.unix_secs_ceil(),
                after: decision.reset_after_secs(),
            },
            limit: binding.limit,
        }
    }
}

/// The `Link` of a next page: equal inputs (and the same `base_url`,
/// which the value itself holds), equal values.
#[derive(Clone, Copy, PartialEq, Eq)]
struct NextLink {
    base_len: usize,
    next: ListQuery,
}

thread_local! {
    /// The values this thread made last, by what they were made of.
    ///
    /// Why: a client below its limit finds its buckets (nearly) full on
    /// each request, so its responses carry the same `Remaining`,
    /// `RateLimit` and, within a second, `Reset` time after time, and a
    /// client polling the first page gets the same next `Link`. Handing
    /// out a clone of the last values (a reference count) skips their
    /// digits, their validation as header values and their allocation:
    /// about 1,200 instructions of a list response (`scripts/profile`).
    /// A miss (a draining bucket, another page) costs a comparison, and
    /// the clones kept here when the values may come again
    /// ([`at_an_end`]). One entry each, per worker thread: bounded, and
    /// no lock.
    static LAST_CHANGING: RefCell<Option<(Changing, [HeaderValue; 3])>> =
        const { RefCell::new(None) };
    static LAST_NEXT: RefCell<Option<(NextLink, HeaderValue)>> = const { RefCell::new(None) };
}

/// The values of a response that change with the decision:
/// `X-RateLimit-Remaining`, `X-RateLimit-Reset`, `RateLimit`. The last
/// ones again when they are the same ([`LAST_CHANGING`]); else written as
/// digits, without `fmt`, into one allocation ([`joined`]) and handed out
/// as slices of it.
fn changing_values(binding: &Binding, slots: [&mut HeaderValue; 3]) {
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
    }
}

/// Whether the binding window's bucket is at one of its ends: full but
/// for this request's token, or empty. Only there do a response's values
/// come again: a client below its rate finds its bucket full each time,
/// and a client refused finds it empty, with the same reset time, until
/// a token is back. In between every admitted request takes a token, so
/// `Remaining` is new each time (a busy key, as under `scripts/load`),
/// and keeping those values for [`LAST_CHANGING`] was three reference
/// counts up and three down again per request for nothing (about 130
/// instructions, `scripts/profile`).
fn at_an_end(binding: &Binding) -> bool {
    let remaining = binding.changing.remaining;
    remaining == 0 || remaining.saturating_add(1) >= binding.limit
}

fn make_changing(
    key: &Changing,
    [remaining_slot, reset_slot, current_slot]: [&mut HeaderValue; 3],
) {
    let mut remaining = itoa::Buffer::new();
    let remaining = remaining.format(key.remaining).as_bytes();
    let mut reset = itoa::Buffer::new();
    let reset = reset.format(key.reset).as_bytes();
    let mut after = itoa::Buffer::new();
    let after = after.format(key.after).as_bytes();
    // `{reset}"{name}";r={remaining};t={after}`: the Reset value, then the
    // RateLimit value, whose `r=` digits are the Remaining value too
    // (written once, and one slice of the buffer fewer to count).
    let name = key.name.as_bytes();
    let mut bytes = joined([reset, b"\"", name, b"\";r=", remaining, b";t=", after]);
    let at = reset.len() + 1 + name.len() + 4;
    let value = |bytes: Bytes| {
        HeaderValue::from_maybe_shared(bytes).unwrap_or_else(|_| HeaderValue::from_static(""))
    };
    *remaining_slot = match bytes.get(at..at + remaining.len()) {
        Some(_) => value(bytes.slice(at..at + remaining.len())),
        None => HeaderValue::from_static(""),
    };
    let split = reset.len().min(bytes.len());
    *reset_slot = value(bytes.slice(..split));
    bytes.advance(split);
    *current_slot = value(bytes);
}

impl Extra<'_> {
    /// The value of the response's own last header (`Link` next,
    /// `Location`); `None` when it has none that changes per request (or
    /// it is not a valid header value). A next `Link` equal to the last
    /// one this thread made is that one again ([`LAST_NEXT`]).
    fn value(&self) -> Option<HeaderValue> {
        let Extra::Next {
            base_url,
            next: Some(next),
        } = *self
        else {
            return self.make_value();
        };
        let key = NextLink {
            base_len: base_url.len(),
            next,
        };
        // The value starts `<{base_url}`: a link of another base address
        // (another server in the process) is not taken for this one.
        let last = LAST_NEXT.try_with(|last| match &*last.borrow() {
            Some((made_of, value))
                if *made_of == key
                    && value.as_bytes().get(1..1 + base_url.len()) == Some(base_url.as_bytes()) =>
            {
                Some(value.clone())
            }
            _ => None,
        });
        if let Ok(Some(value)) = last {
            return Some(value);
        }
        let value = self.make_value()?;
        let _ = LAST_NEXT.try_with(|last| *last.borrow_mut() = Some((key, value.clone())));
        Some(value)
    }
}

/// Bytes owned inline, so that the values of a response cost one
/// allocation (the shared owner's), not one for the owner and one for
/// its buffer.
struct Inline {
    len: usize,
    buf: [u8; INLINE],
}

/// Room for the three changing values (at most 10 + 20 + 58 bytes and
/// the window's name) and a next `Link` with a base address of up to 48
/// bytes; longer ones go to the heap.
const INLINE: usize = 136;

impl AsRef<[u8]> for Inline {
    fn as_ref(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }
}

/// `parts` one after the other, in one allocation.
///
/// Why an array and `#[inline]`: inlined where its parts are known, the
/// loop is unrolled and a literal part (`";r="`) is copied by a store or
/// two of known size, not by a call to `memcpy`; and the length is not
/// summed in a pass of its own first (`scripts/profile`).
#[inline]
fn joined<const N: usize>(parts: [&[u8]; N]) -> Bytes {
    let mut inline = Inline {
        len: 0,
        buf: [0; INLINE],
    };
    for part in parts {
        let at = inline.len;
        let Some(to) = inline.buf.get_mut(at..at + part.len()) else {
            return Bytes::from(parts.concat());
        };
        to.copy_from_slice(part);
        inline.len = at + part.len();
    }
    Bytes::from_owner(inline)
}

/// The successor-version `Link` of `getPet`, built once at startup.
pub fn successor_link(base_url: &str) -> HeaderValue {
    HeaderValue::from_static(static_text(format!(
        "<{base_url}/pets>; rel=\"successor-version\""
    )))
}

/// Adds `getPet`'s `Deprecation`, `Sunset` and successor `Link`.
pub fn deprecation(headers: &mut HeaderMap, successor: &HeaderValue) {
    headers.insert(DEPRECATION, HeaderValue::from_static(DEPRECATION_VALUE));
    headers.insert(SUNSET, HeaderValue::from_static(GET_PET_SUNSET));
    headers.append(LINK, successor.clone());
}

#[cfg(test)]
mod tests {
    use super::*;
    use petstore_core::{BanPolicy, KeyLimiter, Quota, Timestamp};
    use std::time::Duration;

    #[test]
    fn describes_the_binding_window() {
        let limiter = KeyLimiter::new(Quota::new(60, 1000).unwrap(), BanPolicy::default());
        let t = Timestamp::from_unix_secs(1_000_000);
        let d = limiter.check(t);
        let mut h = HeaderMap::new();
        rate_limit(&mut h, &d, &QuotaHeaders::of(&d));
        assert_eq!(h[&X_RATELIMIT_LIMIT], "60");
        assert_eq!(h[&X_RATELIMIT_REMAINING], "59");
        // One token used of 60/min: full again 1 s later.
        assert_eq!(h[&X_RATELIMIT_RESET], "1000001");
        assert_eq!(
            h[&RATELIMIT_POLICY],
            r#""minute";q=60;w=60, "day";q=1000;w=86400"#
        );
        assert_eq!(h[&RATELIMIT], r#""minute";r=59;t=1"#);

        // When the day has fewer left than the minute, the day binds.
        let tight = KeyLimiter::new(Quota::new(60, 2).unwrap(), BanPolicy::default());
        let d = tight.check(t + Duration::from_millis(500));
        let mut h = HeaderMap::new();
        rate_limit(&mut h, &d, &QuotaHeaders::of(&d));
        assert_eq!(h[&X_RATELIMIT_LIMIT], "2");
        assert_eq!(h[&X_RATELIMIT_REMAINING], "1");
        assert_eq!(h[&RATELIMIT], r#""day";r=1;t=43200"#);
        assert_eq!(h[&X_RATELIMIT_RESET], "1043201");
    }

    #[test]
    fn interned_values_are_shared_not_leaked_again() {
        let a = static_text("\"minute\";q=7;w=60".to_owned());
        let b = static_text("\"minute\";q=7;w=60".to_owned());
        assert_eq!(a, b);
        assert_eq!(a.as_ptr(), b.as_ptr());
        assert_eq!(static_text("bad\nvalue".to_owned()), "");
        assert_eq!(static_text("caf\u{e9}".to_owned()), "");
    }

    #[test]
    fn success_headers_come_from_the_template_in_order() {
        let limiter = KeyLimiter::new(Quota::new(60, 1000).unwrap(), BanPolicy::default());
        let d = limiter.check(Timestamp::from_unix_secs(1_000_000));
        let quota = QuotaHeaders::of(&d);
        let names = |h: &HeaderMap| h.keys().map(|k| k.as_str().to_owned()).collect::<Vec<_>>();
        let base = [
            "content-type",
            "x-ratelimit-limit",
            "x-ratelimit-remaining",
            "x-ratelimit-reset",
            "ratelimit",
            "ratelimit-policy",
        ];
        let with = |extra: &[&str]| {
            base.iter()
                .chain(extra)
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
        };

        let last_page = Extra::Next {
            base_url: "/v1",
            next: None,
        };
        let next = ListQuery::new().after(PetId::new(20).unwrap());
        let h = quota.success(
            &d,
            Extra::Next {
                base_url: "/v1",
                next: Some(next),
            },
        );
        assert_eq!(names(&h), with(&["link"]));
        assert_eq!(h[CONTENT_TYPE], "application/json");
        assert_eq!(h[&X_RATELIMIT_LIMIT], "60");
        assert_eq!(h[&X_RATELIMIT_REMAINING], "59");
        assert_eq!(h[&X_RATELIMIT_RESET], "1000001");
        assert_eq!(h[&RATELIMIT], r#""minute";r=59;t=1"#);
        assert_eq!(
            h[&RATELIMIT_POLICY],
            r#""minute";q=60;w=60, "day";q=1000;w=86400"#
        );
        assert_eq!(h[LINK], "</v1/pets?limit=20&after=20>; rel=\"next\"");
        let filtered = ListQuery::new()
            .limit(petstore_core::Limit::new(5).unwrap())
            .status(petstore_core::PetStatus::Sold)
            .after(PetId::new(1234).unwrap());
        let h = quota.success(
            &d,
            Extra::Next {
                base_url: "https://x.example/v1",
                next: Some(filtered),
            },
        );
        assert_eq!(
            h[LINK],
            "<https://x.example/v1/pets?limit=5&status=sold&after=1234>; rel=\"next\""
        );

        // The last page has no Link at all, not an empty one.
        let h = quota.success(&d, last_page);
        assert_eq!(names(&h), with(&[]));

        let successor = successor_link("/v1");
        let h = quota.success(&d, Extra::Deprecated(&successor));
        assert_eq!(names(&h), with(&["deprecation", "sunset", "link"]));
        assert_eq!(h[&DEPRECATION], DEPRECATION_VALUE);
        assert_eq!(h[&SUNSET], GET_PET_SUNSET);
        assert_eq!(h[LINK], successor);
        assert_eq!(h[&X_RATELIMIT_REMAINING], "59");

        let h = quota.success(
            &d,
            Extra::Location {
                base_url: "/v1",
                id: PetId::new(7).unwrap(),
            },
        );
        assert_eq!(names(&h), with(&["location"]));
        assert_eq!(h[LOCATION], "/v1/pets/7");

        // The same as the error path writes, value for value.
        let mut errors = HeaderMap::new();
        rate_limit(&mut errors, &d, &quota);
        let h = quota.success(&d, last_page);
        for name in &base[1..] {
            assert_eq!(errors.get(*name), h.get(*name), "{name}");
        }
    }

    #[test]
    fn values_made_again_or_remembered_are_the_same() {
        let limiter = KeyLimiter::new(Quota::new(60, 1000).unwrap(), BanPolicy::default());
        let t = Timestamp::from_unix_secs(1_000_000);
        let quota = QuotaHeaders::of(&limiter.check(t));
        let first = ListQuery::new().after(PetId::new(20).unwrap());
        let page = |base_url, next| Extra::Next {
            base_url,
            next: Some(next),
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
    fn success_headers_follow_the_binding_window() {
        let tight = KeyLimiter::new(Quota::new(60, 2).unwrap(), BanPolicy::default());
        let t = Timestamp::from_unix_secs(1_000_000);
        let quota = QuotaHeaders::of(&tight.check(t));
        let d = tight.check(t + Duration::from_millis(500));
        let last_page = Extra::Next {
            base_url: "/v1",
            next: None,
        };
        let h = quota.success(&d, last_page);
        assert_eq!(h[&X_RATELIMIT_LIMIT], "2");
        assert_eq!(h[&X_RATELIMIT_REMAINING], "0");
        assert_eq!(h[&RATELIMIT], r#""day";r=0;t=86400"#);
    }

    #[test]
    fn deprecation_headers() {
        let mut h = HeaderMap::new();
        deprecation(&mut h, &successor_link("/v1"));
        assert_eq!(DEPRECATION_VALUE, format!("@{GET_PET_DEPRECATED_AT}"));
        assert_eq!(h[&DEPRECATION], "@1764892800");
        assert_eq!(h[&SUNSET], "Thu, 05 Dec 2030 00:00:00 GMT");
        assert_eq!(h[LINK], r#"</v1/pets>; rel="successor-version""#);
    }
}
