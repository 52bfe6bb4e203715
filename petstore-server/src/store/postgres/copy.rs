//! The read copy: every committed pet and order in the core's in-memory
//! [`Inventory`], loaded at start ([`load`]) and kept current by tailing
//! the tables ([`Postgres::catch_up_to`]), woken by the listener's
//! notifications and by a poll ([`POLL`]).
//!
//! The tail asks four things in one statement, so all answers come from
//! one snapshot: the pets above the copy's last id (ids commit in order,
//! so that is every new pet), the pet rows changed after the last change
//! number the copy applied (changes commit in the order of their numbers,
//! so that is every change since, each row as it now is), and the same
//! two of orders. It applies the new pets first, then the statuses in
//! change order. A row changed but not yet in the copy (its pet is beyond
//! this page of new pets) is not passed: the round stops before it and
//! the next brings the pet in first. While more changes wait than a page
//! holds, new pets wait too (unless a change names one), so that the copy
//! shows a state PostgreSQL was in (every pet as of one change number),
//! not a newer pet beside an older status. Orders follow up to the change
//! number the pets reached: an order's step and its pet's change share
//! one number, so the copy never shows an order ahead of its pet.

use std::future::poll_fn;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use deadpool_postgres::{Object, Pool};
use futures_util::future::join_all;
use petstore_core::{
    inventory::ApplyError,
    order::{Order, OrderId},
    CategoryId, Inventory, NewPet, Pet, PetId, PetStatus, Timestamp,
};
use tokio::time::timeout;
use tokio_postgres::{AsyncMessage, Config, NoTls, Row};

use super::connect::connecting;
use super::describe::{describe, discard, pool_error};
use super::stats::Op;
use super::{Postgres, MAX_BACKOFF, POLL, QUERY_TIMEOUT};

/// How long a notification waits before the tail asks: see
/// [`Postgres::tail_loop`].
const OWN_COMMIT_PAUSE: std::time::Duration = std::time::Duration::from_millis(2);
/// Pets per query when loading or tailing.
const PAGE: i64 = 10_000;
/// Load queries in flight at once: a few, which `join_all` polls in
/// their order (so they leave on the connection in order).
const LOAD_IN_FLIGHT: usize = 4;
/// The channel of `LISTEN`/`NOTIFY`.
const CHANNEL: &str = "petstore_pets";
/// New pets (`kind` 0), changed pets (`kind` 1), new orders (`kind` 2)
/// and changed orders (`kind` 3), one snapshot. An order's row comes in
/// the pets' columns where their types agree (`name` its `placed_by`,
/// `category_id` its pet), its times after (`ORDER_COLUMNS`). The
/// literal `last_change > 0` lets the planner use the partial index
/// whatever the parameter.
const TAIL: &str = "(SELECT id, name, category_id, status, last_change, 0 AS kind, \
                     NULL::int8 AS placed, NULL::int8 AS expires, NULL::int8 AS closed \
                     FROM petstore_pets WHERE id > $1 ORDER BY id LIMIT $3) \
                    UNION ALL \
                    (SELECT id, NULL, NULL, status, last_change, 1, NULL, NULL, NULL \
                     FROM petstore_pets WHERE last_change > $2 AND last_change > 0 \
                     ORDER BY last_change LIMIT $3) \
                    UNION ALL \
                    (SELECT id, placed_by, pet_id, status, last_change, 2, \
                     extract(epoch FROM placed_at)::int8, extract(epoch FROM expires_at)::int8, \
                     extract(epoch FROM closed_at)::int8 \
                     FROM petstore_orders WHERE id > $4 ORDER BY id LIMIT $3) \
                    UNION ALL \
                    (SELECT id, placed_by, pet_id, status, last_change, 3, \
                     extract(epoch FROM placed_at)::int8, extract(epoch FROM expires_at)::int8, \
                     extract(epoch FROM closed_at)::int8 \
                     FROM petstore_orders WHERE last_change > $2 AND id <= $4 \
                     ORDER BY last_change LIMIT $3)";
