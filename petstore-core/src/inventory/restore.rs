//! `Restorer`: the state a durable inventory is rebuilt into as its
//! files are read back (a snapshot's lines, then the records of the
//! segments after it), and the snapshot written from such a state.
//!
//! One type for both, so that what a snapshot holds is by construction
//! what a start would have rebuilt from the records it replaces.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use super::feed::Feed;
use super::journal::{Item, Record, Restore, SnapshotHeader, SnapshotWriter, SNAPSHOT_VERSION};
use super::records::Records;
use super::steps;
use super::TransitionError;
use crate::clock::Timestamp;
use crate::event::log::Entry;
use crate::idempotency::{Answer, KeptKeys, Keyed};
use crate::order::book::OrderBook;
use crate::order::{OrderId, OrderStatus};
use crate::pet::json::decode;
use crate::pet::PetStatus;

/// What a durable inventory holds, as it is read back.
#[derive(Default)]
pub(super) struct Restorer {
    pub(super) records: Records,
    pub(super) book: OrderBook,
    pub(super) kept: Arc<KeptKeys>,
    pub(super) feed: Feed,
    /// The time the records read are dated by (a journal written before
    /// times were: 0, long past any retention).
    time: u64,
    /// What judges which idempotency answers have expired.
    now: Timestamp,
}

impl Restorer {
    /// An empty state, judged at `now`, keeping events for `retention`.
    pub(super) fn new(now: Timestamp, retention: Duration) -> Self {
        let restorer = Restorer {
            now,
            ..Restorer::default()
        };
        restorer.feed.set_retention(retention);
        restorer
    }

    /// Writes this state as snapshot `segment`, taken at `now`: every pet
    /// and order as it stands, the answers not expired at `now`, and the
    /// events still within their retention at `now`.
    /// `tick` is called for each line (a compaction paces itself by it).
    pub(super) fn write_snapshot(
        &self,
        dir: &std::path::Path,
        segment: u64,
        tick: &mut dyn FnMut(),
    ) -> io::Result<SnapshotWriter> {
        let log = self.feed.log();
        let kept_from = log.expired_before(self.now);
        let header = SnapshotHeader {
            version: SNAPSHOT_VERSION,
            segment,
            time: self.now.unix_secs().max(self.time),
            pets: self.records.ends.len() as u64,
            orders: self.book.len(),
            events_first: log.first() + kept_from as u64,
        };
        let mut writer = SnapshotWriter::create(dir, &header)?;
        for index in 0..self.records.ends.len() {
            tick();
            writer.pet(self.records.json(index))?;
        }
        for id in 1..=self.book.len() {
            tick();
            if let Some(order) = OrderId::new(id).and_then(|id| self.book.get(id)) {
                writer.order(&order)?;
            }
        }
        let mut failed = Ok(());
        self.kept.for_each_kept(self.now, |keyed, answer| {
            if failed.is_ok() {
                failed = writer.kept(keyed, answer);
            }
        });
        failed?;
        writer.events(log.entries().skip(kept_from).inspect(|_| tick()))?;
        Ok(writer)
    }
}

impl Restore for Restorer {
    fn record(&mut self, record: Record, json: &[u8], keyed: Option<Keyed>) -> Result<(), String> {
        let answer = match record {
            Record::Time(secs) => {
                self.time = secs;
                None
            }
            Record::Pet(id, status) => {
                self.records.push_json(id, status, json);
                self.feed
                    .push(Entry::pet_created(id.get(), status, self.time));
                // Decoded only for a key: replay of unkeyed pets
                // stays a copy of bytes.
                keyed
                    .as_ref()
                    .and_then(|_| decode(id, status, json))
                    .map(Answer::Created)
            }
            Record::Transition(id, transition) => {
                let Some(index) = self.records.index_of(id) else {
                    return Err(format!(
                        "{transition} of pet {id}, which no record before it created"
                    ));
                };
                let current = self.records.statuses[index];
                if !transition.allows(current) {
                    let refused = TransitionError::Conflict {
                        id,
                        current,
                        transition,
                    };
                    return Err(format!("a transition its pet could not take: {refused}"));
                }
                let status = transition.to_status();
                self.records.set_status(index, status);
                self.feed
                    .push(Entry::pet_changed(id.get(), status, self.time));
                keyed
                    .as_ref()
                    .and_then(|_| decode(id, status, self.records.json(index)))
                    .map(Answer::Transitioned)
            }
            Record::Conflict(id, status, transition) => {
                if self.records.index_of(id).is_none() {
                    return Err(format!(
                            "a kept conflict of {transition} of pet {id}, which no record before it created"
                        ));
                }
                Some(Answer::Conflict {
                    id,
                    status,
                    transition,
                })
            }
            Record::Order(step) => {
                let order = steps::restore_step(&mut self.records, &mut self.book, &step)?;
                // As `publish` gave them: the order, then its pet's change.
                let at = order.closed_at().unwrap_or(order.placed_at()).unix_secs();
                self.feed
                    .push(Entry::order(order.id().get(), order.status(), at));
                let pet_status = order.status().pet_status();
                self.feed
                    .push(Entry::pet_changed(order.pet().get(), pet_status, self.time));
                match (&keyed, step.door) {
                    (None, _) => None,
                    // Through a pet transition: the pet was the answer.
                    (Some(_), Some(_)) => self
                        .records
                        .index_of(order.pet())
                        .and_then(|index| {
                            decode(
                                order.pet(),
                                self.records.statuses[index],
                                self.records.json(index),
                            )
                        })
                        .map(Answer::Transitioned),
                    (Some(_), None) => Some(Answer::Order(Box::new(order))),
                }
            }
            Record::OrderConflict(id, status) => {
                if id.get() > self.book.len() {
                    return Err(format!(
                        "a kept conflict of order {id}, which no record before it placed"
                    ));
                }
                Some(Answer::OrderConflict { id, status })
            }
        };
        if let (Some(keyed), Some(answer)) = (keyed, answer) {
            self.kept.restore(&keyed, answer, self.now);
        }
        Ok(())
    }

    fn header(&mut self, header: &SnapshotHeader) -> Result<(), String> {
        self.time = header.time;
        self.feed.start_at(header.events_first);
        Ok(())
    }

    fn item(&mut self, item: Item, json: &[u8]) -> Result<(), String> {
        match item {
            Item::Pet(id, status) => self.records.push_json(id, status, json),
            Item::Orders(orders) => {
                for order in orders {
                    let Some(index) = self.records.index_of(order.pet()) else {
                        return Err(format!(
                            "order {} of pet {}, which the snapshot does not hold",
                            order.id(),
                            order.pet()
                        ));
                    };
                    let pet = self.records.statuses[index];
                    if order.status() == OrderStatus::Placed && pet != PetStatus::Pending {
                        return Err(format!(
                            "order {} is placed, and its pet {} is {pet}, not pending",
                            order.id(),
                            order.pet()
                        ));
                    }
                    self.book.put(&order);
                }
            }
            Item::Kept(keyed, answer) => self.kept.restore(&keyed, answer, self.now),
            Item::Events(entries) => {
                for entry in entries {
                    self.feed.push(entry);
                }
            }
        }
        Ok(())
    }
}
