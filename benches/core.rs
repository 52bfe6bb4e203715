//! Criterion benchmarks of `petstore-core`: the inventory's reads and
//! writes and the rate limiters' checks.
//!
//! ```sh
//! cargo bench --bench core -- --warm-up-time 1 --measurement-time 3
//! cargo bench --bench core -- get/          # only the `get` benchmarks
//! ```
//!
//! Benchmark ids are `operation/size`; each inventory is built once, the
//! first time a benchmark needs it. What each benchmark measures, its
//! target and how to read it: docs/core-benchmarks.md.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, LazyLock};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use petstore_core::inventory::{OrderQuery, Step, StepRequest};
use petstore_core::order::{Actor, NewOrder, OrderId};
use petstore_core::{
    limit::AnonymousLimiter, BanPolicy, CategoryId, Inventory, KeyLimiter, ListQuery, NewPet,
    PetId, PetStatus, Quota, RateLimiter, SystemClock, Timestamp, Transition,
};

/// The inventory sizes every read benchmark runs on.
const SIZES: [u64; 2] = [10_000, 1_000_000];

/// A small, fast, seeded random number generator (SplitMix64), so the
/// benchmarks need no extra dependency and every run draws the same ids.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `1..=n` (the bias of `%` is irrelevant here).
    fn one_to(&mut self, n: u64) -> u64 {
        self.next() % n + 1
    }
}

/// The `i`-th pet of a benchmark inventory: a 10-character name, one of
/// 100 categories, statuses in turn (a third each).
fn new_pet(i: u64) -> NewPet {
    let name = format!("pet{:07}", i % 10_000_000);
    let category = CategoryId::new(i % 100 + 1).unwrap();
    NewPet::new(name, category)
        .unwrap()
        .with_status(PetStatus::ALL[(i % 3) as usize])
}

fn build(n: u64) -> Inventory {
    let inventory = Inventory::in_memory();
    for i in 0..n {
        inventory.create(new_pet(i)).unwrap();
    }
    assert_eq!(inventory.len() as u64, n);
    inventory
}

static SMALL: LazyLock<Inventory> = LazyLock::new(|| build(SIZES[0]));
static LARGE: LazyLock<Inventory> = LazyLock::new(|| build(SIZES[1]));

fn inventory(n: u64) -> &'static Inventory {
    if n == SIZES[0] {
        &SMALL
    } else {
        &LARGE
    }
}

fn id(n: u64) -> PetId {
    PetId::new(n).unwrap()
}

/// The list queries benchmarked, each drawing what it needs from `rng`.
#[derive(Clone, Copy)]
enum Shape {
    /// The first page of everything.
    All,
    /// The first page of one status (taking turns).
    Status,
    /// A page of everything after a random cursor.
    After,
    /// A page of one status after a random cursor.
    StatusAfter,
}

impl Shape {
    const ALL: [(Shape, &'static str); 4] = [
        (Shape::All, "all"),
        (Shape::Status, "status"),
        (Shape::After, "after"),
        (Shape::StatusAfter, "status_after"),
    ];

    fn query(self, rng: &mut Rng, n: u64) -> ListQuery {
        let status = PetStatus::ALL[(rng.next() % 3) as usize];
        // Leave room for a full page after the cursor.
        let after = id(rng.one_to(n - 100));
        match self {
            Shape::All => ListQuery::new(),
            Shape::Status => ListQuery::new().status(status),
            Shape::After => ListQuery::new().after(after),
            Shape::StatusAfter => ListQuery::new().status(status).after(after),
        }
    }
}

fn bench_get(c: &mut Criterion) {
    let mut group = c.benchmark_group("get");
    group.throughput(Throughput::Elements(1));
    for n in SIZES {
        let inv = inventory(n);
        let mut rng = Rng(1);
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| inv.get(black_box(id(rng.one_to(n)))))
        });
    }
    group.finish();
}

