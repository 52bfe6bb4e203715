//! Orders (beta) over HTTP: the keys the tests use, requests, and the
//! scenarios both one node (`http/orders.rs`) and replicas
//! (`store/orders_replicas.rs`) run, so that both keep one contract.

use std::thread;

use serde_json::{json, Value};

use super::{assert_error, assert_has_ratelimit_headers, Response, Server};

pub const SHOP: &str = "orders-key-shop";
pub const OTHER: &str = "orders-key-other";
pub const BOSS: &str = "orders-key-boss";
pub const READER: &str = "orders-key-reader";
/// Follows the feed of events (beta), and lists what it follows.
pub const FOLLOWER: &str = "orders-key-follower";
pub const JSON: &str = "application/json";

pub fn keys() -> Value {
    let entry = |name: &str, key: &str, scopes: &[&str]| {
        json!({"name": name, "key": key, "plan": "enterprise", "perMinute": 100_000,
               "perDay": 1_000_000, "scopes": scopes})
    };
    json!({"keys": [
        entry("shop", SHOP, &["orders", "pets:read", "pets:write"]),
        entry("other", OTHER, &["orders", "pets:read", "pets:write"]),
        entry("boss", BOSS, &["orders:all"]),
        entry("reader", READER, &["pets:read"]),
        entry("follower", FOLLOWER, &["events", "pets:read", "orders:all"]),
    ]})
}

pub fn call(server: &Server, method: &str, path: &str, key: &str, body: Option<&str>) -> Response {
    call_with(server, method, path, key, body, &[])
}

pub fn call_with(
    server: &Server,
    method: &str,
    path: &str,
    key: &str,
    body: Option<&str>,
    extra: &[(&str, &str)],
) -> Response {
    let auth = format!("Bearer {key}");
    let mut headers = vec![("Authorization", auth.as_str())];
    if body.is_some() {
        headers.push(("Content-Type", JSON));
    }
    headers.extend_from_slice(extra);
    server.request(method, path, &headers, body.map(str::as_bytes))
}

pub fn pet(server: &Server, status: &str) -> u64 {
    let body = json!({"name": "Rex", "categoryId": 1, "status": status}).to_string();
    let resp = call(server, "POST", "/v1/pets", SHOP, Some(&body));
    assert_eq!(resp.status, 201, "{}", resp.describe());
    resp.json()["id"].as_u64().unwrap()
}

pub fn pet_status(server: &Server, id: u64) -> String {
    let resp = call(server, "GET", &format!("/v1/pets/{id}"), SHOP, None);
    resp.json()["status"].as_str().unwrap().to_owned()
}

pub fn place(server: &Server, key: &str, body: &str) -> Response {
    call(server, "POST", "/v1/store/orders", key, Some(body))
}

/// Asserts a placed order's 201 and returns the order.
pub fn placed(resp: &Response, pet: u64, by: &str) -> Value {
    assert_eq!(resp.status, 201, "{}", resp.describe());
    assert_eq!(resp.single("content-type"), JSON);
    assert_has_ratelimit_headers(resp);
    let order = resp.json();
    let id = order["id"].as_u64().unwrap();
    assert_eq!(resp.single("location"), format!("/v1/store/orders/{id}"));
    assert_eq!(order["petId"], pet);
    assert_eq!(order["status"], "placed");
    assert_eq!(order["placedBy"], by);
    assert!(order.get("closedAt").is_none(), "{order}");
    let fields: Vec<&String> = order.as_object().unwrap().keys().collect();
    assert_eq!(
        fields,
        ["expiresAt", "id", "petId", "placedAt", "placedBy", "status"]
    );
    order
}

/// Seconds between two RFC 3339 times of the contract (whole seconds, UTC).
pub fn secs_between(from: &Value, to: &Value) -> i64 {
    let secs = |v: &Value| {
        let t = v.as_str().unwrap();
        assert_eq!(t.len(), 20, "{t}");
        let (date, time) = t.trim_end_matches('Z').split_once('T').unwrap();
        let d: Vec<i64> = date.split('-').map(|p| p.parse().unwrap()).collect();
        let h: Vec<i64> = time.split(':').map(|p| p.parse().unwrap()).collect();
        let days = petstore_core::clock::days_from_civil(d[0], d[1], d[2]);
        ((days * 24 + h[0]) * 60 + h[1]) * 60 + h[2]
    };
    secs(to) - secs(from)
}

