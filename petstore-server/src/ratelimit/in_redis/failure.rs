//! Why a call got no decision ([`Failure`]), and what is logged: a shard
//! that fails (naming the real cause), a shard that answers again, a
//! state in trouble (once per state).
//!
//! A cluster master that dies is still the master of its slots for the
//! other nodes until a replica is promoted: they answer `MOVED <slot>
//! <dead master>`, the cluster client follows it, cannot connect, and
//! when its retries run out returns the last answer it had, the
//! `MOVED`. Logged as such, the line would blame a redirect for a dead
//! node. So the first failure of a shard that ended on a redirect
//! connects once to the node it named, on a task of its own (the
//! requests fall back meanwhile, undelayed), and the line names that
//! node and why it cannot be reached.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::breaker::{Shard, BREAKER};
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
    Unreachable(Unreachable),
    /// Redis answered with an error, or with a reply that is not the
    /// script's: only this call's requests fall back.
    Call(String),
}

/// Why a shard gave no answer.
#[derive(Debug)]
pub(super) struct Unreachable {
    /// The error, as the client gave it.
    error: String,
    /// The node a `MOVED` or `ASK` sent the call to, when the client gave
    /// up on that redirect: whether it can be reached is the real cause.
    sent_to: Option<String>,
}

impl Failure {
    /// No answer within `timeout`.
    pub(super) fn timed_out(timeout: Duration) -> Failure {
        Failure::Unreachable(Unreachable {
            error: format!("no answer within {} ms", timeout.as_millis()),
            sent_to: None,
        })
    }

    pub(super) fn of(e: &redis::RedisError) -> Failure {
        use redis::{ErrorKind, ServerErrorKind};
        match e.kind() {
            ErrorKind::Extension | ErrorKind::Server(ServerErrorKind::ResponseError) => {
                Failure::Call(e.to_string())
            }
            _ => Failure::Unreachable(Unreachable {
                error: e.to_string(),
                sent_to: e.redirect_node().map(|(node, _slot)| node.to_owned()),
            }),
        }
    }
}

impl Unreachable {
    /// The line's cause: the redirect's node and why it cannot be
    /// reached, when the call ended on a redirect to a node that cannot
    /// be; otherwise the error as the client gave it.
    async fn cause(&self) -> String {
        let Some(node) = &self.sent_to else {
            return self.error.clone();
        };
        match tokio::time::timeout(BREAKER, tokio::net::TcpStream::connect(node.as_str())).await {
            Ok(Ok(_)) => format!(
                "{} (the node it names, {node}, accepts connections: the cluster's slots are moving)",
                self.error
            ),
            Ok(Err(e)) => format!(
                "the cluster node {node} cannot be reached ({e}); the cluster still routes the shard's \
                 slot to it (the client's last answer: {})",
                self.error
            ),
            Err(_) => format!(
                "the cluster node {node} cannot be reached (no connection within {} ms); the cluster \
                 still routes the shard's slot to it (the client's last answer: {})",
                BREAKER.as_millis(),
                self.error
            ),
        }
    }
}

impl RedisLimits {
    /// `shard` gave no answer: its breaker opens, and the first failure
    /// is logged with its cause, `doing` saying what the call was (empty
    /// for a decision).
    pub(super) fn unreachable(&self, shard: Shard, failure: Unreachable, doing: &'static str) {
        if !self.inner.breakers.failed(shard) {
            return;
        }
        tokio::spawn(async move {
            let cause = failure.cause().await;
            log_error!(
                "Redis: {cause}{doing}; each replica limits alone at the full plan (with a cluster, \
                 the keys of the shard that failed) until Redis answers (probing every {} s)",
                BREAKER.as_secs()
            );
        });
    }

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
