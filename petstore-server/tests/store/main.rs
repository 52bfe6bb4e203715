//! The inventory's durability, against the real server binary: the
//! journal on disk (crashes, full and failing disks, the system calls it
//! makes) and the inventory in PostgreSQL.
//!
//! | file | tests |
//! |---|---|
//! | `committer.rs` | durable creates and transitions wait without a thread each |
//! | `crash.rs` | kill -9 during concurrent creates loses no acknowledged pet |
//! | `crash_compaction.rs` | kill -9 while the journal is compacted under load: every acknowledged create and transition survives, whatever step the kill cut |
//! | `crash_idempotency.rs` | kill -9 during keyed creates: every retry after the restart gets its original pet, never a second |
//! | `crash_transitions.rs` | kill -9 during concurrent transitions loses no acknowledged change |
//! | `disk.rs` | a journal deleted or damaged, a second server, a full disk; `journal check`/`repair`/`compact` |
//! | `events_replicas.rs` | the feed of events on two replicas: the same ids in commit order, a long poll woken across replicas, list-then-follow misses nothing, migration |
//! | `idempotency_lookup.rs` | a keyed POST looks its key up in PostgreSQL only for an invalid body, or a write the copy refused |
//! | `idempotency_replicas.rs` | `Idempotency-Key` on two replicas: replay, 422, scoping, storms, kill -9, expiry, migration |
//! | `keys_replicas.rs` | two replicas with one keys file give one key the same 403, 401 and 200, before and after a reload |
//! | `orders_replicas.rs` | orders on two replicas: every row, doors, kept keys, one winner, a hold that lapses once, a race with expiry, PostgreSQL down, migration |
//! | `postgres.rs` | replicas on one PostgreSQL, its outages, a counter or rows it cannot use |
//! | `postgres_failover.rs` | a primary killed, its synchronous standby promoted: nothing acknowledged lost, creates back, the log names the host |
//! | `syscalls.rs` | under strace: every 201 follows an `fdatasync` of the journal |
//! | `transitions_replicas.rs` | reserve, release, sell on two replicas: one winner, every copy shows every change, kill -9 |
//!
//! One test binary for the area, so that the shared harness (`../common`)
//! is compiled once for all of it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;

mod committer;
mod crash;
mod crash_compaction;
mod crash_idempotency;
mod crash_transitions;
mod disk;
mod events_replicas;
mod idempotency_lookup;
mod idempotency_replicas;
mod keys_replicas;
mod orders_replicas;
mod postgres;
mod postgres_failover;
mod syscalls;
mod transitions_replicas;
