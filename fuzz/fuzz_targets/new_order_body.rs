//! `NewOrder::from_json` on any bytes: never panics, and what it accepts
//! is a pet id and a hold in range that a `placeOrder` body written again
//! from them parses back to.
#![no_main]

use libfuzzer_sys::fuzz_target;
use petstore_core::order::{Hold, NewOrder};

fuzz_target!(|data: &[u8]| {
    let Ok(order) = NewOrder::from_json(data) else {
        return;
    };
    let hold = order.hold.secs();
    assert!(
        (Hold::MIN_SECS..=Hold::MAX_SECS).contains(&hold),
        "hold {hold} out of range"
    );
    assert!((1..=i64::MAX as u64).contains(&order.pet.get()));
    let body = serde_json::json!({"petId": order.pet.get(), "holdSeconds": hold});
    let body = serde_json::to_vec(&body).expect("a json! value serialises");
    match NewOrder::from_json(&body) {
        Ok(again) => assert_eq!(again, order, "round trip through {body:?}"),
        Err(e) => panic!("re-serialised body {body:?} is refused: {e}"),
    }
});
