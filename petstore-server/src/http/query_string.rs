//! Query strings and path parameters: percent-decoding, and the strict
//! parse of `listPets`'s `limit`, `status` and `after` into a
//! [`ListQuery`], and `listOrders`'s into an [`OrderQuery`]. Pure functions of text, so they are fuzzed and tested
//! without sockets.

use std::borrow::Cow;
use std::time::Duration;

use petstore_core::event::{EventId, EventLimit, EventQuery};
use petstore_core::inventory::OrderQuery;
use petstore_core::order::{OrderId, OrderStatus};
use petstore_core::{quote::quote, ListQuery, PageSize, PetId, PetStatus};

use super::error::ApiError;

/// Percent-decodes one query component (`+` is a space). `None` for a bad
/// escape or bytes that are not UTF-8.
pub fn percent_decode(s: &str, plus_is_space: bool) -> Option<Cow<'_, str>> {
    if !s.bytes().any(|b| b == b'%' || (plus_is_space && b == b'+')) {
        return Some(Cow::Borrowed(s));
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                let hex = std::str::from_utf8(hex).ok()?;
                if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return None;
                }
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok().map(Cow::Owned)
}

/// One decoded `name=value` pair of a query string.
pub type Pair<'a> = (Cow<'a, str>, Cow<'a, str>);

/// The decoded `name=value` pairs of a query string, in order; empty
/// segments (`a=1&&b=2`) are skipped. Lazy: no allocation unless a
/// component has escapes.
pub fn pairs(query: &str) -> Pairs<'_> {
    Pairs { rest: query }
}

/// The iterator of [`pairs`]. One plain scan per segment finds its end
/// (`&`), its first `=`, and whether it has escapes at all (`%`, `+`);
/// a segment without escapes (every query of a well-behaved client) is
/// then cut into borrowed name and value without looking at its bytes
/// again. Both `&` and `=` are ASCII, so every cut is on a character
/// boundary. `str::split` and `split_once` with their char searchers,
/// and then a decoder's own scan per component, cost about three times
/// as much on a query as short as `status=sold&limit=20`, which every
/// list request parses (`scripts/bench/profile`).
#[derive(Clone, Debug)]
pub struct Pairs<'a> {
    rest: &'a str,
}

impl<'a> Iterator for Pairs<'a> {
    type Item = Result<Pair<'a>, ApiError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.rest.is_empty() {
                return None;
            }
            let mut end = self.rest.len();
            let mut equals = None;
            let mut escaped = false;
            for (i, b) in self.rest.bytes().enumerate() {
                match b {
                    b'&' => {
                        end = i;
                        break;
                    }
                    b'=' if equals.is_none() => equals = Some(i),
                    b'%' | b'+' => escaped = true,
                    _ => {}
                }
            }
            let segment = self.rest.get(..end)?;
            self.rest = self.rest.get(end + 1..).unwrap_or("");
            if segment.is_empty() {
                continue;
            }
            let (name, value) = match equals {
                Some(at) => (segment.get(..at)?, segment.get(at + 1..)?),
                None => (segment, ""),
            };
            if !escaped {
                return Some(Ok((Cow::Borrowed(name), Cow::Borrowed(value))));
            }
            let bad = || {
                ApiError::InvalidQuery(
                    "the query string has a bad percent-escape or is not UTF-8".into(),
                )
            };
            return Some(
                percent_decode(name, true)
                    .zip(percent_decode(value, true))
                    .ok_or_else(bad),
            );
        }
    }
}

/// Refuses any query parameter: for operations that define none.
pub fn expect_none(query: Option<&str>) -> Result<(), ApiError> {
    // Most requests send none: no pair iterator to build and ask, as
    // every get did (`scripts/bench/profile`).
    let Some(query) = query.filter(|q| !q.is_empty()) else {
        return Ok(());
    };
    match pairs(query).next() {
        None => Ok(()),
        Some(pair) => Err(unknown(&pair?.0)),
    }
}

