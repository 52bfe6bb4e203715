//! Several threads creating and listing at once, on an in-memory and on a
//! durable inventory. During the run every page a reader sees must be
//! ascending with no gaps (ids are dense and a pet becomes visible only
//! after every smaller id); afterwards the ids are exactly 1..=n and every
//! created pet is visible through `get`, `list` and `list_json`.
//!
//! Each pet describes itself: its name says which writer made it and its
//! sequence number there, and its category and status follow from those,
//! so a reader can check any pet it sees without knowing the others.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

use petstore_core::{
    CategoryId, FsyncPolicy, Inventory, JournalOptions, ListQuery, NewPet, PageSize, Pet, PetId,
    PetStatus,
};

const WRITERS: usize = 4;
const READERS: usize = 3;

fn status_of(seq: usize) -> PetStatus {
    PetStatus::ALL[seq % 3]
}

fn new_pet(writer: usize, seq: usize) -> NewPet {
    NewPet::new(
        format!("w{writer}-{seq}"),
        CategoryId::new(writer as u64 + 1).unwrap(),
    )
    .unwrap()
    .with_status(status_of(seq))
}

/// Checks that a pet is one some writer made: its fields agree with its
/// name.
fn assert_self_consistent(pet: &Pet) {
    let (writer, seq) = pet
        .name()
        .strip_prefix('w')
        .and_then(|rest| rest.split_once('-'))
        .unwrap_or_else(|| panic!("not a test pet: {pet:?}"));
    let (writer, seq): (usize, usize) = (writer.parse().unwrap(), seq.parse().unwrap());
    assert!(writer < WRITERS, "{pet:?}");
    assert_eq!(pet.category_id().get(), writer as u64 + 1, "{pet:?}");
    assert_eq!(pet.status(), status_of(seq), "{pet:?}");
}

/// A page of the unfiltered list: ids ascending with no gaps, starting
/// right after the cursor, full unless it is the last page.
fn assert_dense_page(pets: &[Pet], query: &ListQuery, next_after: Option<PetId>) {
    let first = query.after.map_or(1, |a| a.get() + 1);
    for (i, pet) in pets.iter().enumerate() {
        assert_eq!(
            pet.id().get(),
            first + i as u64,
            "gap or disorder after {:?}: {:?}",
            query.after,
            pets.iter().map(|p| p.id().get()).collect::<Vec<_>>()
        );
        assert_self_consistent(pet);
    }
    assert!(pets.len() <= query.limit.get());
    if let Some(next) = next_after {
        assert_eq!(
            pets.len(),
            query.limit.get(),
            "a short page that is not the last"
        );
        assert_eq!(Some(next), pets.last().map(Pet::id));
    }
}

/// A page of a filtered list: ascending, only that status.
fn assert_filtered_page(pets: &[Pet], query: &ListQuery) {
    let mut previous = query.after.map_or(0, PetId::get);
    for pet in pets {
        assert!(pet.id().get() > previous, "not ascending: {pets:?}");
        previous = pet.id().get();
        assert_eq!(Some(pet.status()), query.status);
        assert_self_consistent(pet);
    }
}

/// A small deterministic generator per thread.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Drops when a writer ends; the last one out tells the readers.
struct WriterOut<'a>(&'a AtomicUsize, &'a AtomicBool);

impl Drop for WriterOut<'_> {
    fn drop(&mut self) {
        if self.0.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.1.store(true, Ordering::SeqCst);
        }
    }
}