/// Each call the next of `servers`, round and round: the scenarios below
/// send each write to the next server.
fn in_turn<'a>(servers: &'a [&'a Server]) -> impl Fn() -> &'a Server {
    let turns = std::cell::Cell::new(0);
    move || {
        let i = turns.get();
        turns.set(i + 1);
        servers[i % servers.len()]
    }
}

/// Every row of the contract's orders, each write on the next of
/// `servers` (one node: the one server; replicas: each in turn, so a step
/// is decided against what another replica wrote) and each read on the
/// server that wrote last (read-your-writes).
pub fn every_row(servers: &[&Server]) {
    let next = in_turn(servers);
    let server = next();
    // Place: 201, Location, the pet held.
    let rex = pet(server, "available");
    let order = placed(
        &place(server, SHOP, &format!(r#"{{"petId":{rex}}}"#)),
        rex,
        "shop",
    );
    let id = order["id"].as_u64().unwrap();
    assert_eq!(secs_between(&order["placedAt"], &order["expiresAt"]), 900);
    assert_eq!(pet_status(server, rex), "pending");
    // The pet is held: a second order is 409 naming its status.
    let again = place(server, OTHER, &format!(r#"{{"petId":{rex}}}"#));
    let message = assert_error(&again, 409, "status_conflict");
    assert!(message.contains("pending"), "{message}");
    // Another key's order is not found, never forbidden.
    let path = format!("/v1/store/orders/{id}");
    assert_error(&call(server, "GET", &path, OTHER, None), 404, "not_found");
    let complete = format!("{path}/complete");
    assert_error(
        &call(server, "POST", &complete, OTHER, None),
        404,
        "not_found",
    );
    // Its own: 200, the same order; the boss (orders:all) sees it too.
    let got = call(server, "GET", &path, SHOP, None);
    assert_eq!(got.status, 200, "{}", got.describe());
    assert_eq!(got.json(), order);
    assert_eq!(call(server, "GET", &path, BOSS, None).json(), order);
    // Complete (on the next server): 200, closedAt, the pet sold; twice is
    // 409 naming it.
    let server = next();
    let done = call(server, "POST", &complete, SHOP, Some("{}"));
    assert_eq!(done.status, 200, "{}", done.describe());
    let done = done.json();
    assert_eq!(done["status"], "completed");
    assert!(done["closedAt"].is_string(), "{done}");
    assert_eq!(pet_status(server, rex), "sold");
    let twice = call(server, "POST", &complete, SHOP, None);
    let message = assert_error(&twice, 409, "status_conflict");
    assert!(message.contains("completed"), "{message}");
    let cancel = call(server, "POST", &format!("{path}/cancel"), SHOP, None);
    assert_error(&cancel, 409, "status_conflict");

    let server = next();
    // Cancel: the pet available again; a hold of one's own choosing (the
    // longest: no run is slow enough to reach its end before the cancel).
    let tom = pet(server, "available");
    let body = format!(r#"{{"petId":{tom},"holdSeconds":86400}}"#);
    let order = placed(&place(server, OTHER, &body), tom, "other");
    assert_eq!(
        secs_between(&order["placedAt"], &order["expiresAt"]),
        86_400
    );
    let path = format!("/v1/store/orders/{}/cancel", order["id"]);
    let cancelled = call(server, "POST", &path, BOSS, None);
    assert_eq!(cancelled.status, 200, "{}", cancelled.describe());
    assert_eq!(cancelled.json()["status"], "cancelled");
    assert_eq!(cancelled.json()["placedBy"], "other");
    assert_eq!(pet_status(server, tom), "available");

    let server = next();
    // No such pet, or one sold: 404 and 409.
    assert_error(
        &place(server, SHOP, r#"{"petId":999999}"#),
        404,
        "not_found",
    );
    let message = assert_error(
        &place(server, SHOP, &format!(r#"{{"petId":{rex}}}"#)),
        409,
        "status_conflict",
    );
    assert!(message.contains("sold"), "{message}");
    assert_error(
        &call(server, "GET", "/v1/store/orders/999999", SHOP, None),
        404,
        "not_found",
    );
}

/// The pet transitions as doors to orders, each write on the next of
/// `servers`, each read where the last write was answered.
pub fn doors(servers: &[&Server]) {
    let next = in_turn(servers);
    let server = next();
    let rex = pet(server, "available");
    // Reserve places an order for the calling key, and answers the pet.
    let reserved = call(
        server,
        "POST",
        &format!("/v1/pets/{rex}/reserve"),
        SHOP,
        None,
    );
    assert_eq!(reserved.status, 200, "{}", reserved.describe());
    assert_eq!(reserved.json()["status"], "pending");
    let mine = call(server, "GET", "/v1/store/orders", SHOP, None).json();
    assert_eq!(mine.as_array().unwrap().len(), 1, "{mine}");
    assert_eq!(mine[0]["petId"], rex);
    assert_eq!(mine[0]["status"], "placed");
    // Another key may not sell or release a pet this key holds.
    for action in ["sell", "release"] {
        let resp = call(
            server,
            "POST",
            &format!("/v1/pets/{rex}/{action}"),
            OTHER,
            None,
        );
        let message = assert_error(&resp, 403, "insufficient_scope");
        assert!(message.contains("orders:all"), "{message}");
        assert_eq!(
            resp.single("www-authenticate"),
            r#"Bearer realm="petstore", error="insufficient_scope", scope="orders:all""#
        );
    }
    assert_eq!(pet_status(server, rex), "pending");
    let server = next();
    // Release cancels the order.
    let released = call(
        server,
        "POST",
        &format!("/v1/pets/{rex}/release"),
        SHOP,
        None,
    );
    assert_eq!(released.json()["status"], "available");
    let order = call(server, "GET", "/v1/store/orders/1", SHOP, None).json();
    assert_eq!(order["status"], "cancelled");
    let server = next();
    // Sell of an available pet records a sale placed and completed at once.
    let sold = call(server, "POST", &format!("/v1/pets/{rex}/sell"), OTHER, None);
    assert_eq!(sold.json()["status"], "sold");
    let sale = call(server, "GET", "/v1/store/orders/2", OTHER, None).json();
    assert_eq!(sale["status"], "completed");
    assert_eq!(sale["placedBy"], "other");
    assert_eq!(sale["placedAt"], sale["closedAt"]);
    let server = next();
    // A pet created pending has no order: release is the transition alone.
    let tom = pet(server, "pending");
    let released = call(
        server,
        "POST",
        &format!("/v1/pets/{tom}/release"),
        SHOP,
        None,
    );
    assert_eq!(released.json()["status"], "available");
    let all = call(server, "GET", "/v1/store/orders", BOSS, None).json();
    assert_eq!(all.as_array().unwrap().len(), 2, "{all}");
}

/// A kept place and a kept conflict, each request on the next of
/// `servers`: the key is kept where every server reads it.
pub fn idempotency_replays(servers: &[&Server]) {
    let next = in_turn(servers);
    let server = servers[0];
    let rex = pet(server, "available");
    let body = format!(r#"{{"petId":{rex}}}"#);
    let keyed = |key: &str, body: &str| {
        call_with(
            next(),
            "POST",
            "/v1/store/orders",
            SHOP,
            Some(body),
            &[("Idempotency-Key", key)],
        )
    };
    let first = keyed("place-1", &body);
    let order = placed(&first, rex, "shop");
    let again = keyed("place-1", &body);
    assert_eq!(again.status, 201);
    assert_eq!(again.single("idempotent-replayed"), "true");
    assert_eq!(again.json(), order);
    assert_eq!(again.single("location"), first.single("location"));
    // The same key with another request: 422.
    let other = keyed("place-1", &format!(r#"{{"petId":{rex},"holdSeconds":60}}"#));
    assert_error(&other, 422, "idempotency_key_reused");
    // A conflict is kept and given again, whatever happens after.
    let conflict = keyed("place-2", &body);
    assert_error(&conflict, 409, "status_conflict");
    let path = format!("/v1/store/orders/{}/cancel", order["id"]);
    assert_eq!(call(server, "POST", &path, SHOP, None).status, 200);
    let replayed = keyed("place-2", &body);
    assert_error(&replayed, 409, "status_conflict");
    assert_eq!(replayed.single("idempotent-replayed"), "true");
    // Only one order was placed by all of that.
    let all = call(server, "GET", "/v1/store/orders", BOSS, None).json();
    assert_eq!(all.as_array().unwrap().len(), 1);
}

/// Sixteen clients place an order for one pet at once, spread over
/// `servers`: one 201, fifteen 409s.
pub fn sixteen_clients_one_pet(servers: &[&Server]) {
    let rex = pet(servers[0], "available");
    let statuses: Vec<u16> = thread::scope(|s| {
        let threads: Vec<_> = (0..16)
            .map(|i| {
                let server = servers[i % servers.len()];
                s.spawn(move || {
                    let key = if i % 2 == 0 { SHOP } else { OTHER };
                    place(server, key, &format!(r#"{{"petId":{rex}}}"#)).status
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 409).count(),
        15,
        "{statuses:?}"
    );
}
