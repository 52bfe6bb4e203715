//! `OrderBook`: every order in memory, in a compact row each, with the
//! indexes the contract's reads need: a key's own orders (so listing them
//! costs the page, not the number of other keys' orders), a pet's open
//! order, and the deadlines of open holds (a heap: the lapse timer pops
//! what is due, and never scans every order).
//!
//! Why rows and not `Order`s: an order's name is interned (a `u32`), its
//! times are whole seconds, and its id is its place in the vector (ids
//! are gapless), so a row is 40 bytes and the key index 8 more.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use super::id::OrderId;
use super::record::{Order, OrderStatus};
use super::Actor;
use crate::clock::Timestamp;
use crate::pet::PetId;

/// One order, compact: see the file's notes.
#[derive(Clone, Copy, Debug)]
struct Row {
    pet: u64,
    placed: u64,
    expires: u64,
    /// 0: not closed.
    closed: u64,
    placer: u32,
    status: u8,
}

/// The orders, by id, with their indexes.
#[derive(Debug, Default)]
pub(crate) struct OrderBook {
    /// Order `id` at `id - 1`.
    rows: Vec<Row>,
    names: Vec<Arc<str>>,
    name_index: HashMap<Arc<str>, u32>,
    /// Each placer's order ids, ascending.
    by_placer: Vec<Vec<u64>>,
    /// Each held pet's placed order.
    open_by_pet: HashMap<PetId, OrderId>,
    /// `(expires, id)` of placed orders, earliest first; an entry whose
    /// order has left `placed` since is stale and skipped when popped.
    deadlines: BinaryHeap<Reverse<(u64, u64)>>,
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
            placed_at: Timestamp::from_unix_secs(row.placed),
            expires_at: Timestamp::from_unix_secs(row.expires),
            closed_at: (row.closed != 0).then(|| Timestamp::from_unix_secs(row.closed)),
        }
    }

    /// The order with this id, if there is one.
    pub(crate) fn get(&self, id: OrderId) -> Option<Order> {
        let index = usize::try_from(id.get() - 1).ok()?;
        self.rows.get(index).map(|row| self.order(index, row))
    }

    /// The placed order holding `pet`, if any.
    pub(crate) fn open_order(&self, pet: PetId) -> Option<OrderId> {
        self.open_by_pet.get(&pet).copied()
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
                placed: order.placed_at.unix_secs(),
                expires: order.expires_at.unix_secs(),
                closed: order.closed_at.map_or(0, Timestamp::unix_secs),
                placer,
                status: order.status.code(),
            });
            self.by_placer[placer as usize].push(id);
            if order.status == OrderStatus::Placed {
                self.open_by_pet.insert(order.pet, order.id);
                self.deadlines
                    .push(Reverse((order.expires_at.unix_secs(), id)));
            }
            return;
        }
        let Some(row) = usize::try_from(id - 1)
            .ok()
            .and_then(|index| self.rows.get_mut(index))
        else {
            return;
        };
        row.status = order.status.code();
        row.closed = order.closed_at.map_or(0, Timestamp::unix_secs);
        if order.status != OrderStatus::Placed
            && self.open_by_pet.get(&order.pet) == Some(&order.id)
        {
            self.open_by_pet.remove(&order.pet);
        }
    }

    fn intern(&mut self, name: &Arc<str>) -> u32 {
        if let Some(&index) = self.name_index.get(name) {
            return index;
        }
        let index = self.names.len() as u32;
        self.names.push(name.clone());
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
        self.deadlines
            .peek()
            .map(|Reverse((secs, _))| Timestamp::from_unix_secs(*secs))
    }

    /// Takes up to `max` placed orders whose hold has lapsed at `now`,
    /// earliest first, off the deadlines: the caller expires them.
    pub(crate) fn take_due(&mut self, now: Timestamp, max: usize) -> Vec<OrderId> {
        let now = now.unix_secs();
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
        let after = after.map_or(0, OrderId::get);
        let matches = |row: &Row| status.is_none_or(|s| s.code() == row.status);
        let mut orders = Vec::with_capacity(limit.min(128));
        let mut more = false;
        let mut take = |index: usize, orders: &mut Vec<Order>| -> bool {
            let row = &self.rows[index];
            if !matches(row) {
                return true;
            }
            if orders.len() == limit {
                more = true;
                return false;
            }
            orders.push(self.order(index, row));
            true
        };
        if actor.sees_all() {
            let start = usize::try_from(after).unwrap_or(usize::MAX);
            for index in start..self.rows.len() {
                if !take(index, &mut orders) {
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
                if !take((id - 1) as usize, &mut orders) {
                    break;
                }
            }
        }
        let next = more.then(|| orders.last().map(Order::id)).flatten();
        (orders, next)
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
    fn a_row_and_its_index_stay_within_48_bytes() {
        assert_eq!(size_of::<Row>(), 40);
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
