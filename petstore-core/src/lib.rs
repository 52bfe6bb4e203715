//! # petstore-core
//!
//! The embeddable heart of the petstore service: a pet [`Inventory`] and
//! the rate limiter of the API's plans. Synchronous, `Send + Sync`, no
//! runtime: share it with an `Arc` from any thread. The HTTP server
//! (`petstore-server`) is a thin layer over exactly this API.
//!
//! The crate root names what an embedder uses: the inventory and its
//! queries, pets and their parts, the limiter and its plans, the clock,
//! and the errors those return. The rest is reached through the module
//! of its room, whose own header lists its files:
//!
//! | module | holds |
//! |---|---|
//! | [`pet`] | [`Pet`], [`NewPet`] and its `createPet` body parser, [`PetStatus`], [`Transition`], [`PetId`], [`CategoryId`], the Unicode name rules, the pet's canonical JSON |
//! | [`inventory`] | [`Inventory`]: storage, `get`/`list`/`create`, `transition`, order steps (beta), the feed of events (beta), `apply`/`apply_statuses` for a read copy; [`ListQuery`], [`PageSize`], [`Page`], encoded pages, order queries; its errors |
//! | [`order`] | orders (beta): an order, its status and id, who acts on it, what placing one asks |
//! | [`event`] | events (beta): the feed of every change, [`Event`](event::Event), its cursor and page |
//! | [`journal`] | the append-only journal of a durable inventory: [`JournalOptions`], recovery, `check_journal` and `repair_journal` |
//! | [`idempotency`] | idempotency keys: the key and its header parser, what a keyed write keeps and replays |
//! | [`limit`] | the rate limiter: [`RateLimiter`], [`KeyLimiter`], the anonymous limiter, [`Decision`], [`Plans`] and [`Quota`] |
//! | [`clock`] | [`Clock`], [`SystemClock`], [`FakeClock`], [`Timestamp`]: time, injectable |
//! | [`quote`] | how an error message quotes client input (64 characters, then `…`) |
//!
//! # Examples
//!
//! ```
//! use std::sync::Arc;
//! use petstore_core::*;
//!
//! let inventory = Arc::new(Inventory::in_memory());
//! let rex = NewPet::from_json(br#"{"name":"Rex","categoryId":1}"#).unwrap();
//! let rex = inventory.create(rex).unwrap();
//! assert_eq!(rex.status(), PetStatus::Available);
//! assert_eq!(inventory.get(rex.id()), Some(rex));
//!
//! let clock = Arc::new(FakeClock::new(Timestamp::from_unix_secs(0)));
//! let limiter = RateLimiter::new(clock);
//! limiter.insert("shop", Plans::default().quota(Plan::Free, None).unwrap(), BanPolicy::default());
//! assert!(limiter.check(&"shop").unwrap().is_allowed());
//! ```

#![deny(missing_docs)]

pub mod clock;
pub mod event;
pub mod idempotency;
pub mod inventory;
pub mod limit;
pub mod order;
pub mod pet;
pub mod quote;

pub use inventory::journal;

pub use clock::{Clock, FakeClock, SystemClock, Timestamp};
pub use inventory::{
    CreateError, Inventory, ListQuery, OpenError, Page, PageSize, PageSizeError, TransitionError,
};
pub use journal::{FsyncPolicy, JournalOptions};
pub use limit::{
    BanPolicy, Decision, KeyLimiter, Outcome, Plan, Plans, Quota, QuotaError, RateLimiter,
};
pub use pet::{CategoryId, NewPet, Pet, PetError, PetId, PetStatus, Transition};
