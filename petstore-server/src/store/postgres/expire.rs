//! Holds that lapsed: every replica asks PostgreSQL, a few times a
//! second while its copy holds a placed order, to expire what is due by
//! PostgreSQL's clock (`petstore_expire`, `schema.rs`). Whichever replica
//! asks first expires an order; the others find it no longer placed, so
//! each lapses exactly once. The copies learn of it as of any change,
//! through the tail.
//!
//! Why every replica and not one elected: an election is a home-made
//! cluster, and a replica that stops would stop the lapses with it. Why
//! PostgreSQL's clock: replicas' clocks differ, and a hold must end at
//! the same moment whichever replica is asked.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::timeout;

use super::describe::{describe, pool_error};
use super::stats::Op;
use super::{Postgres, QUERY_TIMEOUT};

/// How often a replica asks while its copy holds a placed order: a hold
/// lapses within this (plus the tail's catch-up) of its `expiresAt`.
const EVERY: Duration = Duration::from_millis(250);
/// Most holds one transaction expires: a lapse of many holds at once is
/// written in transactions this big, so steps interleave with it.
const BATCH: i32 = 1_024;
const EXPIRE: &str = "SELECT petstore_expire($1)";

impl Postgres {
    /// The expiry task: asks PostgreSQL every [`EVERY`] while the copy
    /// holds a placed order (its deadlines are a hint only: PostgreSQL's
    /// clock decides).
    pub(super) async fn expire_loop(self: Arc<Self>) {
        loop {
            tokio::time::sleep(EVERY).await;
            if self.copy.next_deadline().is_none() || self.health.is_down() {
                continue;
            }
            loop {
                match timeout(QUERY_TIMEOUT, self.expire()).await {
                    // A full batch: more may be due at once.
                    Ok(Ok(n)) if n >= BATCH => {
                        self.wake.notify_one();
                        continue;
                    }
                    Ok(Ok(n)) => {
                        if n > 0 {
                            self.wake.notify_one();
                        }
                    }
                    Ok(Err(cause)) => {
                        self.stats.count_error(Op::Expire);
                        self.health.down(&cause);
                    }
                    Err(_) => {
                        self.stats.count_error(Op::Expire);
                        self.health.down("expiring lapsed holds timed out");
                    }
                }
                break;
            }
        }
    }

    /// One transaction of expiries; how many it expired.
    async fn expire(&self) -> Result<i32, String> {
        let client = self.pool.get().await.map_err(|e| pool_error(&e))?;
        let row = client
            .query_one(EXPIRE, &[&BATCH])
            .await
            .map_err(|e| describe(&e))?;
        row.try_get::<_, i32>(0).map_err(|e| describe(&e))
    }
}
