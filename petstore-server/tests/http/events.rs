//! The feed of events (beta) over real TCP: `GET /v1/events` in commit
//! order with its `Link`, every 400, the scope, 410 past the feed, a long
//! poll woken by a commit and one whose time is up, a drain that answers
//! the waiters, the same ids after a restart, and `Events-Cursor` on the
//! lists so that a client that lists, then follows, misses nothing while
//! others write.

use std::collections::BTreeMap;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common;

use common::events::{apply_pet_events, follow, list_with_cursor};
use common::orders::{call, keys, SHOP};
use common::{assert_error, Response, Server, TempDir, KEY};

fn events(server: &Server, query: &str) -> Response {
    server.get(&format!("/v1/events{query}"), Some(KEY))
}

/// The events of a 200 page, and its next link.
fn page(resp: &Response) -> (Vec<Value>, String) {
    assert_eq!(resp.status, 200, "{}", resp.describe());
    assert_eq!(resp.single("content-type"), "application/json");
    let link = resp.single("link").to_owned();
    (resp.json().as_array().unwrap().clone(), link)
}

fn create(server: &Server, status: &str) -> u64 {
    server.create_pet(&json!({"name": "Rex", "categoryId": 1, "status": status}))["id"]
        .as_u64()
        .unwrap()
}

fn post(server: &Server, path: &str, body: &str) -> Value {
    let resp = server.post(path, Some(KEY), Some("application/json"), body.as_bytes());
    assert!(
        resp.status == 200 || resp.status == 201,
        "{path}: {}",
        resp.describe()
    );
    resp.json()
}