/// Where a tail row holds an order's id, pet, status, placer and times.
const ORDER_COLUMNS: [usize; 7] = [0, 2, 3, 1, 6, 7, 8];
/// Orders by id, as the load reads them.
const ORDER_RANGE: &str = "SELECT id, pet_id, status, placed_by, \
     extract(epoch FROM placed_at)::int8, extract(epoch FROM expires_at)::int8, \
     extract(epoch FROM closed_at)::int8 \
     FROM petstore_orders WHERE id BETWEEN $1 AND $2 ORDER BY id";
const RANGE: &str = "SELECT id, name, category_id, status FROM petstore_pets \
                     WHERE id BETWEEN $1 AND $2 ORDER BY id";
/// What is committed when the load starts: every id up to `last_id`,
/// every change up to `last_change` (the rows read after show at least
/// that much).
const COMMITTED: &str = "SELECT last_id, (SELECT last_change FROM petstore_changes), \
     (SELECT last_id FROM petstore_order_counter) FROM petstore_counter";

/// What a catch-up must bring into the copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Want {
    /// Whatever is committed: always a query.
    Everything,
    /// The pet with this id.
    Pet(u64),
    /// The change with this number.
    Change(u64),
    /// The order with this id.
    Order(u64),
}

impl Postgres {
    /// Brings the copy up to `want` (0: whatever is committed). One tail
    /// query at most per caller, none when a query that started after
    /// this call has finished meanwhile. Returns whether PostgreSQL
    /// answered (or no query was needed).
    pub async fn catch_up_to(&self, want: u64) -> bool {
        self.catch_up(match want {
            0 => Want::Everything,
            id => Want::Pet(id),
        })
        .await
    }

    /// Whether the copy holds `want` already.
    fn holds(&self, want: Want) -> bool {
        match want {
            Want::Everything => false,
            Want::Pet(id) => self.copy.len() as u64 >= id,
            Want::Change(change) => self.changes_applied.load(Ordering::Acquire) >= change,
            Want::Order(id) => self.copy.orders_len() >= id,
        }
    }

    /// Brings the copy up to `want`: see [`catch_up_to`](Self::catch_up_to).
    pub(super) async fn catch_up(&self, want: Want) -> bool {
        if self.holds(want) {
            return true;
        }
        let asked = self.tails_started.load(Ordering::Acquire);
        let Ok(_one) = timeout(QUERY_TIMEOUT, self.tail.lock()).await else {
            return false;
        };
        // A tail that started after this call saw everything committed
        // before it, `want` included.
        if self.holds(want)
            || (want != Want::Everything && self.tails_started.load(Ordering::Acquire) > asked)
        {
            return true;
        }
        self.tails_started.fetch_add(1, Ordering::AcqRel);
        let started = Instant::now();
        let pulled = timeout(QUERY_TIMEOUT, self.pull()).await;
        self.stats.tail.observe(started.elapsed());
        match pulled {
            Ok(Ok(())) => {
                self.health.up(started);
                self.health.rows_apply();
                true
            }
            Ok(Err(PullFailed::Unreachable(cause))) => {
                self.stats.count_error(Op::Tail);
                self.health.down(&cause);
                false
            }
            Ok(Err(PullFailed::BadRow(cause))) => {
                self.stats.count_error(Op::Tail);
                // PostgreSQL answered: what fails is the row, and it
                // fails the same way on every poll until it is fixed.
                self.health.up(started);
                self.health.bad_row(&cause);
                false
            }
            Err(_) => {
                self.stats.count_error(Op::Tail);
                self.health.down("a query of new pets timed out");
                false
            }
        }
    }

