//! `pet_id` on any UTF-8 path segment: never panics; an accepted id is
//! 1..=2^63-1 and is the decimal value of the percent-decoded segment, and
//! every plain decimal in range without a leading zero (a number's one
//! spelling, docs/contract.md, "Listing and paging") is accepted.
#![no_main]

use libfuzzer_sys::fuzz_target;
use petstore_server::http::query_string::{percent_decode, pet_id};

fuzz_target!(|data: &[u8]| {
    let Ok(segment) = std::str::from_utf8(data) else {
        return;
    };
    let result = pet_id(segment);
    // Paths do not treat `+` as a space.
    let decoded = percent_decode(segment, false);
    let digits = decoded
        .as_deref()
        .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        .filter(|d| d.len() == 1 || !d.starts_with('0'));
    let expected = digits
        .and_then(|d| d.parse::<u64>().ok())
        .filter(|n| (1..=i64::MAX as u64).contains(n));
    match (&result, expected) {
        (Ok(id), Some(n)) => assert_eq!(id.get(), n, "segment {segment:?}"),
        (Ok(id), None) => panic!(
            "segment {segment:?} (decoded {decoded:?}) accepted as {id}, \
             but it is not a decimal in 1..=2^63-1 without a leading zero"
        ),
        (Err(e), Some(n)) => panic!("segment {segment:?} is the valid id {n} but refused: {e}"),
        (Err(_), None) => {}
    }
});
