//! # petstore-core
//!
//! The embeddable heart of the petstore service: a pet [`Inventory`] and
//! the rate limiter of the API's plans. Synchronous, `Send + Sync`, no
//! runtime: share it with an `Arc` from any thread. The HTTP server
//! (`petstore-server`) is a thin layer over exactly this API.
//!
//! # Layout
//!
//! Four rooms and one shared file; each room's `mod.rs` opens with its
//! own table of files and the rule of what it may import:
//!
//! | path | holds |
//! |---|---|
//! | `pet/` | [`Pet`], [`NewPet`] and its `createPet` body parser, [`PetStatus`], [`Transition`], [`PetId`], [`CategoryId`], the Unicode name rules ([`validate_name`]), [`PetError`] |
//! | `inventory/` | [`Inventory`]: storage, `get`/`list`/`create`, `transition`, `apply`/`apply_statuses`; [`ListQuery`], [`Limit`], [`Page`]; the arena and the pet's canonical JSON ([`Pet::to_json`]); [`CreateError`], [`TransitionError`], [`OpenError`] |
//! | `inventory/journal/` | the append-only journal of a durable inventory: group commit, record format, replay, [`check_journal`] and [`repair_journal`] |
//! | `idempotency/` | idempotency keys: [`IdempotencyKey`] and its header parser, [`Keyed`], [`Fingerprint`], [`Scope`], the kept [`Answer`], [`Seen`], [`KeyedOutcome`], [`Claim`], [`RETENTION`] |
//! | `limit/` | the rate limiter: [`RateLimiter`], [`KeyLimiter`], [`AnonymousLimiter`], [`Decision`], [`Plans`] and [`Quota`], the [`Clock`] |
//! | `quote.rs` | [`quote()`]: how an error message quotes client input (64 characters, then `…`) |
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

mod idempotency;
mod inventory;
mod limit;
mod pet;
mod quote;

pub use idempotency::{
    Answer, Claim, Fingerprint, IdempotencyKey, KeyError, Keyed, KeyedOutcome, Scope, Seen,
    MAX_KEY_CHARS, MAX_SCOPE_BYTES, RETENTION,
};
#[allow(deprecated)]
pub use inventory::LimitError;
pub use inventory::{
    check_journal, repair_journal, ApplyError, BadLine, CreateError, FinalPage, FsyncPolicy,
    Inventory, JournalCheck, JournalOptions, JournalRepair, JournalStats, JsonPage, Limit,
    ListQuery, OpenError, Page, PageSizeError, Recovery, StorageFailure, StorageFault, TornTail,
    TransitionError, BATCH_BUCKETS, FSYNC_BUCKETS, JOURNAL_FILE, LOCK_FILE, MAX_LISTED,
};
pub use limit::{
    client_key, AnonymousLimiter, AnonymousState, BanPolicy, Clock, Decision, FakeClock,
    KeyLimiter, KeyLimiterState, Outcome, Plan, Plans, Quota, QuotaError, RateLimiter, SystemClock,
    Timestamp, UnknownPlan, WindowState,
};
pub use pet::{
    name_rules, validate_name, CategoryId, IdError, NameError, NameRules, NewPet, Pet, PetError,
    PetId, PetStatus, Transition, UnknownStatus, UnknownTransition, MAX_NAME_CHARS,
};
pub use quote::{quote, Quoted, MAX_QUOTED_CHARS};