fn unknown(name: &str) -> ApiError {
    ApiError::InvalidQuery(format!("unknown query parameter `{}`", quote(name)))
}

/// Parses `listPets`'s query: `limit` (1..100), `status`, `after`; each at
/// most once, nothing else.
pub fn list_query(query: Option<&str>) -> Result<ListQuery, ApiError> {
    match query.and_then(common_list_query) {
        Some(list) => Ok(list),
        None => any_list_query(query),
    }
}

/// [`list_query`] of any query: pair by pair.
fn any_list_query(query: Option<&str>) -> Result<ListQuery, ApiError> {
    let (limit, status, after) = page_params(
        query,
        |v| v.parse::<PetStatus>().ok(),
        "available, pending, sold",
        |v| v.parse::<PetId>().ok(),
        "a pet id",
    )?;
    let mut list = ListQuery::new();
    if let Some(limit) = limit {
        list = list.limit(limit);
    }
    if let Some(status) = status {
        list = list.status(status);
    }
    if let Some(after) = after {
        list = list.after(after);
    }
    Ok(list)
}

/// What [`page_params`] read: `limit`, `status`, `after`, each if given.
type PageParams<S, A> = (Option<PageSize>, Option<S>, Option<A>);

/// The `limit`, `status` and `after` of a list's query, each at most once
/// and nothing else, pair by pair: what the pets' and the orders' lists
/// share. `status_of` and `after_of` read the list's own status and
/// cursor; `statuses` and `cursor` name them in the refusals.
fn page_params<S, A>(
    query: Option<&str>,
    status_of: impl Fn(&str) -> Option<S>,
    statuses: &str,
    after_of: impl Fn(&str) -> Option<A>,
    cursor: &str,
) -> Result<PageParams<S, A>, ApiError> {
    let (mut limit, mut status, mut after) = (None, None, None);
    let mut seen = [false; 3];
    for pair in pairs(query.unwrap_or("")) {
        let (name, value) = pair?;
        let slot = match name.as_ref() {
            "limit" => 0,
            "status" => 1,
            "after" => 2,
            _ => return Err(unknown(&name)),
        };
        if std::mem::replace(&mut seen[slot], true) {
            return Err(ApiError::InvalidQuery(format!(
                "query parameter `{name}` is given more than once"
            )));
        }
        match slot {
            0 => {
                limit = Some(
                    digits(&value)
                        .and_then(|n| PageSize::new(n).ok())
                        .ok_or_else(|| {
                            ApiError::InvalidQuery(format!(
                                "limit must be an integer from 1 to 100 without leading zeros, got {:?}",
                                quote(&value)
                            ))
                        })?,
                );
            }
            1 => {
                status = Some(status_of(&value).ok_or_else(|| {
                    ApiError::InvalidQuery(format!(
                        "status must be one of {statuses}, got {:?}",
                        quote(&value)
                    ))
                })?);
            }
            _ => {
                after = Some(after_of(&value).ok_or_else(|| {
                    ApiError::InvalidQuery(format!(
                        "after must be {cursor}, an integer from 1 to 9223372036854775807 without leading zeros, got {:?}",
                        quote(&value)
                    ))
                })?);
            }
        }
    }
    Ok((limit, status, after))
}