    /// Applies every pet above the copy's maximum and every change after
    /// the last it applied, a page at a time. Called with the tail's lock
    /// held: the change number applied moves only here and in
    /// `show_steps` (`step.rs`), both under it.
    async fn pull(&self) -> Result<(), PullFailed> {
        let client = self
            .pool
            .get()
            .await
            .map_err(|e| PullFailed::Unreachable(pool_error(&e)))?;
        let statement = client.prepare_cached(TAIL).await.map_err(|e| describe(&e));
        let statement = match statement {
            Ok(statement) => statement,
            Err(cause) => {
                drop(Object::take(client));
                return Err(PullFailed::Unreachable(cause));
            }
        };
        loop {
            let from = self.copy.len() as i64;
            let after =
                i64::try_from(self.changes_applied.load(Ordering::Acquire)).unwrap_or(i64::MAX);
            let orders_held = i64::try_from(self.copy.orders_len()).unwrap_or(i64::MAX);
            let rows = match client
                .query(&statement, &[&from, &after, &PAGE, &orders_held])
                .await
            {
                Ok(rows) => rows,
                Err(e) => return Err(PullFailed::Unreachable(discard(client, &e))),
            };
            let mut kinds: [Vec<&Row>; 4] = Default::default();
            for row in &rows {
                let kind = row
                    .try_get::<_, i32>(5)
                    .ok()
                    .and_then(|k| usize::try_from(k).ok());
                if let Some(rows) = kind.and_then(|k| kinds.get_mut(k)) {
                    rows.push(row);
                }
            }
            let [mut fresh, mut changed, fresh_orders, changed_orders] = kinds;
            let more_pets = fresh.len() as i64 == PAGE;
            let more_changes = changed.len() as i64 == PAGE;
            let more_fresh_orders = fresh_orders.len() as i64 == PAGE;
            let more_changed_orders = changed_orders.len() as i64 == PAGE;
            let changes = changes_of(&mut changed).map_err(PullFailed::BadRow)?;
            let beyond = |held: u64| changes.iter().position(|(id, _, _)| id.get() > held);
            // New pets wait while more changes than a page are pending
            // (see the module's notes), unless a change names one of them.
            if !more_changes || beyond(self.copy.len() as u64).is_some() {
                fresh.sort_by_key(|row| row.try_get::<_, i64>(0).unwrap_or(i64::MAX));
                self.apply_fresh(&fresh)?;
            }
            // A change to a pet the copy does not hold yet (beyond this
            // page of new pets) stops this round there: the mark stays
            // before it, and the next round brings the pet in, then
            // applies it. Passing it instead would lose it when this
            // replica's own create put the pet in the copy meanwhile,
            // with the status it was created with.
            let upto = beyond(self.copy.len() as u64).unwrap_or(changes.len());
            let statuses: Vec<(PetId, PetStatus)> = changes[..upto]
                .iter()
                .map(|&(id, status, _)| (id, status))
                .collect();
            self.copy
                .apply_statuses(&statuses)
                .map_err(|e| PullFailed::BadRow(format!("a change the copy cannot apply: {e}")))?;
            let mut mark = changes[..upto]
                .last()
                .map_or(self.changes_applied.load(Ordering::Acquire), |c| c.2);
            // Orders changed after a full page of them were not read: the
            // mark stays at that page's last, and the next round reads
            // on from there (statuses applied twice are the same).
            if more_changed_orders {
                if let Some(last) = changed_orders.iter().filter_map(|row| change_of(row)).max() {
                    mark = mark.min(last);
                }
            }
            self.apply_orders(&fresh_orders, &changed_orders, mark)?;
            if mark > self.changes_applied.load(Ordering::Acquire) {
                self.changes_applied.store(mark, Ordering::Release);
            }
            if let Some(&(_, _, last)) = changes.last() {
                self.latest_change.fetch_max(last, Ordering::Relaxed);
            }
            let stalled = upto < changes.len();
            if stalled && !more_pets {
                // One snapshot holds a changed row's pet among the new
                // pets whenever their page is not full: a row outside
                // the ids' order, which no further round would bring.
                let id = changes[upto].0;
                return Err(PullFailed::BadRow(format!(
                    "the changed row of petstore_pets with id {id} is not among its pets"
                )));
            }
            if !more_pets && !more_changes && !more_fresh_orders && !more_changed_orders {
                return Ok(());
            }
        }
    }

