//! `NewPet::from_json` on any bytes: never panics, and what it accepts is a
//! valid pet that survives a JSON round trip unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use petstore_core::{pet::validate_name, Inventory, NewPet, Pet};

fuzz_target!(|data: &[u8]| {
    let Ok(pet) = NewPet::from_json(data) else {
        return;
    };
    if let Err(e) = validate_name(pet.name()) {
        panic!("accepted name {:?} fails validate_name: {e}", pet.name());
    }
    let id = pet.category_id().get();
    assert!(
        (1..=i64::MAX as u64).contains(&id),
        "categoryId {id} out of range"
    );

    // The created pet's fields, serialised as a createPet body again,
    // parse to the same NewPet.
    let created = match Inventory::in_memory().create(pet.clone()) {
        Ok(created) => created,
        Err(e) => panic!("in-memory create of {pet:?} failed: {e}"),
    };
    let body = serde_json::json!({
        "name": created.name(),
        "categoryId": created.category_id().get(),
        "status": created.status().as_str(),
    });
    let body = serde_json::to_vec(&body).expect("a json! value serialises");
    match NewPet::from_json(&body) {
        Ok(again) => assert_eq!(again, pet, "round trip through {body:?}"),
        Err(e) => panic!(
            "re-serialised body {:?} is refused: {e}",
            String::from_utf8_lossy(&body)
        ),
    }

    // The Pet's own (contract) JSON reads back as the same Pet.
    let json = serde_json::to_vec(&created).expect("a Pet serialises");
    match serde_json::from_slice::<Pet>(&json) {
        Ok(back) => assert_eq!(back, created, "Pet JSON round trip"),
        Err(e) => panic!(
            "Pet JSON {:?} does not read back: {e}",
            String::from_utf8_lossy(&json)
        ),
    }
});
