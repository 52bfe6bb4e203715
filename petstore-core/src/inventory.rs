//! The [`Inventory`]: pets by id, listed in pages, created with dense ids.
//!
//! # Layout and why
//!
//! Pets are never changed or deleted in v1, so storage is append-only:
//!
//! - `arena`: every pet's JSON, encoded once at creation, back to back, each
//!   followed by a `,`. A page of consecutive ids is then one `memcpy`
//!   (`[` + arena slice with its last `,` turned into `]`), and a filtered
//!   page is one copy per pet. Serialising pets on every request was the
//!   largest cost of a list request (see docs/performance.md).
//! - `ends[i]`: where pet `i + 1`'s JSON ends in the arena. Ids are dense,
//!   so the id *is* the index: `get` is O(1).
//! - `statuses[i]`: pet `i + 1`'s status, one byte each. A filtered page
//!   first scans these from the cursor on: for a common status the page
//!   is a few cache lines away.
//! - `by_status[s]`: the ids with status `s`, ascending (ids only grow), so
//!   a filtered page of a rare status is a binary search for the cursor
//!   plus `limit` steps, never a long scan over pets of other statuses.
//!
//! - `final_pages`: the first page of each status filter (or none) and
//!   limit, encoded once it can no longer change: ids only grow and pets
//!   never change, so a first page with more matching pets after it is
//!   final. A client polling the first page gets it without a copy
//!   ([`Inventory::final_page`]). At most 4 x 100 pages (about 1.3 MB
//!   with 10-character names).
//!
//! `get` reads name and category back out of the pet's JSON, whose layout
//! this module alone writes. That keeps a pet at about 89 bytes (1,000,000
//! pets with 10-character names in under 100 MB) instead of holding every
//! pet twice.
//!
//! One `RwLock` guards it all: reads share it, a create holds it for a
//! push. parking_lot's lock is a single word, uncontended in a few
//! nanoseconds, and never poisoned.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use parking_lot::RwLock;

use crate::error::{ApplyError, CreateError, OpenError, StorageFailure};
use crate::journal::{Journal, JournalOptions, JournalStats, Recovery};
use crate::json::{decode, encode};
use crate::pet::{NewPet, Pet, PetId, PetStatus};
use crate::query::{FinalPage, JsonPage, Limit, ListQuery, Page};

/// The pet inventory. `Send + Sync`: share it with an `Arc` and call it
/// through `&self` from any thread.
///
/// # Examples
///
/// ```
/// use petstore_core::{CategoryId, Inventory, Limit, ListQuery, NewPet, PetStatus};
///
/// let inventory = Inventory::in_memory();
/// let cat = CategoryId::new(1).unwrap();
/// for name in ["Rex", "Tom", "Kitty"] {
///     inventory.create(NewPet::new(name, cat).unwrap().with_status(PetStatus::Sold)).unwrap();
/// }
/// let page = inventory.list(&ListQuery::new().limit(Limit::new(2).unwrap()));
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
}

/// The first pages that can no longer change, by status filter and limit
/// (the module's "Layout and why"). Set once each, then read without a
/// lock.
struct FinalPages([[OnceLock<Arc<FinalPage>>; Limit::MAX.get()]; 1 + PetStatus::ALL.len()]);

impl std::fmt::Debug for FinalPages {
    /// How many are kept, not 400 slots.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self
            .0
            .iter()
            .flatten()
            .filter(|slot| slot.get().is_some())
            .count();
        f.debug_struct("FinalPages").field("kept", &kept).finish()
    }
}

impl Default for FinalPages {
    fn default() -> Self {
        FinalPages(std::array::from_fn(|_| {
            std::array::from_fn(|_| OnceLock::new())
        }))
    }
}

impl FinalPages {
    fn slot(&self, query: &ListQuery) -> Option<&OnceLock<Arc<FinalPage>>> {
        let filter = query.status.map_or(0, |status| 1 + status.index());
        self.0.get(filter)?.get(query.limit.get() - 1)
    }
}

