//! Orders (beta) on one node, over real TCP against the binary: every row
//! of the contract (docs/contract.md, "Orders and holds (beta)"): place,
//! list, get, complete, cancel; another key's order is 404; the pet
//! transitions as doors; `orders:all`; idempotency; paging; every 400;
//! in memory and on the journal, and a journal's orders after a restart.

use crate::common;

use std::thread;

use common::{assert_error, assert_has_ratelimit_headers, Response, Server, TempDir};
use serde_json::{json, Value};

const SHOP: &str = "orders-key-shop";
const OTHER: &str = "orders-key-other";
const BOSS: &str = "orders-key-boss";
const READER: &str = "orders-key-reader";
const JSON: &str = "application/json";

fn keys() -> Value {
    let entry = |name: &str, key: &str, scopes: &[&str]| {
        json!({"name": name, "key": key, "plan": "enterprise", "perMinute": 100_000,
               "perDay": 1_000_000, "scopes": scopes})
    };
    json!({"keys": [
        entry("shop", SHOP, &["orders", "pets:read", "pets:write"]),
        entry("other", OTHER, &["orders", "pets:read", "pets:write"]),
        entry("boss", BOSS, &["orders:all"]),
        entry("reader", READER, &["pets:read"]),
    ]})
}

fn call(server: &Server, method: &str, path: &str, key: &str, body: Option<&str>) -> Response {
    call_with(server, method, path, key, body, &[])
}

