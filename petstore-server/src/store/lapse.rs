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

#[cfg(test)]
mod tests {
    use super::*;
    use petstore_core::order::{Actor, Hold, NewOrder, OrderStatus};
    use petstore_core::{CategoryId, FakeClock, NewPet, PetStatus, Timestamp};

    #[test]
    fn the_timer_expires_a_hold_once_the_clock_passes_its_deadline() {
        let inventory = Arc::new(Inventory::in_memory());
        let start = Timestamp::from_unix_secs(1_000_000);
        let clock = Arc::new(FakeClock::new(start));
        let pet = inventory
            .create(NewPet::new("Rex", CategoryId::MIN).unwrap())
            .unwrap()
            .id();
        let shop = Actor::new("shop");
        let order = inventory
            .place_order(&shop, NewOrder::new(pet), start)
            .unwrap()
            .id();
        let runtime = crate::net::runtime().unwrap();
        runtime.spawn(run(inventory.clone(), clock.clone()));
        clock.advance(Hold::DEFAULT.duration());
        // Waits for the event; the bound only catches a timer that never
        // fires.
        let expired = runtime.block_on(async {
            for _ in 0..2_000 {
                if inventory.order(&shop, order).map(|o| o.status()) == Some(OrderStatus::Expired) {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            false
        });
        assert!(expired, "the hold never lapsed");
        assert_eq!(inventory.get(pet).unwrap().status(), PetStatus::Available);
    }
}
