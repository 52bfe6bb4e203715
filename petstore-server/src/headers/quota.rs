//! [`QuotaHeaders`]: the rate-limit header values and the 2xx header
//! templates of one quota, made once per distinct policy; and the
//! rate-limit headers of an error response.

use std::fmt::Write as _;

use hyper::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE, LINK, LOCATION};
use petstore_core::Decision;

use super::binding::Binding;
use super::deprecation::{DEPRECATION_VALUE, GET_PET_SUNSET};
use super::extra::Extra;
use super::last_values::changing_values;
use super::names::{
    DEPRECATION, RATELIMIT, RATELIMIT_POLICY, SUNSET, X_RATELIMIT_LIMIT, X_RATELIMIT_REMAINING,
    X_RATELIMIT_RESET,
};
use super::static_text::{is_static_value, static_text};
use crate::util::intern::Interner;

/// The rate-limit header values of a limiter that depend only on its
/// quota: `RateLimit-Policy` (e.g. `"minute";q=60;w=60, "day";q=1000;w=86400`)
/// and each window's `X-RateLimit-Limit`. Built once per distinct policy
/// (at load), not per request, and leaked, so it is a `Copy` pointer: a
/// request hands the values to its response without formatting,
/// allocating, validating or touching a shared reference count, and
/// moves one pointer rather than the values themselves (the request's
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
/// the key digest (`scripts/bench/profile`).
///
/// Every map is, in this order: `Content-Type`, `X-RateLimit-Limit`,
/// `X-RateLimit-Remaining`, `X-RateLimit-Reset`, `RateLimit`,
/// `RateLimit-Policy`, then what the operation adds: `Link` (next page;
/// list), `Deprecation`, `Sunset` and `Link` (successor; get), or
/// `Location` (create), or nothing (a transition's changed pet). The last
/// of the first three is a placeholder, set or removed.
#[derive(Debug, PartialEq, Eq)]
struct Templates {
    list: HeaderMap,
    get: HeaderMap,
    created: HeaderMap,
    changed: HeaderMap,
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
            changed: template(&[]),
        }
    }
}
/// The values of `policy` (a valid static header value, or empty), made
/// (and leaked) once per distinct policy: memory stays bounded across key
/// reloads.
fn intern_policy(policy: &str, limits: [(u32, &'static str); 2]) -> &'static PolicyValues {
    static MADE: Interner<PolicyValues> = Interner::new();
    MADE.get_or_make(policy, |policy| {
        Box::leak(Box::new(PolicyValues {
            policy_value: HeaderValue::from_static(policy),
            limits: limits.map(|(limit, text)| (limit, HeaderValue::from_static(text))),
            templates: Templates::new(policy),
        }))
    })
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
        let policy = if is_static_value(&policy) {
            &policy
        } else {
            ""
        };
        QuotaHeaders(intern_policy(policy, limits))
    }

    /// The headers of a 2xx operation response: content type, the
    /// rate-limit headers describing `decision`, and `extra`.
    pub fn success(&self, decision: impl Into<Binding>, extra: Extra<'_>) -> HeaderMap {
        let binding = decision.into();
        let templates = &self.0.templates;
        let template = match extra {
            Extra::Next { .. } | Extra::OrderNext { .. } | Extra::EventsNext { .. } => {
                &templates.list
            }
            Extra::Deprecated(_) => &templates.get,
            Extra::Location { .. } | Extra::OrderLocation { .. } => &templates.created,
            Extra::Nothing => &templates.changed,
        };
        let mut map = template.clone();
        let last = match extra {
            Extra::Deprecated(link) => Some(link.clone()),
            _ => extra.value(),
        };
        // The values are written into the template's slots by position
        // (see `Templates`): no name is hashed, and no value moved through
        // an array of its own (copied twice, `scripts/bench/profile`). Slot by
        // slot, not an array's values zipped with the slots: that
        // iterator's account of what was left to drop cost more than the
        // writes (`scripts/bench/profile`).
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
            (Some(_), None) => {
                // The placeholder is the last entry; only a last page or a
                // Location that could not be built lands here.
                let name = map.keys().last().cloned();
                if let Some(name) = name {
                    map.remove(name);
                }
            }
            // A template without a placeholder (a changed pet's).
            (None, _) => {}
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

#[cfg(test)]
mod tests {
    use super::*;
    use petstore_core::{BanPolicy, KeyLimiter, ListQuery, PetId, Quota, Timestamp};
    use std::time::Duration;

    use crate::headers::deprecation::successor_link;

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
            walking: false,
        };
        let next = ListQuery::new().after(PetId::new(20).unwrap());
        let h = quota.success(
            &d,
            Extra::Next {
                base_url: "/v1",
                next: Some(next),
                walking: false,
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
            .limit(petstore_core::PageSize::new(5).unwrap())
            .status(petstore_core::PetStatus::Sold)
            .after(PetId::new(1234).unwrap());
        let h = quota.success(
            &d,
            Extra::Next {
                base_url: "https://x.example/v1",
                next: Some(filtered),
                walking: false,
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

        // A changed pet: the rate-limit headers and nothing after them.
        let h = quota.success(&d, Extra::Nothing);
        assert_eq!(names(&h), with(&[]));
        assert_eq!(
            h[&RATELIMIT_POLICY],
            r#""minute";q=60;w=60, "day";q=1000;w=86400"#
        );
        assert_eq!(h[&X_RATELIMIT_REMAINING], "59");

        // The same as the error path writes, value for value.
        let mut errors = HeaderMap::new();
        rate_limit(&mut errors, &d, &quota);
        let h = quota.success(&d, last_page);
        for name in &base[1..] {
            assert_eq!(errors.get(*name), h.get(*name), "{name}");
        }
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
            walking: false,
        };
        let h = quota.success(&d, last_page);
        assert_eq!(h[&X_RATELIMIT_LIMIT], "2");
        assert_eq!(h[&X_RATELIMIT_REMAINING], "0");
        assert_eq!(h[&RATELIMIT], r#""day";r=0;t=86400"#);
    }
}
