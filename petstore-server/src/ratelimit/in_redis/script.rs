//! The script (`limit.lua`) and what goes in and out of it: each state's
//! arguments ([`Params`], [`state_arg`]), the names of the states it
//! keeps, and its reply as the core's [`Decision`]s ([`decode_call`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use petstore_core::{
    limit::{client_key, WindowState},
    BanPolicy, Decision, Outcome, Quota, Timestamp,
};

/// The script, `limit.lua`.
pub const SCRIPT: &str = include_str!("limit.lua");

/// The script that reads a cluster state's previous form, `carry.lua`.
pub const CARRY: &str = include_str!("carry.lua");

/// The longest ban window or ban the script is given, 10^12 ms (about 31
/// years): with a Unix time in ms (about 1.8 * 10^12) the sum stays far
/// below 2^53. A keys file may say more; it changes nothing in practice.
pub const MAX_BAN_MS: u64 = 1_000_000_000_000;

/// The most requests one call decides, over all its states. Bounds the
/// time one script holds Redis's thread (each request adds to it: 128
/// keep a call short, so another replica's call waits little behind it)
/// and the reply's size; more waiting
/// requests go in the next call.
pub const MAX_CALL: usize = 128;

/// The numbers of the reply per request.
const PER_REQUEST: usize = 11;

/// The bytes of the reply per request: two bytes, nine 64-bit integers.
const REQUEST_BYTES: usize = 2 + 9 * 8;

const MINUTE: Duration = Duration::from_secs(60);
const DAY: Duration = Duration::from_secs(86_400);

/// What one script call needs besides its state's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// The minute window's limit.
    pub per_minute: u32,
    /// The day window's limit; `None` for an anonymous client.
    pub per_day: Option<u32>,
    /// The ban policy; `None` for an anonymous client (never banned).
    pub ban: Option<BanPolicy>,
}

impl Params {
    /// A key's.
    pub fn key(quota: Quota, ban: BanPolicy) -> Params {
        Params {
            per_minute: quota.per_minute().get(),
            per_day: Some(quota.per_day().get()),
            ban: Some(ban),
        }
    }

    /// A client address's, `per_minute` requests a minute.
    pub fn anonymous(per_minute: u32) -> Params {
        Params {
            per_minute,
            per_day: None,
            ban: None,
        }
    }

    /// The script's `ARGV[2..]` (after the time). A ban's window and
    /// length are capped at [`MAX_BAN_MS`], so that the script's sums of
    /// times stay exact.
    pub fn args(&self) -> [u64; 5] {
        let ms =
            |d: Duration| u64::try_from(d.as_millis()).map_or(MAX_BAN_MS, |ms| ms.min(MAX_BAN_MS));
        let (strikes, window, ban) = match self.ban {
            Some(ban) => (
                u64::from(ban.strikes().get()),
                ms(ban.window()),
                ms(ban.duration()),
            ),
            None => (0, 0, 0),
        };
        [
            u64::from(self.per_minute),
            u64::from(self.per_day.unwrap_or(0)),
            strikes,
            window,
            ban,
        ]
    }
}

/// The Redis name of a client address's state: IPv4 (an IPv4-mapped IPv6
/// address counts as its IPv4), or the IPv6 /64. Written from the core's
/// [`client_key`], so that Redis groups addresses exactly as the
/// in-process anonymous limiter does.
pub fn anonymous_name(ip: IpAddr, per_minute: u32) -> String {
    let key = client_key(ip);
    let client = match u32::try_from(key) {
        Ok(v4) => Ipv4Addr::from(v4).to_string(),
        Err(_) => {
            // The /64 in the key's upper half.
            let s = Ipv6Addr::from(key).segments();
            format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
        }
    };
    format!("{{anon:{client}}}:m{per_minute}")
}

/// The name of the state `name` in the script's form (a binary string):
/// `name` with `:v3`. The script is also given [`text_name`] and `name`,
/// and takes over the previous versions' forms there when the state has
/// no `:v3` form yet. The hash tag is the same, and so is the Redis
/// Cluster slot.
pub fn current_name(name: &str) -> String {
    format!("{name}{CURRENT}")
}

