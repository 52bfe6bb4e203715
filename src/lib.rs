//! Workspace root package: it only carries the top-level `benches/` and
//! `examples/`. The library is [`petstore_core`]; the server is the
//! `petstore-server` binary.

pub use petstore_core::*;
