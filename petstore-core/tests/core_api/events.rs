//! The feed of events (beta) through the public API: every kind of change
//! in commit order with what it left; the same feed after a reopen, and
//! positions that go on; a journal from before events; retention and its
//! expired cursors on an injected time; a writer and a follower racing,
//! and a list then a follow that misses nothing.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use petstore_core::{
    event::{EventData, EventId, EventLimit, EventQuery, EventType, FeedError},
    order::{Actor, NewOrder, OrderStatus},
    CategoryId, Clock, Inventory, JournalOptions, ListQuery, NewPet, PageSize, PetId, PetStatus,
    SystemClock, Timestamp, Transition,
};

fn now() -> Timestamp {
    SystemClock::new().now()
}

fn rex() -> NewPet {
    NewPet::new("Rex", CategoryId::MIN).unwrap()
}

/// Every event kept, read in pages of `page`.
fn follow_all(
    inventory: &Inventory,
    after: EventId,
    page: usize,
) -> Vec<petstore_core::event::Event> {
    let mut cursor = after;
    let mut all = Vec::new();
    loop {
        let query = EventQuery::new()
            .after(cursor)
            .limit(EventLimit::new(page).unwrap());
        let got = inventory.events(&query, now()).unwrap();
        if got.events.is_empty() {
            assert_eq!(got.next, cursor);
            return all;
        }
        cursor = got.next;
        all.extend(got.events);
    }
}

/// A shop's day: creates, a reserve, an order placed and completed, one
/// cancelled, one lapsed, a walk-in sale.
fn a_day(inventory: &Inventory) {
    let shop = Actor::new("shop");
    let at = now();
    let ids: Vec<PetId> = (0..5)
        .map(|_| inventory.create(rex()).unwrap().id())
        .collect();
    inventory
        .transition_by(&shop, ids[0], Transition::Reserve, at)
        .unwrap();
    let placed = inventory
        .place_order(&shop, NewOrder::new(ids[1]), at)
        .unwrap();
    inventory.complete_order(&shop, placed.id(), at).unwrap();
    let cancelled = inventory
        .place_order(&shop, NewOrder::new(ids[2]), at)
        .unwrap();
    inventory.cancel_order(&shop, cancelled.id(), at).unwrap();
    let lapsing = inventory
        .place_order(&shop, NewOrder::new(ids[3]), at)
        .unwrap();
    assert_eq!(inventory.expire_due(lapsing.expires_at()), Ok(2));
    inventory
        .transition_by(&shop, ids[4], Transition::Sell, at)
        .unwrap();
}

const DAY_KINDS: [(&str, &str); 21] = [
    ("pet.created", "available"),
    ("pet.created", "available"),
    ("pet.created", "available"),
    ("pet.created", "available"),
    ("pet.created", "available"),
    ("order.placed", "placed"),
    ("pet.status_changed", "pending"),
    ("order.placed", "placed"),
    ("pet.status_changed", "pending"),
    ("order.completed", "completed"),
    ("pet.status_changed", "sold"),
    ("order.placed", "placed"),
    ("pet.status_changed", "pending"),
    ("order.cancelled", "cancelled"),
    ("pet.status_changed", "available"),
    ("order.placed", "placed"),
    ("pet.status_changed", "pending"),
    // Two holds lapse at once (the reserve's and the order's), in id order.
    ("order.expired", "expired"),
    ("pet.status_changed", "available"),
    ("order.expired", "expired"),
    ("pet.status_changed", "available"),
];

fn kinds(events: &[petstore_core::event::Event]) -> Vec<(&'static str, String)> {
    events
        .iter()
        .map(|event| {
            let status = match &event.data {
                EventData::Pet(pet) => pet.status().as_str().to_string(),
                EventData::Order(order) => order.status().as_str().to_string(),
            };
            (event.kind.as_str(), status)
        })
        .collect()
}

