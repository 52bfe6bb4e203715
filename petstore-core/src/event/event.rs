//! [`Event`]: one change of the feed, and its JSON:
//! `{"id":"17","type":"pet.status_changed","at":"2026-11-28T10:00:00Z","data":{...}}`.

use std::fmt;

use super::id::EventId;
use crate::clock::Timestamp;
use crate::order::{Order, OrderStatus};
use crate::pet::Pet;

/// What kind of change an event is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// A pet was created; the data is the pet as created.
    PetCreated,
    /// A pet's status changed; the data is the pet after the change.
    PetStatusChanged,
    /// An order was placed (its pet held).
    OrderPlaced,
    /// An order was completed (its pet sold), or a sale recorded.
    OrderCompleted,
    /// An order was cancelled (its pet available again).
    OrderCancelled,
    /// An order's hold lapsed (its pet available again).
    OrderExpired,
}

impl EventType {
    /// Every type, in the order the contract lists them.
    pub const ALL: [EventType; 6] = [
        EventType::PetCreated,
        EventType::PetStatusChanged,
        EventType::OrderPlaced,
        EventType::OrderCompleted,
        EventType::OrderCancelled,
        EventType::OrderExpired,
    ];

    /// The type as the contract spells it: `pet.created`, ...
    pub const fn as_str(self) -> &'static str {
        match self {
            EventType::PetCreated => "pet.created",
            EventType::PetStatusChanged => "pet.status_changed",
            EventType::OrderPlaced => "order.placed",
            EventType::OrderCompleted => "order.completed",
            EventType::OrderCancelled => "order.cancelled",
            EventType::OrderExpired => "order.expired",
        }
    }

    /// The type of an order's event that leaves it in `status`.
    pub const fn of_order(status: OrderStatus) -> EventType {
        match status {
            OrderStatus::Placed => EventType::OrderPlaced,
            OrderStatus::Completed => EventType::OrderCompleted,
            OrderStatus::Cancelled => EventType::OrderCancelled,
            OrderStatus::Expired => EventType::OrderExpired,
        }
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a change left: the pet or the order after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventData {
    /// A pet event's pet.
    Pet(Pet),
    /// An order event's order.
    Order(Order),
}

/// One change, at its position in the feed.
///
/// # Examples
///
/// ```
/// use petstore_core::*;
/// use petstore_core::event::{EventData, EventQuery, EventType};
/// let inventory = Inventory::in_memory();
/// inventory.create(NewPet::new("Rex", CategoryId::MIN).unwrap()).unwrap();
/// let page = inventory.events(&EventQuery::new(), SystemClock::new().now()).unwrap();
/// let event = &page.events[0];
/// assert_eq!(event.id.get(), 1);
/// assert_eq!(event.kind, EventType::PetCreated);
/// assert!(matches!(&event.data, EventData::Pet(pet) if pet.name() == "Rex"));
/// let json: serde_json::Value = serde_json::from_slice(&event.to_json()).unwrap();
/// assert_eq!(json["id"], "1");
/// assert_eq!(json["type"], "pet.created");
/// assert_eq!(json["data"]["name"], "Rex");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Its position, the cursor to follow on from.
    pub id: EventId,
    /// What kind of change it is.
    pub kind: EventType,
    /// When it was committed (whole seconds).
    pub at: Timestamp,
    /// The pet or the order after the change.
    pub data: EventData,
}

impl Event {
    /// The event as the JSON of the contract's `Event`.
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(192);
        self.encode(&mut out);
        out
    }

    /// Appends the event's JSON to `out`.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        encode_head(self.id, self.kind, &self.at.to_rfc3339(), out);
        match &self.data {
            EventData::Pet(pet) => crate::pet::json::encode(pet, out),
            EventData::Order(order) => order.encode(out),
        }
        out.push(b'}');
    }
}

/// Appends an event's JSON up to its data's value, `at` already in RFC
/// 3339: the caller appends the data and the closing `}`.
pub(crate) fn encode_head(id: EventId, kind: EventType, at: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(br#"{"id":""#);
    crate::pet::json::push_decimal(out, id.get());
    out.extend_from_slice(br#"","type":""#);
    out.extend_from_slice(kind.as_str().as_bytes());
    out.extend_from_slice(br#"","at":""#);
    out.extend_from_slice(at.as_bytes());
    out.extend_from_slice(br#"","data":"#);
}
