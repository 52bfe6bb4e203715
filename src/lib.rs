//! Workspace root package: it only carries the top-level `benches/` and
//! `examples/`. The library is [`petstore_core`]; the server is the
//! `petstore-server` binary.

pub use petstore_core::*;

/// The README's Rust examples, compiled and run by `cargo test` so they
/// cannot drift from the code.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