fn bench_list(c: &mut Criterion) {
    for (shape, shape_name) in Shape::ALL {
        for json in [false, true] {
            let name = match json {
                false => format!("list_{shape_name}"),
                true => format!("list_json_{shape_name}"),
            };
            let mut group = c.benchmark_group(name);
            group.throughput(Throughput::Elements(1));
            for n in SIZES {
                let inv = inventory(n);
                // Every benchmarked page is full.
                let mut probe = Rng(2);
                for _ in 0..100 {
                    let q = shape.query(&mut probe, n);
                    assert_eq!(inv.list_json(&q).count, 20);
                }
                let mut rng = Rng(2);
                group.bench_function(BenchmarkId::from_parameter(n), |b| {
                    if json {
                        b.iter(|| inv.list_json(black_box(&shape.query(&mut rng, n))))
                    } else {
                        b.iter(|| inv.list(black_box(&shape.query(&mut rng, n))))
                    }
                });
            }
            group.finish();
        }
    }
}

/// A first page that no create can change (`Inventory::final_page`): the
/// unfiltered one and each status's in turn, shared, not copied.
fn bench_final_pages(c: &mut Criterion) {
    let mut group = c.benchmark_group("final_page");
    group.throughput(Throughput::Elements(1));
    let queries: Vec<ListQuery> = std::iter::once(ListQuery::new())
        .chain(PetStatus::ALL.map(|status| ListQuery::new().status(status)))
        .collect();
    for n in SIZES {
        let inv = inventory(n);
        for q in &queries {
            assert_eq!(inv.final_page(q).map(|page| page.count), Some(20));
        }
        let mut turn = queries.iter().cycle();
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| inv.final_page(black_box(turn.next().unwrap())))
        });
    }
    group.finish();
}

fn bench_create(c: &mut Criterion) {
    let mut group = c.benchmark_group("create");
    group.throughput(Throughput::Elements(1));
    group.bench_function(BenchmarkId::from_parameter("empty"), |b| {
        // A fresh inventory per sample keeps memory bounded; the NewPets
        // (validated, names allocated) are made before the clock starts,
        // the stored and returned pets' memory is part of the cost.
        b.iter_custom(|iters| {
            let inv = Inventory::in_memory();
            let pets: Vec<NewPet> = (0..iters).map(new_pet).collect();
            let start = Instant::now();
            for pet in pets {
                black_box(inv.create(black_box(pet)).unwrap());
            }
            start.elapsed()
        })
    });
    group.finish();
}

/// A random pet created available (ids 1, 4, 7, ...: `new_pet` gives
/// statuses in turn).
fn available_pet(rng: &mut Rng, n: u64) -> PetId {
    id((rng.one_to(n) - 1) / 3 * 3 + 1)
}

fn bench_transition(c: &mut Criterion) {
    let mut group = c.benchmark_group("transition");
    // A reserve and a release an iteration.
    group.throughput(Throughput::Elements(2));
    for n in SIZES {
        let inv = build(n);
        let mut rng = Rng(5);
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| {
                let pet = available_pet(&mut rng, n);
                inv.transition(black_box(pet), Transition::Reserve).unwrap();
                inv.transition(black_box(pet), Transition::Release).unwrap()
            })
        });
    }
    group.finish();
}

/// An inventory of `n` pets where a tenth of the available ones are
/// reserved and as many sold, as after a while of trade.
fn build_changed(n: u64) -> Inventory {
    let inv = build(n);
    let mut rng = Rng(6);
    for _ in 0..n / 30 {
        let _ = inv.transition(available_pet(&mut rng, n), Transition::Reserve);
        let _ = inv.transition(available_pet(&mut rng, n), Transition::Sell);
    }
    inv
}

/// Runs `read` under criterion while another thread reserves and releases
/// random pets of `inv` without pause.
fn while_changing<R>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    n: u64,
    inv: &Inventory,
    mut read: impl FnMut(&mut Rng) -> R,
) {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut rng = Rng(7);
            while !stop.load(Ordering::Relaxed) {
                let pet = available_pet(&mut rng, n);
                if inv.transition(pet, Transition::Reserve).is_ok() {
                    let _ = inv.transition(pet, Transition::Release);
                }
            }
        });
        let mut rng = Rng(8);
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| read(&mut rng))
        });
        stop.store(true, Ordering::Relaxed);
    });
}

