//! Property tests of the rate limiter against the rules of docs/contract.md,
//! on an injected clock (`FakeClock`, `Timestamp`), so every check is exact
//! to the nanosecond and uses integer arithmetic only.
//!
//! A *history* is a quota plus a list of steps; each step moves the clock
//! forward by some nanoseconds (often zero) and then makes one request.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use petstore_core::{
    limit::{AnonymousLimiter, WindowState},
    BanPolicy, Clock, Decision, FakeClock, KeyLimiter, Outcome, Quota, RateLimiter, Timestamp,
};
use proptest::prelude::*;

const T0: Timestamp = Timestamp::from_unix_secs(1_700_000_000);
const MINUTE_NS: u128 = 60_000_000_000;
const DAY_NS: u128 = 86_400_000_000_000;
const NS: Duration = Duration::from_nanos(1);

/// A ban that can never trigger, for the properties about buckets alone.
fn no_ban() -> BanPolicy {
    BanPolicy::new(u32::MAX, 60, 600).unwrap()
}

/// Quotas small enough that both windows bind in a history of a few
/// hundred requests, and now and then larger ones.
fn arb_quota() -> impl Strategy<Value = Quota> {
    prop_oneof![
        4 => (1..=12u32, 1..=40u32),
        2 => (1..=300u32, 1..=1_000u32),
        1 => (1..=5_000u32, 1..=2_000_000u32),
    ]
    .prop_map(|(m, d)| Quota::new(m, d).unwrap())
}

/// How far the clock moves before a request: often not at all, sometimes
/// nanoseconds, seconds, minutes or hours; and, on purpose, exactly onto
/// the edges where an off-by-one would show: whole seconds (where a
/// `Retry-After` ends), a whole minute or day (a window), one emission
/// interval `60 s / n` of the small per-minute quotas `arb_quota` favours
/// (where one token comes back), each also 1 ns short or over.
fn arb_advance() -> impl Strategy<Value = u64> {
    let edge = prop_oneof![
        (1..=120u64).prop_map(|s| s * 1_000_000_000),
        Just(MINUTE_NS as u64),
        Just(DAY_NS as u64),
        (1..=12u64).prop_map(|n| MINUTE_NS as u64 / n),
    ];
    prop_oneof![
        4 => Just(0u64),
        2 => 0..1_000u64,
        3 => 0..5_000_000_000u64,
        2 => 0..120_000_000_000u64,
        1 => 0..10_800_000_000_000u64,
        3 => (edge, -1i64..=1).prop_map(|(at, off)| at.saturating_add_signed(off)),
    ]
}

fn arb_steps(max: usize) -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(arb_advance(), 0..max)
}

fn arb_ban() -> impl Strategy<Value = BanPolicy> {
    prop_oneof![
        Just(no_ban()),
        (1..=10u32, 1..=120u64, 1..=3_600u64)
            .prop_map(|(s, w, d)| BanPolicy::new(s, w, d).unwrap()),
    ]
}

/// One step of a ban history: the clock moves by a gap, or jumps exactly
/// onto (or 1 ns beside, `offset`) an edge of the model's state: the last
/// refusal's Retry-After instant (0), the next token (1), the oldest
/// strike leaving the window (2), the end of the ban (3). Random gaps
/// almost never land there, and those are where `<` and `<=` differ.
#[derive(Clone, Copy, Debug)]
enum BanStep {
    Gap(u64),
    Edge { edge: usize, offset: i64 },
}

/// Runs a history on a fresh limiter; returns it, the time of the last
/// step, and every decision.
fn replay(quota: Quota, ban: BanPolicy, steps: &[u64]) -> (KeyLimiter, Timestamp, Vec<Decision>) {
    let limiter = KeyLimiter::new(quota, ban);
    let mut now = T0;
    let decisions = steps
        .iter()
        .map(|advance| {
            now = now + Duration::from_nanos(*advance);
            limiter.check(now)
        })
        .collect();
    (limiter, now, decisions)
}