/// Runs writers and readers against `inventory` at once; returns every
/// created pet, in the order each writer made them.
fn hammer(inventory: &Inventory, per_writer: usize) -> Vec<Vec<Pet>> {
    let start = Barrier::new(WRITERS + READERS);
    let writers_left = AtomicUsize::new(WRITERS);
    let done = AtomicBool::new(false);
    let pages_checked = AtomicUsize::new(0);

    let created = std::thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|writer| {
                let (start, writers_left, done) = (&start, &writers_left, &done);
                s.spawn(move || {
                    // Counts this writer out even if it panics, so readers stop.
                    let _out = WriterOut(writers_left, done);
                    start.wait();
                    let mut mine = Vec::with_capacity(per_writer);
                    for seq in 0..per_writer {
                        let pet = inventory.create(new_pet(writer, seq)).unwrap();
                        // Read your own write, at once, every way.
                        assert_eq!(inventory.get(pet.id()).as_ref(), Some(&pet));
                        if seq % 16 == 0 {
                            let before = PetId::new(pet.id().get() - 1);
                            let mut q = ListQuery::new().limit(PageSize::MIN);
                            q.after = before;
                            assert_eq!(inventory.list(&q).pets, std::slice::from_ref(&pet));
                        }
                        // One writer's ids grow: its creates are in order.
                        if let Some(last) = mine.last().map(Pet::id) {
                            assert!(pet.id() > last);
                        }
                        mine.push(pet);
                    }
                    mine
                })
            })
            .collect();

        for reader in 0..READERS {
            let (start, done, pages_checked) = (&start, &done, &pages_checked);
            s.spawn(move || {
                let mut rng = Rng(0x9e37_79b9 + reader as u64);
                let mut seen_len = 0;
                start.wait();
                loop {
                    // Checked after a last pass, so the final state is read too.
                    let finished = done.load(Ordering::SeqCst);

                    // What is visible only grows, and all of it is readable.
                    let len = inventory.len();
                    assert!(len >= seen_len, "len went from {seen_len} to {len}");
                    seen_len = len;
                    if len > 0 {
                        let id = PetId::new(rng.below(len as u64) + 1).unwrap();
                        let pet = inventory.get(id).expect("a pet below len is visible");
                        assert_eq!(pet.id(), id);
                        assert_self_consistent(&pet);
                        let json = inventory.get_json(id).unwrap();
                        assert_eq!(serde_json::from_slice::<Pet>(&json).unwrap(), pet);
                    }

                    // Page through the whole unfiltered list with the cursor
                    // while it grows: no gap, no repeat, across pages too.
                    let limit = PageSize::new(rng.below(100) + 1).unwrap();
                    let mut query = ListQuery::new().limit(limit);
                    let mut expected_next = 1;
                    loop {
                        let page = if rng.below(2) == 0 {
                            inventory.list(&query)
                        } else {
                            let json = inventory.list_json(&query);
                            let pets: Vec<Pet> = serde_json::from_slice(&json.body).unwrap();
                            assert_eq!(json.count, pets.len());
                            petstore_core::Page {
                                pets,
                                next_after: json.next_after,
                            }
                        };
                        assert_dense_page(&page.pets, &query, page.next_after);
                        if let Some(first) = page.pets.first() {
                            assert_eq!(first.id().get(), expected_next);
                        }
                        expected_next += page.pets.len() as u64;
                        pages_checked.fetch_add(1, Ordering::Relaxed);
                        match page.next_after {
                            Some(after) => query.after = Some(after),
                            None => break,
                        }
                    }
                    // Everything that was visible before paging was seen.
                    assert!(expected_next > len as u64);

                    // A filtered page from a random cursor.
                    let status = PetStatus::ALL[rng.below(3) as usize];
                    let mut query = ListQuery::new().status(status).limit(limit);
                    query.after = PetId::new(rng.below(len as u64 + 1));
                    let page = inventory.list(&query);
                    assert_filtered_page(&page.pets, &query);
                    let json = inventory.list_json(&query);
                    let from_json: Vec<Pet> = serde_json::from_slice(&json.body).unwrap();
                    assert_filtered_page(&from_json, &query);

                    if finished {
                        break;
                    }
                }
            });
        }

        writers
            .into_iter()
            .map(|w| w.join().unwrap())
            .collect::<Vec<_>>()
    });
    assert!(pages_checked.load(Ordering::Relaxed) > 0);
    created
}

