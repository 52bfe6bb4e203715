//! The [`Inventory`]: pets by id, listed in pages, created with dense ids,
//! in memory or durable (kept by a journal in a data directory).
//!
//! | file | holds |
//! |---|---|
//! | `mod.rs` | [`Inventory`]: `get`/`list`/`create`, `transition`, `apply` and `apply_statuses` for a copy of another store |
//! | `compact.rs` | compaction: the history replaced by a snapshot of the live state, online |
//! | `restore.rs` | `Restorer`: the state rebuilt from a snapshot and records, and the snapshot written from it |
//! | `feed.rs` | the feed of events (beta): every change published, in that order, read back as events |
//! | `orders.rs` | orders (beta): steps decided in batches (place, complete, cancel, pet transitions as their doors), holds that lapse |
//! | `steps.rs` | [`Step`], [`StepRequest`], [`Stepped`]; how a step's record replays |
//! | `query.rs` | [`ListQuery`], [`PageSize`], [`Page`], [`JsonPage`], [`FinalPage`], [`OrderQuery`], [`OrderPage`] |
//! | `records.rs` | `Records`: the arena of pets' JSON and how a page is read out of it |
//! | `id_set.rs` | `IdSet`: the pets of one status, a bitmap with summaries |
//! | `final_pages.rs` | `FinalPages`: first pages encoded once and kept while no change reaches them |
//! | `journal/` | the append-only journal of a durable inventory: group commit, recovery, repair |
//! | `error.rs` | [`CreateError`], [`TransitionError`], [`StepError`], [`OpenError`], [`ApplyError`], [`StorageFailure`], [`PageSizeError`] |
//! | `tests.rs` | the inventory's tests against a naive model |
//!
//! One `RwLock` guards the records: reads share it, a create holds it for
//! a push, a transition for one pet's change. parking_lot's lock is a single word, cheap when uncontended,
//! and never poisoned.
//!
//! Idempotency keys: the inventory keeps each keyed write's answer
//! (`idempotency/`), and a durable one writes the key into the same
//! journal record as the write, so the two survive a crash together.
//!
//! May use: `pet`, `order`, `idempotency`, `event`, `clock.rs`.

mod compact;
mod error;
mod feed;
mod final_pages;
mod id_set;
pub mod journal;
mod orders;
mod query;
mod records;
mod restore;
mod steps;
#[cfg(test)]
mod tests;

use std::path::Path;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

pub use error::{
    ApplyError, CompactError, CreateError, OpenError, PageSizeError, StepError, StorageFailure,
    StorageFault, TransitionError,
};
use journal::{JournalOptions, JournalStats, Recovery};
pub use query::{FinalPage, JsonPage, ListQuery, OrderPage, OrderQuery, Page, PageSize};
pub use steps::{Step, StepRequest, Stepped};

use crate::clock::{Clock, SystemClock};
use crate::idempotency::{Answer, Claim, KeptKeys, Keyed, KeyedOutcome, Seen};
use crate::order::book::OrderBook;
use crate::order::Actor;
use crate::pet::json::decode;
use crate::pet::{NewPet, Pet, PetId, PetStatus, Transition};
use final_pages::FinalPages;
#[cfg(doc)]
use id_set::IdSet;
use journal::{Change, Journal};
use records::{id_at, Records};

/// The pet inventory. `Send + Sync`: share it with an `Arc` and call it
/// through `&self` from any thread.
///
/// # Examples
///
/// ```
/// use petstore_core::{CategoryId, Inventory, PageSize, ListQuery, NewPet, PetStatus};
///
/// let inventory = Inventory::in_memory();
/// let cat = CategoryId::new(1).unwrap();
/// for name in ["Rex", "Tom", "Kitty"] {
///     inventory.create(NewPet::new(name, cat).unwrap().with_status(PetStatus::Sold)).unwrap();
/// }
/// let page = inventory.list(&ListQuery::new().limit(PageSize::new(2).unwrap()));
/// assert_eq!(page.pets.len(), 2);
/// let next = inventory.list(&ListQuery::new().after(page.next_after.unwrap()));
/// assert_eq!(next.pets[0].name(), "Kitty");
/// assert_eq!(next.next_after, None);
/// ```
#[derive(Debug, Default)]
pub struct Inventory {
    records: RwLock<Records>,
    /// `None`: in memory only.
    journal: Option<Journal>,
    recovery: Option<Recovery>,
    final_pages: FinalPages,
    /// Idempotency keys in flight and kept.
    kept: Arc<KeptKeys>,
    /// The orders. Taken after `records` when both are (publish).
    orders: RwLock<OrderBook>,
    /// Held while a batch of order steps and transitions is decided,
    /// written and published (`orders.rs`, on why).
    steps: Mutex<()>,
    /// Batches of steps waiting to be decided: the next thread to decide
    /// takes them all, in one commit; `combined` wakes the waiters when
    /// it is done.
    combine: Mutex<steps::Combine>,
    combined: parking_lot::Condvar,
    /// The events of every change published (beta), in that order.
    feed: feed::Feed,
}

