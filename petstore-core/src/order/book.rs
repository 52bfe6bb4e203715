//! `OrderBook`: every order in memory, in a compact row each, with the
//! indexes the contract's reads need: a key's own orders (so listing them
//! costs the page, not the number of other keys' orders), a pet's open
//! order, and the deadlines of open holds (a heap: the lapse timer pops
//! what is due, and never scans every order).
//!
//! Why rows and not `Order`s: an order's name is interned (a `u32`), its
//! times are whole Unix seconds in a `u32` (until 2106), and its id is
//! its place in the vector (ids are gapless), so a row is 32 bytes and
//! the key index 8 more. A pet's open order is a slot per pet (8 bytes a
//! pet, not a map entry per order), and the deadlines' heap drops the
//! entries of closed orders once they outnumber the open ones, so it
//! holds about what is placed, not everything ever placed.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use super::id::OrderId;
use super::record::{Order, OrderStatus};
use super::Actor;
use crate::clock::{write_rfc3339, Timestamp};
use crate::pet::json::push_decimal;
use crate::pet::PetId;

/// One order, compact: see the file's notes.
#[derive(Clone, Copy, Debug)]
struct Row {
    pet: u64,
    placed: u32,
    expires: u32,
    /// 0: not closed.
    closed: u32,
    placer: u32,
    status: u8,
}

/// Unix seconds as a row keeps them (saturating past 2106).
fn secs(t: Timestamp) -> u32 {
    u32::try_from(t.unix_secs()).unwrap_or(u32::MAX)
}

fn time(secs: u32) -> Timestamp {
    Timestamp::from_unix_secs(u64::from(secs))
}

/// The orders, by id, with their indexes.
#[derive(Debug, Default)]
pub(crate) struct OrderBook {
    /// Order `id` at `id - 1`.
    rows: Vec<Row>,
    names: Vec<Arc<str>>,
    /// Each name as a JSON string, escaped once, for pages.
    names_json: Vec<Box<str>>,
    name_index: HashMap<Arc<str>, u32>,
    /// Each placer's order ids, ascending.
    by_placer: Vec<Vec<u64>>,
    /// The placed order holding pet `id` at `id - 1` (0: none), grown to
    /// the highest pet ever held.
    open_by_pet: Vec<u64>,
    /// `(expires, id)` of placed orders, earliest first; an entry whose
    /// order has left `placed` since is stale and skipped when popped.
    deadlines: BinaryHeap<Reverse<(u32, u64)>>,
    /// How many entries of `deadlines` are stale. Signed: an entry taken
    /// off as due is counted out here before its order's expiry (which
    /// counts a closed order in) is recorded.
    stale: i64,
}

impl OrderBook {
    /// How many orders there are (the last id).
    pub(crate) fn len(&self) -> u64 {
        self.rows.len() as u64
    }

    fn order(&self, index: usize, row: &Row) -> Order {
        let id = OrderId::new(index as u64 + 1).unwrap_or(OrderId::MAX);
        Order {
            id,
            pet: PetId::new(row.pet).unwrap_or(PetId::MAX),
            status: OrderStatus::from_code(row.status),
            placed_by: self.names[row.placer as usize].clone(),
            placed_at: time(row.placed),
            expires_at: time(row.expires),
            closed_at: (row.closed != 0).then(|| time(row.closed)),
        }
    }

    /// The order with this id, if there is one.
    pub(crate) fn get(&self, id: OrderId) -> Option<Order> {
        let index = usize::try_from(id.get() - 1).ok()?;
        self.rows.get(index).map(|row| self.order(index, row))
    }

    /// The placed order holding `pet`, if any.
    pub(crate) fn open_order(&self, pet: PetId) -> Option<OrderId> {
        let slot = usize::try_from(pet.get() - 1).ok()?;
        self.open_by_pet.get(slot).copied().and_then(OrderId::new)
    }

    fn set_open(&mut self, pet: PetId, order: u64) {
        let Ok(slot) = usize::try_from(pet.get() - 1) else {
            return;
        };
        if slot >= self.open_by_pet.len() {
            if order == 0 {
                return;
            }
            self.open_by_pet.resize(slot + 1, 0);
        }
        self.open_by_pet[slot] = order;
    }