    /// Applies orders to the copy up to change `mark`, so that an order
    /// never shows a step whose pet's change the copy has not applied:
    /// new orders in id order (stopping at the first made after the
    /// mark: ids stay gapless, the next round brings it), then changes to
    /// orders the copy holds (a change to one it does not hold yet comes
    /// with that order, read whole, in a later round).
    fn apply_orders(&self, fresh: &[&Row], changed: &[&Row], mark: u64) -> Result<(), PullFailed> {
        let within = |row: &&Row| change_of(row).is_some_and(|change| change <= mark);
        let read = |rows: &[&Row]| -> Result<Vec<Order>, PullFailed> {
            rows.iter()
                .map(|row| {
                    order_at(row, ORDER_COLUMNS).ok_or_else(|| {
                        let id = row.try_get::<_, i64>(0).unwrap_or(0);
                        PullFailed::BadRow(format!(
                            "the row of petstore_orders with id {id} is not a valid order"
                        ))
                    })
                })
                .collect()
        };
        let mut fresh: Vec<&Row> = fresh.to_vec();
        fresh.sort_by_key(|row| row.try_get::<_, i64>(0).unwrap_or(i64::MAX));
        let fresh: Vec<&Row> = fresh.into_iter().take_while(within).collect();
        let held = self.copy.orders_len() + fresh.len() as u64;
        let mut changed: Vec<&Row> = changed
            .iter()
            .copied()
            .filter(within)
            .filter(|row| {
                row.try_get::<_, i64>(0)
                    .ok()
                    .and_then(|id| u64::try_from(id).ok())
                    .is_some_and(|id| id <= held)
            })
            .collect();
        changed.sort_by_key(|row| row.try_get::<_, i64>(4).unwrap_or(i64::MAX));
        let mut orders = read(&fresh)?;
        let mut changes = read(&changed)?;
        // One call, ids ascending for the new ones first; a change to one
        // of them (already read whole) is the same state again.
        orders.append(&mut changes);
        orders.sort_by_key(|order| order.id());
        self.copy.apply_orders(&orders).map(drop).map_err(|e| {
            PullFailed::BadRow(format!("the orders do not follow on from the copy: {e}"))
        })
    }

    /// Applies new pets, in id order, to the copy.
    fn apply_fresh(&self, rows: &[&Row]) -> Result<(), PullFailed> {
        let pets = rows
            .iter()
            .map(|row| pet_of(row))
            .collect::<Result<Vec<Pet>, String>>()
            .map_err(PullFailed::BadRow)?;
        if let Some(last) = pets.last() {
            self.latest.fetch_max(last.id().get(), Ordering::Relaxed);
        }
        self.copy
            .apply(&pets)
            .map(drop)
            .map_err(|e| {
                PullFailed::BadRow(match e {
                    ApplyError::Gap { expected, found } => format!(
                        "the ids in petstore_pets skip from {} to {found} (a row written above \
                         the counter?); ids have no gap, so no replica can apply it: delete that row",
                        expected.saturating_sub(1)
                    ),
                    other => format!("the table does not follow on from the copy: {other}"),
                })
            })
    }

    /// The tail: woken by notifications, polling as a backup, backing off
    /// while PostgreSQL is down.
    pub(super) async fn tail_loop(self: Arc<Self>) {
        let mut wait = POLL;
        loop {
            let woken = timeout(wait, self.wake.notified()).await.is_ok();
            if woken {
                // Most notifications are this replica's own commits, which
                // its committers show in the copy themselves a moment
                // later: a short pause lets them, and a notification the
                // copy has caught up with then costs no query. The poll
                // still asks every time.
                tokio::time::sleep(OWN_COMMIT_PAUSE).await;
                if self.behind() == 0 && self.changes_behind() == 0 {
                    continue;
                }
            }
            wait = if self.catch_up_to(0).await {
                POLL
            } else {
                (wait * 2).min(MAX_BACKOFF)
            };
        }
    }