/// The two shapes nearly every list request has, `limit=N` and
/// `status=S&limit=N`, matched byte for byte; `None` for anything else
/// (another order, an escape, a cursor, a bad value), which the general
/// parse takes and refuses or accepts with its own messages.
///
/// Why: the general way scans the query into pairs and then matches each
/// name and value on every list request, a visible share of its cost
/// (`scripts/bench/profile`); these prefixes cost a few comparisons. Equal results are checked
/// against the general parse (`the_common_shapes_parse_as_the_general_way`).
fn common_list_query(query: &str) -> Option<ListQuery> {
    let mut list = ListQuery::new();
    let rest = match query.strip_prefix("status=") {
        Some(rest) => {
            let (status, rest) = if let Some(rest) = rest.strip_prefix("sold&") {
                (PetStatus::Sold, rest)
            } else if let Some(rest) = rest.strip_prefix("available&") {
                (PetStatus::Available, rest)
            } else {
                (PetStatus::Pending, rest.strip_prefix("pending&")?)
            };
            list = list.status(status);
            rest
        }
        None => query,
    };
    // `digits` takes nothing but plain digits: no `&`, `%` or `+` gets by.
    let limit = digits(rest.strip_prefix("limit=")?)?;
    Some(list.limit(PageSize::new(limit).ok()?))
}

/// Plain decimal digits as a number; `None` for anything else, a leading
/// zero (docs/contract.md, "Listing and paging": a number has one spelling, `020` is not 20) or
/// overflow.
///
/// One pass that checks and adds up the digits together: `str::parse`
/// after a check of its own read each digit twice, on every list request
/// (`limit`) and every get (`petId`; `scripts/bench/profile`).
fn digits(s: &str) -> Option<u64> {
    let bytes = s.as_bytes();
    if bytes.len() > 1 && bytes.first() == Some(&b'0') {
        return None;
    }
    let mut n: u64 = 0;
    for b in bytes {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(digit))?;
    }
    (!bytes.is_empty()).then_some(n)
}

/// Parses `listOrders`'s query: `limit` (1..100), `status` (an order's),
/// `after` (an order id); each at most once, nothing else.
pub fn order_query(query: Option<&str>) -> Result<OrderQuery, ApiError> {
    let (limit, status, after) = page_params(
        query,
        |v| v.parse::<OrderStatus>().ok(),
        "placed, completed, cancelled, expired",
        |v| v.parse::<OrderId>().ok(),
        "an order id",
    )?;
    let mut list = OrderQuery::new();
    if let Some(limit) = limit {
        list = list.limit(limit);
    }
    if let Some(status) = status {
        list = list.status(status);
    }
    if let Some(after) = after {
        list = list.after(after);
    }
    Ok(list)
}

/// `listEvents`'s query: which events, and how long to wait for one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventsRequest {
    /// The cursor and the page's size.
    pub query: EventQuery,
    /// `wait`: how long to wait when nothing follows the cursor.
    pub wait: Option<Duration>,
}

/// The longest `wait` of a `listEvents` request, in seconds.
pub const MAX_WAIT_SECS: u64 = 30;

/// Parses `listEvents`'s query: `after` (a cursor), `limit` (1..1000),
/// `wait` (1..30 seconds); each at most once, nothing else.
pub fn events_query(query: Option<&str>) -> Result<EventsRequest, ApiError> {
    let mut request = EventsRequest {
        query: EventQuery::new(),
        wait: None,
    };
    let mut seen = [false; 3];
    for pair in pairs(query.unwrap_or("")) {
        let (name, value) = pair?;
        let slot = match name.as_ref() {
            "after" => 0,
            "limit" => 1,
            "wait" => 2,
            _ => return Err(unknown(&name)),
        };
        if std::mem::replace(&mut seen[slot], true) {
            return Err(ApiError::InvalidQuery(format!(
                "query parameter `{name}` is given more than once"
            )));
        }
        let bad = |what: &str| {
            ApiError::InvalidQuery(format!("{name} must be {what}, got {:?}", quote(&value)))
        };
        match slot {
            0 => {
                let cursor = EventId::parse(&value).ok_or_else(|| {
                    bad("a cursor: an event's id or a list's Events-Cursor (decimal digits)")
                })?;
                request.query = request.query.after(cursor);
            }
            1 => {
                let limit = digits(&value)
                    .and_then(|n| usize::try_from(n).ok())
                    .and_then(EventLimit::new)
                    .ok_or_else(|| bad("an integer from 1 to 1000 without leading zeros"))?;
                request.query = request.query.limit(limit);
            }
            _ => {
                let secs = digits(&value)
                    .filter(|n| (1..=MAX_WAIT_SECS).contains(n))
                    .ok_or_else(|| bad("a number of seconds from 1 to 30 without leading zeros"))?;
                request.wait = Some(Duration::from_secs(secs));
            }
        }
    }
    Ok(request)
}