#[derive(Debug, Default)]
pub(crate) struct Records {
    arena: Vec<u8>,
    ends: Vec<u64>,
    statuses: Vec<PetStatus>,
    by_status: [Vec<PetId>; 3],
}

impl Inventory {
    /// An empty inventory held in memory only: gone when dropped.
    pub fn in_memory() -> Self {
        Self::default()
    }

    /// A durable inventory kept in `dir` (created if missing): the pets of
    /// its journal are replayed, and every create is on disk before it
    /// returns. See the `journal` module for the format, group commit and
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
        let mut records = Records::default();
        let (journal, recovery) = Journal::open(dir.as_ref(), options, |id, status, json| {
            records.push_json(id, status, json)
        })?;
        Ok(Inventory {
            records: RwLock::new(records),
            journal: Some(journal),
            recovery: Some(recovery),
            final_pages: FinalPages::default(),
        })
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
            return journal.append(new, &|batch: &[Pet]| {
                let mut records = self.records.write();
                for pet in batch {
                    records.push(pet);
                }
            });
        }
        let mut records = self.records.write();
        let next = records.ends.len() as u64 + 1;
        let id = PetId::new(next).ok_or(CreateError::IdsExhausted)?;
        let pet = new.into_pet(id);
        records.push(&pet);
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
            return journal.append_many(news, &|batch: &[Pet]| {
                let mut records = self.records.write();
                for pet in batch {
                    records.push(pet);
                }
            });
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
    /// use petstore_core::{ApplyError, CategoryId, Inventory, NewPet, PetId};
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

    /// The page of `query` when it is a first page (no cursor) that can
    /// never change again, encoded once and shared: `None` for a page with
    /// a cursor, or while no more pets match than the page holds (a pet
    /// created later could still join it, or give it a next page).
    ///
    /// Why it cannot change: ids only grow and pets never change, so the
    /// first `limit` pets matching a filter stay the first once another
    /// one matches after them. Its body is byte for byte
    /// [`list_json`](Self::list_json)'s, then and for ever.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::{CategoryId, Inventory, Limit, ListQuery, NewPet};
    /// let inventory = Inventory::in_memory();
    /// let first_two = ListQuery::new().limit(Limit::new(2).unwrap());
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
        let slot = self.final_pages.slot(query)?;
        if let Some(page) = slot.get() {
            return Some(page.clone());
        }
        let page = {
            let records = self.records.read();
            let matching = match query.status {
                None => records.ends.len(),
                Some(status) => records.by_status[status.index()].len(),
            };
            if matching <= query.limit.get() {
                return None;
            }
            records.json_page(query, Vec::new())
        };
        let final_page = FinalPage {
            body: page.body.into_boxed_slice(),
            count: page.count,
            next_after: page.next_after?,
        };
        // Two threads may build it at once: both built the same bytes.
        Some(slot.get_or_init(|| Arc::new(final_page)).clone())
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

impl Records {
    /// [`Inventory::list_json_into`] under the lock.
    fn json_page(&self, query: &ListQuery, mut body: Vec<u8>) -> JsonPage {
        body.clear();
        if query.status.is_none() {
            // Consecutive ids are consecutive in the arena: one copy.
            let (range, next_after) = self.all_range(query);
            // `[`, the pets with their commas, the last comma becoming `]`.
            body.reserve_exact((1 + self.arena_span(&range)).max(2));
            body.push(b'[');
            if !range.is_empty() {
                let start = self.start(range.start);
                let end = self.end(range.end - 1);
                body.extend_from_slice(&self.arena[start..end]);
            }
            close_array(&mut body);
            return JsonPage {
                body,
                count: range.len(),
                next_after,
            };
        }
        if let Some((ids, next_after)) = self.first_page_of_status(query) {
            self.write_pets(ids, &mut body);
            return JsonPage {
                body,
                count: ids.len(),
                next_after,
            };
        }
        // The matches' bytes first, so that the body is allocated once,
        // exactly ([`Runs`]).
        let mut runs = Runs::new();
        let mut count = 0;
        let next_after = self.select(query, |index| {
            count += 1;
            runs.push(self, index);
        });
        runs.write(&self.arena, &mut body);
        JsonPage {
            body,
            count,
            next_after,
        }
    }
}