/// After the run: ids unique and exactly 1..=n, every pet visible through
/// `get`, and the full paging (filtered or not) returns exactly them.
fn assert_complete(inventory: &Inventory, created: &[Vec<Pet>], per_writer: usize) {
    let n = WRITERS * per_writer;
    let mut all: Vec<Pet> = created.iter().flatten().cloned().collect();
    assert_eq!(all.len(), n);
    let ids: HashSet<u64> = all.iter().map(|p| p.id().get()).collect();
    assert_eq!(ids.len(), n, "duplicate ids");
    assert_eq!(ids, (1..=n as u64).collect::<HashSet<_>>(), "ids not dense");
    assert_eq!(inventory.len(), n);
    for (writer, pets) in created.iter().enumerate() {
        for (seq, pet) in pets.iter().enumerate() {
            assert_eq!(pet.name(), format!("w{writer}-{seq}"));
            assert_eq!(inventory.get(pet.id()).as_ref(), Some(pet));
        }
    }
    assert_eq!(inventory.get(PetId::new(n as u64 + 1).unwrap()), None);

    all.sort_by_key(Pet::id);
    // Every filter: none, and each of the three statuses.
    let filters = std::iter::once(None).chain(PetStatus::ALL.map(Some));
    for status in filters {
        let want: Vec<&Pet> = all
            .iter()
            .filter(|p| status.is_none_or(|s| p.status() == s))
            .collect();
        if let Some(s) = status {
            // Every writer made these of each status (`status_of`).
            let made = (0..per_writer).filter(|seq| status_of(*seq) == s).count();
            assert_eq!(want.len(), WRITERS * made, "status {s:?}");
        }
        let mut query = ListQuery::new().limit(PageSize::MAX);
        query.status = status;
        let mut got = Vec::new();
        loop {
            let page = inventory.list(&query);
            got.extend(page.pets);
            match page.next_after {
                Some(after) => query.after = Some(after),
                None => break,
            }
        }
        assert_eq!(got.iter().collect::<Vec<_>>(), want, "status {status:?}");

        // The JSON side on its own: its own cursor, the pets read back
        // from its bytes, its own count; never filled from `list`.
        let mut query = ListQuery::new().limit(PageSize::MAX);
        query.status = status;
        let mut got_json: Vec<Pet> = Vec::new();
        loop {
            let json = inventory.list_json(&query);
            let pets: Vec<Pet> = serde_json::from_slice(&json.body).unwrap();
            assert_eq!(json.count, pets.len(), "status {status:?}");
            got_json.extend(pets);
            match json.next_after {
                Some(after) => {
                    assert_eq!(got_json.last().map(Pet::id), Some(after));
                    query.after = Some(after);
                }
                None => break,
            }
        }
        assert_eq!(
            got_json.iter().collect::<Vec<_>>(),
            want,
            "JSON, status {status:?}"
        );
    }
}

#[test]
fn in_memory_concurrent_creates_and_lists() {
    let inventory = Arc::new(Inventory::in_memory());
    let per_writer = 2_000;
    let created = hammer(&inventory, per_writer);
    assert_complete(&inventory, &created, per_writer);
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        TempDir(crate::scratch::scratch(&format!("concurrency-{name}")))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The durable inventory publishes pets in batches (group commit): the
/// same rules hold, and the journal holds exactly the same pets.
fn durable(fsync: FsyncPolicy, per_writer: usize) {
    let dir = TempDir::new(&format!("{fsync:?}"));
    let options = JournalOptions {
        fsync,
        ..JournalOptions::default()
    };
    let created = {
        let inventory = Inventory::open(&dir.0, options).unwrap();
        let created = hammer(&inventory, per_writer);
        assert_complete(&inventory, &created, per_writer);
        created
    };
    let reopened = Inventory::open(&dir.0, options).unwrap();
    assert_complete(&reopened, &created, per_writer);
}

#[test]
fn durable_concurrent_creates_and_lists() {
    durable(FsyncPolicy::Never, 1_000);
}

#[test]
fn durable_with_fsync_concurrent_creates_and_lists() {
    durable(FsyncPolicy::Always, 100);
}
