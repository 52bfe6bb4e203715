//! # petstore-core
//!
//! The embeddable heart of the petstore service: a pet [`Inventory`] and
//! the rate limiter of the API's plans. Synchronous, `Send + Sync`, no
//! runtime: share it with an `Arc` from any thread. The HTTP server
//! (`petstore-server`) is a thin layer over exactly this API.
//!
//! # Layout
//!
//! One concept per module:
//!
//! | module | holds |
//! |---|---|
//! | `pet` | [`Pet`], [`NewPet`], [`PetStatus`], [`PetId`], [`CategoryId`], name rules |
//! | `body` | the `createPet` JSON body parser behind [`NewPet::from_json`] |
//! | `query` | [`ListQuery`], [`Limit`], [`Page`], [`JsonPage`] |
//! | `json` | the pet's canonical JSON: [`Pet::to_json`], its encoder and fast reader |
//! | `inventory` | [`Inventory`]: storage, `get`/`list`/`create`, `apply` for a copy of another store |
//! | `journal` | the append-only journal of a durable inventory: group commit, recovery |
//! | `repair` | [`check_journal`], [`repair_journal`]: the way out of a damaged journal |
//! | `clock` | [`Clock`], [`SystemClock`], [`FakeClock`], [`Timestamp`] |
//! | `quota` | [`Plan`], [`Plans`], [`Quota`], [`BanPolicy`] |
//! | `bucket` | one GCRA token bucket (private) |
//! | `decision` | [`Decision`], [`Outcome`], [`WindowState`]: what the headers need |
//! | `limiter` | [`KeyLimiter`] (one key: minute + day + ban), its state as plain numbers [`KeyLimiterState`], [`RateLimiter`] |
//! | `anonymous` | [`AnonymousLimiter`]: per-address limits with bounded memory; [`AnonymousState`] |
//! | `error` | the typed errors |
//! | `quote` | [`quote`]: how an error message quotes client input (64 characters, then `…`) |
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

mod anonymous;
mod body;
mod bucket;
mod clock;
mod decision;
mod error;
mod inventory;
mod journal;
mod json;
mod limiter;
mod pet;
mod query;
mod quota;
mod quote;
mod repair;

pub use anonymous::{client_key, AnonymousLimiter, AnonymousState};
pub use clock::{Clock, FakeClock, SystemClock, Timestamp};
pub use decision::{Decision, Outcome, WindowState};
pub use error::{
    ApplyError, CreateError, IdError, LimitError, NameError, OpenError, PetError, QuotaError,
    StorageFailure, StorageFault,
};
pub use inventory::Inventory;
pub use journal::{
    FsyncPolicy, JournalOptions, JournalStats, Recovery, TornTail, BATCH_BUCKETS, FSYNC_BUCKETS,
    JOURNAL_FILE, LOCK_FILE,
};
pub use limiter::{KeyLimiter, KeyLimiterState, RateLimiter};
pub use pet::{
    name_rules, validate_name, CategoryId, NameRules, NewPet, Pet, PetId, PetStatus, UnknownStatus,
    MAX_NAME_CHARS,
};
pub use query::{FinalPage, JsonPage, Limit, ListQuery, Page};
pub use quota::{BanPolicy, Plan, Plans, Quota, UnknownPlan};
pub use quote::{quote, Quoted, MAX_QUOTED_CHARS};
pub use repair::{check_journal, repair_journal, BadLine, JournalCheck, JournalRepair, MAX_LISTED};