/// The arena's bytes of at most a page of pets ([`Limit::MAX`]), as runs:
/// pets next to each other in the arena (consecutive ids, a run of one
/// status) become one range and one copy, and the page's length is known
/// before its body grows, so that it grows once, exactly.
///
/// Why one pass for the runs and one for the copies: every pet's bounds
/// are looked up once, where a pass for the length and a pass for the
/// copies each looked them up again (a filtered first page, whose pets
/// are rarely neighbours, is about 20 runs of one pet; `scripts/profile`).
/// The filtered page of a cursor and the first page of a status share it.
struct Runs {
    ranges: [(usize, usize); Limit::MAX.get()],
    len: usize,
    span: usize,
}

impl Runs {
    fn new() -> Self {
        Runs {
            ranges: [(0, 0); Limit::MAX.get()],
            len: 0,
            span: 0,
        }
    }

    /// Adds the pet at `index` (after the ones added before it).
    fn push(&mut self, records: &Records, index: usize) {
        let (start, end) = (records.start(index), records.end(index));
        self.span += end - start;
        match self
            .len
            .checked_sub(1)
            .and_then(|last| self.ranges.get_mut(last))
        {
            Some(last) if last.1 == start => last.1 = end,
            _ => {
                if let Some(slot) = self.ranges.get_mut(self.len) {
                    *slot = (start, end);
                    self.len += 1;
                }
            }
        }
    }

    /// The JSON array of the pets added, into `body`.
    fn write(&self, arena: &[u8], body: &mut Vec<u8>) {
        body.reserve_exact((1 + self.span).max(2));
        body.push(b'[');
        for &(start, end) in &self.ranges[..self.len] {
            body.extend_from_slice(&arena[start..end]);
        }
        close_array(body);
    }
}

/// Turns `[a,b,` into `[a,b]` and `[` into `[]`.
fn close_array(body: &mut Vec<u8>) {
    match body.last_mut() {
        Some(last @ b',') => *last = b']',
        _ => body.push(b']'),
    }
}

fn id_at(index: usize) -> PetId {
    // `index < ends.len()`, and `create` never pushes past `PetId::MAX`.
    PetId::new(index as u64 + 1).unwrap_or(PetId::MAX)
}

impl Records {
    fn index_of(&self, id: PetId) -> Option<usize> {
        let index = usize::try_from(id.get() - 1).ok()?;
        (index < self.ends.len()).then_some(index)
    }

    fn start(&self, index: usize) -> usize {
        match index {
            0 => 0,
            _ => self.ends[index - 1] as usize,
        }
    }

    /// End of the pet's JSON *including* its trailing comma.
    fn end(&self, index: usize) -> usize {
        self.ends[index] as usize
    }

    /// The pet's JSON without the trailing comma.
    fn json(&self, index: usize) -> &[u8] {
        &self.arena[self.start(index)..self.end(index) - 1]
    }

    fn arena_span(&self, range: &std::ops::Range<usize>) -> usize {
        match range.is_empty() {
            true => 0,
            false => self.end(range.end - 1) - self.start(range.start),
        }
    }

    fn push(&mut self, pet: &Pet) {
        encode(pet, &mut self.arena);
        self.push_encoded(pet.id(), pet.status());
    }

    /// Appends a pet whose JSON, exactly as [`encode`] writes it, is given.
    pub(crate) fn push_json(&mut self, id: PetId, status: PetStatus, json: &[u8]) {
        self.arena.extend_from_slice(json);
        self.push_encoded(id, status);
    }

