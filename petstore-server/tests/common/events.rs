//! The feed of events (beta) as a client reads it: every pet listed with
//! the list's `Events-Cursor`, the feed followed page by page, and pet
//! events applied to what was listed, so that one node's tests and the
//! replicas' check "list, then follow, misses nothing" alike.

use std::collections::BTreeMap;

use serde_json::Value;

use super::Server;

fn get(server: &Server, path: &str, key: &str) -> super::Response {
    let auth = format!("Bearer {key}");
    server.request("GET", path, &[("Authorization", auth.as_str())], None)
}

/// Every pet's status, listed page by page from `first` (a `/v1/pets`
/// path with its query), and the first page's `Events-Cursor`.
pub fn list_with_cursor(server: &Server, key: &str, first: &str) -> (BTreeMap<u64, String>, u64) {
    let mut resp = get(server, first, key);
    assert_eq!(resp.status, 200, "{}", resp.describe());
    let cursor = resp.header_u64("events-cursor");
    let mut listed = BTreeMap::new();
    loop {
        for pet in resp.json().as_array().unwrap() {
            listed.insert(
                pet["id"].as_u64().unwrap(),
                pet["status"].as_str().unwrap().to_owned(),
            );
        }
        let Some(link) = resp.header("link").map(str::to_owned) else {
            return (listed, cursor);
        };
        let next = link
            .trim_start_matches('<')
            .split('>')
            .next()
            .unwrap()
            .to_owned();
        resp = get(server, &next, key);
        assert_eq!(resp.status, 200, "{}", resp.describe());
    }
}

/// Every event the feed holds after `after`, followed page by page.
pub fn follow(server: &Server, key: &str, after: u64) -> Vec<Value> {
    let mut events = Vec::new();
    let mut after = after.to_string();
    loop {
        let resp = get(server, &format!("/v1/events?after={after}&limit=7"), key);
        assert_eq!(resp.status, 200, "{}", resp.describe());
        let page = resp.json().as_array().unwrap().clone();
        let Some(last) = page.last() else {
            return events;
        };
        after = last["id"].as_str().unwrap().to_owned();
        events.extend(page);
    }
}

/// `state` with the pet events of `events` applied, in order.
pub fn apply_pet_events(state: &mut BTreeMap<u64, String>, events: &[Value]) {
    for event in events {
        if event["type"].as_str().unwrap().starts_with("pet.") {
            let pet = &event["data"];
            state.insert(
                pet["id"].as_u64().unwrap(),
                pet["status"].as_str().unwrap().to_owned(),
            );
        }
    }
}
