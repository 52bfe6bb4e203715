//! Embedding `petstore-core` in your own program: the inventory and the
//! rate limiter in-process, no HTTP.
//!
//! ```sh
//! cargo run --example embedded
//! ```
//!
//! It creates a few pets, lists them, pages through them with the cursor,
//! parses a `createPet` body from JSON (and shows a refused one with its
//! error), sells a pet (release, then sell; selling it again is refused,
//! naming its status), then drives a rate limiter on a fake clock until it refuses a
//! request and says when to retry.

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use petstore_core::{
    BanPolicy, CategoryId, FakeClock, Inventory, ListQuery, NewPet, Outcome, PageSize, PetStatus,
    Quota, RateLimiter, Timestamp, Transition,
};

fn main() -> Result<(), Box<dyn Error>> {
    // The inventory is `Send + Sync`: share it with an `Arc` between threads.
    let inventory = Arc::new(Inventory::in_memory());

    // Create some pets. `NewPet::new` validates the name (1 to 100
    // characters, not blank, no control characters).
    let dogs = CategoryId::new(1).ok_or("category 1 is valid")?;
    let cats = CategoryId::new(2).ok_or("category 2 is valid")?;
    let pets = [
        ("Rex", dogs, PetStatus::Available),
        ("Tom", cats, PetStatus::Sold),
        ("Kitty", cats, PetStatus::Available),
        ("Fido", dogs, PetStatus::Pending),
        ("Luna", cats, PetStatus::Available),
        ("Max", dogs, PetStatus::Sold),
        ("Bella", dogs, PetStatus::Available),
    ];
    for (name, category, status) in pets {
        let pet = inventory.create(NewPet::new(name, category)?.with_status(status))?;
        println!("created #{} {} ({})", pet.id(), pet.name(), pet.status());
    }

    // The first page (default limit 20), and the same page as the JSON body
    // the HTTP server would send.
    let page = inventory.list(&ListQuery::new());
    println!("\nfirst page: {} pets", page.pets.len());
    let json = inventory.list_json(&ListQuery::new().status(PetStatus::Sold));
    println!("sold, as JSON: {}", String::from_utf8(json.body)?);

    // Page through the available pets two at a time: the last id of a page
    // (`next_after`) is the `after` cursor of the next; `None` on the last.
    println!("\navailable pets, two per page:");
    let mut query = ListQuery::new()
        .status(PetStatus::Available)
        .limit(PageSize::new(2)?);
    for number in 1.. {
        let page = inventory.list(&query);
        let names: Vec<&str> = page.pets.iter().map(|p| p.name()).collect();
        println!("  page {number}: {names:?}");
        match page.next_after {
            Some(after) => query = query.after(after),
            None => break,
        }
    }

    // A `createPet` body parsed and validated exactly as the server does.
    let body = br#"{"name":"Nemo","categoryId":3,"status":"pending"}"#;
    let nemo = inventory.create(NewPet::from_json(body)?)?;
    println!(
        "\nfrom JSON: #{} {} ({})",
        nemo.id(),
        nemo.name(),
        nemo.status()
    );
    // A refused body: the error names the field and the reason.
    let refused = br#"{"name":"Nemo","categoryId":0}"#;
    match NewPet::from_json(refused) {
        Ok(pet) => println!("unexpectedly accepted: {pet:?}"),
        Err(e) => println!(
            "refused {}: {e} (field: {})",
            String::from_utf8_lossy(refused),
            e.field().unwrap_or("-")
        ),
    }
    // The inventory still answers by id (`getPet`).
    if let Some(pet) = inventory.get(nemo.id()) {
        println!("get #{}: {}", pet.id(), pet.name());
    }

    // A sale: Nemo came in pending (held for a customer), the customer
    // walks away (release), the next one buys it (sell). Each step is
    // allowed only from the statuses the contract names; a second sale
    // is refused with the pet's current status.
    let released = inventory.transition(nemo.id(), Transition::Release);
    println!("\nrelease #{}: {}", nemo.id(), describe(&released));
    for step in [Transition::Sell, Transition::Sell] {
        let outcome = inventory.transition(nemo.id(), step);
        println!("{step} #{}: {}", nemo.id(), describe(&outcome));
    }
    let sold = inventory.list_json(&ListQuery::new().status(PetStatus::Sold));
    println!("sold now: {}", String::from_utf8(sold.body)?);

    // A rate limiter on a clock the program controls: 3 requests per minute,
    // 100 per day, for the key "shop".
    let clock = Arc::new(FakeClock::new(Timestamp::from_unix_secs(1_700_000_000)));
    let limiter = RateLimiter::new(Arc::clone(&clock));
    limiter.insert("shop", Quota::new(3, 100)?, BanPolicy::default());
    println!("\nrate limit: 3 per minute");
    for request in 1..=4 {
        let decision = limiter.check(&"shop").ok_or("the key was inserted")?;
        let window = decision.binding();
        match decision.outcome {
            Outcome::Allowed => println!(
                "  request {request}: allowed, {} of {} left this {}",
                window.remaining, window.limit, window.name
            ),
            Outcome::Limited { retry_after } | Outcome::Banned { retry_after } => println!(
                "  request {request}: refused, retry after {retry_after:?} (Retry-After: {} s)",
                decision.retry_after_secs().unwrap_or(1)
            ),
        }
    }
    // One token comes back every 20 s.
    clock.advance(Duration::from_secs(20));
    let decision = limiter.check(&"shop").ok_or("the key was inserted")?;
    println!("  20 s later: allowed = {}", decision.is_allowed());
    // An unknown key has no limiter.
    println!(
        "  unknown key: {:?}",
        limiter.check(&"mallory").map(|d| d.outcome)
    );
    Ok(())
}

/// A transition's outcome in a few words.
fn describe(outcome: &Result<petstore_core::Pet, petstore_core::TransitionError>) -> String {
    match outcome {
        Ok(pet) => format!("{} is now {}", pet.name(), pet.status()),
        Err(e) => format!("refused: {e}"),
    }
}