    fn push_encoded(&mut self, id: PetId, status: PetStatus) {
        self.arena.push(b',');
        self.ends.push(self.arena.len() as u64);
        self.statuses.push(status);
        self.by_status[status.index()].push(id);
    }

    /// The first page of a status (a filter and no cursor): the first ids
    /// of the status's index, found without a scan or a search, and the
    /// cursor of the next page. `None` for any other query.
    fn first_page_of_status(&self, query: &ListQuery) -> Option<(&[PetId], Option<PetId>)> {
        let status = query.status.filter(|_| query.after.is_none())?;
        let ids = &self.by_status[status.index()];
        let page = &ids[..query.limit.get().min(ids.len())];
        let next = page.last().copied().filter(|_| ids.len() > page.len());
        Some((page, next))
    }

    /// Writes the JSON array of the pets `ids` (ascending, at most a
    /// page: [`Limit::MAX`]) into `body`, growing it at most once, to
    /// exactly its length ([`Runs`]).
    fn write_pets(&self, ids: &[PetId], body: &mut Vec<u8>) {
        debug_assert!(ids.len() <= Limit::MAX.get());
        let mut runs = Runs::new();
        for id in ids {
            runs.push(self, id.get() as usize - 1);
        }
        runs.write(&self.arena, body);
    }

    /// Indices of the first page of all pets (no status filter).
    fn all_range(&self, query: &ListQuery) -> (std::ops::Range<usize>, Option<PetId>) {
        let len = self.ends.len();
        // Ids are dense: the first id greater than `after` is at index `after`.
        let start = query.after.map_or(0, |a| a.get().min(len as u64) as usize);
        let end = start.saturating_add(query.limit.get()).min(len);
        let next = (end < len && end > start).then(|| id_at(end - 1));
        (start..end, next)
    }

    /// Calls `visit` with the index of each pet of the page, in order, and
    /// returns the cursor of the next page.
    fn select(&self, query: &ListQuery, mut visit: impl FnMut(usize)) -> Option<PetId> {
        match query.status {
            None => {
                let (range, next) = self.all_range(query);
                range.for_each(visit);
                next
            }
            Some(status) => {
                let ids = &self.by_status[status.index()];
                let limit = query.limit.get();
                let len = self.statuses.len();
                // First look at the statuses right after the cursor: one
                // byte per pet in id order, so a page of a common status is
                // a few cache lines away. A binary search of `ids` from a
                // cursor deep in a large inventory misses the cache at
                // nearly every step: 1.5 to 2 us a page at 1,000,000 pets,
                // against about 1 us with the scan (docs/core-benchmarks.md).
                let from = query.after.map_or(0, |a| a.get().min(len as u64) as usize);
                let budget = from
                    .saturating_add(SCAN_PER_PET * limit + SCAN_EXTRA)
                    .min(len);
                let mut count = 0;
                let mut last = None;
                // Every pet below `index` has been looked at.
                let mut index = from;
                for &s in &self.statuses[from..budget] {
                    if count == limit {
                        break;
                    }
                    if s == status {
                        visit(index);
                        count += 1;
                        last = Some(index);
                    }
                    index += 1;
                }
                // A rare status did not fill the page there: the rest by
                // binary search.
                if count < limit && index < len {
                    let start = ids.partition_point(|id| id.get() <= index as u64);
                    let end = start.saturating_add(limit - count).min(ids.len());
                    for id in &ids[start..end] {
                        let at = id.get() as usize - 1;
                        visit(at);
                        last = Some(at);
                    }
                }
                // More after the page exactly when the status's largest id
                // is beyond the page's last one.
                let last = id_at(last?);
                ids.last().is_some_and(|max| *max > last).then_some(last)
            }
        }
    }
}

