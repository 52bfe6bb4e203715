//! Resident memory of an in-memory [`Inventory`] holding 1,000,000 pets
//! with 10-character names (statuses a third each).
//!
//! ```sh
//! cargo run --release --example memory
//! ```
//!
//! Prints the process's resident set size (`VmRSS` of `/proc/self/status`,
//! Linux only) before and after, in MB (10^6 bytes) and MiB, and the peak
//! (`VmHWM`: the vectors double as they grow, so the peak can exceed the
//! final figure).

use std::error::Error;

use petstore_core::{CategoryId, Inventory, NewPet, PetStatus};

const PETS: u64 = 1_000_000;

/// A `kB` field of `/proc/self/status` (`VmRSS`, `VmHWM`), in bytes.
fn status_bytes(field: &str) -> Result<u64, Box<dyn Error>> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .ok_or_else(|| format!("no {field} line in /proc/self/status"))?;
    // "VmRSS:	   12345 kB"
    let kib: u64 = line.trim().trim_end_matches("kB").trim().parse()?;
    Ok(kib * 1024)
}

fn resident_bytes() -> Result<u64, Box<dyn Error>> {
    status_bytes("VmRSS")
}

fn mb(bytes: u64) -> String {
    format!(
        "{:.1} MB ({:.1} MiB)",
        bytes as f64 / 1e6,
        bytes as f64 / 1_048_576.0
    )
}

/// A 10-character name made from the number, `pet0000042`.
fn name(i: u64) -> String {
    format!("pet{:07}", i % 10_000_000)
}

fn main() -> Result<(), Box<dyn Error>> {
    let before = resident_bytes()?;
    println!("resident before: {}", mb(before));

    let inventory = Inventory::in_memory();
    let category = CategoryId::new(7).ok_or("category 7 is valid")?;
    for i in 0..PETS {
        let status = PetStatus::ALL[(i % 3) as usize];
        let pet = NewPet::new(name(i), category)?.with_status(status);
        inventory.create(pet)?;
    }
    let after = resident_bytes()?;

    assert_eq!(inventory.len() as u64, PETS);
    println!("pets:            {}", inventory.len());
    println!("resident after:  {}", mb(after));
    println!("peak resident:   {}", mb(status_bytes("VmHWM")?));
    println!(
        "growth:          {} ({:.1} bytes per pet)",
        mb(after.saturating_sub(before)),
        after.saturating_sub(before) as f64 / PETS as f64
    );
    let target = 100_000_000;
    println!(
        "target:          <= 100 MB resident after: {}",
        if after <= target { "met" } else { "MISSED" }
    );
    Ok(())
}
