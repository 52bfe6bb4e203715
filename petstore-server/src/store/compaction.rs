//! Compaction of the journal, online: a task asks the inventory now and
//! then whether its journal has outgrown its last snapshot (the core's
//! `CompactionPolicy`, set by `--compact-min-size` and
//! `--compact-ratio`) and, when it has, compacts it on a blocking thread
//! while requests go on. One compaction at a time: the next check waits
//! for it.
//!
//! Why a poll and not a signal from the write path: the question is two
//! sizes compared under the journal's locks, and a second between the
//! journal passing its threshold and the compaction starting changes
//! nothing a reader could see.

use std::sync::Arc;
use std::time::Duration;

use petstore_core::Inventory;

use crate::{log_error, log_info};

/// How often the task asks whether a compaction is due.
const CHECK: Duration = Duration::from_secs(1);

/// After a failed compaction, how long before the next try: a full disk
/// should not be hammered.
const BACKOFF: Duration = Duration::from_secs(60);

/// Compacts `inventory`'s journal whenever it is due, for ever (spawned
/// once by the server; it ends with the runtime).
pub async fn run(inventory: Arc<Inventory>) {
    let mut tick = tokio::time::interval(CHECK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if !inventory.compaction_due() {
            continue;
        }
        let compacting = Arc::clone(&inventory);
        match tokio::task::spawn_blocking(move || compacting.compact()).await {
            Ok(Ok(done)) => log_info!(
                "compacted the journal into {} ({} bytes, {} pets) in {} ms, replacing {} bytes",
                done.snapshot.display(),
                done.bytes,
                done.pets,
                done.took.as_millis(),
                done.replaced_bytes
            ),
            Ok(Err(e)) => {
                log_error!(
                    "compacting the journal failed: {e}; the journal keeps every change and \
                     is tried again in {} s",
                    BACKOFF.as_secs()
                );
                tokio::time::sleep(BACKOFF).await;
            }
            Err(_) => {
                log_error!("compacting the journal panicked; tried again later");
                tokio::time::sleep(BACKOFF).await;
            }
        }
    }
}
