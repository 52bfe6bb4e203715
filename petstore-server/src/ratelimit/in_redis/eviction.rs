//! The check at start that Redis never evicts a limiter state: a Redis
//! with `maxmemory` and an evicting `maxmemory-policy` would silently
//! refill quotas and lift bans under memory pressure.

use std::time::Duration;

use super::limits::RedisLimits;
use crate::{log_error, log_info};

impl RedisLimits {
    /// Checks once Redis answers (at most a few tries a second apart)
    /// that it never evicts a state: a Redis with `maxmemory` and an
    /// evicting `maxmemory-policy` would silently refill quotas and lift
    /// bans under memory pressure. Logs a warning if it might, or that it
    /// will not. Run as a task of its own at start.
    pub async fn check_eviction(self) {
        for _ in 0..10 {
            let asked = async {
                let limit = self.inner.link.config_get("maxmemory").await?;
                let policy = self.inner.link.config_get("maxmemory-policy").await?;
                Ok::<_, redis::RedisError>((limit, policy))
            };
            match tokio::time::timeout(Duration::from_secs(1), asked).await {
                Ok(Ok((limit, policy))) => {
                    let unbounded = limit.as_deref().is_none_or(|l| l == "0");
                    let policy = policy.unwrap_or_default();
                    if unbounded || policy == "noeviction" {
                        log_info!(
                            "Redis: maxmemory-policy {policy}, maxmemory {}: limiter states are never evicted",
                            limit.as_deref().unwrap_or("0")
                        );
                    } else {
                        log_error!(
                            "WARNING: Redis has maxmemory {} and maxmemory-policy {policy}: under memory pressure it may evict limiter states, which refills quotas and lifts bans. Set maxmemory-policy noeviction",
                            limit.as_deref().unwrap_or("?")
                        );
                    }
                    return;
                }
                // Down, or CONFIG refused (a managed Redis): try again, a
                // few times, then say that it could not be checked.
                _ => tokio::time::sleep(Duration::from_secs(1)).await,
            }
        }
        log_error!(
            "Redis: could not read maxmemory-policy; make sure it is noeviction, or quotas refill and bans lift when Redis evicts"
        );
    }
}
