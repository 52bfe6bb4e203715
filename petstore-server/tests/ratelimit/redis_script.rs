//! The Redis script (`src/ratelimit/in_redis/limit.lua`) against the core's limiter:
//! the same requests at the same instants give the same `Decision`, field
//! for field (outcome, Retry-After, both windows' remaining and reset, so
//! `t=` too, and the start of a ban), over 100,000 random steps whose
//! times land exactly on the edges (a token's return, a Retry-After, a
//! window's reset, a strike leaving its window, a ban's end). A copy of
//! the script with one `<=` turned into `<` must be caught: the test of
//! the test. Each call decides 1 to 8 states at one instant (as a
//! replica sends what it queued during its previous call), and a quarter
//! of the states bring 2 to 5 requests (a busy key), compared with as
//! many checks of the core at that instant. Between rounds, some states
//! are rewritten in the previous encoding (a hash), so calls mix both
//! forms; some move elsewhere and come back as the text a cluster
//! replica read from their previous slot (FROM `=`); some are asked for
//! with their previous form unread (FROM `?`: decided when present, and
//! when missing not decided at all), and a quarter named alone, as a
//! replica names a state it decided lately (FROM `!`: the same); some come with a stale carried text
//! while present (two replicas carrying one state over: the state there
//! must win, or the second would undo the first's charges); and a few
//! are overwritten with
//! garbage (the script must reset them, as the core starts a fresh
//! limiter). And one table of limiter
//! cases runs against both backends.
//!
//! The script runs in the harness's own Redis with the time passed in
//! (its first argument; empty in production, meaning Redis `TIME`). The
//! calls of a round go in one pipeline, so 100,000 steps take seconds.

use crate::common;

use std::net::{IpAddr, Ipv4Addr};
use std::num::NonZeroU32;
use std::time::Duration;

use common::redis::RedisServer;
use petstore_core::{limit::AnonymousLimiter, BanPolicy, Decision, KeyLimiter, Quota, Timestamp};
use petstore_server::ratelimit::in_redis::{
    current_name, decode_call, state_arg, text_name, Params, Previous, Requests,
    StateReply as Verdict, CARRY, SCRIPT,
};

/// A small deterministic generator (xorshift64*): the same steps on every
/// run, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

enum Subject {
    Key(KeyLimiter, BanPolicy),
    Anonymous(AnonymousLimiter),
}

/// One limiter in both implementations: the core's, and its state's name
/// in Redis.
struct Case {
    subject: Subject,
    name: String,
    params: Params,
    now_ms: u64,
    last: Option<Decision>,
    /// Where this round's call says the state's previous form is.
    from: Previous,
    /// The state's text as it was moved "elsewhere" (another slot), where
    /// it stays: what a cluster replica reads whenever the state is
    /// missing here.
    elsewhere: Option<String>,
}

const ADDRESS: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));

fn ms_floor(t: Timestamp) -> u64 {
    t.as_unix_nanos() / 1_000_000
}

fn ms_ceil(t: Timestamp) -> u64 {
    t.as_unix_nanos().div_ceil(1_000_000)
}

impl Case {
    fn new(rng: &mut Rng, i: usize) -> Case {
        let now_ms = 1_700_000_000_000 + rng.below(1_000_000_000);
        if rng.below(5) == 0 {
            let per_minute = rng.pick(&[1u32, 2, 3, 7, 60, 1000]);
            let limiter = AnonymousLimiter::new(NonZeroU32::new(per_minute).unwrap(), 16);
            return Case {
                subject: Subject::Anonymous(limiter),
                name: format!("{{anon:{i}}}:m{per_minute}"),
                params: Params::anonymous(per_minute),
                now_ms,
                last: None,
                from: Previous::Hash,
                elsewhere: None,
            };
        }
        let per_minute = rng.pick(&[1u32, 2, 3, 5, 7, 60, 299, 100_000_000]);
        let per_day = rng.pick(&[1u32, 2, 5, 13, 1000, 86_401, 100_000_000]);
        let quota = Quota::new(per_minute, per_day).unwrap();
        let ban = BanPolicy::new(
            rng.pick(&[1u32, 2, 3, 5]),
            rng.pick(&[1u64, 7, 60, 120]),
            rng.pick(&[1u64, 30, 600]),
        )
        .unwrap();
        Case {
            subject: Subject::Key(KeyLimiter::new(quota, ban), ban),
            name: format!("{{k{i}}}:m{per_minute}/d{per_day}"),
            params: Params::key(quota, ban),
            now_ms,
            last: None,
            from: Previous::Hash,
            elsewhere: None,
        }
    }