/// The name of the state `name` in the previous version's form (text):
/// `name` with `:v2`.
pub fn text_name(name: &str) -> String {
    format!("{name}{TEXT}")
}

/// The suffix of [`current_name`].
pub const CURRENT: &str = ":v3";
/// The suffix of [`text_name`].
pub const TEXT: &str = ":v2";

/// A state's name and a suffix ([`CURRENT`], [`TEXT`]) written as one
/// argument straight into a command's buffer: the same bytes as
/// [`current_name`] or [`text_name`], without a `String` of their own
/// (a call names three per state).
#[derive(Clone, Copy, Debug)]
pub struct Suffixed<'a>(pub &'a str, pub &'static str);

impl redis::ToRedisArgs for Suffixed<'_> {
    fn write_redis_args<W>(&self, out: &mut W)
    where
        W: ?Sized + redis::RedisWrite,
    {
        use std::io::Write as _;
        let mut arg = out.writer_for_next_arg();
        // Writes into a `Vec`: they cannot fail.
        let _ = arg.write_all(self.0.as_bytes());
        let _ = arg.write_all(self.1.as_bytes());
    }
}

/// Where a state with neither a `:v3` nor a `:v2` form takes its previous
/// form (the script's FROM argument).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Previous {
    /// The hash of the version before the previous one, at the name
    /// without a suffix, in the same slot (one Redis).
    Hash,
    /// Elsewhere, not read yet (a cluster: under the state's own hash
    /// tag, another slot): the script decides nothing for the state and
    /// says so ([`StateReply::Unread`]).
    Unread,
    /// As the replica read it (`carry.lua`): the state's text, or empty
    /// when there was none.
    Read(String),
    /// Not named: the replica's calls decided the state lately, so it has
    /// its `:v3` form, and the call gives only that name (two fewer names
    /// are two fewer objects for Redis to make). Should it be missing
    /// after all (its TTL ran out), the script decides nothing for it
    /// ([`StateReply::Unread`]) and the replica calls again naming its
    /// previous forms.
    Unnamed,
}

impl Previous {
    /// FROM, as the script reads it after a state's packed numbers.
    fn from(&self) -> (&'static [u8], &[u8]) {
        match self {
            Previous::Hash => (b"", b""),
            Previous::Unread => (b"?", b""),
            Previous::Read(text) => (b"=", text.as_bytes()),
            Previous::Unnamed => (b"!", b""),
        }
    }

    /// How many names the call gives the state: its current one alone
    /// when [`Previous::Unnamed`], else that and its previous forms'.
    pub fn names(&self) -> usize {
        match self {
            Previous::Unnamed => 1,
            _ => 3,
        }
    }
}

/// The script's argument for one state of a call: seven little-endian
/// 64-bit integers packed (the script unpacks them in one call, where
/// parsing seven decimals cost it more than the rest of its argument
/// handling): its [`Params::args`], the number of its requests in the
/// call, and the end (ms since the Unix epoch, 0 for none) of a ban this
/// replica started alone while Redis was away, which the state takes on
/// if it ends later than its own; then FROM, where its previous form is
/// ([`Previous`]). One argument, not two: each is an object Redis makes
/// and a string the script is handed.
pub fn state_arg<'a>(
    params: &Params,
    count: usize,
    ban_until_ms: u64,
    previous: &'a Previous,
) -> StateArg<'a> {
    let [m, d, strikes, window, ban] = params.args();
    let mut packed = [0u8; 56];
    let all = [m, d, strikes, window, ban, count as u64, ban_until_ms];
    for (chunk, n) in packed.chunks_exact_mut(8).zip(all) {
        chunk.copy_from_slice(&n.to_le_bytes());
    }
    StateArg { packed, previous }
}

/// [`state_arg`]: written straight into the command, as one argument.
#[derive(Clone, Copy, Debug)]
pub struct StateArg<'a> {
    packed: [u8; 56],
    previous: &'a Previous,
}

