//! Orders (beta) on one node, over real TCP against the binary: every row
//! of the contract (docs/contract.md, "Orders and holds (beta)"): place,
//! list, get, complete, cancel; another key's order is 404; the pet
//! transitions as doors; `orders:all`; idempotency; paging; every 400;
//! in memory and on the journal, and a journal's orders after a restart.

use crate::common;

use common::orders::*;
use common::{assert_error, Response, Server, TempDir};
use serde_json::json;

#[test]
fn every_row_in_memory_and_on_the_journal() {
    every_row(&[&Server::builder().keys(keys()).start()]);
    let data = TempDir::new();
    every_row(&[&Server::builder().keys(keys()).data(data.path()).start()]);
}

#[test]
fn the_pet_transitions_are_doors_to_orders() {
    doors(&[&Server::builder().keys(keys()).start()]);
}

#[test]
fn an_idempotency_key_replays_a_place_and_a_conflict() {
    idempotency_replays(&[&Server::builder().keys(keys()).start()]);
}

#[test]
fn sixteen_clients_ordering_one_pet_get_one_201() {
    let data = TempDir::new();
    sixteen_clients_one_pet(&[&Server::builder().keys(keys()).data(data.path()).start()]);
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