    /// An instant at an edge of what the last decision said (or
    /// anywhere), never before `now`.
    fn next_instant(&self, rng: &mut Rng) -> u64 {
        let now = self.now_ms;
        let Some(last) = self.last else {
            return now + rng.below(3);
        };
        let at = last.at;
        let edge = |t: Timestamp, rng: &mut Rng| match rng.below(3) {
            0 => ms_floor(t),
            1 => ms_ceil(t),
            _ => ms_ceil(t).saturating_sub(1),
        };
        let next = match rng.below(12) {
            0 => now,
            1 => now + 1,
            2 => match last.outcome {
                petstore_core::Outcome::Allowed => now + rng.below(3),
                petstore_core::Outcome::Limited { retry_after }
                | petstore_core::Outcome::Banned { retry_after } => edge(at + retry_after, rng),
            },
            3 => {
                let secs = last.retry_after_secs().unwrap_or(1);
                now + secs * 1000 - rng.below(2)
            }
            4 => edge(last.minute.reset_at, rng),
            5 => match last.day {
                Some(day) => edge(day.reset_at, rng),
                None => now + 60_000,
            },
            6 => {
                // A token's return: 60 s / the per-minute limit.
                let token = Duration::from_secs(60) / last.minute.limit;
                edge(at + token * (1 + rng.below(2) as u32), rng)
            }
            7 => match &self.subject {
                Subject::Key(limiter, ban) => match limiter.state().refusals.first() {
                    Some(t) => edge(*t + ban.window(), rng),
                    None => now + rng.below(1000),
                },
                Subject::Anonymous(_) => now + rng.below(1000),
            },
            8 => match &self.subject {
                Subject::Key(limiter, _) => match limiter.state().banned_until {
                    Some(t) => edge(t, rng),
                    None => now,
                },
                Subject::Anonymous(_) => now,
            },
            9 => match &self.subject {
                Subject::Key(limiter, _) => match limiter.state().retry_at {
                    Some(t) => edge(t, rng),
                    None => now,
                },
                Subject::Anonymous(_) => now,
            },
            10 => now + rng.below(120_000),
            _ => now + rng.below(3 * 86_400_000),
        };
        next.max(now)
    }

    /// The same limiter, fresh: what a state overwritten by garbage
    /// becomes in the script.
    fn restart(&mut self) {
        self.subject = match &self.subject {
            Subject::Key(limiter, ban) => {
                Subject::Key(KeyLimiter::new(limiter.quota(), *ban), *ban)
            }
            Subject::Anonymous(_) => Subject::Anonymous(AnonymousLimiter::new(
                NonZeroU32::new(self.params.per_minute).unwrap(),
                16,
            )),
        };
        self.last = None;
    }

    fn check(&mut self) -> Decision {
        let now = Timestamp::from_unix_nanos(self.now_ms * 1_000_000);
        let decision = match &self.subject {
            Subject::Key(limiter, _) => limiter.check(now),
            Subject::Anonymous(limiter) => limiter.check(ADDRESS, now),
        };
        self.last = Some(decision);
        decision
    }
}

/// A previous form a call carries for a state that is already there (the
/// race of two replicas carrying it over): banned until 2096, so that a
/// script taking it over the state there is caught at once.
const STALE: &str = "0:0:0:0:4000000000000::";

/// The state's stored form (`:v3`: a version byte, six little-endian
/// 64-bit integers, the strikes' text) as the previous version's text,
/// `mm:mf:dm:df:bu:ra:r` (empty for no ban, no Retry-After).
fn as_text(bytes: &[u8]) -> String {
    assert!(bytes.len() >= 49 && bytes[0] == 3, "not a state: {bytes:?}");
    let n = |i: usize| i64::from_le_bytes(bytes[1 + 8 * i..9 + 8 * i].try_into().unwrap());
    let opt = |v: i64| if v == 0 { String::new() } else { v.to_string() };
    format!(
        "{}:{}:{}:{}:{}:{}:{}",
        n(0),
        n(1),
        n(2),
        n(3),
        opt(n(4)),
        opt(n(5)),
        std::str::from_utf8(&bytes[49..]).unwrap()
    )
}