/// A key's decision has exactly two windows, minute then day, with their
/// periods: checked before any loop over `windows()`, so a loop over
/// nothing cannot pass for a check.
fn assert_key_windows(d: &Decision) -> Result<(), TestCaseError> {
    let windows: Vec<(&str, Duration)> = d.windows().map(|w| (w.name, w.period)).collect();
    prop_assert_eq!(
        windows,
        vec![
            ("minute", Duration::from_secs(60)),
            ("day", Duration::from_secs(86_400))
        ]
    );
    Ok(())
}

/// An anonymous client's decision has the minute window alone.
fn assert_anonymous_windows(d: &Decision) -> Result<(), TestCaseError> {
    let windows: Vec<(&str, Duration)> = d.windows().map(|w| (w.name, w.period)).collect();
    prop_assert_eq!(windows, vec![("minute", Duration::from_secs(60))]);
    prop_assert!(d.day.is_none());
    Ok(())
}

fn window<'a>(d: &'a Decision, name: &str) -> &'a WindowState {
    d.windows().find(|w| w.name == name).unwrap()
}

fn nanos(d: Duration) -> u128 {
    d.as_nanos()
}

/// For every pair of allowed requests `i <= j`, the `j - i + 1` requests
/// allowed in `[t_i, t_j]` are at most `capacity + capacity * (t_j - t_i) /
/// period`. Checking intervals that start and end on allowed requests is
/// enough: any other interval holds the same requests in at least as much
/// time.
fn assert_rate_bound(
    allowed: &[Timestamp],
    capacity: u32,
    period_ns: u128,
) -> Result<(), TestCaseError> {
    let cap = u128::from(capacity);
    for i in 0..allowed.len() {
        for j in i..allowed.len() {
            let count = (j - i + 1) as u128;
            let span = nanos(allowed[j].saturating_duration_since(allowed[i]));
            prop_assert!(
                count * period_ns <= cap * period_ns + cap * span,
                "{count} requests allowed in {span} ns, capacity {cap} per {period_ns} ns"
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// (a) In any interval `[t0, t1]`, the allowed requests never exceed
    /// `capacity + rate * (t1 - t0)`, for the minute and for the day window,
    /// whatever the ban policy.
    #[test]
    fn allowed_requests_never_exceed_the_rate(
        quota in arb_quota(),
        ban in arb_ban(),
        steps in arb_steps(300),
    ) {
        let clock = Arc::new(FakeClock::new(T0));
        let limiter = RateLimiter::new(Arc::clone(&clock));
        limiter.insert("key", quota, ban);
        let mut allowed = Vec::new();
        for advance in &steps {
            clock.advance(Duration::from_nanos(*advance));
            let d = limiter.check(&"key").unwrap();
            assert_key_windows(&d)?;
            prop_assert_eq!(d.at, clock.now());
            if d.is_allowed() {
                allowed.push(d.at);
            }
        }
        assert_rate_bound(&allowed, quota.per_minute().get(), MINUTE_NS)?;
        assert_rate_bound(&allowed, quota.per_day().get(), DAY_NS)?;
    }

    /// (a) for the per-address limiter of anonymous clients.
    #[test]
    fn anonymous_requests_never_exceed_the_rate(
        per_minute in 1..=20u32,
        steps in arb_steps(300),
    ) {
        let limiter = AnonymousLimiter::new(NonZeroU32::new(per_minute).unwrap(), 16);
        let ip = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));
        let mut now = T0;
        let mut allowed = Vec::new();
        for advance in &steps {
            now = now + Duration::from_nanos(*advance);
            let d = limiter.check(ip, now);
            assert_anonymous_windows(&d)?;
            for w in d.windows() {
                prop_assert!(w.remaining <= w.limit);
                prop_assert_eq!(w.limit, per_minute);
            }
            if d.is_allowed() {
                allowed.push(now);
            }
        }
        assert_rate_bound(&allowed, per_minute, MINUTE_NS)?;
    }

    /// (b) `remaining` of the binding window is exactly how many more
    /// requests are allowed at the same instant; a refusal reports 0.
    #[test]
    fn remaining_is_exactly_the_requests_left(quota in arb_quota(), steps in arb_steps(200)) {
        let (limiter, now, decisions) = replay(quota, no_ban(), &steps);
        for d in &decisions {
            assert_key_windows(d)?;
            for w in d.windows() {
                prop_assert!(w.remaining <= w.limit);
            }
            if !d.is_allowed() {
                prop_assert_eq!(d.binding().remaining, 0);
            }
            // The binding window: fewer left, the minute window on a tie.
            let day = d.day.unwrap();
            let binding = if day.remaining < d.minute.remaining { "day" } else { "minute" };
            prop_assert_eq!(d.binding().name, binding);
        }
        let d = limiter.check(now);
        let r = d.binding().remaining;
        prop_assert!(r <= d.minute.remaining && Some(r) <= d.day.map(|w| w.remaining));
        // Large quotas: only check a bounded number, the rule is the same.
        prop_assume!(r <= 5_000);
        for i in 0..r {
            let next = limiter.check(now);
            prop_assert!(next.is_allowed(), "request {} of the {} left was refused", i + 1, r);
            prop_assert_eq!(next.binding().remaining, r - i - 1);
        }
        prop_assert!(!limiter.check(now).is_allowed());
    }

    /// (b) A refusal's `retry_after` is exact: one nanosecond earlier the
    /// request is still refused (and told to wait 1 ns), at `retry_after`
    /// it is allowed.
    #[test]
    fn retry_after_is_exact(quota in arb_quota(), steps in arb_steps(200)) {
        let (limiter, now, _) = replay(quota, no_ban(), &steps);
        // Drain what is left at `now` (bounded: huge quotas are skipped).
        let mut refusal = None;
        for _ in 0..=5_000 {
            let d = limiter.check(now);
            if !d.is_allowed() {
                refusal = Some(d);
                break;
            }
        }
        prop_assume!(refusal.is_some());
        let Outcome::Limited { retry_after } = refusal.unwrap().outcome else {
            return Err(TestCaseError::fail("a refusal without a ban must be Limited"));
        };
        prop_assert!(retry_after >= NS);
        let early = limiter.check(now + (retry_after - NS));
        prop_assert_eq!(early.outcome, Outcome::Limited { retry_after: NS });
        let d = limiter.check(now + retry_after);
        prop_assert!(d.is_allowed(), "refused at retry_after: {:?}", d);
    }

    /// (b) `reset_at` is when the window's bucket is full again: a request
    /// at `reset_at` sees a full bucket (`remaining` is `limit - 1` after
    /// taking its token, or `limit` when the other window refused it), and
    /// one 1 ns earlier sees one token short. `reset_at` is never before
    /// the decision, and a full bucket resets now.
    #[test]
    fn reset_at_is_when_the_bucket_is_full(quota in arb_quota(), steps in arb_steps(200)) {
        let (limiter, now, _) = replay(quota, no_ban(), &steps);
        let d = limiter.check(now);
        assert_key_windows(&d)?;
        for w in d.windows() {
            prop_assert!(w.reset_at >= now);
            if w.reset_at == now {
                // Full now: nothing was taken, so this request was refused
                // by the other window.
                prop_assert!(!d.is_allowed());
                prop_assert_eq!(w.remaining, w.limit);
            }
            // Replays the same history and decision, then probes at `at`:
            // how many tokens the window holds before the probe takes one.
            let held_at = |at: Timestamp| {
                let (probe, _, _) = replay(quota, no_ban(), &steps);
                probe.check(now);
                let p = probe.check(at);
                window(&p, w.name).remaining + u32::from(p.is_allowed())
            };
            prop_assert_eq!(held_at(w.reset_at), w.limit, "{} at reset_at", w.name);
            if w.reset_at > now {
                prop_assert_eq!(held_at(Timestamp::from_unix_nanos(w.reset_at.as_unix_nanos() - 1)), w.limit - 1);
            }
        }
        // The header value: whole seconds until the binding window resets.
        let wait = nanos(d.binding().reset_at.saturating_duration_since(d.at));
        prop_assert_eq!(u128::from(d.reset_after_secs()), wait.div_ceil(1_000_000_000));
    }

    /// (c) A refused request takes no token: a limiter that never saw the
    /// refused requests decides every other request the same way, and ends
    /// in the same state.
    #[test]
    fn refused_requests_take_no_token(quota in arb_quota(), steps in arb_steps(300)) {
        let (with, now, decisions) = replay(quota, no_ban(), &steps);
        let without = KeyLimiter::new(quota, no_ban());
        let mut at = T0;
        for (advance, d) in steps.iter().zip(&decisions) {
            at = at + Duration::from_nanos(*advance);
            if d.is_allowed() {
                prop_assert_eq!(&without.check(at), d);
            }
        }
        // The same state: the same next decisions, here and a bit later.
        for later in [0, 1, 1_000_000_000, 30_000_000_000] {
            let t = now + Duration::from_nanos(later);
            prop_assert_eq!(with.check(t), without.check(t));
        }
    }

    /// (d) The ban, checked against a direct model of the rule (limiter.rs):
    /// a *strike* is a refusal of a request that came back before the
    /// `Retry-After` (whole seconds, at least 1) of the key's previous
    /// refusal; `strikes` strikes within the window ban the key for the
    /// ban duration; while banned every request is `Banned` with
    /// `retry_after` = the time left and 0 remaining, and is no strike;
    /// after the ban the buckets alone decide again. The quota is 1 per
    /// minute (the day never binds), so the model's bucket is one token
    /// back 60 s after the last allowed request.
    #[test]
    fn strikes_within_the_window_ban_the_key(
        strikes in 1..=8u32,
        window_secs in 1..=120u64,
        ban_secs in 1..=1_000u64,
        steps in prop::collection::vec(
            prop_oneof![
                1 => Just(BanStep::Gap(0)),
                1 => (0..2_000_000_000u64).prop_map(BanStep::Gap),
                1 => (0..90_000_000_000u64).prop_map(BanStep::Gap),
                1 => (0..1_200_000_000_000u64).prop_map(BanStep::Gap),
                // Whole seconds: exactly at a Retry-After or a window's end
                // when the previous request was a refusal.
                1 => (0..120u64).prop_map(|s| BanStep::Gap(s * 1_000_000_000)),
                // Straight onto an edge of the model's state.
                4 => (0..4usize, -1i64..=1).prop_map(|(edge, offset)| BanStep::Edge { edge, offset }),
            ],
            1..60,
        ),
    ) {
        let ban = BanPolicy::new(strikes, window_secs, ban_secs).unwrap();
        let limiter = KeyLimiter::new(Quota::new(1, 1_000_000).unwrap(), ban);
        let window = Duration::from_secs(window_secs);
        let duration = Duration::from_secs(ban_secs);
        let whole_seconds =
            |d: Duration| Duration::from_secs(d.as_nanos().div_ceil(1_000_000_000).max(1) as u64);
        // The model.
        let mut next_token = T0;
        let mut retry_at: Option<Timestamp> = None;
        let mut strikes_seen: VecDeque<Timestamp> = VecDeque::new();
        let mut banned_until: Option<Timestamp> = None;
        let mut now = T0;
        for step in steps {
            now = match step {
                BanStep::Gap(gap) => now + Duration::from_nanos(gap),
                BanStep::Edge { edge, offset } => {
                    let target = match edge {
                        0 => retry_at,
                        1 => Some(next_token),
                        2 => strikes_seen.front().map(|s| *s + window),
                        _ => banned_until,
                    };
                    // Never backwards: an edge already passed is "now".
                    target
                        .map(|t| Timestamp::from_unix_nanos(t.as_unix_nanos().saturating_add_signed(offset)))
                        .filter(|t| *t > now)
                        .unwrap_or(now)
                }
            };
            let d = limiter.check(now);
            if let Some(until) = banned_until.filter(|until| now < *until) {
                prop_assert_eq!(d.outcome, Outcome::Banned { retry_after: until.saturating_duration_since(now) });
                prop_assert!(!d.ban_started);
                prop_assert_eq!((d.minute.remaining, d.day.unwrap().remaining), (0, 0));
                prop_assert!(d.binding().reset_at >= until);
                prop_assert_eq!(d.retry_after_secs(), Some(whole_seconds(until.saturating_duration_since(now)).as_secs()));
            } else if now >= next_token {
                prop_assert!(d.is_allowed(), "{:?}", d);
                next_token = now + Duration::from_secs(60);
            } else {
                let wait = next_token.saturating_duration_since(now);
                let strike = retry_at.is_some_and(|at| now < at);
                retry_at = Some(now + whole_seconds(wait));
                if strike {
                    strikes_seen.retain(|s| now.saturating_duration_since(*s) < window);
                    strikes_seen.push_back(now);
                }
                if strikes_seen.len() >= strikes as usize {
                    prop_assert_eq!(d.outcome, Outcome::Banned { retry_after: duration });
                    prop_assert!(d.ban_started);
                    banned_until = Some(now + duration);
                    strikes_seen.clear();
                } else {
                    prop_assert_eq!(d.outcome, Outcome::Limited { retry_after: wait });
                    prop_assert!(!d.ban_started);
                }
            }
        }
    }

    /// (d) A client that ignores `Retry-After` is banned after `strikes`
    /// early returns; the ban lasts exactly its duration; afterwards the
    /// key works again and the strikes start from zero.
    #[test]
    fn the_key_works_again_after_the_ban(
        per_minute in 1..=20u32,
        strikes in 1..=10u32,
        window_secs in 1..=120u64,
        ban_secs in 60..=3_600u64,
        gap_ns in 0..1_000_000u64,
    ) {
        let ban = BanPolicy::new(strikes, window_secs, ban_secs).unwrap();
        let limiter = KeyLimiter::new(Quota::new(per_minute, 1_000_000).unwrap(), ban);
        let mut now = T0;
        for _ in 0..per_minute {
            prop_assert!(limiter.check(now).is_allowed());
        }
        // The first refusal is no strike; each quicker return after it is.
        let first = limiter.check(now);
        prop_assert!(matches!(first.outcome, Outcome::Limited { .. }), "{:?}", first);
        for k in 1..=strikes {
            now = now + Duration::from_nanos(gap_ns);
            let d = limiter.check(now);
            if k < strikes {
                prop_assert!(matches!(d.outcome, Outcome::Limited { .. }), "strike {}: {:?}", k, d);
            } else {
                prop_assert_eq!(d.outcome, Outcome::Banned { retry_after: Duration::from_secs(ban_secs) });
                prop_assert!(d.ban_started);
            }
        }
        let end = now + Duration::from_secs(ban_secs);
        let last = limiter.check(Timestamp::from_unix_nanos(end.as_unix_nanos() - 1));
        prop_assert_eq!(last.outcome, Outcome::Banned { retry_after: NS });
        prop_assert_eq!(last.retry_after_secs(), Some(1));
        // The ban lasts at least a minute, so the minute bucket is full again.
        let d = limiter.check(end);
        prop_assert!(d.is_allowed(), "{:?}", d);
        prop_assert_eq!(d.minute.remaining, per_minute - 1);
        for _ in 1..per_minute {
            prop_assert!(limiter.check(end).is_allowed());
        }
        // The strikes start from zero: the same run of early returns is
        // refused, not banned, until the last one.
        let d = limiter.check(end);
        prop_assert!(matches!(d.outcome, Outcome::Limited { .. }), "{:?}", d);
        for k in 1..strikes {
            let d = limiter.check(end + Duration::from_nanos(gap_ns * u64::from(k)));
            prop_assert!(matches!(d.outcome, Outcome::Limited { .. }), "strike {} after the ban: {:?}", k, d);
        }
    }

    /// Concurrent callers read the clock before taking the limiter's lock,
    /// so a request can arrive with a `now` older than one the key has
    /// already seen. Such stale readings never panic, never report more
    /// than the limit, and never let more through than the rate allows
    /// from the first reading to the latest one seen.
    #[test]
    fn stale_clock_readings_are_harmless(
        quota in arb_quota(),
        steps in prop::collection::vec((arb_advance(), 0..2_000_000_000u64), 0..300),
    ) {
        let limiter = KeyLimiter::new(quota, BanPolicy::default());
        let mut latest = T0;
        let mut allowed = 0u128;
        for (advance, staleness) in steps {
            latest = latest + Duration::from_nanos(advance);
            // Up to 2 s in the past, never before T0.
            let now = Timestamp::from_unix_nanos(
                latest.as_unix_nanos() - staleness.min(latest.as_unix_nanos() - T0.as_unix_nanos()),
            );
            let d = limiter.check(now);
            assert_key_windows(&d)?;
            for w in d.windows() {
                prop_assert!(w.remaining <= w.limit);
                prop_assert!(w.reset_at >= now);
            }
            if let Outcome::Limited { retry_after } = d.outcome {
                prop_assert!(retry_after > Duration::ZERO);
            }
            allowed += u128::from(d.is_allowed());
        }
        let span = nanos(latest.saturating_duration_since(T0));
        for (cap, period) in [(quota.per_minute().get(), MINUTE_NS), (quota.per_day().get(), DAY_NS)] {
            let cap = u128::from(cap);
            prop_assert!(allowed * period <= cap * period + cap * span);
        }
    }

    /// The anonymous limiter remembers at most `capacity` addresses however
    /// many it sees, and an address seen recently (fewer than `capacity / 2`
    /// other addresses since) keeps its bucket.
    #[test]
    fn anonymous_memory_is_bounded(
        capacity in 2..=64usize,
        addresses in prop::collection::vec(0..200u32, 1..1_000),
    ) {
        // One request per address per minute, at one instant: a second
        // request is refused exactly when the address is remembered.
        let limiter = AnonymousLimiter::new(NonZeroU32::MIN, capacity);
        let mut last_seen: HashMap<u32, usize> = HashMap::new();
        for (i, a) in addresses.iter().enumerate() {
            let d = limiter.check(IpAddr::V4(Ipv4Addr::from(*a)), T0);
            prop_assert!(limiter.tracked() <= capacity);
            if let Some(prev) = last_seen.get(a) {
                // Distinct other addresses seen since this one's last request.
                let others = last_seen.values().filter(|seen| *seen > prev).count();
                if others < capacity / 2 {
                    prop_assert!(!d.is_allowed(), "address {} forgotten after {} others", a, others);
                }
            } else {
                prop_assert!(d.is_allowed());
            }
            last_seen.insert(*a, i);
        }
    }
}

#[test]
fn anonymous_flood_of_addresses_stays_within_capacity() {
    let limiter = AnonymousLimiter::new(NonZeroU32::new(60).unwrap(), 2_000);
    let mut max = 0;
    for i in 0..200_000u32 {
        limiter.check(
            IpAddr::V4(Ipv4Addr::from(i.wrapping_mul(2_654_435_761))),
            T0,
        );
        max = max.max(limiter.tracked());
    }
    assert!(max <= 2_000, "tracked {max}");
    assert!(
        max >= 1_000,
        "it should remember at least half its capacity"
    );
}

#[test]
fn refusals_report_the_binding_window_and_its_reset() {
    // 2 per minute, 3 per day: after 3 requests spread over 2 minutes the
    // day window binds, and its retry is hours away, not seconds.
    let limiter = KeyLimiter::new(Quota::new(2, 3).unwrap(), no_ban());
    let mut now = T0;
    for _ in 0..3 {
        assert!(limiter.check(now).is_allowed());
        now = now + Duration::from_secs(60);
    }
    let d = limiter.check(now);
    assert_eq!(d.binding().name, "day");
    assert_eq!(d.binding().remaining, 0);
    assert_eq!(d.minute.remaining, 2);
    // One day token comes back every 8 h; the first was taken at T0.
    let Outcome::Limited { retry_after } = d.outcome else {
        panic!("{d:?}")
    };
    assert_eq!(now + retry_after, T0 + Duration::from_secs(8 * 3_600));
    assert_eq!(d.retry_after_secs(), Some(8 * 3_600 - 180));
}

#[test]
fn a_strike_exactly_one_window_old_no_longer_counts() {
    // 2 strikes within 10 s ban. The buckets stay empty (1 per minute, 1
    // per day), and every Retry-After is hours away, so every refusal
    // after the first is a strike.
    let limiter = KeyLimiter::new(
        Quota::new(1, 1).unwrap(),
        BanPolicy::new(2, 10, 600).unwrap(),
    );
    let limited = |d: Decision| matches!(d.outcome, Outcome::Limited { .. }) && !d.ban_started;
    assert!(limiter.check(T0).is_allowed());
    // The first refusal: no strike.
    assert!(limited(limiter.check(T0 + Duration::from_secs(1))));
    // Strike 1.
    let strike = T0 + Duration::from_secs(2);
    assert!(limited(limiter.check(strike)));
    // Exactly 10 s later strike 1 has left the window: this is strike 1 again.
    let again = strike + Duration::from_secs(10);
    assert!(limited(limiter.check(again)));
    // 1 ns less than 10 s after that one: the second strike, a ban.
    let banned = limiter.check(again + (Duration::from_secs(10) - NS));
    assert_eq!(
        banned.outcome,
        Outcome::Banned {
            retry_after: Duration::from_secs(600)
        }
    );
    assert!(banned.ban_started);
}

/// The README's rule: a refusal is a strike only when the request came
/// back *before* the Retry-After of the key's previous refusal. Exactly at
/// that instant it is not: with one strike to a ban, a request refused at
/// its Retry-After instant is `Limited`, one refused 1 ns earlier starts a
/// ban. (The request in between takes the token that came back, so the
/// one at the Retry-After instant is refused too.)
#[test]
fn a_request_exactly_at_its_retry_after_is_no_strike() {
    let run = |early: Duration| {
        let limiter = KeyLimiter::new(
            Quota::new(1, 1_000).unwrap(),
            BanPolicy::new(1, 600, 600).unwrap(),
        );
        assert!(limiter.check(T0).is_allowed());
        // Refused; the first refusal is never a strike. 59.5 s to wait:
        // `Retry-After: 60`, so the client may come back at T0 + 60.5 s.
        let refused_at = T0 + Duration::from_millis(500);
        let d = limiter.check(refused_at);
        assert_eq!(
            d.outcome,
            Outcome::Limited {
                retry_after: Duration::from_millis(59_500)
            }
        );
        assert_eq!(d.retry_after_secs(), Some(60));
        let retry_at = refused_at + Duration::from_secs(60);
        // Another request takes the token back at T0 + 60 s.
        assert!(limiter.check(T0 + Duration::from_secs(60)).is_allowed());
        limiter.check(Timestamp::from_unix_nanos(
            retry_at.as_unix_nanos() - early.as_nanos() as u64,
        ))
    };
    let at = run(Duration::ZERO);
    assert_eq!(
        at.outcome,
        Outcome::Limited {
            retry_after: Duration::from_millis(59_500)
        },
        "exactly at its Retry-After: refused, but no strike"
    );
    assert!(!at.ban_started);
    let before = run(NS);
    assert_eq!(
        before.outcome,
        Outcome::Banned {
            retry_after: Duration::from_secs(600)
        },
        "1 ns before its Retry-After: a strike, and one strike bans"
    );
    assert!(before.ban_started);
}

/// `RateLimiter::remove` forgets one key and only that one: the key gets
/// no decision any more, a second removal finds nothing, the other keys
/// keep their buckets, and a key inserted again starts full.
#[test]
fn removing_a_key_forgets_it_and_only_it() {
    let clock = Arc::new(FakeClock::new(T0));
    let limiter = RateLimiter::new(Arc::clone(&clock));
    let quota = Quota::new(3, 100).unwrap();
    limiter.insert("alice", quota, no_ban());
    limiter.insert("bob", quota, no_ban());
    for _ in 0..2 {
        assert!(limiter.check(&"alice").unwrap().is_allowed());
        assert!(limiter.check(&"bob").unwrap().is_allowed());
    }
    assert!(!limiter.remove(&"mallory"), "an unknown key is not removed");
    assert!(limiter.remove(&"alice"));
    assert!(
        limiter.check(&"alice").is_none(),
        "a removed key gets no decision"
    );
    assert!(!limiter.remove(&"alice"), "a key is removed once");
    // Bob keeps his state: one token left, then refused.
    let d = limiter.check(&"bob").unwrap();
    assert!(d.is_allowed());
    assert_eq!(d.minute.remaining, 0);
    assert!(!limiter.check(&"bob").unwrap().is_allowed());
    // Alice inserted again starts with full buckets.
    limiter.insert("alice", quota, no_ban());
    let d = limiter.check(&"alice").unwrap();
    assert!(d.is_allowed());
    assert_eq!(
        (d.minute.remaining, d.day.map(|w| w.remaining)),
        (2, Some(99))
    );
}