    /// Adds a new order (its id the next) or records a placed one's
    /// change of status; anything else is ignored (replay checks its
    /// records before it puts them).
    pub(crate) fn put(&mut self, order: &Order) {
        let id = order.id.get();
        if id == self.len() + 1 {
            let placer = self.intern(&order.placed_by);
            self.rows.push(Row {
                pet: order.pet.get(),
                placed: secs(order.placed_at),
                expires: secs(order.expires_at),
                closed: order.closed_at.map_or(0, secs),
                placer,
                status: order.status.code(),
            });
            self.by_placer[placer as usize].push(id);
            if order.status == OrderStatus::Placed {
                self.set_open(order.pet, id);
                self.deadlines.push(Reverse((secs(order.expires_at), id)));
            }
            return;
        }
        let Some(row) = usize::try_from(id - 1)
            .ok()
            .and_then(|index| self.rows.get_mut(index))
        else {
            return;
        };
        let was_placed = row.status == OrderStatus::Placed.code();
        row.status = order.status.code();
        row.closed = order.closed_at.map_or(0, secs);
        if was_placed && order.status != OrderStatus::Placed {
            if self.open_order(order.pet) == Some(order.id) {
                self.set_open(order.pet, 0);
            }
            // Its deadline's entry is stale now.
            self.stale += 1;
            self.drop_stale();
        }
    }

    /// Rebuilds the deadlines without their stale entries once those are
    /// the larger part (and there are enough to matter): each entry is
    /// dropped once, so the cost per closed order stays constant.
    fn drop_stale(&mut self) {
        let len = self.deadlines.len();
        if self.stale < 1_024 || self.stale.saturating_mul(2) < len as i64 {
            return;
        }
        let rows = &self.rows;
        let placed = |id: u64| {
            usize::try_from(id - 1)
                .ok()
                .and_then(|index| rows.get(index))
                .is_some_and(|row| row.status == OrderStatus::Placed.code())
        };
        self.deadlines.retain(|Reverse((_, id))| placed(*id));
        self.deadlines.shrink_to_fit();
        self.stale = 0;
    }

    fn intern(&mut self, name: &Arc<str>) -> u32 {
        if let Some(&index) = self.name_index.get(name) {
            return index;
        }
        let index = self.names.len() as u32;
        self.names.push(name.clone());
        let json = serde_json::to_string(&**name).unwrap_or_else(|_| "\"\"".into());
        self.names_json.push(json.into_boxed_str());
        self.name_index.insert(name.clone(), index);
        self.by_placer.push(Vec::new());
        index
    }

    /// The interned name equal to `name`, so that orders of one key
    /// share one allocation of it.
    pub(crate) fn name(&self, name: &str) -> Option<Arc<str>> {
        self.name_index
            .get_key_value(name)
            .map(|(name, _)| name.clone())
    }

    /// The earliest deadline of a placed order, if any (perhaps a stale
    /// one: then [`take_due`](Self::take_due) finds nothing).
    pub(crate) fn next_deadline(&self) -> Option<Timestamp> {
        self.deadlines.peek().map(|Reverse((secs, _))| time(*secs))
    }

    /// Takes up to `max` placed orders whose hold has lapsed at `now`,
    /// earliest first, off the deadlines: the caller expires them.
    pub(crate) fn take_due(&mut self, now: Timestamp, max: usize) -> Vec<OrderId> {
        let now = secs(now);
        let mut due = Vec::new();
        while due.len() < max {
            match self.deadlines.peek() {
                Some(Reverse((secs, _))) if *secs <= now => {}
                _ => break,
            }
            let Some(Reverse((_, id))) = self.deadlines.pop() else {
                break;
            };
            let placed = usize::try_from(id - 1)
                .ok()
                .and_then(|index| self.rows.get(index))
                .is_some_and(|row| row.status == OrderStatus::Placed.code());
            self.stale -= 1;
            if let (true, Some(id)) = (placed, OrderId::new(id)) {
                due.push(id);
            }
        }
        due
    }

    /// Up to `limit` orders `actor` sees, with ids above `after` and the
    /// status asked for, ascending; and whether more follow (the last
    /// one's id, then).
    pub(crate) fn list(
        &self,
        actor: &Actor,
        after: Option<OrderId>,
        status: Option<OrderStatus>,
        limit: usize,
    ) -> (Vec<Order>, Option<OrderId>) {
        let mut orders = Vec::with_capacity(limit.min(128));
        let next = self.visit(actor, after, status, limit, |index, row| {
            orders.push(self.order(index, row));
        });
        (orders, next)
    }