/// Rewrites the state `name` as a previous version kept it: the text at
/// `:v2` (`hash` false) or a hash at `name` (`hash` true), with the same
/// fields and TTL, and nothing at its `:v3` name (what a replica finds
/// after a deploy). Whether there was a state to rewrite.
fn to_previous_form(redis: &mut redis::Connection, name: &str, hash: bool) -> bool {
    let current = current_name(name);
    // Not a string: no state yet (or only a previous form).
    let Ok(Some(value)) = redis::cmd("GET")
        .arg(&current)
        .query::<Option<Vec<u8>>>(redis)
    else {
        return false;
    };
    let ttl: i64 = redis::cmd("PTTL").arg(&current).query(redis).unwrap();
    if ttl <= 0 {
        // Its TTL ran out since the GET (a busy machine is slow): no
        // state to rewrite, as if the GET had come a moment later.
        return false;
    }
    let text = as_text(&value);
    redis::cmd("DEL")
        .arg(name)
        .arg(text_name(name))
        .arg(&current)
        .exec(redis)
        .unwrap();
    if !hash {
        redis::cmd("SET")
            .arg(text_name(name))
            .arg(&text)
            .arg("PX")
            .arg(ttl)
            .exec(redis)
            .unwrap();
        return true;
    }
    let fields: Vec<&str> = text.split(':').collect();
    assert_eq!(fields.len(), 7, "{name} = {text:?}");
    let mut hset = redis::cmd("HSET");
    hset.arg(name);
    for (field, v) in ["mm", "mf", "dm", "df", "bu", "ra", "r"]
        .iter()
        .zip(&fields)
    {
        // The hash's script wrote the ban's end and Retry-After only once
        // there was one.
        if !v.is_empty() || *field == "r" {
            hset.arg(*field).arg(*v);
        }
    }
    hset.exec(redis).unwrap();
    redis::cmd("PEXPIRE")
        .arg(name)
        .arg(ttl)
        .exec(redis)
        .unwrap();
    true
}