fn bench_changing(c: &mut Criterion) {
    let mut group = c.benchmark_group("changing_list_json");
    group.throughput(Throughput::Elements(1));
    for n in SIZES {
        let inv = build_changed(n);
        let mut shapes = Shape::ALL.iter().cycle();
        while_changing(&mut group, n, &inv, |rng| {
            let q = shapes.next().unwrap().0.query(rng, n);
            inv.list_json(black_box(&q))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("changing_final_page");
    group.throughput(Throughput::Elements(1));
    let queries: Vec<ListQuery> = std::iter::once(ListQuery::new())
        .chain(PetStatus::ALL.map(|status| ListQuery::new().status(status)))
        .collect();
    for n in SIZES {
        let inv = build_changed(n);
        let mut turn = queries.iter().cycle();
        // A page reached by a change is rebuilt on the next read, so
        // this also counts the rebuilds the changes cause.
        while_changing(&mut group, n, &inv, |_| {
            inv.final_page(black_box(turn.next().unwrap()))
        });
    }
    group.finish();
}

/// A quota no benchmark can exhaust, so every check takes the common
/// path: allowed, one token from each window.
fn roomy_quota() -> Quota {
    Quota::new(1_000_000_000, 1_000_000_000).unwrap()
}

fn bench_limiters(c: &mut Criterion) {
    let mut group = c.benchmark_group("limiter");
    group.throughput(Throughput::Elements(1));

    let key = KeyLimiter::new(roomy_quota(), BanPolicy::default());
    let mut t = Timestamp::from_unix_secs(1_000_000);
    group.bench_function("key_check/1", |b| {
        b.iter(|| {
            t = t + Duration::from_micros(1);
            let d = key.check(black_box(t));
            debug_assert!(d.is_allowed());
            d
        })
    });

    // Keys as the server keeps them: SHA-256 digests, here made up from the
    // key's number, so drawing one costs no memory access of its own.
    let key_of = |n: u64| {
        let mut rng = Rng(n);
        let mut k = [0u8; 32];
        for chunk in k.chunks_mut(8) {
            chunk.copy_from_slice(&rng.next().to_le_bytes());
        }
        k
    };
    // One key (its state stays in cache: the cost of the code), then one
    // of 100,000 at random (a 29 MB table: the cost of memory).
    for keys in [1u64, 100_000] {
        let limiter = RateLimiter::new(SystemClock::new());
        for n in 0..keys {
            limiter.insert(key_of(n), roomy_quota(), BanPolicy::default());
        }
        let mut rng = Rng(3);
        group.bench_function(BenchmarkId::new("rate_limiter_check", keys), |b| {
            b.iter(|| {
                let key = key_of(rng.one_to(keys) - 1);
                limiter.check(black_box(&key)).unwrap()
            })
        });
    }

    // Anonymous clients: one address, then 10,000 addresses at random, in
    // a limiter with the server's capacity (100,000). The clock moves 1 ms
    // per request, so buckets refill and checks take the allowed path.
    for addresses in [1u32, 10_000] {
        let anonymous = AnonymousLimiter::new(NonZeroU32::new(60).unwrap(), 100_000);
        let mut t = Timestamp::from_unix_secs(1_000_000);
        let mut rng = Rng(4);
        group.bench_function(BenchmarkId::new("anonymous_check", addresses), |b| {
            b.iter(|| {
                t = t + Duration::from_millis(1);
                let ip = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + rng.next() as u32 % addresses));
                anonymous.check(black_box(ip), black_box(t))
            })
        });
    }
    group.finish();
}

/// Two threads each doing `iters` reads at once; returns the wall time
/// from the moment both start to the moment both are done.
fn two_threads(iters: u64, op: impl Fn(&mut Rng) + Sync) -> Duration {
    let barrier = Barrier::new(2);
    let spans: Vec<(Instant, Instant)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|seed| {
                let (barrier, op) = (&barrier, &op);
                s.spawn(move || {
                    let mut rng = Rng(100 + seed);
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..iters {
                        op(&mut rng);
                    }
                    (start, Instant::now())
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let start = spans.iter().map(|s| s.0).min().unwrap();
    let end = spans.iter().map(|s| s.1).max().unwrap();
    end - start
}

fn bench_concurrent_reads(c: &mut Criterion) {
    for json in [false, true] {
        let name = match json {
            false => "concurrent_get",
            true => "concurrent_list_json_after",
        };
        let mut group = c.benchmark_group(name);
        // Two reads per iteration: the throughput is the combined rate.
        group.throughput(Throughput::Elements(2));
        for n in SIZES {
            let inv = inventory(n);
            group.bench_function(BenchmarkId::from_parameter(n), |b| {
                b.iter_custom(|iters| {
                    two_threads(iters, |rng| {
                        if json {
                            let q = Shape::After.query(rng, n);
                            black_box(inv.list_json(black_box(&q)));
                        } else {
                            black_box(inv.get(black_box(id(rng.one_to(n)))));
                        }
                    })
                })
            });
        }
        group.finish();
    }
}

/// 1,000,000 orders of 1,000 other keys, and 20,000 of the key that
/// lists (one in 51): a key's page of its own orders, against the pets'
/// pages above.
fn orders_of_many_keys() -> &'static Inventory {
    static BUILT: LazyLock<Inventory> = LazyLock::new(|| {
        let inv = Inventory::in_memory();
        let at = Timestamp::from_unix_secs(1_764_324_000);
        let others: Vec<Actor> = (0..1_000)
            .map(|k| Actor::new(&format!("key-{k}")))
            .collect();
        let mine = Actor::new("mine");
        let total = 1_020_000;
        for _ in 0..total {
            inv.create(NewPet::new("Rex", CategoryId::MIN).unwrap())
                .unwrap();
        }
        for start in (0..total).step_by(1_000) {
            let batch = (start..start + 1_000)
                .map(|i| StepRequest {
                    actor: if i % 51 == 0 {
                        mine.clone()
                    } else {
                        others[(i % 1_000) as usize].clone()
                    },
                    step: Step::Place(NewOrder::new(id(i + 1))),
                    at,
                    claim: None,
                })
                .collect();
            inv.steps(batch).unwrap();
        }
        inv
    });
    &BUILT
}

fn bench_orders(c: &mut Criterion) {
    let mut group = c.benchmark_group("list_orders_json");
    group.throughput(Throughput::Elements(1));
    let inv = orders_of_many_keys();
    let mine = Actor::new("mine");
    let page = |after: u64| {
        let mut query = OrderQuery::new();
        if let Some(after) = OrderId::new(after) {
            query = query.after(after);
        }
        inv.list_orders_json(&mine, &query)
    };
    assert_eq!(inv.list_orders(&mine, &OrderQuery::new()).orders.len(), 20);
    let mut rng = Rng(9);
    group.bench_function(BenchmarkId::from_parameter("own_of_1m"), |b| {
        b.iter(|| page(black_box(rng.one_to(900_000))))
    });
    group.finish();

    let mut group = c.benchmark_group("order_steps");
    // A place and a cancel an iteration, in memory.
    group.throughput(Throughput::Elements(2));
    let inv = build(10_000);
    let shop = Actor::new("shop");
    let at = Timestamp::from_unix_secs(1_764_324_000);
    let mut rng = Rng(11);
    group.bench_function(BenchmarkId::from_parameter("place_cancel"), |b| {
        b.iter(|| {
            let pet = available_pet(&mut rng, 10_000);
            let order = inv
                .place_order(&shop, NewOrder::new(black_box(pet)), at)
                .unwrap();
            inv.cancel_order(&shop, order.id(), at).unwrap()
        })
    });
    group.finish();
}

criterion_group!(
    benches,
    bench_orders,
    bench_get,
    bench_list,
    bench_final_pages,
    bench_create,
    bench_transition,
    bench_changing,
    bench_limiters,
    bench_concurrent_reads
);
criterion_main!(benches);
