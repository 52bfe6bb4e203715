//! [`Health`]: whether PostgreSQL answers, and whether creates can
//! succeed, each change logged once, naming the server (`connect.rs`):
//! after a failover the server that failed and the one that answers are
//! two hosts of one connection string.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use super::connect::Servers;
use crate::{log_error, log_info};

/// Up or down, with the cause logged once when it goes down and once when
/// it comes back.
#[derive(Debug, Default)]
pub(super) struct Health {
    down: AtomicBool,
    /// Why, where and since when it is down.
    cause: Mutex<Option<(String, Instant)>>,
    /// The hosts, and the server the pool's newest connection reached.
    servers: Arc<Servers>,
    /// Why creates cannot succeed although PostgreSQL answers; cleared
    /// only by a create that commits (a successful read shows nothing).
    pub(super) stuck: Mutex<Option<String>>,
    /// A committed row the copy cannot apply; cleared by a catch-up that
    /// applies every row. Meanwhile creates are refused (503).
    pub(super) bad_row: Mutex<Option<String>>,
}

impl Health {
    pub(super) fn new(servers: Arc<Servers>) -> Health {
        Health {
            servers,
            ..Health::default()
        }
    }

    pub(super) fn is_down(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }

    pub(super) fn down(&self, cause: &str) {
        let mut current = self.cause.lock();
        if current.is_none() {
            let cause = format!("at {}: {cause}", self.servers.current());
            log_error!(
                "PostgreSQL failed {cause}. Creates answer 503, reads go on from this replica's copy, \
                 /healthz answers 503; retrying with backoff (every host of {})",
                self.servers.named()
            );
            *current = Some((cause, Instant::now()));
            self.down.store(true, Ordering::Relaxed);
        }
    }

    /// Creates cannot succeed for `cause` (logged once, until a commit
    /// succeeds again).
    pub(super) fn stuck(&self, cause: &str) {
        let mut stuck = self.stuck.lock();
        if stuck.as_deref() != Some(cause) {
            log_error!(
                "PostgreSQL at {} refuses every create: {cause}. Creates answer 503, reads go on, \
                 /healthz answers 503, until a create commits again",
                self.servers.current()
            );
            *stuck = Some(cause.to_owned());
        }
    }

    /// The copy cannot apply a committed row, for `cause` (logged once,
    /// until every row applies again).
    pub(super) fn bad_row(&self, cause: &str) {
        let mut bad = self.bad_row.lock();
        if bad.as_deref() != Some(cause) {
            log_error!(
                "the read copy cannot apply a committed row: {cause}. Creates answer 503 \
                 (a pet stored now could not be read here), reads of what the copy holds go on, \
                 /healthz answers 503, until the row is fixed in PostgreSQL"
            );
            *bad = Some(cause.to_owned());
        }
    }

    /// Every committed row applies again.
    pub(super) fn rows_apply(&self) {
        if let Some(cause) = self.bad_row.lock().take() {
            log_info!(
                "the read copy applies every row again (it could not: {cause}); creates work again"
            );
        }
    }

    /// A create committed: whatever made creates fail is over.
    pub(super) fn unstuck(&self) {
        if let Some(cause) = self.stuck.lock().take() {
            log_info!("PostgreSQL stores creates again (they had failed: {cause})");
        }
    }

    /// An operation that `started` then succeeded. Only one that started
    /// after the failure shows PostgreSQL answering again: while it shuts
    /// down, a query already under way may still finish after another
    /// failed, and would otherwise end an outage that goes on.
    pub(super) fn up(&self, started: Instant) {
        if !self.is_down() {
            return;
        }
        let mut current = self.cause.lock();
        match current.as_ref() {
            Some((_, since)) if started < *since => return,
            Some((cause, _)) => log_info!(
                "PostgreSQL answers again at {} (it had failed {cause}); creates work again",
                self.servers.current()
            ),
            None => {}
        }
        *current = None;
        self.down.store(false, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_operation_started_after_the_failure_ends_an_outage() {
        let health = Health::default();
        let before = Instant::now();
        health.up(before);
        assert!(!health.is_down());
        health.down("reset by peer");
        // A query under way when PostgreSQL went down, finishing now.
        health.up(before);
        assert!(health.is_down());
        // A second failure of the same outage keeps its first cause.
        health.down("connection refused");
        assert_eq!(
            health.cause.lock().as_ref().map(|(c, _)| c.as_str()),
            Some("at localhost:5432/postgres: reset by peer")
        );
        health.up(Instant::now());
        assert!(!health.is_down());
        assert!(health.cause.lock().is_none());
    }
}
