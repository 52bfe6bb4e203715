//! `Keys::parse` on any bytes: never panics (errors are fine). An accepted
//! file parses again as a reload of itself, to the same number of keys.
#![no_main]

use libfuzzer_sys::fuzz_target;
use petstore_server::keys::Keys;

fuzz_target!(|data: &[u8]| {
    let Ok(keys) = Keys::parse(data, None) else {
        return;
    };
    match Keys::parse(data, Some(&keys)) {
        Ok(reloaded) => assert_eq!(reloaded.len(), keys.len(), "reload changed the key count"),
        Err(e) => panic!("a file accepted once is refused on reload: {e}"),
    }
});