#[test]
fn every_change_is_an_event_in_commit_order_with_what_it_left() {
    let inventory = Inventory::in_memory();
    a_day(&inventory);
    let events = follow_all(&inventory, EventId::START, 4);
    let ids: Vec<u64> = events.iter().map(|e| e.id.get()).collect();
    assert_eq!(ids, (1..=23).collect::<Vec<_>>());
    let got = kinds(&events);
    for (i, (kind, status)) in DAY_KINDS.iter().enumerate() {
        assert_eq!(
            (got[i].0, got[i].1.as_str()),
            (*kind, *status),
            "event {}",
            i + 1
        );
    }
    // The walk-in sale: an order completed at once, and the pet sold.
    assert_eq!(got[21], ("order.completed", "completed".to_string()));
    assert_eq!(got[22], ("pet.status_changed", "sold".to_string()));
    // A placed order's event has no closedAt even though it closed later.
    let EventData::Order(placed) = &events[7].data else {
        panic!()
    };
    assert_eq!(
        (placed.status(), placed.closed_at()),
        (OrderStatus::Placed, None)
    );
    let EventData::Order(done) = &events[9].data else {
        panic!()
    };
    assert!(done.closed_at().is_some());
    assert_eq!(inventory.events_head(), EventId::new(23));
    // The encoded pages are the events' JSON, byte for byte, whatever the
    // page (a page kept for its cursor included).
    for (after, limit) in [(0, 1000), (0, 5), (7, 3), (20, 10), (23, 10), (7, 3)] {
        let query = EventQuery::new()
            .after(EventId::new(after))
            .limit(EventLimit::new(limit).unwrap());
        let typed = inventory.events(&query, now()).unwrap();
        let json = inventory.events_json(&query, now()).unwrap();
        let mut expected = b"[".to_vec();
        for (i, event) in typed.events.iter().enumerate() {
            if i > 0 {
                expected.push(b',');
            }
            expected.extend_from_slice(&event.to_json());
        }
        expected.push(b']');
        assert_eq!(
            String::from_utf8(json.body).unwrap(),
            String::from_utf8(expected).unwrap()
        );
        assert_eq!((json.count, json.next), (typed.events.len(), typed.next));
    }
}