/// How far past the cursor `Records::select` scans the statuses for a
/// filtered page before it falls back to a binary search: 8 pets per pet
/// wanted (a status held by a third of the pets needs 3), plus a margin.
const SCAN_PER_PET: usize = 8;
const SCAN_EXTRA: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{escape_into, parse_canonical};
    use crate::pet::CategoryId;
    use crate::query::Limit;
    use proptest::prelude::*;

    fn pet(id: u64, name: &str, category: u64, status: PetStatus) -> Option<Pet> {
        Some(Pet::from_parts(
            PetId::new(id)?,
            name.to_owned(),
            CategoryId::new(category)?,
            status,
        ))
    }

    #[test]
    fn an_applied_copy_answers_like_the_original() {
        let original = Inventory::in_memory();
        let mut pets = Vec::new();
        for (i, status) in PetStatus::ALL.iter().cycle().take(10).enumerate() {
            let name = format!("pet {i}");
            let new = NewPet::new(name, CategoryId::MIN).map(|n| n.with_status(*status));
            let created = new.ok().and_then(|n| original.create(n).ok());
            pets.extend(created);
        }
        let copy = Inventory::in_memory();
        assert_eq!(copy.apply(&pets[..4]), Ok(4));
        assert_eq!(
            copy.apply(&pets[7..]),
            Err(ApplyError::Gap {
                expected: 5,
                found: 8
            })
        );
        assert_eq!(copy.apply(&pets[2..]), Ok(6));
        for status in [None, Some(PetStatus::Sold)] {
            let mut query = ListQuery::new();
            query.status = status;
            assert_eq!(copy.list_json(&query).body, original.list_json(&query).body);
        }
        assert_eq!(copy.get(PetId::MIN), original.get(PetId::MIN));
    }

    #[test]
    fn encode_matches_serde_json_and_decodes_back() {
        let names = [
            "Rex",
            "a\"b\\c",
            "é€😀",
            "x\u{7f}",
            "1234",
            r#"","categoryId":5"#,
        ];
        for name in names {
            for status in PetStatus::ALL {
                for (id, cat) in [(1, 1), (9, 10), (PetId::MAX.get(), CategoryId::MAX.get())] {
                    let Some(p) = pet(id, name, cat, status) else {
                        panic!("bad test pet")
                    };
                    let mut ours = Vec::new();
                    encode(&p, &mut ours);
                    assert_eq!(Some(ours.clone()), serde_json::to_vec(&p).ok(), "{name:?}");
                    assert_eq!(p.to_json(), ours);
                    assert_eq!(decode(p.id(), status, &ours), Some(p));
                }
            }
        }
    }

    #[test]
    fn canonical_parse_accepts_exactly_what_encode_writes() {
        for name in ["Rex", "é€😀 x", "1234"] {
            for status in PetStatus::ALL {
                let p = pet(123, name, 45, status).unwrap_or_else(|| panic!("bad test pet"));
                let mut json = Vec::new();
                encode(&p, &mut json);
                assert_eq!(parse_canonical(&json), Some((p.id(), status)));
            }
        }
        // Valid pets that are not canonical (or need escapes) take the slow path.
        for other in [
            r#"{"id":1,"name":"a\"b","categoryId":1,"status":"sold"}"#,
            r#"{"id":01,"name":"a","categoryId":1,"status":"sold"}"#,
            r#"{"id":1, "name":"a","categoryId":1,"status":"sold"}"#,
            r#"{"id":1,"name":"a","categoryId":0,"status":"sold"}"#,
            r#"{"id":1,"name":"a","categoryId":1,"status":"lost"}"#,
            r#"{"id":1,"name":" ","categoryId":1,"status":"sold"}"#,
            r#"{"id":0,"name":"a","categoryId":1,"status":"sold"}"#,
            r#"{"id":1,"name":"a","categoryId":99999999999999999999,"status":"sold"}"#,
            r#"{"id":1,"name":"a","categoryId":1,"status":"sold"} "#,
        ] {
            assert_eq!(parse_canonical(other.as_bytes()), None, "{other}");
        }
    }

    #[test]
    fn escapes_control_characters_like_serde_json() {
        let mut out = Vec::new();
        escape_into("\u{0}\u{1f}\n\u{8}\u{c}", &mut out);
        assert_eq!(
            Some(out),
            serde_json::to_vec("\u{0}\u{1f}\n\u{8}\u{c}")
                .ok()
                .map(|v| v[1..v.len() - 1].to_vec())
        );
    }

    #[test]
    fn cursor_past_the_end_and_limits() {
        let inv = Inventory::in_memory();
        assert_eq!(inv.list(&ListQuery::new()), Page::default());
        for i in 0..5 {
            let status = PetStatus::ALL[i % 3];
            let new = NewPet::new(format!("p{i}"), CategoryId::MIN).map(|n| n.with_status(status));
            assert!(new.ok().map(|n| inv.create(n).is_ok()) == Some(true));
        }
        let q = |limit: u64, after: Option<u64>| {
            let mut q = ListQuery::new();
            q.limit = Limit::new(limit).unwrap_or_default();
            q.after = after.and_then(PetId::new);
            q
        };
        assert_eq!(inv.list(&q(5, None)).next_after, None);
        assert_eq!(inv.list(&q(4, None)).next_after, PetId::new(4));
        assert_eq!(inv.list(&q(1, Some(4))).pets.len(), 1);
        assert_eq!(inv.list(&q(1, Some(4))).next_after, None);
        assert_eq!(inv.list(&q(3, Some(5))), Page::default());
        assert_eq!(inv.list(&q(3, Some(PetId::MAX.get()))), Page::default());
        assert_eq!(inv.list_json(&q(3, Some(5))).body, b"[]");
        // available: ids 1 and 4
        let sold_after = q(1, None).status(PetStatus::Available);
        let page = inv.list(&sold_after);
        assert_eq!(page.next_after, PetId::new(1));
        let page = inv.list(&sold_after.after(PetId::MIN));
        assert_eq!(
            page.pets.iter().map(|p| p.id().get()).collect::<Vec<_>>(),
            [4]
        );
        assert_eq!(page.next_after, None);
        assert_eq!(
            inv.get(PetId::MIN).map(|p| p.name().to_owned()),
            Some("p0".into())
        );
        assert_eq!(inv.get(PetId::new(6).unwrap_or(PetId::MAX)), None);
        assert_eq!(inv.get(PetId::MAX), None);
    }

    #[test]
    fn a_rare_status_is_found_on_either_side_of_the_scan_budget() {
        // Only the last pet is sold; for every inventory size up to past
        // the scan budget, it is found by the scan or by the fallback.
        let create = |inv: &Inventory, status: PetStatus| {
            let new = NewPet::new("p", CategoryId::MIN).map(|p| p.with_status(status));
            match new.map(|p| inv.create(p)) {
                Ok(Ok(pet)) => pet,
                _ => panic!("create failed"),
            }
        };
        for n in 1..=SCAN_PER_PET * 3 + SCAN_EXTRA + 3 {
            let inv = Inventory::in_memory();
            for _ in 1..n {
                create(&inv, PetStatus::Available);
            }
            let last = create(&inv, PetStatus::Sold);
            for limit in 1..=3 {
                let q = ListQuery::new()
                    .status(PetStatus::Sold)
                    .limit(Limit::new(limit).unwrap_or_default());
                let page = inv.list(&q);
                assert_eq!(
                    page.pets,
                    std::slice::from_ref(&last),
                    "n {n} limit {limit}"
                );
                assert_eq!(page.next_after, None);
                if let Some(before) = PetId::new(n as u64 - 1) {
                    assert_eq!(inv.list(&q.after(before)).pets, std::slice::from_ref(&last));
                }
                assert_eq!(inv.list(&q.after(last.id())), Page::default());
            }
        }
    }

    fn arb_new_pet() -> impl Strategy<Value = NewPet> {
        (
            "[a-z\"\\\\é ]{0,6}[a-z]",
            1..=4u64,
            prop::sample::select(PetStatus::ALL.to_vec()),
        )
            .prop_filter_map("valid", |(name, cat, status)| {
                Some(
                    NewPet::new(name, CategoryId::new(cat)?)
                        .ok()?
                        .with_status(status),
                )
            })
    }

    fn arb_query() -> impl Strategy<Value = ListQuery> {
        (
            1..=100u64,
            prop::option::of(prop::sample::select(PetStatus::ALL.to_vec())),
            prop::option::of(1..=260u64),
        )
            .prop_map(|(limit, status, after)| ListQuery {
                limit: Limit::new(limit).unwrap_or_default(),
                status,
                after: after.and_then(PetId::new),
            })
    }

    /// What `list` must return, computed the slow, obvious way.
    fn naive(all: &[Pet], q: &ListQuery) -> Page {
        let matching: Vec<&Pet> = all
            .iter()
            .filter(|p| q.status.is_none_or(|s| p.status() == s))
            .filter(|p| q.after.is_none_or(|a| p.id() > a))
            .collect();
        let pets: Vec<Pet> = matching
            .iter()
            .take(q.limit.get())
            .map(|p| (*p).clone())
            .collect();
        let next_after = (matching.len() > pets.len())
            .then(|| pets.last().map(Pet::id))
            .flatten();
        Page { pets, next_after }
    }

    proptest! {
        /// Inventories where one status is common and the others rare
        /// (alone or in runs), with small pages: filtered pages come from
        /// the status scan, the binary-search fallback, or both.
        #[test]
        fn filtered_pages_of_rare_and_common_statuses_equal_naive(
            statuses in prop::collection::vec(
                prop_oneof![
                    40 => Just(vec![PetStatus::Available]),
                    1 => prop::sample::select(PetStatus::ALL.to_vec()).prop_map(|s| vec![s]),
                    1 => (prop::sample::select(PetStatus::ALL.to_vec()), 1..40usize)
                        .prop_map(|(s, n)| vec![s; n]),
                ],
                0..800,
            ),
            queries in prop::collection::vec(
                (1..=12u64, prop::sample::select(PetStatus::ALL.to_vec()), prop::option::of(1..=1_700u64)),
                1..30,
            ),
        ) {
            let inv = Inventory::in_memory();
            let mut all = Vec::new();
            for (i, status) in statuses.into_iter().flatten().enumerate() {
                let new = NewPet::new(format!("p{i}"), CategoryId::MIN)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?
                    .with_status(status);
                all.push(inv.create(new).map_err(|e| TestCaseError::fail(e.to_string()))?);
            }
            for (limit, status, after) in queries {
                let mut q = ListQuery {
                    limit: Limit::new(limit).unwrap_or_default(),
                    status: Some(status),
                    after: after.and_then(PetId::new),
                };
                let want = naive(&all, &q);
                prop_assert_eq!(&inv.list(&q), &want);
                let json = inv.list_json(&q);
                prop_assert_eq!(json.body.capacity(), json.body.len());
                prop_assert_eq!(Some(json.body), serde_json::to_vec(&want.pets).ok());
                prop_assert_eq!(json.next_after, want.next_after);
                // And the rest of the pages, by the cursor.
                let mut seen: Vec<PetId> = want.pets.iter().map(Pet::id).collect();
                while let Some(after) = inv.list(&q).next_after {
                    q.after = Some(after);
                    seen.extend(inv.list(&q).pets.iter().map(Pet::id));
                }
                let first = after.unwrap_or(0);
                let matching: Vec<PetId> = all
                    .iter()
                    .filter(|p| p.status() == status && p.id().get() > first)
                    .map(Pet::id)
                    .collect();
                prop_assert_eq!(seen, matching);
            }
        }

        /// Creates interleaved with asks for first pages: a final page is
        /// given only when more pets match than it holds, equals the
        /// naive page then, and still equals it after every later create.
        #[test]
        fn final_pages_equal_the_naive_page_then_and_for_ever(
            steps in prop::collection::vec(
                prop_oneof![
                    3 => prop::sample::select(PetStatus::ALL.to_vec()).prop_map(Ok),
                    1 => (1..=6u64, prop::option::of(prop::sample::select(PetStatus::ALL.to_vec())))
                        .prop_map(Err),
                ],
                1..120,
            ),
        ) {
            let inv = Inventory::in_memory();
            let mut all = Vec::new();
            let mut given = Vec::new();
            for step in steps {
                match step {
                    Ok(status) => {
                        let new = NewPet::new(format!("p{}", all.len()), CategoryId::MIN)
                            .map_err(|e| TestCaseError::fail(e.to_string()))?
                            .with_status(status);
                        all.push(inv.create(new).map_err(|e| TestCaseError::fail(e.to_string()))?);
                    }
                    Err((limit, status)) => {
                        let q = ListQuery {
                            limit: Limit::new(limit).unwrap_or_default(),
                            status,
                            after: None,
                        };
                        let matching = all.iter().filter(|p| status.is_none_or(|s| p.status() == s)).count();
                        let page = inv.final_page(&q);
                        prop_assert_eq!(page.is_some(), matching > q.limit.get());
                        if let Some(page) = page {
                            given.push((q, page));
                        }
                        // A cursor is never a final page.
                        prop_assert!(inv.final_page(&q.after(PetId::MIN)).is_none());
                    }
                }
                for (q, page) in &given {
                    let want = naive(&all, q);
                    prop_assert_eq!(Some(page.body.to_vec()), serde_json::to_vec(&want.pets).ok());
                    prop_assert_eq!(page.count, want.pets.len());
                    prop_assert_eq!(Some(page.next_after), want.next_after);
                    prop_assert_eq!(&inv.final_page(q), &Some(page.clone()));
                }
            }
        }

        #[test]
        fn list_equals_naive_filter_sort_take(
            pets in prop::collection::vec(arb_new_pet(), 0..250),
            queries in prop::collection::vec(arb_query(), 1..20),
        ) {
            let inv = Inventory::in_memory();
            let mut all = Vec::new();
            for new in pets {
                all.push(inv.create(new).map_err(|e| TestCaseError::fail(e.to_string()))?);
            }
            for q in &queries {
                let want = naive(&all, q);
                prop_assert_eq!(&inv.list(q), &want);
                let json = inv.list_json(q);
                prop_assert_eq!(json.body.capacity(), json.body.len());
                let reused = inv.list_json_into(q, b"left over from another page".to_vec());
                prop_assert_eq!(&reused.body, &json.body);
                prop_assert_eq!(reused.next_after, json.next_after);
                prop_assert_eq!(Some(json.body), serde_json::to_vec(&want.pets).ok());
                prop_assert_eq!(json.count, want.pets.len());
                prop_assert_eq!(json.next_after, want.next_after);
            }
            for p in &all {
                prop_assert_eq!(inv.get(p.id()), Some(p.clone()));
                prop_assert_eq!(inv.get_json(p.id()), serde_json::to_vec(p).ok());
            }
        }

        #[test]
        fn cursor_paging_visits_every_match_once(
            pets in prop::collection::vec(arb_new_pet(), 0..250),
            limit in 1..=100u64,
            status in prop::option::of(prop::sample::select(PetStatus::ALL.to_vec())),
        ) {
            let inv = Inventory::in_memory();
            let mut want = Vec::new();
            for new in pets {
                let pet = inv.create(new).map_err(|e| TestCaseError::fail(e.to_string()))?;
                if status.is_none_or(|s| s == pet.status()) {
                    want.push(pet.id());
                }
            }
            let mut seen = Vec::new();
            let mut query = ListQuery { limit: Limit::new(limit).unwrap_or_default(), status, after: None };
            loop {
                let page = inv.list(&query);
                prop_assert!(page.pets.len() <= limit as usize);
                seen.extend(page.pets.iter().map(Pet::id));
                match page.next_after {
                    Some(after) => query.after = Some(after),
                    None => break,
                }
            }
            prop_assert_eq!(seen, want);
        }
    }
}
