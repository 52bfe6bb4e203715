//! Durable create throughput and journal replay time.
//!
//! `cargo bench --bench durability` (`-- lapse`: only the last) prints, for 1, 16 and 64 concurrent
//! creators, durable creates per second with the journal's group commit
//! beside one fsync per create (the same line format, written and synced
//! under a mutex, one pet at a time), measured in the same run, and
//! durable transitions per second (reserves and releases) by as many
//! threads beside those creates; then the time to replay a journal of
//! 1,000,000 pets, and of 1,000,000 pets and 2,000,000 transitions; then
//! 100,000 holds lapsing in the same second: the time until the last is
//! expired, and a reader's p99 list meanwhile against the same reader's
//! quiet p99. `-- compaction` (only that): a journal of 100,000 pets and
//! 1,000,000 transitions (each reserve placing an order, each release
//! cancelling it) with its events past their retention: its size and
//! start-up before and after a compaction, beside a fresh journal of the
//! same pets alone; then creates and lists while compactions run back to
//! back, against the same quiet.
//!
//! Environment: `PETSTORE_BENCH_SECS` (default 3) per measurement,
//! `PETSTORE_BENCH_REST` (default the policy's, 4) the compaction's rest,
//! `PETSTORE_BENCH_DIR` (default the system temp dir) for the files.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use petstore_core::inventory::{Step, StepRequest};
use petstore_core::order::{Actor, Hold, NewOrder};
use petstore_core::{
    CategoryId, FsyncPolicy, Inventory, JournalOptions, ListQuery, NewPet, PageSize, PetId,
    PetStatus, Timestamp, Transition,
};

