//! Orders (beta): the record of a deal. An order holds a pet for the key
//! that placed it until it is completed (the pet sold), cancelled, or its
//! hold lapses (the pet available again). The rules: docs/contract.md,
//! "Orders and holds (beta)". Placing, completing and the rest are the
//! inventory's, which changes the pet and the order in one step.
//!
//! | file | holds |
//! |---|---|
//! | `id.rs` | [`OrderId`]: a positive `int64`, one spelling |
//! | `record.rs` | [`Order`], [`OrderStatus`] |
//! | `actor.rs` | [`Actor`]: who acts on orders, and whether it sees every key's |
//! | `new_order.rs` | [`NewOrder`], [`Hold`]: what a `placeOrder` body asks, and its parser |
//! | `book.rs` | `OrderBook`: the orders in memory, compact, indexed by key, pet and deadline |
//! | `json.rs` | an order's JSON: [`Order::to_json`] |
//! | `error.rs` | [`OrderError`]: why a `placeOrder` body is refused |
//!
//! May use: `pet`, `clock.rs`, `quote.rs`.

mod actor;
pub(crate) mod book;
mod error;
mod id;
mod json;
pub(crate) use json::encode_array;
mod new_order;
mod record;

pub use actor::Actor;
pub use error::OrderError;
pub use id::OrderId;
pub use new_order::{Hold, NewOrder};
pub use record::{InvalidOrder, Order, OrderStatus, UnknownOrderStatus};