impl redis::ToRedisArgs for StateArg<'_> {
    fn write_redis_args<W>(&self, out: &mut W)
    where
        W: ?Sized + redis::RedisWrite,
    {
        use std::io::Write as _;
        let (mark, text) = self.previous.from();
        let mut arg = out.writer_for_next_arg();
        // Writes into a `Vec`: they cannot fail.
        let _ = arg.write_all(&self.packed);
        let _ = arg.write_all(mark);
        let _ = arg.write_all(text);
    }
}

/// What the script said about one state of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateReply {
    /// Its requests' decisions, in order ([`Requests::decisions`]).
    Decided(Requests),
    /// Decided as a fresh state: what was at its name was not a state
    /// (someone wrote over it).
    Reset(Requests),
    /// Redis could not store it (out of memory, say): nothing was charged,
    /// and its requests are for the replica to decide alone.
    NotStored,
    /// Nothing decided: the state is missing and its previous form is
    /// elsewhere ([`Previous::Unread`]); the replica reads it and calls
    /// again.
    Unread,
}

/// Where one state's requests are in a reply that [`decode_call`]
/// checked; each is made a [`Decision`] only when read
/// ([`Requests::decisions`]).
///
/// Why not a list of decisions per state: a call carries tens of
/// requests, and collecting each state's decisions into a `Vec` of its
/// own (128 bytes a decision, an allocation a state, then moved again
/// into each waiter's channel) cost the replica about as much as
/// decoding them (`PROFILE_REDIS=1 scripts/bench/profile-keys`). Read this
/// way, a decision goes from the reply straight to its waiter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Requests {
    /// The offset of the first request in the reply.
    at: usize,
    /// How many.
    count: usize,
    /// The call's instant (ms since the Unix epoch).
    now_ms: u64,
}

impl Requests {
    /// How many requests of the state the reply decided.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The decisions, in order, read from `reply` (the one [`decode_call`]
    /// checked) for a state of `params`. Every one is `Some` for that
    /// reply: its numbers were checked.
    pub fn decisions<'a>(
        &self,
        reply: &'a [u8],
        params: &'a Params,
    ) -> impl Iterator<Item = Option<Decision>> + 'a {
        let now_ms = self.now_ms;
        let bytes = self
            .count
            .checked_mul(REQUEST_BYTES)
            .and_then(|len| reply.get(self.at..self.at.checked_add(len)?))
            .unwrap_or_default();
        bytes
            .chunks_exact(REQUEST_BYTES)
            .map(move |one| decode(&numbers(one)?, now_ms, params))
    }
}

/// The script's reply to a call whose states had these request counts,
/// in order: one [`StateReply`] per state (a state's parameters are needed
/// only to read its decisions: [`Requests::decisions`]). `None` for a reply
/// that is not the script's (its length, a negative number, an unknown
/// outcome or flag).
pub fn decode_call(
    reply: &[u8],
    counts: impl IntoIterator<Item = usize>,
) -> Option<Vec<StateReply>> {
    let (now, mut rest) = reply.split_first_chunk::<8>()?;
    let now_ms = u64::try_from(i64::from_le_bytes(*now)).ok()?;
    let counts = counts.into_iter();
    let mut replies = Vec::with_capacity(counts.size_hint().0);
    for count in counts {
        let (&flag, after) = rest.split_first()?;
        rest = after;
        let requests = match flag {
            0 | 1 => {
                let len = count.checked_mul(REQUEST_BYTES)?;
                if rest.len() < len {
                    return None;
                }
                let (mine, after) = rest.split_at(len);
                if !mine.chunks_exact(REQUEST_BYTES).all(is_request) {
                    return None;
                }
                let at = reply.len() - rest.len();
                rest = after;
                Requests { at, count, now_ms }
            }
            2 => {
                replies.push(StateReply::NotStored);
                continue;
            }
            3 => {
                replies.push(StateReply::Unread);
                continue;
            }
            _ => return None,
        };
        replies.push(if flag == 0 {
            StateReply::Decided(requests)
        } else {
            StateReply::Reset(requests)
        });
    }
    rest.is_empty().then_some(replies)
}