impl Inventory {
    /// An empty inventory held in memory only: gone when dropped.
    pub fn in_memory() -> Self {
        Self::default()
    }

    /// A durable inventory kept in `dir` (created if missing): the pets of
    /// its journal are replayed, and every create is on disk before it
    /// returns. See `inventory/journal/` for the format, group commit and
    /// recovery rules.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::{CategoryId, Inventory, JournalOptions, NewPet, PetId};
    /// let dir = std::env::temp_dir().join(format!("petstore-doc-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// {
    ///     let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
    ///     inventory.create(NewPet::new("Rex", CategoryId::MIN).unwrap()).unwrap();
    /// }
    /// let reopened = Inventory::open(&dir, JournalOptions::default()).unwrap();
    /// assert_eq!(reopened.get(PetId::MIN).unwrap().name(), "Rex");
    /// assert_eq!(reopened.recovery().unwrap().pets, 1);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn open(dir: impl AsRef<Path>, options: JournalOptions) -> Result<Self, OpenError> {
        Self::open_with_clock(dir, options, &SystemClock::new())
    }

    /// [`open`](Self::open), with `clock` as the wall clock that judges
    /// which idempotency keys of the journal have expired (they are not
    /// kept again): a test opens a journal a day later without waiting a
    /// day.
    pub fn open_with_clock(
        dir: impl AsRef<Path>,
        options: JournalOptions,
        clock: &dyn Clock,
    ) -> Result<Self, OpenError> {
        let now = clock.now();
        let mut state = restore::Restorer::new(now, crate::event::log::DEFAULT_RETENTION);
        let (journal, recovery) = Journal::open(dir.as_ref(), options, &mut state)?;
        let restore::Restorer {
            records,
            book,
            kept,
            feed,
            ..
        } = state;
        let inventory = Inventory {
            records: RwLock::new(records),
            journal: Some(journal),
            recovery: Some(recovery),
            final_pages: FinalPages::default(),
            kept,
            orders: RwLock::new(book),
            steps: Mutex::new(()),
            combine: Mutex::new(steps::Combine::default()),
            combined: parking_lot::Condvar::new(),
            feed,
        };
        // Holds that lapsed while no server ran lapse now, and are written.
        inventory.expire_due(now).map_err(|failure| OpenError::Io {
            path: dir.as_ref().join(journal::JOURNAL_FILE),
            source: std::io::Error::other(failure.detail),
        })?;
        Ok(inventory)
    }

    /// What opening the journal found; `None` for an in-memory inventory.
    pub fn recovery(&self) -> Option<&Recovery> {
        self.recovery.as_ref()
    }

    /// The journal file; `None` for an in-memory inventory.
    pub fn journal_path(&self) -> Option<&Path> {
        self.journal.as_ref().map(Journal::path)
    }

    /// The journal's counters; `None` for an in-memory inventory.
    pub fn journal_stats(&self) -> Option<JournalStats> {
        self.journal.as_ref().map(Journal::stats)
    }

    /// Why pets cannot be stored now, or `None` if they can (always `None`
    /// in memory). Once the journal has failed it stays failed until the
    /// inventory is reopened. Also checks, with one `stat`, that the
    /// journal's path still names the file being written, so a health
    /// check notices a deleted journal before any create does.
    pub fn storage_failure(&self) -> Option<StorageFailure> {
        self.journal.as_ref().and_then(Journal::failure)
    }

    /// Calls `hook` once, with the details, when the journal fails (a
    /// write, an fsync, or its file deleted or replaced), whichever call
    /// notices it: a server logs the cause there, once, rather than on
    /// every refused create. Only the first hook set is kept; an in-memory
    /// inventory never calls it.
    pub fn on_storage_failure(&self, hook: impl Fn(&StorageFailure) + Send + Sync + 'static) {
        if let Some(journal) = &self.journal {
            journal.on_failure(Box::new(hook));
        }
    }

    /// Stores a new pet under the next id (1, 2, 3, ...) and returns it.
    /// For a durable inventory, the pet is on disk (and visible to readers)
    /// when this returns `Ok`; this call blocks for the fsync, so async
    /// callers run it on a blocking thread.
    pub fn create(&self, new: NewPet) -> Result<Pet, CreateError> {
        if let Some(journal) = &self.journal {
            return journal.append(new, &|batch, at| self.publish(batch, at));
        }
        let mut records = self.records.write();
        let next = records.ends.len() as u64 + 1;
        let id = PetId::new(next).ok_or(CreateError::IdsExhausted)?;
        let pet = new.into_pet(id);
        records.push(&pet);
        self.feed
            .record(&[Change::Created(pet.clone())], unix_secs_now());
        drop(records);
        self.feed.announce();
        Ok(pet)
    }

    /// Stores several new pets under the next ids, in their order, and
    /// returns them: [`create`](Self::create) for a caller that batches
    /// creates itself. A durable inventory writes them in one group commit
    /// and this call blocks once, for one fsync, however many pets it
    /// holds (a server's committer then holds one thread per batch, not
    /// one per waiting create). All or nothing: on an error no pet is
    /// stored (or acknowledged).
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::{CategoryId, Inventory, NewPet};
    /// let inventory = Inventory::in_memory();
    /// let new = |name| NewPet::new(name, CategoryId::MIN).unwrap();
    /// let pets = inventory.create_many(vec![new("Rex"), new("Tom")]).unwrap();
    /// assert_eq!(pets.iter().map(|p| p.id().get()).collect::<Vec<_>>(), [1, 2]);
    /// assert_eq!(inventory.len(), 2);
    /// ```
    pub fn create_many(&self, news: Vec<NewPet>) -> Result<Vec<Pet>, CreateError> {
        if let Some(journal) = &self.journal {
            return journal.append_many(news, &[], &|batch, at| self.publish(batch, at));
        }
        let mut records = self.records.write();
        let first = records.ends.len() as u64 + 1;
        let last = first.saturating_add(news.len() as u64).saturating_sub(1);
        if !news.is_empty() && PetId::new(last).is_none() {
            return Err(CreateError::IdsExhausted);
        }
        let pets: Vec<Pet> = news
            .into_iter()
            .zip(first..)
            .map(|(new, id)| new.into_pet(PetId::new(id).unwrap_or(PetId::MAX)))
            .collect();
        for pet in &pets {
            records.push(pet);
        }
        let changes: Vec<Change> = pets.iter().cloned().map(Change::Created).collect();
        self.feed.record(&changes, unix_secs_now());
        drop(records);
        self.feed.announce();
        Ok(pets)
    }

    /// Adds pets whose ids were given elsewhere (a database's counter):
    /// how an in-memory inventory is kept as a read copy of another store.
    /// `pets` must be in ascending id order and follow on from what the
    /// inventory holds without a gap; pets it already holds (an id at or
    /// below [`len`](Self::len)) are skipped, so two callers that fetched
    /// overlapping ranges may both apply them. Returns how many pets were
    /// added. All or nothing: on a gap nothing is added. One write lock
    /// for the whole slice.
    ///
    /// A durable inventory refuses ([`ApplyError::Durable`]): its pets
    /// come from its journal alone.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::{CategoryId, Inventory, NewPet, PetId, inventory::ApplyError};
    /// let pet = |id| NewPet::new("Rex", CategoryId::MIN).unwrap().into_pet(PetId::new(id).unwrap());
    /// let copy = Inventory::in_memory();
    /// assert_eq!(copy.apply(&[pet(1), pet(2)]), Ok(2));
    /// // Overlapping ranges are fine: pet 2 is already there.
    /// assert_eq!(copy.apply(&[pet(2), pet(3)]), Ok(1));
    /// assert_eq!(copy.apply(&[pet(5)]), Err(ApplyError::Gap { expected: 4, found: 5 }));
    /// assert_eq!(copy.len(), 3);
    /// ```
    pub fn apply(&self, pets: &[Pet]) -> Result<usize, ApplyError> {
        if self.journal.is_some() {
            return Err(ApplyError::Durable);
        }
        let mut records = self.records.write();
        let held = records.ends.len() as u64;
        let fresh = pets
            .iter()
            .position(|pet| pet.id().get() > held)
            .map_or(&[][..], |at| &pets[at..]);
        for (i, pet) in fresh.iter().enumerate() {
            let expected = held + 1 + i as u64;
            if pet.id().get() != expected {
                return Err(ApplyError::Gap {
                    expected,
                    found: pet.id().get(),
                });
            }
        }
        for pet in fresh {
            records.push(pet);
        }
        Ok(fresh.len())
    }

    /// Changes a pet's status by one [`Transition`] and returns the pet as
    /// it now is, if its current status allows the transition; otherwise
    /// nothing changes. A transition is a door to orders (beta): made as
    /// [`transition_by`](Self::transition_by) by the store itself
    /// ([`Actor::store`], which may act on any key's order) at the system
    /// clock's time, so `reserve` places an order, `release` cancels it
    /// and `sell` completes it or records a sale. Decided under the
    /// inventory's lock for steps, so of two racing transitions that both
    /// start from the same status exactly one succeeds. A durable
    /// inventory returns `Ok` once the change is on disk (journal synced)
    /// and visible to readers; the call blocks for that fsync.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::{CategoryId, Inventory, NewPet, PetId, PetStatus, Transition, TransitionError};
    /// let inventory = Inventory::in_memory();
    /// let rex = inventory.create(NewPet::new("Rex", CategoryId::MIN).unwrap()).unwrap();
    /// let reserved = inventory.transition(rex.id(), Transition::Reserve).unwrap();
    /// assert_eq!(reserved.status(), PetStatus::Pending);
    /// assert_eq!(inventory.get(rex.id()), Some(reserved));
    /// let sold = inventory.transition(rex.id(), Transition::Sell).unwrap();
    /// assert_eq!(sold.status(), PetStatus::Sold);
    /// let again = inventory.transition(rex.id(), Transition::Sell).unwrap_err();
    /// assert_eq!(again.to_string(), "pet 1 is sold; sell needs available or pending");
    /// assert_eq!(
    ///     inventory.transition(PetId::new(9).unwrap(), Transition::Sell),
    ///     Err(TransitionError::NotFound(PetId::new(9).unwrap()))
    /// );
    /// ```
    pub fn transition(&self, id: PetId, transition: Transition) -> Result<Pet, TransitionError> {
        match self.transition_many(&[(id, transition)]) {
            Ok(mut outcomes) => outcomes.pop().unwrap_or(Err(TransitionError::NotFound(id))),
            Err(failure) => Err(TransitionError::Storage(failure)),
        }
    }

    /// Several transitions, decided in order (a later one sees an earlier
    /// one's effect, on the same pet too), each with its own outcome, as
    /// [`transition`](Self::transition) would give them one by one. A
    /// durable inventory writes all that succeed in one group commit and
    /// blocks once, for one fsync, for the lot: a server's committer holds
    /// one thread per batch, not one per waiting transition.
    ///
    /// `Err` when the journal failed (before, or while writing these):
    /// then none of them is acknowledged, and an item's outcome is unknown
    /// only in that it may be on disk and come back at the next start.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::{CategoryId, Inventory, NewPet, PetStatus, Transition, TransitionError};
    /// let inventory = Inventory::in_memory();
    /// let rex = inventory.create(NewPet::new("Rex", CategoryId::MIN).unwrap()).unwrap().id();
    /// let outcomes = inventory
    ///     .transition_many(&[(rex, Transition::Reserve), (rex, Transition::Reserve), (rex, Transition::Sell)])
    ///     .unwrap();
    /// assert_eq!(outcomes[0].as_ref().map(|p| p.status()), Ok(PetStatus::Pending));
    /// assert!(matches!(outcomes[1], Err(TransitionError::Conflict { current: PetStatus::Pending, .. })));
    /// assert_eq!(outcomes[2].as_ref().map(|p| p.status()), Ok(PetStatus::Sold));
    /// ```
    pub fn transition_many(
        &self,
        batch: &[(PetId, Transition)],
    ) -> Result<Vec<Result<Pet, TransitionError>>, StorageFailure> {
        self.transition_many_with(batch.iter().map(|&(id, t)| (id, t, None)).collect())
    }

    /// [`transition_many`](Self::transition_many), each transition with
    /// its claimed key when it has one: as [`steps`](Self::steps) by the
    /// store itself ([`Actor::store`]) at the system clock's time.
    fn transition_many_with(
        &self,
        batch: Vec<(PetId, Transition, Option<Claim>)>,
    ) -> Result<Vec<Result<Pet, TransitionError>>, StorageFailure> {
        let at = SystemClock::new().now();
        let actor = Actor::store();
        let requests = batch
            .into_iter()
            .map(|(id, transition, claim)| StepRequest {
                actor: actor.clone(),
                step: Step::Transition(id, transition),
                at,
                claim,
            })
            .collect();
        let outcomes = self.steps(requests)?;
        Ok(outcomes
            .into_iter()
            .map(|outcome| match outcome {
                Ok(Stepped::Pet(pet)) => Ok(pet),
                Ok(Stepped::Order(order)) => Err(TransitionError::NotFound(order.pet())),
                Err(error) => Err(error.into()),
            })
            .collect())
    }

    /// What a request with idempotency key `keyed` finds, before it is
    /// validated or run: [`Seen::New`] (run it), a kept answer to give
    /// again, the key used with another request, or the same request
    /// still running. Expired keys (older than
    /// [`RETENTION`](crate::idempotency::RETENTION) at `keyed.at`) are not found.
    pub fn seen(&self, keyed: &Keyed) -> Seen {
        self.kept.seen(keyed)
    }

    /// Claims `keyed`'s key for a write about to run, for a caller that
    /// batches writes itself ([`create_many_claimed`](Self::create_many_claimed),
    /// [`transition_many_claimed`](Self::transition_many_claimed)): until
    /// the write is durable, a request with the key finds it in flight.
    /// What the key holds instead when it is not new: the claim is also
    /// the question [`seen`](Self::seen) asks, so a caller with a valid
    /// request need not ask that first.
    // A server's batching hook, off the front page: an embedder writes
    // keyed with `create_keyed` and `transition_keyed`.
    #[doc(hidden)]
    pub fn claim(&self, keyed: Keyed) -> Result<Claim, Seen> {
        self.kept.claim(keyed)
    }

    /// How many idempotency keys are kept with their answers.
    pub fn kept_keys(&self) -> usize {
        self.kept.len()
    }

    /// [`create`](Self::create) with an idempotency key: the first
    /// request with the key creates the pet and keeps the answer, as
    /// durably as the pet (the same journal record); the same request
    /// again within [`RETENTION`](crate::idempotency::RETENTION) gets that answer
    /// ([`KeyedOutcome::Replay`]) and creates nothing; another request
    /// with the key is [`KeyedOutcome::Reused`]; one while the first
    /// runs, [`KeyedOutcome::InFlight`]. A create that fails keeps
    /// nothing: the key can be used again.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::*;
    /// use petstore_core::idempotency::*;
    /// let inventory = Inventory::in_memory();
    /// let clock = FakeClock::new(Timestamp::from_unix_secs(1_000));
    /// let keyed = |fingerprint| Keyed {
    ///     scope: Scope::new("shop").unwrap(),
    ///     key: IdempotencyKey::parse_header(b"order-17").unwrap(),
    ///     fingerprint: Fingerprint::from_bytes([fingerprint; 32]),
    ///     at: clock.now(),
    /// };
    /// let rex = || NewPet::new("Rex", CategoryId::MIN).unwrap();
    /// let first = inventory.create_keyed(rex(), keyed(1)).unwrap();
    /// let KeyedOutcome::Done(Answer::Created(pet)) = first else { panic!() };
    /// // A retry gets the same pet; nothing is created again.
    /// assert_eq!(
    ///     inventory.create_keyed(rex(), keyed(1)).unwrap(),
    ///     KeyedOutcome::Replay(Answer::Created(pet))
    /// );
    /// assert_eq!(inventory.len(), 1);
    /// // Another request with the same key is refused.
    /// assert_eq!(inventory.create_keyed(rex(), keyed(2)).unwrap(), KeyedOutcome::Reused);
    /// // A day later the key is free again.
    /// clock.advance(RETENTION);
    /// assert_eq!(inventory.seen(&keyed(2)), Seen::New);
    /// ```
    pub fn create_keyed(&self, new: NewPet, keyed: Keyed) -> Result<KeyedOutcome, CreateError> {
        let claim = match self.claim(keyed) {
            Ok(claim) => claim,
            Err(seen) => return Ok(taken(seen)),
        };
        let mut pets = self.create_many_claimed(vec![(new, Some(claim))])?;
        match pets.pop() {
            Some(pet) => Ok(KeyedOutcome::Done(Answer::Created(pet))),
            None => Err(CreateError::IdsExhausted),
        }
    }

    /// [`create_many`](Self::create_many) where some creates hold a
    /// claimed key ([`claim`](Self::claim)): each pet with a claim is
    /// written in one record with its key, and once the batch is durable
    /// the key keeps [`Answer::Created`]. On an error nothing is stored
    /// and every claim is let go.
    // A server's batching hook, off the front page: an embedder writes
    // keyed with `create_keyed` and `transition_keyed`.
    #[doc(hidden)]
    pub fn create_many_claimed(
        &self,
        batch: Vec<(NewPet, Option<Claim>)>,
    ) -> Result<Vec<Pet>, CreateError> {
        let (news, claims): (Vec<NewPet>, Vec<Option<Claim>>) = batch.into_iter().unzip();
        let pets = match &self.journal {
            Some(journal) => {
                let keys: Vec<Option<&Keyed>> = claims
                    .iter()
                    .map(|c| c.as_ref().map(Claim::keyed))
                    .collect();
                journal.append_many(news, &keys, &|batch, at| self.publish(batch, at))?
            }
            None => self.create_many(news)?,
        };
        for (pet, claim) in pets.iter().zip(claims) {
            if let Some(claim) = claim {
                claim.keep(Answer::Created(pet.clone()));
            }
        }
        Ok(pets)
    }

    /// [`transition`](Self::transition) with an idempotency key, as
    /// [`create_keyed`](Self::create_keyed): the pet as the transition
    /// left it, or the conflict its status made, is kept for the key
    /// (both are [`KeyedOutcome::Done`]); a pet that does not exist, or
    /// a journal that failed, is an `Err` and keeps nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::*;
    /// use petstore_core::idempotency::*;
    /// let inventory = Inventory::in_memory();
    /// let rex = inventory.create(NewPet::new("Rex", CategoryId::MIN).unwrap()).unwrap().id();
    /// let keyed = |key: &[u8]| Keyed {
    ///     scope: Scope::new("shop").unwrap(),
    ///     key: IdempotencyKey::parse_header(key).unwrap(),
    ///     fingerprint: Fingerprint::from_bytes([0; 32]),
    ///     at: Timestamp::from_unix_secs(1_000),
    /// };
    /// let sold = inventory.transition_keyed(rex, Transition::Sell, keyed(b"a")).unwrap();
    /// assert!(matches!(sold, KeyedOutcome::Done(Answer::Transitioned(_))));
    /// let again = inventory.transition_keyed(rex, Transition::Sell, keyed(b"b")).unwrap();
    /// let conflict = Answer::Conflict { id: rex, status: PetStatus::Sold, transition: Transition::Sell };
    /// assert_eq!(again, KeyedOutcome::Done(conflict.clone()));
    /// // The kept conflict is given again, whatever the pet's status now.
    /// inventory.transition(rex, Transition::Release).ok();
    /// assert_eq!(
    ///     inventory.transition_keyed(rex, Transition::Sell, keyed(b"b")).unwrap(),
    ///     KeyedOutcome::Replay(conflict)
    /// );
    /// ```
    pub fn transition_keyed(
        &self,
        id: PetId,
        transition: Transition,
        keyed: Keyed,
    ) -> Result<KeyedOutcome, TransitionError> {
        let claim = match self.claim(keyed) {
            Ok(claim) => claim,
            Err(seen) => return Ok(taken(seen)),
        };
        let mut outcomes = self
            .transition_many_claimed(vec![(id, transition, Some(claim))])
            .map_err(TransitionError::Storage)?;
        match outcomes.pop() {
            Some(Ok(pet)) => Ok(KeyedOutcome::Done(Answer::Transitioned(pet))),
            Some(Err(TransitionError::Conflict {
                id,
                current,
                transition,
            })) => Ok(KeyedOutcome::Done(Answer::Conflict {
                id,
                status: current,
                transition,
            })),
            Some(Err(error)) => Err(error),
            None => Err(TransitionError::NotFound(id)),
        }
    }

    /// [`transition_many`](Self::transition_many) where some transitions
    /// hold a claimed key ([`claim`](Self::claim)): each is written in one
    /// record with its key, a conflict with a key too, and once the batch
    /// is durable the key keeps [`Answer::Transitioned`] or
    /// [`Answer::Conflict`]. A pet not found, or an `Err`, lets its claim
    /// go.
    // A server's batching hook, off the front page: an embedder writes
    // keyed with `create_keyed` and `transition_keyed`.
    #[doc(hidden)]
    pub fn transition_many_claimed(
        &self,
        batch: Vec<(PetId, Transition, Option<Claim>)>,
    ) -> Result<Vec<Result<Pet, TransitionError>>, StorageFailure> {
        self.transition_many_with(batch)
    }

    /// Sets the statuses of pets of a read copy of another store (a
    /// database, where the transitions were decided), in the order given:
    /// the store's commit order, so that the last change of a pet wins.
    /// No transition rule is checked: the store already did. Returns how
    /// many changes were applied. All or nothing: if any names a pet the
    /// copy does not hold yet ([`ApplyError::Unknown`]; apply the pet
    /// first), nothing is applied. One write lock for the whole slice.
    ///
    /// A durable inventory refuses ([`ApplyError::Durable`]), as
    /// [`apply`](Self::apply) does.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::{CategoryId, Inventory, NewPet, PetId, PetStatus, inventory::ApplyError};
    /// let id = |n| PetId::new(n).unwrap();
    /// let copy = Inventory::in_memory();
    /// copy.apply(&[NewPet::new("Rex", CategoryId::MIN).unwrap().into_pet(id(1))]).unwrap();
    /// let changes = [(id(1), PetStatus::Pending), (id(1), PetStatus::Sold)];
    /// assert_eq!(copy.apply_statuses(&changes), Ok(2));
    /// assert_eq!(copy.get(id(1)).unwrap().status(), PetStatus::Sold);
    /// assert_eq!(
    ///     copy.apply_statuses(&[(id(1), PetStatus::Available), (id(2), PetStatus::Sold)]),
    ///     Err(ApplyError::Unknown { id: id(2) })
    /// );
    /// assert_eq!(copy.get(id(1)).unwrap().status(), PetStatus::Sold);
    /// ```
    pub fn apply_statuses(&self, changes: &[(PetId, PetStatus)]) -> Result<usize, ApplyError> {
        if self.journal.is_some() {
            return Err(ApplyError::Durable);
        }
        let mut records = self.records.write();
        let mut indices = Vec::with_capacity(changes.len());
        for &(id, _) in changes {
            indices.push(records.index_of(id).ok_or(ApplyError::Unknown { id })?);
        }
        for (index, &(_, status)) in indices.into_iter().zip(changes) {
            self.change(&mut records, index, status);
        }
        Ok(changes.len())
    }

    /// Publishes a batch of changes, in its order (a durable one once the
    /// journal has it), dated `at` (Unix seconds) for the feed.
    fn publish(&self, changes: &[Change], at: u64) {
        self.publish_locked(changes, at);
        self.feed.announce();
    }

    fn publish_locked(&self, changes: &[Change], at: u64) {
        let mut records = self.records.write();
        let mut book = None;
        for change in changes {
            match change {
                Change::Created(pet) => records.push(pet),
                Change::Changed(id, status) => {
                    if let Some(index) = records.index_of(*id) {
                        self.change(&mut records, index, *status);
                    }
                }
                Change::Order(order) => book.get_or_insert_with(|| self.orders.write()).put(order),
            }
        }
        // Before the locks go: see `feed.rs` on why.
        self.feed.record(changes, at);
    }

    /// Sets one pet's status and drops the kept first pages it reaches,
    /// under the records' write lock.
    fn change(&self, records: &mut Records, index: usize, status: PetStatus) {
        let old = records.statuses[index];
        if old == status {
            return;
        }
        records.set_status(index, status);
        let left = records.by_status[old.index()].len();
        self.final_pages.dropped_by(id_at(index), old, status, left);
    }

    /// The pet with this id, if there is one.
    pub fn get(&self, id: PetId) -> Option<Pet> {
        let records = self.records.read();
        let index = records.index_of(id)?;
        decode(id, records.statuses[index], records.json(index))
    }

    /// The pet with this id as the JSON of a Pet, if there is one.
    pub fn get_json(&self, id: PetId) -> Option<Vec<u8>> {
        let records = self.records.read();
        let index = records.index_of(id)?;
        Some(records.json(index).to_vec())
    }

    /// One page of pets matching the query, ascending by id.
    pub fn list(&self, query: &ListQuery) -> Page {
        let records = self.records.read();
        let mut pets = Vec::with_capacity(query.limit.get());
        let next_after = records.select(query, |index| {
            let id = id_at(index);
            if let Some(pet) = decode(id, records.statuses[index], records.json(index)) {
                pets.push(pet);
            }
        });
        Page { pets, next_after }
    }

    /// One page of pets matching the query, already encoded as the JSON
    /// response body (a bare array of Pet). Byte for byte the same as
    /// `serde_json::to_vec(&inventory.list(query).pets)`.
    ///
    /// The body's capacity is exactly its length, so a server can hand it
    /// on (`bytes::Bytes::from`, say) without another allocation.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::{CategoryId, Inventory, ListQuery, NewPet};
    /// let inventory = Inventory::in_memory();
    /// assert_eq!(inventory.list_json(&ListQuery::new()).body, b"[]");
    /// inventory.create(NewPet::new("Rex", CategoryId::MIN).unwrap()).unwrap();
    /// let page = inventory.list_json(&ListQuery::new());
    /// assert_eq!(
    ///     String::from_utf8(page.body).unwrap(),
    ///     r#"[{"id":1,"name":"Rex","categoryId":1,"status":"available"}]"#
    /// );
    /// ```
    pub fn list_json(&self, query: &ListQuery) -> JsonPage {
        self.list_json_into(query, Vec::new())
    }

    /// [`list_json`](Self::list_json), written into `body` (cleared
    /// first) and returned in the page: a server can hand out buffers it
    /// reuses, instead of allocating one per page. It grows `body` only
    /// when its capacity is short, and then to exactly the page's length.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::{CategoryId, Inventory, ListQuery, NewPet};
    /// let inventory = Inventory::in_memory();
    /// inventory.create(NewPet::new("Rex", CategoryId::MIN).unwrap()).unwrap();
    /// let reused = Vec::with_capacity(4096);
    /// let page = inventory.list_json_into(&ListQuery::new(), reused);
    /// assert_eq!(page.body, inventory.list_json(&ListQuery::new()).body);
    /// assert_eq!(page.body.capacity(), 4096);
    /// ```
    pub fn list_json_into(&self, query: &ListQuery, body: Vec<u8>) -> JsonPage {
        self.records.read().json_page(query, body)
    }

    /// The page of `query` when it is a first page (no cursor) that only
    /// a transition could change, encoded once and shared: `None` for a
    /// page with a cursor, or while no more pets match than the page holds
    /// (a pet created later could still join it, or give it a next page).
    ///
    /// Why creates cannot change it: ids only grow, so the first `limit`
    /// pets matching a filter stay the first once another one matches
    /// after them. A transition that reaches the page (changes a pet on
    /// it, brings one onto it, or leaves its filter without a next page)
    /// drops it, before the transition returns; pages it cannot reach are
    /// kept. Its body is byte for byte [`list_json`](Self::list_json)'s
    /// whenever it is given.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::{CategoryId, Inventory, PageSize, ListQuery, NewPet};
    /// let inventory = Inventory::in_memory();
    /// let first_two = ListQuery::new().limit(PageSize::new(2).unwrap());
    /// for name in ["Rex", "Tom"] {
    ///     inventory.create(NewPet::new(name, CategoryId::MIN).unwrap()).unwrap();
    /// }
    /// // A third pet could still give the page a next page.
    /// assert!(inventory.final_page(&first_two).is_none());
    /// inventory.create(NewPet::new("Kitty", CategoryId::MIN).unwrap()).unwrap();
    /// let page = inventory.final_page(&first_two).unwrap();
    /// assert_eq!(*page.body, *inventory.list_json(&first_two).body);
    /// assert_eq!(page.next_after.get(), 2);
    /// ```
    pub fn final_page(&self, query: &ListQuery) -> Option<Arc<FinalPage>> {
        if query.after.is_some() {
            return None;
        }
        if let Some(page) = self.final_pages.get(query) {
            return Some(page);
        }
        let records = self.records.read();
        let matching = match query.status {
            None => records.ends.len(),
            Some(status) => records.by_status[status.index()].len(),
        };
        if matching <= query.limit.get() {
            return None;
        }
        let page = records.json_page(query, Vec::new());
        let final_page = FinalPage {
            body: page.body.into_boxed_slice(),
            count: page.count,
            next_after: page.next_after?,
        };
        // Kept with the read lock still held: a transition, which drops
        // the pages it reaches under the write lock, comes either before
        // this page was built or after it is kept, never between. Two
        // threads may build it at once: both built the same bytes.
        Some(self.final_pages.keep(query, final_page))
    }

    /// How many pets the inventory holds.
    pub fn len(&self) -> usize {
        self.records.read().ends.len()
    }

    /// Whether the inventory holds no pet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The system clock's time in Unix seconds: what an in-memory
/// inventory's events are dated by.
fn unix_secs_now() -> u64 {
    SystemClock::new().now().unix_secs()
}

/// The outcome of a keyed write whose key was taken (never [`Seen::New`]:
/// a claim that failed found something).
fn taken(seen: Seen) -> KeyedOutcome {
    KeyedOutcome::of_seen(seen).unwrap_or(KeyedOutcome::InFlight)
}
