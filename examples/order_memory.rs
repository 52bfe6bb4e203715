//! Resident memory of orders in one node's memory: 1,000,000 pets, then
//! 1,000,000 orders of them placed by 1,000 keys (a third then completed,
//! a third cancelled), and what the orders added per order.
//!
//! ```sh
//! cargo run --release --example order_memory
//! ```
//!
//! Prints the process's resident set size (`VmRSS` of `/proc/self/status`,
//! Linux only) after the pets and after the orders; the difference over
//! the number of orders is the cost of one, which the target puts at 64
//! bytes at most.
//!
//! Why every pet changes status once before the first reading: a pet's
//! first change moves its JSON to a slot of its own (`records.rs`), which
//! later changes reuse. That is the pets' cost of changing hands, paid
//! once per pet with or without orders; taken before, it leaves the
//! orders' own cost in the difference.

use std::error::Error;

use petstore_core::inventory::{Step, StepRequest};
use petstore_core::order::{Actor, NewOrder};
use petstore_core::{CategoryId, Inventory, NewPet, Timestamp};

const ORDERS: u64 = 1_000_000;
const KEYS: u64 = 1_000;
/// Steps handed to the inventory at once, as a server's committer does.
const BATCH: u64 = 1_000;

fn resident_bytes() -> Result<u64, Box<dyn Error>> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .ok_or("no VmRSS line in /proc/self/status")?;
    let kib: u64 = line.trim().trim_end_matches("kB").trim().parse()?;
    Ok(kib * 1024)
}

fn main() -> Result<(), Box<dyn Error>> {
    let inventory = Inventory::in_memory();
    let category = CategoryId::new(7).ok_or("category 7 is valid")?;
    for i in 0..ORDERS {
        inventory.create(NewPet::new(format!("pet{i:07}"), category)?)?;
    }
    let ids: Vec<petstore_core::PetId> = (1..=ORDERS)
        .map(|i| petstore_core::PetId::new(i).ok_or("a pet id"))
        .collect::<Result<_, _>>()?;
    let to = |status| ids.iter().map(|&id| (id, status)).collect::<Vec<_>>();
    inventory.apply_statuses(&to(petstore_core::PetStatus::Pending))?;
    inventory.apply_statuses(&to(petstore_core::PetStatus::Sold))?;
    inventory.apply_statuses(&to(petstore_core::PetStatus::Available))?;
    let actors: Vec<Actor> = (0..KEYS)
        .map(|k| Actor::new(&format!("shop-frontend-{k:04}")))
        .collect();
    let at = Timestamp::from_unix_secs(1_764_324_000);
    let before = resident_bytes()?;
    for start in (0..ORDERS).step_by(BATCH as usize) {
        let batch = (start..start + BATCH)
            .map(|i| {
                let pet = petstore_core::PetId::new(i + 1).ok_or("a pet id")?;
                Ok(StepRequest {
                    actor: actors[(i % KEYS) as usize].clone(),
                    step: Step::Place(NewOrder::new(pet)),
                    at,
                    claim: None,
                })
            })
            .collect::<Result<Vec<_>, Box<dyn Error>>>()?;
        inventory.steps(batch)?;
    }
    let everyone = Actor::store();
    for id in 1..=ORDERS {
        let order = petstore_core::order::OrderId::new(id).ok_or("an order id")?;
        match id % 3 {
            0 => drop(inventory.complete_order(&everyone, order, at)?),
            1 => drop(inventory.cancel_order(&everyone, order, at)?),
            _ => {}
        }
    }
    let after = resident_bytes()?;
    assert_eq!(inventory.orders_len(), ORDERS);
    let per_order = after.saturating_sub(before) as f64 / ORDERS as f64;
    println!("orders:          {ORDERS} of {KEYS} keys");
    println!("resident before: {:.1} MB (the pets)", before as f64 / 1e6);
    println!("resident after:  {:.1} MB", after as f64 / 1e6);
    println!("per order:       {per_order:.1} bytes");
    println!(
        "target:          <= 64 bytes per order: {}",
        if per_order <= 64.0 { "met" } else { "MISSED" }
    );
    Ok(())
}