/// Runs random steps of `script` against the core: `cases` limiters in
/// calls of 1 to 8 states sharing one clock, `rounds` calls each; returns
/// the number of steps and the mismatches (the first few described).
fn compare(
    redis: &mut redis::Connection,
    script: &str,
    seed: u64,
    cases: usize,
    rounds: usize,
) -> Comparison {
    redis::cmd("FLUSHALL").exec(redis).unwrap();
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(script)
        .query(redis)
        .unwrap();
    let mut rng = Rng(seed);
    let mut all: Vec<Case> = (0..cases).map(|i| Case::new(&mut rng, i)).collect();
    // The calls: runs of 1 to 8 cases (a third of them alone) sharing one
    // clock, as a replica's call decides its states at one Redis TIME.
    let mut calls = Vec::new();
    let mut first = 0;
    while first < cases {
        let size = if rng.below(3) == 0 {
            1
        } else {
            1 + rng.below(8) as usize
        };
        let end = (first + size).min(cases);
        let now = all[first..end].iter().map(|c| c.now_ms).max().unwrap();
        for case in &mut all[first..end] {
            case.now_ms = now;
        }
        calls.push(first..end);
        first = end;
    }
    let mut seen = Comparison::default();
    for _ in 0..rounds {
        // Some states go back to the previous encoding, a few are
        // overwritten with garbage (and the core starts afresh).
        for case in &mut all {
            case.from = Previous::Hash;
            match rng.below(64) {
                // Here again, in a previous form: the text, or the hash.
                0..=5 if to_previous_form(redis, &case.name, rng.below(2) == 0) => {
                    case.elsewhere = None;
                    seen.previous_form += 1;
                }
                // The state moves elsewhere (a cluster's previous slot):
                // read by carry.lua in either form, then gone from here;
                // the call carries its text, as the replica read it.
                7..=9 => {
                    // Before it went, the previous version wrote it in a
                    // previous form, which carry.lua reads.
                    to_previous_form(redis, &case.name, rng.below(2) == 0);
                    let text: String = redis::Script::new(CARRY)
                        .key(text_name(&case.name))
                        .key(&case.name)
                        .invoke(redis)
                        .unwrap();
                    redis::cmd("DEL")
                        .arg(current_name(&case.name))
                        .arg(text_name(&case.name))
                        .arg(&case.name)
                        .exec(redis)
                        .unwrap();
                    seen.carried += usize::from(!text.is_empty());
                    // Nothing here: the state is still where it went
                    // before, if it went (a call that wrote nothing).
                    if !text.is_empty() || case.elsewhere.is_none() {
                        case.elsewhere = Some(text);
                    }
                }
                // Its previous form is elsewhere, unread: the script
                // decides it only if it has its current form.
                10 => case.from = Previous::Unread,
                // Decided lately, so named alone: the script decides it
                // only if it has its current form (the replica's usual
                // call).
                13..=28 => case.from = Previous::Unnamed,
                // Another replica carried it over first (the race of two
                // replicas that both found it missing): the text this
                // call carries is stale, and the state there must win.
                11 | 12 => case.from = Previous::Read(STALE.into()),
                6 => {
                    redis::cmd("SET")
                        .arg(current_name(&case.name))
                        .arg("garbage")
                        .exec(redis)
                        .unwrap();
                    case.restart();
                    case.elsewhere = None;
                    seen.garbage += 1;
                }
                _ => {}
            }
        }
        let mut pipe = redis::pipe();
        let mut expected = Vec::with_capacity(calls.len());
        for call in &calls {
            // The call's instant: an edge of one of its states.
            let lead = call.start + rng.below(call.len() as u64) as usize;
            let now = all[lead].next_instant(&mut rng);
            let names: usize = all[call.clone()].iter().map(|c| c.from.names()).sum();
            pipe.cmd("EVALSHA").arg(&sha).arg(names);
            for case in &all[call.clone()] {
                pipe.arg(current_name(&case.name));
                if case.from != Previous::Unnamed {
                    pipe.arg(text_name(&case.name)).arg(&case.name);
                }
            }
            pipe.arg(now);
            let mut wants = Vec::with_capacity(call.len());
            for case in &mut all[call.clone()] {
                case.now_ms = now;
                // A quarter of the states bring a busy key's 2 to 5
                // requests; a few none (a part that carries only a ban).
                let count = match rng.below(16) {
                    0 => 0,
                    1..=4 => 2 + rng.below(4) as usize,
                    _ => 1,
                };
                // Whether the state is there decides what these calls
                // expect, and the pipeline runs a moment after this
                // check: a state due to expire within it (a bucket full
                // again, so the same as none to the core) is given a
                // minute more, so that it is still there when the call
                // runs, however slow the machine.
                if matches!(case.from, Previous::Unread | Previous::Unnamed)
                    || case.from == Previous::Read(STALE.into())
                {
                    for name in [current_name(&case.name), text_name(&case.name)] {
                        redis::cmd("PEXPIRE")
                            .arg(name)
                            .arg(60_000)
                            .arg("GT")
                            .exec(redis)
                            .unwrap();
                    }
                }
                // Neither its form nor the previous version's text (named
                // alone: not its form; its text is not looked at).
                let mut exists = redis::cmd("EXISTS");
                exists.arg(current_name(&case.name));
                if case.from != Previous::Unnamed {
                    exists.arg(text_name(&case.name));
                }
                let missing = exists.query::<u32>(redis).unwrap() == 0;
                if let (true, Previous::Hash, Some(text)) = (missing, &case.from, &case.elsewhere) {
                    case.from = Previous::Read(text.clone());
                }
                if case.from == Previous::Read(STALE.into()) {
                    if missing {
                        // Nothing here after all: the carry is what is
                        // there, as the replica would read it.
                        let hash = redis::cmd("EXISTS")
                            .arg(&case.name)
                            .query::<bool>(redis)
                            .unwrap();
                        case.from = match (hash, &case.elsewhere) {
                            (true, _) => Previous::Hash,
                            (false, Some(text)) => Previous::Read(text.clone()),
                            (false, None) => Previous::Read(String::new()),
                        };
                    } else {
                        seen.stale += 1;
                    }
                }
                let unread = matches!(case.from, Previous::Unread | Previous::Unnamed) && missing;
                seen.unnamed += usize::from(case.from == Previous::Unnamed && !unread);
                pipe.arg(state_arg(&case.params, count, 0, &case.from));
                if unread {
                    // Nothing decided, nothing charged: no core check.
                    wants.push(None);
                    continue;
                }
                wants.push(Some((0..count).map(|_| case.check()).collect::<Vec<_>>()));
            }
            expected.push(wants);
        }
        let replies: Vec<Vec<u8>> = pipe.query(redis).unwrap();
        for ((call, wants), reply) in calls.iter().zip(&expected).zip(&replies) {
            let cases = &all[call.clone()];
            let got = decode_call(reply, wants.iter().map(|w| w.as_ref().map_or(0, Vec::len)));
            seen.calls += 1;
            seen.multi += usize::from(call.len() > 1);
            for (k, (case, wants)) in cases.iter().zip(wants).enumerate() {
                let verdict = got.as_ref().and_then(|v| v.get(k));
                let Some(wants) = wants else {
                    if verdict == Some(&Verdict::Unread) {
                        seen.unread += 1;
                    } else {
                        seen.mismatches += 1;
                        seen.shown
                            .push(format!("{}: {verdict:?}, not unread", case.name));
                    }
                    continue;
                };
                seen.batches += usize::from(wants.len() > 1);
                let read =
                    |r: &Requests| r.decisions(reply, &case.params).collect::<Option<Vec<_>>>();
                let decisions = match verdict {
                    Some(Verdict::Decided(r)) => read(r),
                    Some(Verdict::Reset(r)) => {
                        seen.resets += 1;
                        read(r)
                    }
                    _ => None,
                };
                for (i, want) in wants.iter().enumerate() {
                    seen.steps += 1;
                    match want.outcome {
                        petstore_core::Outcome::Allowed => seen.allowed += 1,
                        petstore_core::Outcome::Limited { .. } => seen.limited += 1,
                        petstore_core::Outcome::Banned { .. } => seen.banned += 1,
                    }
                    seen.bans_started += usize::from(want.ban_started);
                    let got = decisions.as_ref().and_then(|all| all.get(i));
                    if got != Some(want) {
                        seen.mismatches += 1;
                        if seen.shown.len() < 5 {
                            seen.shown.push(format!(
                                "{} ({:?}) at {} ms, request {} of {}: core {want:?}\n   script {got:?} (reply {reply:?})",
                                case.name,
                                case.from,
                                case.now_ms,
                                i + 1,
                                wants.len()
                            ));
                        }
                    }
                }
            }
        }
    }
    seen
}

