//! Resident memory of the feed of events (beta) in one node's memory:
//! 10,000,000 events applied to a read copy that holds one pet, and what
//! they added per event.
//!
//! ```sh
//! cargo run --release --example event_memory
//! ```
//!
//! Prints the process's resident set size (`VmRSS` of `/proc/self/status`,
//! Linux only) before and after; the difference over the number of events
//! is the cost of one kept event. An event holds what changed, how and
//! when (16 bytes); the pet or order it names is the inventory's, counted
//! once however many events name it. The log grows by doubling, so a
//! reading just after it doubled shows up to twice the entries' bytes.

use std::error::Error;

use petstore_core::event::{EventId, EventType, Recorded};
use petstore_core::{CategoryId, Clock, Inventory, NewPet, PetId, PetStatus, SystemClock};

const EVENTS: u64 = 10_000_000;
/// Events handed over at once, as a replica's copy applies a page.
const PAGE: u64 = 10_000;

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
    let copy = Inventory::in_memory();
    let rex = NewPet::new("Rex", CategoryId::MIN)?.into_pet(PetId::MIN);
    copy.apply(&[rex])?;
    let at = SystemClock::new().now();
    let before = resident_bytes()?;
    let statuses = [PetStatus::Pending, PetStatus::Available];
    let mut page = Vec::with_capacity(PAGE as usize);
    for first in (1..=EVENTS).step_by(PAGE as usize) {
        page.clear();
        page.extend((first..first + PAGE).map(|id| Recorded {
            id: EventId::new(id),
            kind: EventType::PetStatusChanged,
            subject: 1,
            pet_status: Some(statuses[(id % 2) as usize]),
            at,
        }));
        copy.apply_events(EventId::new(first - 1), &page)?;
    }
    let after = resident_bytes()?;
    let held = copy.events_held() as u64;
    println!("events held:        {held}");
    println!("resident before:    {:.1} MiB", before as f64 / 1_048_576.0);
    println!("resident after:     {:.1} MiB", after as f64 / 1_048_576.0);
    println!(
        "bytes per event:    {:.1}",
        after.saturating_sub(before) as f64 / held as f64
    );
    Ok(())
}