    /// [`list`](Self::list)'s page written straight into `out` as the JSON
    /// of an array of Order, byte for byte what [`Order::to_json`] of each
    /// would give: no `Order` built, no allocation but `out`'s growth, and
    /// each key's name escaped once, when it first placed an order.
    pub(crate) fn encode_page(
        &self,
        actor: &Actor,
        after: Option<OrderId>,
        status: Option<OrderStatus>,
        limit: usize,
        out: &mut Vec<u8>,
    ) -> Option<OrderId> {
        out.push(b'[');
        let mut first = true;
        let next = self.visit(actor, after, status, limit, |index, row| {
            if !first {
                out.push(b',');
            }
            first = false;
            out.extend_from_slice(br#"{"id":"#);
            push_decimal(out, index as u64 + 1);
            out.extend_from_slice(br#","petId":"#);
            push_decimal(out, row.pet);
            out.extend_from_slice(br#","status":""#);
            out.extend_from_slice(OrderStatus::from_code(row.status).as_str().as_bytes());
            out.extend_from_slice(br#"","placedBy":"#);
            out.extend_from_slice(self.names_json[row.placer as usize].as_bytes());
            out.extend_from_slice(br#","placedAt":""#);
            write_rfc3339(u64::from(row.placed), out);
            out.extend_from_slice(br#"","expiresAt":""#);
            write_rfc3339(u64::from(row.expires), out);
            out.push(b'"');
            if row.closed != 0 {
                out.extend_from_slice(br#","closedAt":""#);
                write_rfc3339(u64::from(row.closed), out);
                out.push(b'"');
            }
            out.push(b'}');
        });
        out.push(b']');
        next
    }

    /// Calls `visit` with each of up to `limit` rows `actor` sees, with
    /// ids above `after` and the status asked for, ascending: a key's own
    /// through its index, every one's through the rows. Returns the last
    /// one's id when more match.
    fn visit(
        &self,
        actor: &Actor,
        after: Option<OrderId>,
        status: Option<OrderStatus>,
        limit: usize,
        mut visit: impl FnMut(usize, &Row),
    ) -> Option<OrderId> {
        let after = after.map_or(0, OrderId::get);
        let mut taken = 0;
        let mut last = 0;
        let mut more = false;
        let mut take = |index: usize| -> bool {
            let row = &self.rows[index];
            if status.is_some_and(|s| s.code() != row.status) {
                return true;
            }
            if taken == limit {
                more = true;
                return false;
            }
            visit(index, row);
            taken += 1;
            last = index as u64 + 1;
            true
        };
        if actor.sees_all() {
            let start = usize::try_from(after).unwrap_or(usize::MAX);
            for index in start..self.rows.len() {
                if !take(index) {
                    break;
                }
            }
        } else if let Some(ids) = self
            .name_index
            .get(actor.name())
            .map(|&placer| &self.by_placer[placer as usize])
        {
            let start = ids.partition_point(|&id| id <= after);
            for &id in &ids[start..] {
                if !take((id - 1) as usize) {
                    break;
                }
            }
        }
        if more {
            OrderId::new(last)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(id: u64, pet: u64, by: &str, status: OrderStatus) -> Order {
        Order {
            id: OrderId::new(id).unwrap(),
            pet: PetId::new(pet).unwrap(),
            status,
            placed_by: Arc::from(by),
            placed_at: Timestamp::from_unix_secs(100),
            expires_at: Timestamp::from_unix_secs(100 + id),
            closed_at: None,
        }
    }

    #[test]
    fn a_page_written_from_rows_is_the_orders_json() {
        let mut book = OrderBook::default();
        for id in 1..=9 {
            let by = ["a\"b", "plain", "ünï"][(id % 3) as usize];
            let mut o = order(id, id, by, OrderStatus::Placed);
            o.placed_at = Timestamp::from_unix_secs(1_764_324_000 + id * 86_399);
            book.put(&o);
            if id % 2 == 0 {
                o.status = OrderStatus::Completed;
                o.closed_at = Some(Timestamp::from_unix_secs(1_800_000_000 + id));
                book.put(&o);
            }
        }
        for actor in [Actor::new("plain"), Actor::new("x").with_all_orders()] {
            for status in [None, Some(OrderStatus::Completed)] {
                for after in [None, OrderId::new(3)] {
                    let (orders, next) = book.list(&actor, after, status, 2);
                    let mut out = Vec::new();
                    let got = book.encode_page(&actor, after, status, 2, &mut out);
                    assert_eq!(got, next);
                    assert_eq!(
                        String::from_utf8(out).unwrap(),
                        String::from_utf8(super::super::encode_array(&orders)).unwrap()
                    );
                }
            }
        }
    }

    #[test]
    fn a_row_is_32_bytes() {
        assert_eq!(size_of::<Row>(), 32);
    }

    #[test]
    fn a_key_sees_its_own_orders_and_all_sees_every_one() {
        let mut book = OrderBook::default();
        for id in 1..=6 {
            let by = if id % 2 == 0 { "even" } else { "odd" };
            book.put(&order(id, id, by, OrderStatus::Placed));
        }
        let ids = |(orders, next): (Vec<Order>, Option<OrderId>)| {
            (
                orders.iter().map(|o| o.id.get()).collect::<Vec<_>>(),
                next.map(OrderId::get),
            )
        };
        let even = Actor::new("even");
        assert_eq!(ids(book.list(&even, None, None, 2)), (vec![2, 4], Some(4)));
        assert_eq!(
            ids(book.list(&even, OrderId::new(4), None, 2)),
            (vec![6], None)
        );
        assert_eq!(
            ids(book.list(&Actor::new("none"), None, None, 9)),
            (vec![], None)
        );
        let all = Actor::new("x").with_all_orders();
        assert_eq!(
            ids(book.list(&all, OrderId::new(3), None, 9)),
            (vec![4, 5, 6], None)
        );
        let mut cancelled = book.get(OrderId::new(4).unwrap()).unwrap();
        cancelled.status = OrderStatus::Cancelled;
        cancelled.closed_at = Some(Timestamp::from_unix_secs(150));
        book.put(&cancelled);
        assert_eq!(book.get(cancelled.id), Some(cancelled));
        assert_eq!(book.open_order(PetId::new(4).unwrap()), None);
        let placed = Some(OrderStatus::Placed);
        assert_eq!(ids(book.list(&even, None, placed, 9)), (vec![2, 6], None));
    }

    #[test]
    fn the_deadlines_drop_closed_orders_once_they_are_the_larger_part() {
        let mut book = OrderBook::default();
        for id in 1..=4_000 {
            book.put(&order(id, id, "k", OrderStatus::Placed));
        }
        for id in 1..=3_000 {
            let mut closed = book.get(OrderId::new(id).unwrap()).unwrap();
            closed.status = OrderStatus::Cancelled;
            book.put(&closed);
            assert!(book.deadlines.len() <= 4_000);
        }
        // Rebuilt on the way: at most the open ones and fewer than 1,024
        // stale ones are left, and the due ones are exactly the open.
        assert!(
            book.deadlines.len() < 1_000 + 1_024,
            "{}",
            book.deadlines.len()
        );
        let due = book.take_due(
            Timestamp::from_unix_secs(u64::MAX / 2_000_000_000),
            usize::MAX,
        );
        assert_eq!(due.len(), 1_000);
        assert!(due.iter().all(|id| id.get() > 3_000));
    }

    #[test]
    fn only_placed_orders_past_their_deadline_fall_due_earliest_first() {
        let mut book = OrderBook::default();
        for id in 1..=4 {
            book.put(&order(id, id, "k", OrderStatus::Placed));
        }
        let mut done = book.get(OrderId::new(1).unwrap()).unwrap();
        done.status = OrderStatus::Completed;
        book.put(&done);
        assert_eq!(book.next_deadline(), Some(Timestamp::from_unix_secs(101)));
        let due = book.take_due(Timestamp::from_unix_secs(103), 10);
        assert_eq!(due.iter().map(|id| id.get()).collect::<Vec<_>>(), [2, 3]);
        assert_eq!(book.take_due(Timestamp::from_unix_secs(103), 10), []);
        assert_eq!(book.next_deadline(), Some(Timestamp::from_unix_secs(104)));
    }
}