/// Parses the `orderId` path segment.
pub fn order_id(segment: &str) -> Result<OrderId, ApiError> {
    let bad = || {
        ApiError::InvalidPath(format!(
            "orderId must be an integer from 1 to 9223372036854775807 without leading zeros, got {:?}",
            quote(segment)
        ))
    };
    if let Some(id) = digits(segment).and_then(OrderId::new) {
        return Ok(id);
    }
    let decoded = percent_decode(segment, false).ok_or_else(bad)?;
    decoded.parse().map_err(|_| bad())
}

/// Parses the `petId` path segment.
pub fn pet_id(segment: &str) -> Result<PetId, ApiError> {
    let bad = || {
        ApiError::InvalidPath(format!(
            "petId must be an integer from 1 to 9223372036854775807 without leading zeros, got {:?}",
            quote(segment)
        ))
    };
    // The one spelling of an id (`PetId`'s `FromStr`): plain digits, no
    // escape, no leading zero. Anything else (an escape, an error) takes
    // the general way below, which says what is wrong with it.
    if let Some(id) = digits(segment).and_then(PetId::new) {
        return Ok(id);
    }
    let decoded = percent_decode(segment, false).ok_or_else(bad)?;
    decoded.parse().map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_are_one_spelling_of_a_number() {
        for (text, n) in [("0", Some(0)), ("7", Some(7)), ("20", Some(20))] {
            assert_eq!(digits(text), n, "{text}");
        }
        assert_eq!(digits("18446744073709551615"), Some(u64::MAX));
        for bad in [
            "",
            "00",
            "020",
            "-1",
            "+1",
            " 1",
            "1 ",
            "1a",
            "18446744073709551616",
            "٣",
        ] {
            assert_eq!(digits(bad), None, "{bad}");
        }
        // The fast way of a pet id agrees with `PetId`'s own parse.
        for text in [
            "1",
            "42",
            "9223372036854775807",
            "9223372036854775808",
            "0",
            "01",
            "%31",
        ] {
            assert_eq!(
                pet_id(text).ok(),
                text.parse::<PetId>()
                    .ok()
                    .filter(|_| !text.contains('%'))
                    .or_else(|| { percent_decode(text, false).and_then(|d| d.parse().ok()) }),
                "{text}"
            );
        }
    }

    fn code(r: Result<ListQuery, ApiError>) -> String {
        match r {
            Ok(q) => format!("{q:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn list_query_accepts_the_contract() {
        let q = list_query(Some("limit=5&status=sold&after=7")).unwrap();
        assert_eq!(q.limit.get(), 5);
        assert_eq!(q.status, Some(PetStatus::Sold));
        assert_eq!(q.after.map(PetId::get), Some(7));
        assert_eq!(list_query(None).unwrap(), ListQuery::new());
        assert_eq!(list_query(Some("")).unwrap(), ListQuery::new());
        assert_eq!(
            list_query(Some("status=%73old")).unwrap().status,
            Some(PetStatus::Sold)
        );
        assert_eq!(list_query(Some("limit=100")).unwrap().limit.get(), 100);
    }

    #[test]
    fn list_query_refuses_the_rest() {
        for bad in [
            "limit=0",
            "limit=101",
            "limit=abc",
            "limit=",
            "limit",
            "limit=-1",
            "limit=+5",
            "limit=1.0",
            "limit=5&limit=5",
            "limit=99999999999999999999999",
            "status=Sold",
            "status=",
            "status=sold&status=sold",
            "after=0",
            "after=-1",
            "after=abc",
            "after=9223372036854775808",
            "foo=1",
            "limit=%zz",
            "limit=%ff",
            "limit=0100",
            "limit=020",
            "limit=00",
            "after=0001",
            "after=00",
        ] {
            assert!(
                list_query(Some(bad)).is_err(),
                "{bad} -> {}",
                code(list_query(Some(bad)))
            );
        }
        let err = list_query(Some("limit=1&limit=2")).unwrap_err();
        assert!(err.to_string().contains("`limit`"));
        assert_eq!(err.code(), "invalid_query");
    }

    #[test]
    fn pet_ids() {
        assert_eq!(pet_id("12").map(PetId::get), Ok(12));
        assert_eq!(pet_id("%31").map(PetId::get), Ok(1));
        for bad in [
            "0",
            "-1",
            "x",
            "",
            "9223372036854775808",
            "1%2F2",
            "%",
            "01",
            "00",
            "%301",
        ] {
            assert_eq!(
                pet_id(bad).map_err(|e| e.code()),
                Err("invalid_path"),
                "{bad}"
            );
        }
    }

    proptest::proptest! {
        /// The scanner is the plain definition: split on `&`, drop empty
        /// segments, split each on its first `=`, decode both sides.
        #[test]
        fn pairs_are_split_then_decoded(query in "[a-z=&%+0-9A-F\u{e9}]{0,24}") {
            let expected: Option<Vec<(String, String)>> = query
                .split('&')
                .filter(|segment| !segment.is_empty())
                .map(|segment| {
                    let (name, value) = segment.split_once('=').unwrap_or((segment, ""));
                    Some((
                        percent_decode(name, true)?.into_owned(),
                        percent_decode(value, true)?.into_owned(),
                    ))
                })
                .collect();
            let scanned: Result<Vec<(String, String)>, ApiError> = pairs(&query)
                .map(|pair| pair.map(|(n, v)| (n.into_owned(), v.into_owned())))
                .collect();
            proptest::prop_assert_eq!(scanned.ok(), expected);
        }
    }

    proptest::proptest! {
        /// The fast way answers only what the general way accepts, and
        /// answers it the same.
        #[test]
        fn the_common_shapes_parse_as_the_general_way(
            query in "(status=(sold|available|pending|Sold|sol|%73old)?&?)?(limit=[0-9+%&a]{0,4})?(&after=[0-9]{0,2})?(&limit=[0-9]{0,2})?",
        ) {
            let general = any_list_query(Some(&query)).ok();
            if let Some(fast) = common_list_query(&query) {
                proptest::prop_assert_eq!(Some(fast), general);
                proptest::prop_assert_eq!(list_query(Some(&query)).ok(), Some(fast));
            }
        }
    }

    #[test]
    fn the_common_shapes_take_the_fast_way() {
        let sold = ListQuery::new()
            .status(PetStatus::Sold)
            .limit(PageSize::new(20).unwrap());
        assert_eq!(common_list_query("status=sold&limit=20"), Some(sold));
        assert_eq!(
            common_list_query("limit=100"),
            Some(ListQuery::new().limit(PageSize::new(100).unwrap()))
        );
        for other in [
            "limit=20&status=sold",
            "limit=0",
            "limit=101",
            "limit=020",
            "limit=20&",
            "status=sold&limit=20&after=3",
            "status=Sold&limit=20",
            "status=sold&&limit=20",
            "",
        ] {
            assert_eq!(common_list_query(other), None, "{other}");
        }
    }

    #[test]
    fn expect_none_names_the_parameter() {
        assert!(expect_none(None).is_ok());
        assert!(expect_none(Some("&")).is_ok());
        assert!(expect_none(Some("x=1"))
            .unwrap_err()
            .to_string()
            .contains("`x`"));
    }
}