#[test]
fn a_reopened_journal_gives_the_same_events_and_positions_go_on() {
    let dir = crate::scratch::scratch("events-reopen");
    let before = {
        let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
        a_day(&inventory);
        follow_all(&inventory, EventId::START, 1000)
    };
    assert_eq!(before.len(), 23);
    let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
    assert_eq!(follow_all(&inventory, EventId::START, 7), before);
    inventory.create(rex()).unwrap();
    let next = follow_all(&inventory, EventId::new(23), 10);
    assert_eq!(next.len(), 1);
    assert_eq!(
        (next[0].id.get(), next[0].kind),
        (24, EventType::PetCreated)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_journal_from_before_events_keeps_positions_but_its_changes_are_past_retention() {
    let dir = crate::scratch::scratch("events-old");
    {
        let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
        a_day(&inventory);
    }
    // Without its time records a journal is one a release before events
    // wrote: its creates are undated.
    crate::scratch::strip_times(&dir);
    let inventory = Inventory::open(&dir, JournalOptions::default()).unwrap();
    let expired = inventory.events(&EventQuery::new().after(EventId::START), now());
    assert!(
        matches!(expired, Err(FeedError::Expired { .. })),
        "{expired:?}"
    );
    // What follows is dated again, and numbered after the old changes.
    inventory.create(rex()).unwrap();
    let page = inventory.events(&EventQuery::new(), now()).unwrap();
    assert!(page.events.iter().all(|e| e.id.get() > 5));
    assert_eq!(page.events.last().map(|e| e.id.get()), Some(24));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn events_past_retention_expire_their_cursors_and_the_edge_still_follows() {
    let inventory = Inventory::in_memory();
    inventory.set_event_retention(Duration::from_secs(60));
    inventory.create(rex()).unwrap();
    inventory.create(rex()).unwrap();
    let soon = now() + Duration::from_secs(1);
    assert_eq!(follow_all(&inventory, EventId::START, 1).len(), 2);
    let later = now() + Duration::from_secs(61);
    assert_eq!(
        inventory.events(&EventQuery::new().after(EventId::START), later),
        Err(FeedError::Expired {
            after: EventId::START,
            oldest: EventId::new(2)
        })
    );
    // A client at the head missed nothing: its cursor is still good.
    let at_head = inventory.events(&EventQuery::new().after(EventId::new(2)), later);
    assert_eq!(at_head.map(|p| p.events.len()), Ok(0));
    // Without a cursor: from the oldest kept, never expired.
    assert_eq!(
        inventory.events(&EventQuery::new(), later).map(|p| p.next),
        Ok(EventId::new(2))
    );
    assert_eq!(
        inventory
            .events(&EventQuery::new(), soon)
            .map(|p| p.events.len()),
        Ok(2)
    );
    assert_eq!(
        inventory.events(&EventQuery::new().after(EventId::new(3)), soon),
        Err(FeedError::Ahead {
            after: EventId::new(3),
            head: EventId::new(2)
        })
    );
}

#[test]
fn the_hook_hears_the_newest_position_after_each_change() {
    let inventory = Inventory::in_memory();
    let heard = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let into = heard.clone();
    inventory.on_events(move |head| into.lock().push(head.get()));
    inventory.create(rex()).unwrap();
    inventory.create_many(vec![rex(), rex()]).unwrap();
    inventory.transition(PetId::MIN, Transition::Sell).unwrap();
    assert_eq!(*heard.lock(), [1, 3, 5]);
}

/// Writers create and move pets while a follower reads the feed from the
/// start and a lister lists, then follows from the list's position: both
/// end with exactly the inventory's pets and statuses, and the follower
/// sees each position once, in order.
fn race(inventory: Arc<Inventory>) {
    const WRITERS: usize = 3;
    const PETS: usize = 150;
    let done = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let inventory = inventory.clone();
            std::thread::spawn(move || {
                let actor = Actor::new(["a", "b", "c"][w]);
                for _ in 0..PETS {
                    let id = inventory.create(rex()).unwrap().id();
                    let at = now();
                    for t in [Transition::Reserve, Transition::Release, Transition::Sell] {
                        let _ = inventory.transition_by(&actor, id, t, at);
                    }
                }
            })
        })
        .collect();
    // The follower: every event from the start.
    let follower = {
        let (inventory, done) = (inventory.clone(), done.clone());
        std::thread::spawn(move || {
            let mut cursor = EventId::START;
            let mut pets = BTreeMap::new();
            loop {
                let finished = done.load(Ordering::Acquire);
                let page = inventory
                    .events(
                        &EventQuery::new()
                            .after(cursor)
                            .limit(EventLimit::new(50).unwrap()),
                        now(),
                    )
                    .unwrap();
                for event in &page.events {
                    assert_eq!(event.id.get(), cursor.get() + 1, "one position at a time");
                    cursor = event.id;
                    if let EventData::Pet(pet) = &event.data {
                        pets.insert(pet.id(), pet.status());
                    }
                }
                if finished && page.events.is_empty() {
                    return pets;
                }
            }
        })
    };
    // The lister: lists while the writers write, then follows.
    std::thread::sleep(Duration::from_millis(1));
    let cursor = inventory.events_head();
    let mut listed = BTreeMap::new();
    let mut query = ListQuery::new().limit(PageSize::new(100).unwrap());
    loop {
        let page = inventory.list(&query);
        for pet in &page.pets {
            listed.insert(pet.id(), pet.status());
        }
        match page.next_after {
            Some(after) => query = query.after(after),
            None => break,
        }
    }
    for writer in writers {
        writer.join().unwrap();
    }
    done.store(true, Ordering::Release);
    for event in follow_all(&inventory, cursor, 100) {
        if let EventData::Pet(pet) = &event.data {
            listed.insert(pet.id(), pet.status());
        }
    }
    let followed = follower.join().unwrap();
    let truth: BTreeMap<PetId, PetStatus> = (1..=inventory.len() as u64)
        .map(|id| {
            let pet = inventory.get(PetId::new(id).unwrap()).unwrap();
            (pet.id(), pet.status())
        })
        .collect();
    assert_eq!(truth.len(), WRITERS * PETS);
    assert_eq!(followed, truth, "the follower from the start");
    assert_eq!(listed, truth, "the list, then the follow from its position");
}

#[test]
fn a_follower_and_a_lister_racing_writers_miss_nothing_in_memory() {
    race(Arc::new(Inventory::in_memory()));
}

#[test]
fn a_follower_and_a_lister_racing_writers_miss_nothing_durable() {
    let dir = crate::scratch::scratch("events-race");
    race(Arc::new(
        Inventory::open(&dir, JournalOptions::default()).unwrap(),
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}