fn scratch(name: &str) -> PathBuf {
    let base =
        std::env::var_os("PETSTORE_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    let dir = base.join(format!("petstore-bench-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

fn pet(i: u64) -> NewPet {
    NewPet::new(format!("pet-{i:06}"), CategoryId::new(i % 10 + 1).unwrap())
        .unwrap()
        .with_status(PetStatus::ALL[(i % 3) as usize])
}

/// Runs `creators` threads calling `create` for `secs`; creates per second.
fn run(creators: usize, secs: Duration, create: Arc<dyn Fn(u64) + Send + Sync>) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let threads: Vec<_> = (0..creators)
        .map(|t| {
            let (stop, done, create) = (stop.clone(), done.clone(), create.clone());
            std::thread::spawn(move || {
                let mut i = t as u64 * 1_000_000_000;
                while !stop.load(Ordering::Relaxed) {
                    create(i);
                    i += 1;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    std::thread::sleep(secs);
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

fn group_commit(creators: usize, secs: Duration) -> (f64, f64) {
    let dir = scratch(&format!("group-{creators}"));
    let inventory = Arc::new(Inventory::open(&dir, JournalOptions::default()).unwrap());
    let inv = inventory.clone();
    let rate = run(
        creators,
        secs,
        Arc::new(move |i| {
            inv.create(pet(i)).unwrap();
        }),
    );
    let stats = inventory.journal_stats().unwrap();
    let batch = stats.records as f64 / stats.batches.max(1) as f64;
    drop(inventory);
    fs::remove_dir_all(&dir).unwrap();
    (rate, batch)
}

/// Pets each transitioning thread owns, so that its steps never conflict.
const OWNED: u64 = 1_000;

/// Durable transitions per second by `threads` threads, each reserving
/// and releasing its own pets in turn (every step allowed), and the mean
/// batch of the group commit.
fn group_transitions(threads: usize, secs: Duration) -> (f64, f64) {
    let dir = scratch(&format!("transitions-{threads}"));
    let inventory = Arc::new(Inventory::open(&dir, JournalOptions::default()).unwrap());
    let available = |i: u64| pet(i).with_status(PetStatus::Available);
    let pets = threads as u64 * OWNED;
    inventory
        .create_many((0..pets).map(available).collect())
        .unwrap();
    let before = inventory.journal_stats().unwrap();
    let inv = inventory.clone();
    let rate = run(
        threads,
        secs,
        Arc::new(move |i| {
            // `run` numbers thread t's calls from t * 1,000,000,000.
            let (thread, call) = (i / 1_000_000_000, i % 1_000_000_000);
            let id = thread * OWNED + (call / 2) % OWNED + 1;
            let step = [Transition::Reserve, Transition::Release][(call % 2) as usize];
            inv.transition(PetId::new(id).unwrap(), step).unwrap();
        }),
    );
    let stats = inventory.journal_stats().unwrap();
    let batch =
        (stats.records - before.records) as f64 / (stats.batches - before.batches).max(1) as f64;
    drop(inventory);
    fs::remove_dir_all(&dir).unwrap();
    (rate, batch)
}

fn one_fsync_per_create(creators: usize, secs: Duration) -> f64 {
    let dir = scratch(&format!("single-{creators}"));
    fs::create_dir_all(&dir).unwrap();
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("pets.journal"))
        .unwrap();
    let file = Arc::new(Mutex::new(file));
    let rate = run(
        creators,
        secs,
        Arc::new(move |i| {
            let new = pet(i);
            let line = format!(
            "{{\"pet\":{{\"id\":{i},\"name\":\"{}\",\"categoryId\":{},\"status\":\"{}\"}},\"crc32\":\"00000000\"}}\n",
            new.name(),
            new.category_id(),
            new.status()
        );
            let mut file = file.lock().unwrap();
            file.write_all(line.as_bytes()).unwrap();
            file.sync_data().unwrap();
        }),
    );
    fs::remove_dir_all(&dir).unwrap();
    rate
}

/// The time to open a journal of `pets` pets, followed (`with_transitions`)
/// by a reserve of each pet, then a sale of each, and the journal's size.
fn replay(pets: u64, with_transitions: bool) -> (Duration, u64) {
    let dir = scratch("replay");
    {
        let writer = open_unsynced(&dir);
        // Many writers so the un-synced journal fills quickly.
        let writer = Arc::new(writer);
        let per = pets / 4;
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let w = writer.clone();
                std::thread::spawn(move || {
                    (0..per).for_each(|i| {
                        let mut new = pet(t * per + i);
                        if with_transitions {
                            // Every reserve and sale then succeeds.
                            new = new.with_status(PetStatus::Available);
                        }
                        drop(w.create(new).unwrap())
                    })
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        if with_transitions {
            let ids = (1..=pets).filter_map(PetId::new);
            for step in [Transition::Reserve, Transition::Sell] {
                let batch: Vec<_> = ids.clone().map(|id| (id, step)).collect();
                for chunk in batch.chunks(10_000) {
                    let outcomes = writer.transition_many(chunk).unwrap();
                    assert!(outcomes.iter().all(Result::is_ok));
                }
            }
        }
    }
    File::open(dir.join("pets.journal"))
        .unwrap()
        .sync_all()
        .unwrap();
    let bytes = fs::metadata(dir.join("pets.journal")).unwrap().len();
    let started = Instant::now();
    let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
    let took = started.elapsed();
    assert_eq!(inventory.len() as u64, pets);
    let transitions = inventory.recovery().map(|r| r.transitions);
    assert_eq!(
        transitions,
        Some(if with_transitions { 2 * pets } else { 0 })
    );
    drop(inventory);
    fs::remove_dir_all(&dir).unwrap();
    (took, bytes)
}

/// The p99 of `n` list reads of random pages, in microseconds, while
/// `busy` is set or `n` are done.
fn reader_p99(inventory: &Inventory, busy: &AtomicBool, n: usize) -> f64 {
    let mut took = Vec::with_capacity(n);
    let mut seed = 7u64;
    while took.len() < n || busy.load(Ordering::Relaxed) {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let after = PetId::new(seed % 90_000 + 1).unwrap();
        let query = ListQuery::new()
            .limit(PageSize::new(20).unwrap())
            .after(after);
        let started = Instant::now();
        std::hint::black_box(inventory.list_json(&query));
        took.push(started.elapsed().as_secs_f64() * 1e6);
        std::thread::sleep(Duration::from_micros(50));
    }
    took.sort_by(f64::total_cmp);
    took[took.len() * 99 / 100]
}

/// `n` holds placed in one second lapse together: how long until the
/// last is expired (durable, fsync always), and a reader's p99 list
/// meanwhile against its quiet p99.
fn lapse(n: u64) -> (Duration, f64, f64) {
    let dir = scratch("lapse");
    let inventory = Arc::new(Inventory::open(&dir, JournalOptions::default()).unwrap());
    let news: Vec<NewPet> = (0..n).map(pet).collect();
    for chunk in news.chunks(10_000) {
        inventory.create_many(chunk.to_vec()).unwrap();
    }
    let at = Timestamp::from_unix_secs(1_764_324_000);
    let shop = Actor::new("shop");
    let available: Vec<u64> = (1..=n).filter(|id| id % 3 == 1).collect();
    let mut placed = 0;
    for chunk in available.chunks(1_024) {
        let batch = chunk
            .iter()
            .map(|&id| StepRequest {
                actor: shop.clone(),
                step: Step::Place(NewOrder::new(PetId::new(id).unwrap())),
                at,
                claim: None,
            })
            .collect();
        placed += inventory.steps(batch).unwrap().len();
    }
    let busy = AtomicBool::new(false);
    let quiet = reader_p99(&inventory, &busy, 20_000);
    busy.store(true, Ordering::Relaxed);
    let (took, during) = std::thread::scope(|s| {
        let reader = s.spawn(|| reader_p99(&inventory, &busy, 1_000));
        let started = Instant::now();
        let expired = inventory.expire_due(at + Hold::DEFAULT.duration()).unwrap();
        let took = started.elapsed();
        busy.store(false, Ordering::Relaxed);
        assert_eq!(expired, placed);
        (took, reader.join().unwrap())
    });
    drop(inventory);
    fs::remove_dir_all(&dir).unwrap();
    (took, quiet, during)
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is ignored.
    let secs = std::env::var("PETSTORE_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let secs = Duration::from_secs(secs);
    if std::env::args().any(|a| a == "compaction") {
        compaction(secs);
        return;
    }
    // `-- lapse`: only the lapse of holds.
    if !std::env::args().any(|a| a == "lapse") {
        creates_and_replays(secs);
    }
    let (took, quiet, during) = lapse(300_000);
    println!(
        "100,000 holds lapsing together (durable): the last expired after {:.0} ms; \
         a reader's list p99 {during:.1} us meanwhile, {quiet:.1} us quiet ({:.1}x)",
        took.as_secs_f64() * 1e3,
        during / quiet.max(f64::MIN_POSITIVE)
    );
}

fn creates_and_replays(secs: Duration) {
    println!(
        "durable creates per second, fsync always, {secs:?} each (cargo bench --bench durability)"
    );
    println!("| creators | group commit | mean batch | one fsync per create | ratio |");
    println!("|---:|---:|---:|---:|---:|");
    let mut creates = Vec::new();
    for creators in [1, 16, 64] {
        let (group, batch) = group_commit(creators, secs);
        let single = one_fsync_per_create(creators, secs);
        println!(
            "| {creators} | {group:.0} | {batch:.1} | {single:.0} | {:.1}x |",
            group / single.max(1.0)
        );
        creates.push((creators, group));
    }
    println!("\ndurable transitions per second, fsync always, beside the creates above");
    println!("| threads | transitions | mean batch | creates | transitions / creates |");
    println!("|---:|---:|---:|---:|---:|");
    for (threads, created) in creates {
        let (rate, batch) = group_transitions(threads, secs);
        println!(
            "| {threads} | {rate:.0} | {batch:.1} | {created:.0} | {:.2} |",
            rate / created.max(1.0)
        );
    }
    println!();
    for with_transitions in [false, true] {
        let (took, bytes) = replay(1_000_000, with_transitions);
        let what = match with_transitions {
            false => "1,000,000 pets",
            true => "1,000,000 pets and 2,000,000 transitions",
        };
        println!(
            "replay of {what} ({:.0} MB journal): {:.0} ms",
            bytes as f64 / 1e6,
            took.as_secs_f64() * 1e3
        );
    }
    println!();
}

/// A durable inventory in `dir` that writes without fsync: a journal to
/// measure is filled fast.
fn open_unsynced(dir: &std::path::Path) -> Inventory {
    let options = JournalOptions {
        fsync: FsyncPolicy::Never,
        ..JournalOptions::default()
    };
    Inventory::open(dir, options).unwrap()
}

/// Creates `n` available pets, 10,000 a batch.
fn create_available(inventory: &Inventory, n: u64) {
    let news: Vec<NewPet> = (0..n)
        .map(pet)
        .map(|p| p.with_status(PetStatus::Available))
        .collect();
    for chunk in news.chunks(10_000) {
        inventory.create_many(chunk.to_vec()).unwrap();
    }
}

/// Bytes of every file of the journal in `dir`.
fn journal_bytes(dir: &std::path::Path) -> u64 {
    fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("pets"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

/// The median of three opens of `dir`, in seconds.
fn open_time(dir: &std::path::Path) -> f64 {
    let mut took: Vec<f64> = (0..3)
        .map(|_| {
            let started = Instant::now();
            let inventory = Inventory::open(dir, JournalOptions::default()).unwrap();
            let took = started.elapsed().as_secs_f64();
            drop(inventory);
            took
        })
        .collect();
    took.sort_by(f64::total_cmp);
    took[1]
}

/// Creates per second and lists per second and their p99s (ms) over
/// `secs`, by 4 creators and 1 lister, while `compacting` runs beside.
fn load_beside(inventory: &Inventory, secs: Duration, compacting: bool) -> [f64; 4] {
    let stop = AtomicBool::new(false);
    let compactions = AtomicU64::new(0);
    std::thread::scope(|s| {
        let creators: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    let mut took = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let started = Instant::now();
                        inventory.create(pet(took.len() as u64)).unwrap();
                        took.push(started.elapsed().as_secs_f64() * 1e3);
                    }
                    took
                })
            })
            .collect();
        let lister = s.spawn(|| {
            let mut took = Vec::new();
            let mut seed = 7u64;
            while !stop.load(Ordering::Relaxed) {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                let query = ListQuery::new()
                    .limit(PageSize::new(20).unwrap())
                    .after(PetId::new(seed % 90_000 + 1).unwrap());
                let started = Instant::now();
                std::hint::black_box(inventory.list_json(&query));
                took.push(started.elapsed().as_secs_f64() * 1e6);
            }
            took
        });
        if compacting {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    inventory.compact().unwrap();
                    compactions.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        std::thread::sleep(secs);
        stop.store(true, Ordering::Relaxed);
        let mut creates: Vec<f64> = creators
            .into_iter()
            .flat_map(|c| c.join().unwrap())
            .collect();
        let mut lists = lister.join().unwrap();
        let p99 = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() * 99 / 100]
        };
        if compacting {
            println!(
                "  ({} compactions in {secs:?})",
                compactions.load(Ordering::Relaxed)
            );
        }
        [
            creates.len() as f64 / secs.as_secs_f64(),
            p99(&mut creates),
            lists.len() as f64 / secs.as_secs_f64(),
            p99(&mut lists),
        ]
    })
}

/// See the file's header, `-- compaction`.
fn compaction(secs: Duration) {
    const PETS: u64 = 100_000;
    const ROUNDS: usize = 5;
    let dir = scratch("compaction");
    {
        let writer = open_unsynced(&dir);
        writer.set_event_retention(Duration::from_secs(1));
        create_available(&writer, PETS);
        let ids: Vec<PetId> = (1..=PETS).filter_map(PetId::new).collect();
        for _ in 0..ROUNDS {
            for step in [Transition::Reserve, Transition::Release] {
                let batch: Vec<_> = ids.iter().map(|&id| (id, step)).collect();
                for chunk in batch.chunks(10_000) {
                    assert!(writer
                        .transition_many(chunk)
                        .unwrap()
                        .iter()
                        .all(Result::is_ok));
                }
            }
        }
        // Past the events' retention: what a store of years holds.
        std::thread::sleep(Duration::from_secs(2));
    }
    let before_bytes = journal_bytes(&dir);
    let before = open_time(&dir);
    let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
    inventory.set_event_retention(Duration::from_secs(1));
    let done = inventory.compact().unwrap();
    drop(inventory);
    let after_bytes = journal_bytes(&dir);
    let after = open_time(&dir);

    let fresh = scratch("compaction-fresh");
    {
        let writer = open_unsynced(&fresh);
        create_available(&writer, PETS);
    }
    let fresh_bytes = journal_bytes(&fresh);
    let fresh_open = open_time(&fresh);
    fs::remove_dir_all(&fresh).unwrap();
    let orders = (ROUNDS as u64) * PETS;
    println!("compaction of 100,000 pets and 1,000,000 transitions ({orders} orders, events past retention) (cargo bench --bench durability -- compaction)");
    println!("| journal | bytes on disk | start-up (median of 3) |");
    println!("|---|---:|---:|");
    println!(
        "| before compaction | {before_bytes} | {:.0} ms |",
        before * 1e3
    );
    println!(
        "| after (compacted in {:.0} ms) | {after_bytes} | {:.0} ms |",
        done.took.as_secs_f64() * 1e3,
        after * 1e3
    );
    println!(
        "| fresh, the same pets alone | {fresh_bytes} | {:.0} ms |",
        fresh_open * 1e3
    );
    println!(
        "start-up after/before {:.2}, after/fresh {:.2}; disk after/before {:.2}, after/fresh {:.2}",
        after / before,
        after / fresh_open,
        after_bytes as f64 / before_bytes as f64,
        after_bytes as f64 / fresh_bytes as f64
    );

    let mut options = JournalOptions::default();
    if let Some(rest) = std::env::var("PETSTORE_BENCH_REST")
        .ok()
        .and_then(|r| r.parse().ok())
    {
        options.compaction.rest = rest;
    }
    let inventory = Inventory::open(&dir, options).unwrap();
    let quiet = load_beside(&inventory, secs, false);
    let during = load_beside(&inventory, secs, true);
    println!("\ncreates (4 threads, fsync always) and lists (1 thread, 20 a page) for {secs:?} each, quiet, then with compactions back to back");
    println!("| | creates/s | create p99 | lists/s | list p99 |");
    println!("|---|---:|---:|---:|---:|");
    for (what, r) in [("quiet", quiet), ("compacting", during)] {
        println!(
            "| {what} | {:.0} | {:.2} ms | {:.0} | {:.1} us |",
            r[0], r[1], r[2], r[3]
        );
    }
    println!(
        "compacting/quiet: creates {:.2}, create p99 {:.2}x, lists {:.2}, list p99 {:.2}x",
        during[0] / quiet[0],
        during[1] / quiet[1],
        during[2] / quiet[2],
        during[3] / quiet[3]
    );
    drop(inventory);
    fs::remove_dir_all(&dir).unwrap();
}