/// Waits until `n` requests wait for events (a bound only catches hangs).
fn until_waiting(server: &Server, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.metric("petstore_event_waiters") != n {
        assert!(Instant::now() < deadline, "never {n} waiters");
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn every_change_follows_in_commit_order_with_a_next_link_on_every_page() {
    let server = Server::start(&[]);
    let (empty, link) = page(&events(&server, ""));
    assert!(empty.is_empty());
    assert_eq!(link, r#"</v1/events?limit=100&after=0>; rel="next""#);
    let rex = create(&server, "available");
    create(&server, "sold");
    let order = post(
        &server,
        "/v1/store/orders",
        &format!(r#"{{"petId":{rex}}}"#),
    );
    post(
        &server,
        &format!("/v1/store/orders/{}/complete", order["id"]),
        "",
    );

    let (all, link) = page(&events(&server, "?after=0"));
    let seen: Vec<(&str, &str)> = all
        .iter()
        .map(|e| (e["id"].as_str().unwrap(), e["type"].as_str().unwrap()))
        .collect();
    assert_eq!(
        seen,
        [
            ("1", "pet.created"),
            ("2", "pet.created"),
            ("3", "order.placed"),
            ("4", "pet.status_changed"),
            ("5", "order.completed"),
            ("6", "pet.status_changed"),
        ]
    );
    assert_eq!(link, r#"</v1/events?limit=100&after=6>; rel="next""#);
    // Each event: its four fields, the data as the change left it.
    for event in &all {
        let fields: Vec<&String> = event.as_object().unwrap().keys().collect();
        assert_eq!(fields, ["at", "data", "id", "type"], "{event}");
        assert!(event["at"].as_str().unwrap().ends_with('Z'), "{event}");
    }
    assert_eq!(
        all[0]["data"],
        json!({"id": rex, "name": "Rex", "categoryId": 1, "status": "available"})
    );
    assert_eq!(all[1]["data"]["status"], "sold");
    assert_eq!(all[2]["data"]["status"], "placed");
    assert!(all[2]["data"].get("closedAt").is_none());
    assert_eq!(all[3]["data"]["status"], "pending");
    assert_eq!(all[4]["data"]["status"], "completed");
    assert!(all[4]["data"]["closedAt"].is_string());
    assert_eq!(all[5]["data"]["status"], "sold");

    // Paged: two at a time, each page's link to the next; the last one
    // points at the end, where a follower waits.
    let mut query = "?limit=2".to_string();
    let mut ids = Vec::new();
    loop {
        let (events, link) = page(&events(&server, &query));
        if events.is_empty() {
            assert_eq!(link, r#"</v1/events?limit=2&after=6>; rel="next""#);
            break;
        }
        ids.extend(events.iter().map(|e| e["id"].as_str().unwrap().to_owned()));
        let next = link
            .strip_prefix("</v1/events")
            .unwrap()
            .split('>')
            .next()
            .unwrap();
        query = next.to_owned();
    }
    assert_eq!(ids, ["1", "2", "3", "4", "5", "6"]);
    // HEAD: the same status and headers, no body.
    let mut conn = server.connect();
    let request = format!(
        "HEAD /v1/events?after=3 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nConnection: close\r\n\r\n"
    );
    conn.send(request.as_bytes()).unwrap();
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut conn.stream, &mut bytes).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.contains(r#"link: </v1/events?limit=100&after=6>; rel="next""#),
        "{head}"
    );
    assert_eq!(body, "");
}

#[test]
fn a_bad_query_is_400_and_a_cursor_past_the_feed_410() {
    let server = Server::start(&[]);
    create(&server, "available");
    for query in [
        "?after=01",
        "?after=x",
        "?after=-1",
        "?after=",
        "?after=18446744073709551616",
        "?limit=0",
        "?limit=1001",
        "?limit=01",
        "?wait=0",
        "?wait=31",
        "?wait=1.5",
        "?since=1",
        "?after=1&after=1",
        "?limit=1&limit=2",
    ] {
        let message = assert_error(&events(&server, query), 400, "invalid_query");
        assert!(!message.is_empty(), "{query}");
    }
    let message = assert_error(&events(&server, "?after=2"), 410, "cursor_expired");
    assert!(message.contains("beyond the newest event"), "{message}");
    assert_eq!(page(&events(&server, "?after=1&limit=1000")).0.len(), 0);
    // POST is not allowed; the scope is `events`.
    let resp = server.post("/v1/events", Some(KEY), Some("application/json"), b"{}");
    assert_error(&resp, 405, "method_not_allowed");
    assert_eq!(resp.single("allow"), "GET, HEAD");
    let scoped = Server::builder().keys(keys()).start();
    let resp = call(&scoped, "GET", "/v1/events", SHOP, None);
    assert_error(&resp, 403, "insufficient_scope");
    assert!(resp
        .single("www-authenticate")
        .contains(r#"scope="events""#));
    assert_error(&scoped.get("/v1/events", None), 401, "unauthorized");
}

#[test]
fn events_past_their_retention_are_410_and_the_client_lists_again() {
    let server = Server::start(&["--events-retention", "1s"]);
    create(&server, "available");
    assert_eq!(page(&events(&server, "?after=0")).0.len(), 1);
    // A second later the event is past its retention (waited for, not slept).
    let deadline = Instant::now() + Duration::from_secs(30);
    let expired = loop {
        let resp = events(&server, "?after=0");
        if resp.status == 410 {
            break resp;
        }
        assert!(Instant::now() < deadline, "{}", resp.describe());
        thread::sleep(Duration::from_millis(50));
    };
    let message = assert_error(&expired, 410, "cursor_expired");
    assert!(message.contains("Events-Cursor"), "{message}");
    // The list's cursor is where to follow from again.
    let list = server.get("/v1/pets", Some(KEY));
    assert_eq!(list.single("events-cursor"), "1");
    assert_eq!(page(&events(&server, "?after=1")).0.len(), 0);
}

#[test]
fn a_long_poll_answers_at_a_commit_or_when_its_time_is_up() {
    let server = Server::start(&[]);
    let waiter = {
        let addr_server = &server;
        thread::scope(|scope| {
            let waiting = scope.spawn(|| events(addr_server, "?after=0&wait=9"));
            until_waiting(&server, 1);
            let id = create(&server, "available");
            let resp = waiting.join().unwrap();
            (resp, id)
        })
    };
    let (resp, id) = waiter;
    let (got, link) = page(&resp);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["data"]["id"], id);
    assert_eq!(link, r#"</v1/events?limit=100&wait=9&after=1>; rel="next""#);
    assert_eq!(server.metric("petstore_event_waiters"), 0);
    // Nothing happens: after its second, an empty page and the same cursor.
    let (none, link) = page(&events(&server, "?after=1&wait=1"));
    assert!(none.is_empty());
    assert_eq!(link, r#"</v1/events?limit=100&wait=1&after=1>; rel="next""#);
}

#[test]
fn a_drain_answers_the_waiters_at_once_with_what_they_have() {
    let mut server = Server::start(&["--shutdown-delay", "5"]);
    create(&server, "available");
    let resp = thread::scope(|scope| {
        let waiting = scope.spawn(|| events(&server, "?after=1&wait=9"));
        until_waiting(&server, 1);
        server.signal("TERM");
        waiting.join().unwrap()
    });
    let (none, link) = page(&resp);
    assert!(none.is_empty());
    assert_eq!(link, r#"</v1/events?limit=100&wait=9&after=1>; rel="next""#);
    // While it drains, a long poll does not wait at all.
    let started = Instant::now();
    let again = events(&server, "?after=1&wait=9");
    assert_eq!(page(&again).0.len(), 0);
    assert!(started.elapsed() < Duration::from_secs(9));
    server.wait_exit(Duration::from_secs(30));
}

#[test]
fn a_restart_gives_the_same_events_and_ids_go_on() {
    let data = TempDir::new();
    let before = {
        let server = Server::builder().data(data.path()).start();
        let rex = create(&server, "available");
        post(&server, &format!("/v1/pets/{rex}/reserve"), "");
        page(&events(&server, "")).0
    };
    assert_eq!(before.len(), 3);
    let server = Server::builder().data(data.path()).start();
    assert_eq!(page(&events(&server, "")).0, before);
    create(&server, "sold");
    let (after, _) = page(&events(&server, "?after=3"));
    assert_eq!(after.len(), 1);
    assert_eq!(
        (after[0]["id"].as_str(), after[0]["type"].as_str()),
        (Some("4"), Some("pet.created"))
    );
}

#[test]
fn a_client_that_lists_then_follows_from_events_cursor_misses_nothing() {
    let data = TempDir::new();
    let server = Server::builder().data(data.path()).start();
    for _ in 0..20 {
        create(&server, "available");
    }
    let (mut state, cursor) = thread::scope(|scope| {
        // Another client writes all the while: creates, and sells.
        let writer = scope.spawn(|| {
            for i in 0..60u64 {
                create(&server, "available");
                // The first twenty pets, each sold once; then the new ones.
                post(&server, &format!("/v1/pets/{}/sell", i + 1), "");
            }
        });
        let listed = list_with_cursor(&server, KEY, "/v1/pets?limit=7");
        writer.join().unwrap();
        listed
    });
    apply_pet_events(&mut state, &follow(&server, KEY, cursor));
    let truth: BTreeMap<u64, String> = (1..=80u64)
        .map(|id| {
            let pet = server.get(&format!("/v1/pets/{id}"), Some(KEY)).json();
            (id, pet["status"].as_str().unwrap().to_owned())
        })
        .collect();
    assert_eq!(state, truth);
    // The orders' list carries the cursor too.
    let orders = server.get("/v1/store/orders", Some(KEY));
    assert_eq!(orders.status, 200);
    assert!(orders.header_u64("events-cursor") >= cursor);
}
