//! The lapse of holds on a local store: one timer for every order. Each
//! tick it asks the inventory for its earliest deadline (the top of a
//! heap) and, when one is due, expires what is due on a blocking thread
//! (the journal's fsync). Nothing scans the orders; an idle tick is one
//! read of the heap's top.
//!
//! Why a tick and not a sleep until the next deadline: a hold placed
//! meanwhile may end sooner than the one slept on, and waking the timer
//! for each placed order would cost every place a message. A quarter of
//! a second keeps a lapse within the contract's second.

use std::sync::Arc;
use std::time::Duration;

use petstore_core::{Clock, Inventory};

use crate::log_error;

/// How often the timer looks at the earliest deadline.
pub const TICK: Duration = Duration::from_millis(250);

/// Expires lapsed holds of `inventory` as `clock` tells time, for ever
/// (spawned once by the server; it ends with the runtime).
pub async fn run(inventory: Arc<Inventory>, clock: Arc<dyn Clock>) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = clock.now();
        if inventory.next_deadline().is_none_or(|due| due > now) {
            continue;
        }
        let expiring = Arc::clone(&inventory);
        match tokio::task::spawn_blocking(move || expiring.expire_due(now)).await {
            Ok(Ok(_)) => {}
            // A failed journal is logged once, by its failure hook; the
            // holds lapse at the next start.
            Ok(Err(_)) => {}
            Err(_) => log_error!("expiring lapsed holds panicked; they are tried again"),
        }
    }
}