#[derive(Debug, Default)]
struct Comparison {
    steps: usize,
    mismatches: usize,
    shown: Vec<String>,
    /// Calls made, and those that decided more than one state.
    calls: usize,
    multi: usize,
    /// States that brought more than one request to their call.
    batches: usize,
    /// States rewritten in the previous encoding before a call; states
    /// overwritten with garbage, and those the script said it reset.
    previous_form: usize,
    /// States carried from elsewhere with their text, and states missing
    /// with their previous form unread (so not decided).
    carried: usize,
    unread: usize,
    /// States present that a call carried a stale previous form for.
    stale: usize,
    /// States present that a call named alone (decided lately).
    unnamed: usize,
    garbage: usize,
    resets: usize,
    allowed: usize,
    limited: usize,
    banned: usize,
    bans_started: usize,
}

#[test]
fn the_script_decides_exactly_as_the_core_over_100_000_random_steps() {
    let server = RedisServer::start();
    let mut redis = server.connection();
    let started = std::time::Instant::now();
    let seen = compare(&mut redis, SCRIPT, 0x5eed_1234, 500, 200);
    assert!(seen.steps >= 100_000);
    assert_eq!(
        seen.mismatches,
        0,
        "{} of {} steps differ:\n{}",
        seen.mismatches,
        seen.steps,
        seen.shown.join("\n")
    );
    // Every state the script wrote has a TTL (a key without one would
    // stay in Redis forever).
    let names: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut redis).unwrap();
    assert!(names.len() > 100, "{} states", names.len());
    for name in &names {
        let ttl: i64 = redis::cmd("PTTL").arg(name).query(&mut redis).unwrap();
        // -1: no TTL, the failure guarded against. 0: it expires within
        // this millisecond; -2: gone, its TTL ran out since KEYS (real
        // time passes, and a busy machine is slow).
        assert!(ttl >= 0 || ttl == -2, "{name} has no TTL ({ttl})");
    }
    // The steps reach every outcome, many times over.
    assert!(
        seen.allowed > 10_000
            && seen.limited > 10_000
            && seen.banned > 5_000
            && seen.bans_started > 1_000
            && seen.batches > 10_000
            && seen.multi > 10_000
            && seen.previous_form > 5_000
            && seen.carried > 2_000
            && seen.unread > 50
            && seen.unnamed > 5_000
            && seen.stale > 2_000,
        "{seen:?}"
    );
    // Every state overwritten with garbage was reset, and no other.
    assert!(seen.garbage > 500, "{seen:?}");
    assert_eq!(seen.resets, seen.garbage, "{seen:?}");
    eprintln!(
        "{} steps compared in {:?}: {} allowed, {} limited, {} banned ({} bans started)",
        seen.steps,
        started.elapsed(),
        seen.allowed,
        seen.limited,
        seen.banned,
        seen.bans_started
    );
}