    /// Keeps a `LISTEN` connection open, reconnecting with backoff; each
    /// notification wakes the tail. Its connect is bounded per host named,
    /// as the pool's is: one bound for all would end at a first host that
    /// never answers, and the host to fail over to would not be tried.
    pub(super) async fn listen_loop(self: Arc<Self>, config: Config) {
        let mut backoff = POLL;
        let connect_within = connecting(&config);
        loop {
            if let Ok(Ok((client, mut connection))) =
                timeout(connect_within, config.connect(NoTls)).await
            {
                let command = format!("LISTEN {CHANNEL}");
                let listen = client.batch_execute(&command);
                tokio::pin!(listen);
                let mut listening = false;
                loop {
                    tokio::select! {
                        done = &mut listen, if !listening => {
                            if done.is_err() { break; }
                            listening = true;
                            backoff = POLL;
                            // Whatever was committed while not listening.
                            self.wake.notify_one();
                            self.events_wake.notify_one();
                        }
                        message = poll_fn(|cx| connection.poll_message(cx)) => match message {
                            Some(Ok(AsyncMessage::Notification(n))) => {
                                // A create's payload is its batch's last
                                // id; a transition's, `change` and its
                                // batch's last change number.
                                let payload = n.payload();
                                if let Some(change) = payload.strip_prefix("change ") {
                                    if let Ok(last) = change.parse::<u64>() {
                                        self.latest_change.fetch_max(last, Ordering::Relaxed);
                                    }
                                } else if let Ok(last) = payload.parse::<u64>() {
                                    self.latest.fetch_max(last, Ordering::Relaxed);
                                }
                                self.wake.notify_one();
                                self.events_wake.notify_one();
                            }
                            Some(Ok(_)) => {}
                            Some(Err(_)) | None => break,
                        },
                    }
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
}

/// Loads every committed pet into `copy`: the counters first (every id up
/// to the first is committed), then ranges of ids, a few queries in
/// flight. Returns the change number the copy holds every change up to:
/// the rows were read after it was, so they show at least those changes,
/// and the tail applies every later one again, in order.
pub(super) async fn load(pool: &Pool, copy: &Inventory) -> Result<u64, String> {
    let client = pool.get().await.map_err(|e| pool_error(&e))?;
    let (last, changes, orders): (i64, i64, i64) = client
        .query_one(COMMITTED, &[])
        .await
        .and_then(|row| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))
        .map_err(|e| describe(&e))?;
    let statement = client.prepare(RANGE).await.map_err(|e| describe(&e))?;
    let mut from = 1i64;
    while from <= last {
        let ranges: Vec<(i64, i64)> = (0..LOAD_IN_FLIGHT as i64)
            .map(|i| from.saturating_add(i.saturating_mul(PAGE)))
            .filter(|start| *start <= last)
            .map(|start| (start, start.saturating_add(PAGE - 1).min(last)))
            .collect();
        // Every query is sent before the first answer is awaited
        // (tokio-postgres pipelines requests on one connection). A query
        // leaves when first polled, and `join_all` polls a few futures in
        // their order, so the ranges leave in order.
        let params: Vec<[&(dyn tokio_postgres::types::ToSql + Sync); 2]> =
            ranges.iter().map(|(a, b)| [a as _, b as _]).collect();
        let queries = params.iter().map(|params| client.query(&statement, params));
        let mut results = Vec::with_capacity(ranges.len());
        for rows in join_all(queries).await {
            results.push(rows.map_err(|e| describe(&e))?);
        }
        for rows in results {
            copy.apply(&pets_of(&rows)?)
                .map_err(|e| format!("the table has a hole in its ids: {e}"))?;
        }
        from = ranges.last().map_or(last, |r| r.1).saturating_add(1);
    }
    if (copy.len() as i64) < last {
        return Err(format!(
            "the counter says {last} pets, the table has {}",
            copy.len()
        ));
    }
    // The orders after the pets, whose statuses their rows agree with
    // (or are older than: the tail applies every later change again).
    let statement = client
        .prepare(ORDER_RANGE)
        .await
        .map_err(|e| describe(&e))?;
    let mut from = 1i64;
    while from <= orders {
        let to = from.saturating_add(PAGE - 1).min(orders);
        let rows = client
            .query(&statement, &[&from, &to])
            .await
            .map_err(|e| describe(&e))?;
        let page = rows
            .iter()
            .map(|row| order_of(row, 0))
            .collect::<Option<Vec<Order>>>()
            .ok_or_else(|| {
                format!(
                    "a row of petstore_orders with an id from {from} to {to} is not a valid order"
                )
            })?;
        copy.apply_orders(&page)
            .map_err(|e| format!("the orders table has a hole in its ids: {e}"))?;
        from = to.saturating_add(1);
    }
    if (copy.orders_len() as i64) < orders {
        return Err(format!(
            "the order counter says {orders} orders, the table has {}",
            copy.orders_len()
        ));
    }
    u64::try_from(changes).map_err(|_| format!("the change counter is negative: {changes}"))
}

/// The order in `row`'s columns `at`: id, pet, status, placer, and
/// placed, expires and closed as Unix seconds. `None` when they do not
/// make one the core would have made.
pub(super) fn order_at(row: &Row, at: [usize; 7]) -> Option<Order> {
    let positive = |i: usize| {
        row.try_get::<_, i64>(i)
            .ok()
            .and_then(|n| u64::try_from(n).ok())
    };
    let time = |i: usize| positive(i).map(Timestamp::from_unix_secs);
    let closed = match row.try_get::<_, Option<i64>>(at[6]).ok()? {
        None => None,
        Some(_) => Some(time(at[6])?),
    };
    Order::from_parts(
        OrderId::new(positive(at[0])?)?,
        PetId::new(positive(at[1])?)?,
        row.try_get::<_, &str>(at[2]).ok()?.parse().ok()?,
        row.try_get::<_, &str>(at[3]).ok()?,
        time(at[4])?,
        time(at[5])?,
        closed,
    )
    .ok()
}

/// The order in seven columns from `first` on, as [`order_at`] reads them.
pub(super) fn order_of(row: &Row, first: usize) -> Option<Order> {
    order_at(
        row,
        [
            first,
            first + 1,
            first + 2,
            first + 3,
            first + 4,
            first + 5,
            first + 6,
        ],
    )
}

/// A tail row's change number.
fn change_of(row: &Row) -> Option<u64> {
    row.try_get::<_, i64>(4)
        .ok()
        .and_then(|c| u64::try_from(c).ok())
}

/// Pets out of `id, name, category_id, status` rows, checked as the core
/// checks a create (the table's CHECKs hold the same rules).
fn pets_of(rows: &[Row]) -> Result<Vec<Pet>, String> {
    rows.iter().map(pet_of).collect()
}

fn pet_of(row: &Row) -> Result<Pet, String> {
    let bad = |what: &str| format!("a row of petstore_pets has {what}");
    let id = row.try_get::<_, i64>(0).map_err(|_| bad("no id"))?;
    let id = u64::try_from(id)
        .ok()
        .and_then(PetId::new)
        .ok_or_else(|| bad("an invalid id"))?;
    let bad = |what: &str| format!("the row of petstore_pets with id {id} has {what}");
    let name = row.try_get::<_, &str>(1).map_err(|_| bad("no name"))?;
    let category = row
        .try_get::<_, i64>(2)
        .ok()
        .and_then(|c| u64::try_from(c).ok())
        .and_then(CategoryId::new)
        .ok_or_else(|| bad("an invalid category"))?;
    let status = row
        .try_get::<_, &str>(3)
        .ok()
        .and_then(|s| s.parse::<PetStatus>().ok())
        .ok_or_else(|| bad("an invalid status"))?;
    let new = NewPet::new(name, category).map_err(|e| bad(&format!("an invalid name ({e})")))?;
    Ok(new.with_status(status).into_pet(id))
}

/// The `(id, status, change number)` of changed rows, in change order.
fn changes_of(rows: &mut [&Row]) -> Result<Vec<(PetId, PetStatus, u64)>, String> {
    rows.sort_by_key(|row| row.try_get::<_, i64>(4).unwrap_or(i64::MAX));
    rows.iter()
        .map(|row| {
            let bad = |what: &str| format!("a changed row of petstore_pets has {what}");
            let id = row
                .try_get::<_, i64>(0)
                .ok()
                .and_then(|id| u64::try_from(id).ok())
                .and_then(PetId::new)
                .ok_or_else(|| bad("an invalid id"))?;
            let status = row
                .try_get::<_, &str>(3)
                .ok()
                .and_then(|s| s.parse::<PetStatus>().ok())
                .ok_or_else(|| bad("an invalid status"))?;
            let change = row
                .try_get::<_, i64>(4)
                .ok()
                .and_then(|c| u64::try_from(c).ok())
                .ok_or_else(|| bad("an invalid change number"))?;
            Ok((id, status, change))
        })
        .collect()
}

/// Why the copy could not catch up.
#[derive(Debug)]
enum PullFailed {
    /// PostgreSQL failed or could not be reached.
    Unreachable(String),
    /// A committed row the copy cannot apply (it breaks the contract's
    /// rules, or leaves a gap): the same on every try, until fixed.
    BadRow(String),
}
