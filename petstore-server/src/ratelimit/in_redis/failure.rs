//! Why a call got no decision ([`Failure`]), and what is logged: a shard
//! that answers again, a state in trouble (once per state).

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::breaker::Shard;
use super::limits::RedisLimits;
use super::script::current_name;
use crate::{log_error, log_info};

/// How many troubled state names are remembered for logging them once.
const MAX_TROUBLED: usize = 1_000;

/// Why a call got no decision.
#[derive(Debug)]
pub(super) enum Failure {
    /// Redis did not answer, or not in time, or its cluster could not
    /// route the call: the shard's breaker opens.
    Unreachable(String),
    /// Redis answered with an error, or with a reply that is not the
    /// script's: only this call's requests fall back.
    Call(String),
}

impl Failure {
    /// No answer within `timeout`.
    pub(super) fn timed_out(timeout: Duration) -> Failure {
        Failure::Unreachable(format!("no answer within {} ms", timeout.as_millis()))
    }

    pub(super) fn of(e: &redis::RedisError) -> Failure {
        use redis::{ErrorKind, ServerErrorKind};
        match e.kind() {
            ErrorKind::Extension | ErrorKind::Server(ServerErrorKind::ResponseError) => {
                Failure::Call(e.to_string())
            }
            _ => Failure::Unreachable(e.to_string()),
        }
    }
}

impl RedisLimits {
    /// `shard` answered: its breaker closes, and the last one to close
    /// says so in the log.
    pub(super) fn answered(&self, shard: Shard) {
        if self.inner.breakers.succeeded(shard) {
            log_info!("Redis answers again: one rate limit across replicas");
        }
    }

    /// Counts a problem of one state and logs it, once per state name (at
    /// most [`MAX_TROUBLED`] names are remembered; past them a problem is
    /// counted, not logged).
    pub(super) fn state_trouble(&self, name: &str, why: &str) {
        let name = current_name(&self.inner.link.place(name));
        self.inner
            .stats
            .state_errors
            .fetch_add(1, Ordering::Relaxed);
        let mut logged = self.inner.troubled.lock();
        if logged.len() < MAX_TROUBLED && logged.insert(Box::from(&*name)) {
            log_error!(
                "Redis: the limiter state {name}: {why}; its requests are decided by each replica alone meanwhile, every other state stays shared"
            );
        }
    }
}