/// The test of the test: a copy of the script with any one of its `<=`
/// (in code, not comments) turned into `<` must differ from the core.
#[test]
fn a_mutated_script_is_caught() {
    let server = RedisServer::start();
    let mut redis = server.connection();
    let mut mutants = 0;
    let mut offset = 0;
    while let Some(found) = SCRIPT[offset..].find("<=") {
        let at = offset + found;
        offset = at + 2;
        let line_start = SCRIPT[..at].rfind('\n').map_or(0, |i| i + 1);
        if SCRIPT[line_start..at].contains("--") {
            continue; // a comment
        }
        let mutant = format!("{}<{}", &SCRIPT[..at], &SCRIPT[at + 2..]);
        let line = SCRIPT[line_start..].lines().next().unwrap_or("").trim();
        let seen = compare(&mut redis, &mutant, 0xbad_5eed, 300, 100);
        assert!(
            seen.mismatches > 0,
            "the mutant `{line}` (<= turned into <) passed {} steps unnoticed",
            seen.steps
        );
        eprintln!(
            "mutant `{line}`: {} of {} steps differ",
            seen.mismatches, seen.steps
        );
        mutants += 1;
    }
    assert!(mutants >= 3, "only {mutants} `<=` found in the script");
}

/// One backend of the table: decides a request at an instant in ms.
trait Backend {
    fn decide(&mut self, now_ms: u64) -> Decision;
}

/// The in-process backend: the core's limiters, as each key entry (and
/// the anonymous table) holds them.
enum Local {
    Key(KeyLimiter),
    Anonymous(AnonymousLimiter),
}

impl Backend for Local {
    fn decide(&mut self, now_ms: u64) -> Decision {
        let now = Timestamp::from_unix_nanos(now_ms * 1_000_000);
        match self {
            Local::Key(limiter) => limiter.check(now),
            Local::Anonymous(limiter) => limiter.check(ADDRESS, now),
        }
    }
}

/// The Redis backend: the script, with the instant passed in.
struct InRedis<'a> {
    connection: &'a mut redis::Connection,
    name: String,
    params: Params,
}

impl Backend for InRedis<'_> {
    fn decide(&mut self, now_ms: u64) -> Decision {
        let reply: Vec<u8> = redis::Script::new(SCRIPT)
            .key(current_name(&self.name))
            .key(text_name(&self.name))
            .key(&self.name)
            .arg(now_ms)
            .arg(state_arg(&self.params, 1, 0, &Previous::Hash))
            .invoke(self.connection)
            .unwrap();
        match decode_call(&reply, [1]).unwrap().pop() {
            Some(Verdict::Decided(r)) if r.count() == 1 => {
                r.decisions(&reply, &self.params).next().flatten().unwrap()
            }
            other => panic!("not one decision: {other:?}"),
        }
    }
}