fn call_with(
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

fn pet(server: &Server, status: &str) -> u64 {
    let body = json!({"name": "Rex", "categoryId": 1, "status": status}).to_string();
    let resp = call(server, "POST", "/v1/pets", SHOP, Some(&body));
    assert_eq!(resp.status, 201, "{}", resp.describe());
    resp.json()["id"].as_u64().unwrap()
}

fn pet_status(server: &Server, id: u64) -> String {
    let resp = call(server, "GET", &format!("/v1/pets/{id}"), SHOP, None);
    resp.json()["status"].as_str().unwrap().to_owned()
}

fn place(server: &Server, key: &str, body: &str) -> Response {
    call(server, "POST", "/v1/store/orders", key, Some(body))
}

/// Asserts a placed order's 201 and returns the order.
fn placed(resp: &Response, pet: u64, by: &str) -> Value {
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
fn secs_between(from: &Value, to: &Value) -> i64 {
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

fn every_row(server: &Server) {
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
    // Complete: 200, closedAt, the pet sold; twice is 409 naming it.
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

#[test]
fn every_row_in_memory_and_on_the_journal() {
    every_row(&Server::builder().keys(keys()).start());
    let data = TempDir::new();
    every_row(&Server::builder().keys(keys()).data(data.path()).start());
}

#[test]
fn the_pet_transitions_are_doors_to_orders() {
    let server = Server::builder().keys(keys()).start();
    let rex = pet(&server, "available");
    // Reserve places an order for the calling key, and answers the pet.
    let reserved = call(
        &server,
        "POST",
        &format!("/v1/pets/{rex}/reserve"),
        SHOP,
        None,
    );
    assert_eq!(reserved.status, 200, "{}", reserved.describe());
    assert_eq!(reserved.json()["status"], "pending");
    let mine = call(&server, "GET", "/v1/store/orders", SHOP, None).json();
    assert_eq!(mine.as_array().unwrap().len(), 1, "{mine}");
    assert_eq!(mine[0]["petId"], rex);
    assert_eq!(mine[0]["status"], "placed");
    // Another key may not sell or release a pet this key holds.
    for action in ["sell", "release"] {
        let resp = call(
            &server,
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
    assert_eq!(pet_status(&server, rex), "pending");
    // Release cancels the order.
    let released = call(
        &server,
        "POST",
        &format!("/v1/pets/{rex}/release"),
        SHOP,
        None,
    );
    assert_eq!(released.json()["status"], "available");
    let order = call(&server, "GET", "/v1/store/orders/1", SHOP, None).json();
    assert_eq!(order["status"], "cancelled");
    // Sell of an available pet records a sale placed and completed at once.
    let sold = call(
        &server,
        "POST",
        &format!("/v1/pets/{rex}/sell"),
        OTHER,
        None,
    );
    assert_eq!(sold.json()["status"], "sold");
    let sale = call(&server, "GET", "/v1/store/orders/2", OTHER, None).json();
    assert_eq!(sale["status"], "completed");
    assert_eq!(sale["placedBy"], "other");
    assert_eq!(sale["placedAt"], sale["closedAt"]);
    // A pet created pending has no order: release is the transition alone.
    let tom = pet(&server, "pending");
    let released = call(
        &server,
        "POST",
        &format!("/v1/pets/{tom}/release"),
        SHOP,
        None,
    );
    assert_eq!(released.json()["status"], "available");
    let all = call(&server, "GET", "/v1/store/orders", BOSS, None).json();
    assert_eq!(all.as_array().unwrap().len(), 2, "{all}");
}

#[test]
fn a_key_lists_its_own_orders_in_pages_and_orders_all_lists_every_one() {
    let server = Server::builder().keys(keys()).start();
    for i in 0..5 {
        let key = if i % 2 == 0 { SHOP } else { OTHER };
        let id = pet(&server, "available");
        assert_eq!(
            place(&server, key, &format!(r#"{{"petId":{id}}}"#)).status,
            201
        );
    }
    let ids = |resp: &Response| -> Vec<u64> {
        resp.json()
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["id"].as_u64().unwrap())
            .collect()
    };
    let first = call(&server, "GET", "/v1/store/orders?limit=2", SHOP, None);
    assert_eq!(ids(&first), [1, 3]);
    assert_eq!(
        first.single("link"),
        r#"</v1/store/orders?limit=2&after=3>; rel="next""#
    );
    let last = call(
        &server,
        "GET",
        "/v1/store/orders?limit=2&after=3",
        SHOP,
        None,
    );
    assert_eq!(ids(&last), [5]);
    assert!(last.header("link").is_none());
    let all = call(
        &server,
        "GET",
        "/v1/store/orders?status=placed&limit=100",
        BOSS,
        None,
    );
    assert_eq!(ids(&all), [1, 2, 3, 4, 5]);
    let none = call(
        &server,
        "GET",
        "/v1/store/orders?status=completed",
        BOSS,
        None,
    );
    assert_eq!(ids(&none), Vec::<u64>::new());
}

#[test]
fn every_bad_request_is_a_clear_400_and_changes_nothing() {
    let server = Server::builder().keys(keys()).start();
    let rex = pet(&server, "available");
    let bodies = [
        ("", "empty"),
        ("{", "not valid JSON"),
        ("[]", "JSON object"),
        ("{}", "`petId` is required"),
        (r#"{"petId":0}"#, "`petId`"),
        (r#"{"petId":"1"}"#, "`petId`"),
        (r#"{"petId":1,"holdSeconds":59}"#, "`holdSeconds`"),
        (r#"{"petId":1,"holdSeconds":86401}"#, "`holdSeconds`"),
        (r#"{"petId":1,"id":3}"#, "unknown field `id`"),
        (r#"{"petId":1,"petId":1}"#, "more than once"),
    ];
    for (body, says) in bodies {
        let message = assert_error(&place(&server, SHOP, body), 400, "invalid_body");
        assert!(message.contains(says), "{body:?}: {message}");
    }
    for query in [
        "limit=0",
        "limit=101",
        "limit=01",
        "status=sold",
        "after=0",
        "x=1",
        "limit=2&limit=3",
    ] {
        let resp = call(
            &server,
            "GET",
            &format!("/v1/store/orders?{query}"),
            SHOP,
            None,
        );
        assert_error(&resp, 400, "invalid_query");
    }
    for path in [
        "/v1/store/orders/0",
        "/v1/store/orders/01",
        "/v1/store/orders/x",
    ] {
        assert_error(&call(&server, "GET", path, SHOP, None), 400, "invalid_path");
    }
    let step = call(
        &server,
        "POST",
        "/v1/store/orders/1/complete",
        SHOP,
        Some(r#"{"paid":true}"#),
    );
    assert_error(&step, 400, "invalid_body");
    let wrong_type = call_with(
        &server,
        "POST",
        "/v1/store/orders",
        SHOP,
        None,
        &[("Content-Type", "text/plain")],
    );
    assert_eq!(wrong_type.status, 415, "{}", wrong_type.describe());
    // Methods: 405 with the path's Allow.
    let put = call(&server, "PUT", "/v1/store/orders", SHOP, None);
    assert_error(&put, 405, "method_not_allowed");
    assert_eq!(put.single("allow"), "GET, HEAD, POST");
    let get_step = call(&server, "GET", "/v1/store/orders/1/cancel", SHOP, None);
    assert_eq!(get_step.single("allow"), "POST");
    // Scopes: a reader may not place or list; orders:all may not place.
    assert_error(
        &place(&server, READER, &format!(r#"{{"petId":{rex}}}"#)),
        403,
        "insufficient_scope",
    );
    assert_error(
        &call(&server, "GET", "/v1/store/orders", READER, None),
        403,
        "insufficient_scope",
    );
    assert_error(
        &place(&server, BOSS, &format!(r#"{{"petId":{rex}}}"#)),
        403,
        "insufficient_scope",
    );
    // Nothing changed.
    assert_eq!(pet_status(&server, rex), "available");
    let all = call(&server, "GET", "/v1/store/orders", BOSS, None).json();
    assert_eq!(all, json!([]));
}

#[test]
fn an_idempotency_key_replays_a_place_and_a_conflict() {
    let server = Server::builder().keys(keys()).start();
    let rex = pet(&server, "available");
    let body = format!(r#"{{"petId":{rex}}}"#);
    let keyed = |key: &str, body: &str| {
        call_with(
            &server,
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
    assert_eq!(call(&server, "POST", &path, SHOP, None).status, 200);
    let replayed = keyed("place-2", &body);
    assert_error(&replayed, 409, "status_conflict");
    assert_eq!(replayed.single("idempotent-replayed"), "true");
    // Only one order was placed by all of that.
    let all = call(&server, "GET", "/v1/store/orders", BOSS, None).json();
    assert_eq!(all.as_array().unwrap().len(), 1);
}

#[test]
fn sixteen_clients_ordering_one_pet_get_one_201() {
    let data = TempDir::new();
    let server = Server::builder().keys(keys()).data(data.path()).start();
    let rex = pet(&server, "available");
    let statuses: Vec<u16> = thread::scope(|s| {
        let threads: Vec<_> = (0..16)
            .map(|i| {
                let server = &server;
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

#[test]
fn a_journal_keeps_its_orders_across_a_restart() {
    let data = TempDir::new();
    let (order, sold) = {
        let server = Server::builder().keys(keys()).data(data.path()).start();
        let rex = pet(&server, "available");
        let order = placed(
            &place(&server, SHOP, &format!(r#"{{"petId":{rex}}}"#)),
            rex,
            "shop",
        );
        let tom = pet(&server, "available");
        let sold = call(&server, "POST", &format!("/v1/pets/{tom}/sell"), SHOP, None);
        assert_eq!(sold.status, 200);
        (order, tom)
    };
    let server = Server::builder().keys(keys()).data(data.path()).start();
    let path = format!("/v1/store/orders/{}", order["id"]);
    assert_eq!(call(&server, "GET", &path, SHOP, None).json(), order);
    assert_eq!(
        pet_status(&server, order["petId"].as_u64().unwrap()),
        "pending"
    );
    let all = call(&server, "GET", "/v1/store/orders", SHOP, None).json();
    assert_eq!(all[1]["petId"], sold);
    assert_eq!(all[1]["status"], "completed");
    // Ids go on.
    let next = pet(&server, "available");
    let order = placed(
        &place(&server, SHOP, &format!(r#"{{"petId":{next}}}"#)),
        next,
        "shop",
    );
    assert_eq!(order["id"], 3);
}