/// Whether one request's [`REQUEST_BYTES`] are the script's: a known
/// outcome and no negative number, all that [`decode`] refuses.
fn is_request(bytes: &[u8]) -> bool {
    bytes.first().is_some_and(|outcome| *outcome <= 2)
        && bytes
            .get(2..)
            .is_some_and(|ints| ints.chunks_exact(8).all(|n| n[7] < 0x80))
}

/// One request's [`REQUEST_BYTES`] as its 11 numbers.
fn numbers(bytes: &[u8]) -> Option<[i64; PER_REQUEST]> {
    let (head, ints) = bytes.split_first_chunk::<2>()?;
    let mut out = [
        i64::from(head[0]),
        i64::from(head[1]),
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
    ];
    for (slot, chunk) in out[2..].iter_mut().zip(ints.chunks_exact(8)) {
        *slot = i64::from_le_bytes(chunk.try_into().ok()?);
    }
    Some(out)
}

/// One request's 11 numbers as the core's [`Decision`] at `now_ms`.
fn decode(reply: &[i64], now_ms: u64, params: &Params) -> Option<Decision> {
    let r: [i64; PER_REQUEST] = reply.try_into().ok()?;
    if r.iter().any(|n| *n < 0) {
        return None;
    }
    let n = |i: usize| r[i] as u128;
    let ns =
        |ms: u128| Timestamp::from_unix_nanos(u64::try_from(ms * 1_000_000).unwrap_or(u64::MAX));
    let at = ns(u128::from(now_ms));
    // A TAT of ms + frac/cap is full again at its nanosecond, rounded up
    // (the core's `Bucket::full_at`); a wait of w/cap ms likewise.
    let full = |ms: u128, frac: u128, cap: u32| {
        let extra = (frac * 1_000_000).div_ceil(u128::from(cap));
        Timestamp::from_unix_nanos(u64::try_from(ms * 1_000_000 + extra).unwrap_or(u64::MAX))
    };
    let wait = |w: u128, cap: u32| {
        Duration::from_nanos(
            u64::try_from((w * 1_000_000).div_ceil(u128::from(cap))).unwrap_or(u64::MAX),
        )
    };
    let day_cap = params.per_day.unwrap_or(1);
    let outcome = match r[0] {
        0 => Outcome::Allowed,
        1 => Outcome::Limited {
            retry_after: wait(n(5), params.per_minute).max(match params.per_day {
                Some(cap) => wait(n(9), cap),
                None => Duration::ZERO,
            }),
        },
        2 => Outcome::Banned {
            retry_after: ns(n(10)).saturating_duration_since(at),
        },
        _ => return None,
    };
    // A request that took nothing reports the buckets as they stand, at
    // the earliest now; while banned, full at the earliest when it ends.
    let floor = match outcome {
        Outcome::Allowed => Timestamp::from_unix_nanos(0),
        Outcome::Limited { .. } => at,
        Outcome::Banned { retry_after } => at + retry_after,
    };
    let window = |name, cap: u32, period, base: usize| WindowState {
        name,
        limit: cap,
        remaining: u32::try_from(r[base]).unwrap_or(u32::MAX),
        period,
        reset_at: full(n(base + 1), n(base + 2), cap).max(floor),
    };
    Some(Decision {
        outcome,
        at,
        minute: window("minute", params.per_minute, MINUTE, 2),
        day: params.per_day.map(|_| window("day", day_cap, DAY, 6)),
        ban_started: r[1] == 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::StateId;

    #[test]
    fn a_suffixed_argument_is_the_names_bytes() {
        let name = "{ab12}:m60/d1000";
        let mut call = redis::cmd("EVALSHA");
        call.arg(Suffixed(name, CURRENT))
            .arg(Suffixed(name, TEXT))
            .arg(Suffixed("", CURRENT));
        let args: Vec<Vec<u8>> = call
            .args_iter()
            .filter_map(|arg| match arg {
                redis::Arg::Simple(bytes) => Some(bytes.to_vec()),
                _ => None,
            })
            .collect();
        assert_eq!(
            args,
            [
                b"EVALSHA".to_vec(),
                current_name(name).into_bytes(),
                text_name(name).into_bytes(),
                b":v3".to_vec(),
            ]
        );
    }

    #[test]
    fn names_never_hold_the_key_and_group_ipv6_by_64() {
        let id = StateId {
            digest: [0xab; 32],
            quota: Quota::new(60, 1_000).unwrap(),
        };
        assert_eq!(
            id.external_name(),
            format!("{{{}}}:m60/d1000", "ab".repeat(32))
        );
        let v6: IpAddr = "2001:db8:1:2:3:4:5:6".parse().unwrap();
        assert_eq!(anonymous_name(v6, 60), "{anon:2001:db8:1:2::/64}:m60");
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().unwrap();
        assert_eq!(anonymous_name(mapped, 7), "{anon:192.0.2.1}:m7");
    }

    #[test]
    fn a_reply_that_is_not_the_scripts_is_refused() {
        let p = Params::anonymous(60);
        let one = [0, 0, 59, 1, 0, 0, 0, 0, 0, 0, 0];
        let two = [0, 0, 58, 2, 0, 0, 0, 0, 0, 0, 0];
        // As the script packs them: a flag is one byte, a request two
        // bytes and nine integers.
        let flag = |f: u8| vec![f];
        let request = |r: &[i64; 11]| {
            let mut bytes = vec![r[0] as u8, r[1] as u8];
            for n in &r[2..] {
                bytes.extend_from_slice(&n.to_le_bytes());
            }
            bytes
        };
        let reply = |parts: &[Vec<u8>]| -> Vec<u8> {
            let mut r = 1_700_000_000_000i64.to_le_bytes().to_vec();
            for part in parts {
                r.extend_from_slice(part);
            }
            r
        };
        // Two states: one request each, then one state not stored, one
        // whose previous form is unread.
        let call = reply(&[
            flag(0),
            request(&one),
            flag(1),
            request(&two),
            flag(2),
            flag(3),
        ]);
        let replies = decode_call(&call, [1, 1, 3, 2]).unwrap();
        let remaining = |requests: &Requests| {
            let decisions: Vec<_> = requests.decisions(&call, &p).collect();
            assert_eq!(decisions.len(), requests.count());
            decisions[0].as_ref().unwrap().minute.remaining
        };
        assert!(matches!(&replies[0], StateReply::Decided(r) if remaining(r) == 59));
        assert!(matches!(&replies[1], StateReply::Reset(r) if remaining(r) == 58));
        assert_eq!(replies[2], StateReply::NotStored);
        assert_eq!(replies[3], StateReply::Unread);
        // The reply must hold exactly the call's requests.
        assert!(decode_call(&call, [1, 1, 3]).is_none());
        assert!(decode_call(&call, [2, 1, 3, 2]).is_none());
        assert!(decode_call(&reply(&[flag(0), request(&one)]), [2]).is_none());
        let mut short = reply(&[flag(0), request(&one)]);
        short.pop();
        assert!(decode_call(&short, [1]).is_none());
        // Not the script's numbers: an unknown flag or outcome, a negative.
        assert!(decode_call(&reply(&[flag(4), request(&one)]), [1]).is_none());
        assert!(decode_call(&reply(&[flag(3), request(&one)]), [1]).is_none());
        let mut bad = one;
        bad[0] = 3;
        assert!(decode_call(&reply(&[flag(0), request(&bad)]), [1]).is_none());
        bad = one;
        bad[4] = -1;
        assert!(decode_call(&reply(&[flag(0), request(&bad)]), [1]).is_none());
        bad = one;
        bad[9] = i64::MIN;
        assert!(decode_call(&reply(&[flag(0), request(&bad)]), [1]).is_none());
        assert!(decode_call(&[], [1]).is_none());
        assert!(decode_call(&(-1i64).to_le_bytes(), [0]).is_none());
    }
}