/// What a step expects: `A`llowed, `L`imited or `B`anned (`!` when this
/// request starts the ban), the binding window's remaining, and the
/// Retry-After in seconds of a refusal.
type Step = (u64, &'static str, u32, Option<u64>);

struct TableCase {
    name: &'static str,
    quota: Option<(u32, u32)>,
    ban: (u32, u64, u64),
    anonymous_per_minute: u32,
    /// (ms after the previous step, outcome, remaining, Retry-After).
    steps: &'static [Step],
}

const TABLE: &[TableCase] = &[
    TableCase {
        name: "a free key: its 3 a minute, then one back every 20 s",
        quota: Some((3, 1000)),
        ban: (60, 60, 600),
        anonymous_per_minute: 0,
        steps: &[
            (0, "A", 2, None),
            (0, "A", 1, None),
            (0, "A", 0, None),
            (0, "L", 0, Some(20)),
            (19_999, "L", 0, Some(1)),
            (1, "A", 0, None),
        ],
    },
    TableCase {
        name: "a small perDay binds: Retry-After runs to the day bucket's next token",
        quota: Some((100, 2)),
        ban: (60, 60, 600),
        anonymous_per_minute: 0,
        steps: &[
            (0, "A", 1, None),
            (0, "A", 0, None),
            (0, "L", 0, Some(43_200)),
        ],
    },
    TableCase {
        name: "coming back before Retry-After is a strike; the second bans",
        quota: Some((1, 100)),
        ban: (2, 60, 600),
        anonymous_per_minute: 0,
        steps: &[
            (0, "A", 0, None),
            (0, "L", 0, Some(60)),
            (1_000, "L", 0, Some(59)),
            (1_000, "B!", 0, Some(600)),
            (599_999, "B", 0, Some(1)),
            (1, "A", 0, None),
        ],
    },
    TableCase {
        name: "a client that waits as told is never banned, even at one strike",
        quota: Some((1, 1000)),
        ban: (1, 60, 600),
        anonymous_per_minute: 0,
        steps: &[
            (0, "A", 0, None),
            (0, "L", 0, Some(60)),
            (60_000, "A", 0, None),
            (0, "L", 0, Some(60)),
            (60_000, "A", 0, None),
        ],
    },
    TableCase {
        name: "an address without a key: 2 a minute, never banned",
        quota: None,
        ban: (1, 60, 600),
        anonymous_per_minute: 2,
        steps: &[
            (0, "A", 1, None),
            (0, "A", 0, None),
            (0, "L", 0, Some(30)),
            (0, "L", 0, Some(30)),
            (30_000, "A", 0, None),
        ],
    },
];

fn run_table(case: &TableCase, backend: &mut dyn Backend, label: &str) {
    let mut now = 1_700_000_000_000u64;
    for (i, (after, outcome, remaining, retry)) in case.steps.iter().enumerate() {
        now += after;
        let d = backend.decide(now);
        let got = match d.outcome {
            petstore_core::Outcome::Allowed => "A",
            petstore_core::Outcome::Limited { .. } => "L",
            petstore_core::Outcome::Banned { .. } if d.ban_started => "B!",
            petstore_core::Outcome::Banned { .. } => "B",
        };
        let at = format!("{label}, {:?}, step {i}", case.name);
        assert_eq!(got, *outcome, "{at}: {d:?}");
        assert_eq!(d.binding().remaining, *remaining, "{at}: {d:?}");
        assert_eq!(d.retry_after_secs(), *retry, "{at}: {d:?}");
    }
}

#[test]
fn one_table_of_limiter_cases_holds_in_process_and_in_redis() {
    let server = RedisServer::start();
    let mut connection = server.connection();
    for (n, case) in TABLE.iter().enumerate() {
        let (mut local, params, name) = match case.quota {
            Some((m, d)) => {
                let quota = Quota::new(m, d).unwrap();
                let ban = BanPolicy::new(case.ban.0, case.ban.1, case.ban.2).unwrap();
                (
                    Local::Key(KeyLimiter::new(quota, ban)),
                    Params::key(quota, ban),
                    format!("{{table{n}}}:m{m}/d{d}"),
                )
            }
            None => {
                let per_minute = case.anonymous_per_minute;
                (
                    Local::Anonymous(AnonymousLimiter::new(
                        NonZeroU32::new(per_minute).unwrap(),
                        16,
                    )),
                    Params::anonymous(per_minute),
                    format!("{{anon:table{n}}}:m{per_minute}"),
                )
            }
        };
        run_table(case, &mut local, "in process");
        let mut redis = InRedis {
            connection: &mut connection,
            name,
            params,
        };
        run_table(case, &mut redis, "in Redis");
    }
}
