//! One script call: EVALSHA and the parts' names and arguments written
//! straight into one command, sent with the call's timeout, its reply
//! checked and counted.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::breaker::Shard;
use super::failure::Failure;
use super::limits::RedisLimits;
use super::part::Part;
use super::script::{decode_call, state_arg, StateReply, Suffixed, CURRENT, TEXT};

impl RedisLimits {
    /// One script call deciding `parts`; per part its [`StateReply`], or
    /// `None` (the failure logged, and the breaker opened when Redis did
    /// not answer) when Redis gave no reply of the script's within
    /// its timeout ([`TIMEOUT`](super::TIMEOUT) by default).
    pub(super) async fn call(
        &self,
        shard: Shard,
        parts: &[Part],
    ) -> Option<(Vec<u8>, Vec<StateReply>)> {
        let started = Instant::now();
        // EVALSHA written straight into one command: redis-rs's
        // `ScriptInvocation` keeps each argument in a `Vec` of its own and
        // copies them all into a command again, and each name was a
        // `format!` (`Suffixed`): several allocations a state.
        // Sized for the whole call up front: grown an argument at a time,
        // its buffers were copied again and again, most of them past
        // malloc's per-thread cache (a call carries tens of states).
        let names: usize = parts.iter().map(|p| p.previous.names()).sum();
        let bytes: usize = parts
            .iter()
            .map(|p| (p.name.len() + GROUP_TAG) * p.previous.names() + STATE_ARGS)
            .sum();
        let mut call = redis::Cmd::with_capacity(4 + names + parts.len(), 64 + bytes);
        call.arg("EVALSHA")
            .arg(self.inner.script.get_hash())
            .arg(names);
        for part in parts {
            let place = self.inner.link.place(&part.name);
            call.arg(Suffixed(&place, CURRENT));
            // As many names as counted above, by the same rule.
            if part.previous.names() > 1 {
                call.arg(Suffixed(&place, TEXT)).arg(&*place);
            }
        }
        call.arg("");
        for part in parts {
            call.arg(state_arg(
                &part.params,
                part.waiters.len(),
                part.ban_until_ms,
                &part.previous,
            ));
        }
        let reply = match tokio::time::timeout(
            self.inner.timeout,
            self.inner.link.eval::<Vec<u8>>(&self.inner.script, &call),
        )
        .await
        {
            Err(_) => Err(Failure::timed_out(self.inner.timeout)),
            Ok(Err(e)) => Err(Failure::of(&e)),
            Ok(Ok(reply)) => match decode_call(&reply, parts.iter().map(|p| p.waiters.len())) {
                Some(replies) => Ok((reply, replies)),
                None => Err(Failure::Call(format!("unexpected script reply {reply:?}"))),
            },
        };
        match reply {
            Ok((reply, replies)) => {
                self.inner.stats.latency.observe(started.elapsed());
                let decided: usize = parts
                    .iter()
                    .zip(&replies)
                    .filter(|(_, v)| !matches!(v, StateReply::NotStored | StateReply::Unread))
                    .map(|(p, _)| p.waiters.len())
                    .sum();
                self.inner
                    .stats
                    .decisions
                    .fetch_add(decided as u64, Ordering::Relaxed);
                self.answered(shard);
                Some((reply, replies))
            }
            // Redis answered, but not with the script's reply: only these
            // requests fall back, the breaker stays as it is.
            Err(Failure::Call(why)) => {
                for part in parts {
                    self.state_trouble(&part.name, &why);
                }
                None
            }
            Err(Failure::Unreachable(e)) => {
                self.unreachable(shard, e, "");
                None
            }
        }
    }
}

/// Room for a name's group tag in a cluster and its suffix, in bytes,
/// when a call's buffers are sized ([`RedisLimits::call`]).
const GROUP_TAG: usize = 16;

/// Room for a state's argument (packed numbers and FROM), in bytes, when
/// a call's buffers are sized; a FROM with a previous form's text is
/// longer, and grows them.
const STATE_ARGS: usize = 64;
