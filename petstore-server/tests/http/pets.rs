//! The three operations: createPet, getPet, listPets, and every 400 of
//! docs/contract.md.

use crate::common;

use common::{assert_error, assert_names, Server, KEY};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{json, Value};

const JSON: Option<&str> = Some("application/json");

fn post_body(server: &Server, body: &[u8]) -> common::Response {
    server.post("/v1/pets", Some(KEY), JSON, body)
}

fn assert_json_content_type(resp: &common::Response) {
    let ct = resp.single("content-type").to_ascii_lowercase();
    assert!(
        ct == "application/json" || ct.starts_with("application/json;"),
        "Content-Type: {}",
        resp.describe()
    );
}

#[test]
fn create_returns_201_with_location_and_the_pet_and_get_returns_it() {
    let server = Server::start(&[]);

    let resp = post_body(&server, br#"{"name":"Rex","categoryId":7}"#);
    assert_eq!(resp.status, 201, "{}", resp.describe());
    assert_eq!(resp.single("location"), "/v1/pets/1");
    assert_json_content_type(&resp);
    let rex = json!({"id": 1, "name": "Rex", "categoryId": 7, "status": "available"});
    assert_eq!(resp.json(), rex, "status defaults to available");

    let resp = post_body(
        &server,
        br#"{"status":"sold","categoryId":9223372036854775807,"name":"Tom"}"#,
    );
    assert_eq!(resp.status, 201, "{}", resp.describe());
    assert_eq!(resp.single("location"), "/v1/pets/2");
    let tom = json!({"id": 2, "name": "Tom", "categoryId": 9_223_372_036_854_775_807_u64, "status": "sold"});
    assert_eq!(resp.json(), tom);

    let resp = server.post(
        "/v1/pets",
        Some(KEY),
        Some("application/json; charset=utf-8"),
        br#"{"name":"Kit","categoryId":1,"status":"pending"}"#,
    );
    assert_eq!(
        resp.status,
        201,
        "charset=utf-8 accepted: {}",
        resp.describe()
    );
    assert_eq!(resp.single("location"), "/v1/pets/3");
    let kit = json!({"id": 3, "name": "Kit", "categoryId": 1, "status": "pending"});
    assert_eq!(resp.json(), kit);

    for (path, want) in [
        ("/v1/pets/1", &rex),
        ("/v1/pets/2", &tom),
        ("/v1/pets/3", &kit),
    ] {
        let resp = server.get(path, Some(KEY));
        assert_eq!(resp.status, 200, "GET {path}: {}", resp.describe());
        assert_json_content_type(&resp);
        assert_eq!(&resp.json(), want, "GET {path}");
    }

    let resp = server.get("/v1/pets", Some(KEY));
    assert_eq!(resp.status, 200);
    assert_json_content_type(&resp);
    assert_eq!(resp.json(), json!([rex, tom, kit]), "a bare array, by id");
}

#[test]
fn names_are_counted_in_characters_and_stored_exactly() {
    let server = Server::start(&[]);
    let names = [
        " Rex ".to_owned(),
        "é".repeat(100),
        "🐕".repeat(100),
        "名".repeat(100),
        "a".repeat(100),
        "x".to_owned(),
        "O'Brien \"the\" \\ dog".to_owned(),
    ];
    for (i, name) in names.iter().enumerate() {
        let body = json!({"name": name, "categoryId": 3});
        let pet = server.create_pet(&body);
        let id = i as u64 + 1;
        assert_eq!(pet["id"], id, "{name:?}");
        assert_eq!(pet["name"].as_str(), Some(name.as_str()), "stored exactly");
        let got = server.get(&format!("/v1/pets/{id}"), Some(KEY));
        assert_eq!(got.status, 200);
        assert_eq!(got.json()["name"].as_str(), Some(name.as_str()));
    }
}

#[test]
fn list_is_ascending_with_default_limit_20_and_a_next_link() {
    let server = Server::start(&[]);
    for i in 1..=25 {
        server.create_pet(&json!({"name": format!("pet{i}"), "categoryId": i}));
    }
    let (ids, link) = server.list_ids("/v1/pets");
    assert_eq!(ids, (1..=20).collect::<Vec<_>>(), "default limit 20");
    assert_eq!(
        link.as_deref(),
        Some(r#"</v1/pets?limit=20&after=20>; rel="next""#)
    );

    let (ids, link) = server.list_ids("/v1/pets?limit=20&after=20");
    assert_eq!(ids, (21..=25).collect::<Vec<_>>());
    assert_eq!(link, None, "no Link on the last page");

    // Exactly `limit` pets left: still the last page.
    let (ids, link) = server.list_ids("/v1/pets?limit=5&after=20");
    assert_eq!(ids, (21..=25).collect::<Vec<_>>());
    assert_eq!(link, None, "no Link when no more pets match");

    let (ids, link) = server.list_ids("/v1/pets?limit=25");
    assert_eq!(ids, (1..=25).collect::<Vec<_>>());
    assert_eq!(link, None);

    let (ids, link) = server.list_ids("/v1/pets?after=25");
    assert!(ids.is_empty());
    assert_eq!(link, None);

    let (ids, link) = server.list_ids("/v1/pets?after=9223372036854775807");
    assert!(ids.is_empty(), "the largest int64 is a valid cursor");
    assert_eq!(link, None);

    // Following the links visits every pet once, in order.
    let mut path = "/v1/pets?limit=7".to_owned();
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let (ids, link) = server.list_ids(&path);
        seen.extend(ids);
        pages += 1;
        let Some(link) = link else { break };
        let target = common::next_path(&link);
        assert_eq!(
            target,
            format!("/v1/pets?limit=7&after={}", seen.last().unwrap())
        );
        path = target;
    }
    assert_eq!(seen, (1..=25).collect::<Vec<_>>());
    assert_eq!(pages, 4);
}

#[test]
fn invisible_names_are_blank_and_bidi_controls_and_noncharacters_refused() {
    let server = Server::start(&[]);
    for name in [
        "\u{200b}",
        "\u{2060}",
        "\u{feff}",
        " \u{200b}\u{2060}\u{feff} ",
        "\u{3164}",
        "Rex\u{202e}",
        "\u{202a}Rex",
        "Rex\u{2066}x\u{2069}",
        "Rex\u{fdd0}",
        "Rex\u{fffe}",
        "Rex\u{10ffff}",
    ] {
        let body = json!({"name": name, "categoryId": 1}).to_string();
        let msg = assert_error(&post_body(&server, body.as_bytes()), 400, "invalid_body");
        assert_names(&msg, "name", &body);
    }
    let (ids, _) = server.list_ids("/v1/pets");
    assert!(ids.is_empty(), "nothing was created: {ids:?}");
    // Invisible characters next to a visible one are kept as sent.
    for name in ["\u{200b}Rex", "a\u{200d}b", "\u{feff}x\u{2060}"] {
        let pet = server.create_pet(&json!({"name": name, "categoryId": 1}));
        assert_eq!(pet["name"].as_str(), Some(name));
    }
}

#[test]
fn numbers_with_leading_zeros_are_refused() {
    let server = Server::start(&[]);
    server.create_pet(&json!({"name": "Rex", "categoryId": 1}));
    for path in [
        "/v1/pets/01",
        "/v1/pets/0001",
        "/v1/pets/00",
        "/v1/pets/%301",
    ] {
        let msg = assert_error(&server.get(path, Some(KEY)), 400, "invalid_path");
        assert_names(&msg, "petId", path);
        assert!(msg.contains("leading zeros"), "{path}: {msg}");
    }
    for (path, field) in [
        ("/v1/pets?limit=020", "limit"),
        ("/v1/pets?limit=01", "limit"),
        ("/v1/pets?limit=00", "limit"),
        ("/v1/pets?after=0001", "after"),
        ("/v1/pets?after=00", "after"),
    ] {
        let msg = assert_error(&server.get(path, Some(KEY)), 400, "invalid_query");
        assert_names(&msg, field, path);
        assert!(msg.contains("leading zeros"), "{path}: {msg}");
    }
    // The one spelling still works.
    assert_eq!(server.get("/v1/pets/1", Some(KEY)).status, 200);
    let (ids, _) = server.list_ids("/v1/pets?limit=10");
    assert_eq!(ids, vec![1]);
}

#[test]
fn limit_is_at_most_100() {
    let server = Server::start(&[]);
    for i in 1..=105 {
        server.create_pet(&json!({"name": format!("p{i}"), "categoryId": 1}));
    }
    let (ids, link) = server.list_ids("/v1/pets?limit=100");
    assert_eq!(ids, (1..=100).collect::<Vec<_>>());
    assert_eq!(
        link.as_deref(),
        Some(r#"</v1/pets?limit=100&after=100>; rel="next""#)
    );
    let (ids, link) = server.list_ids("/v1/pets?limit=1");
    assert_eq!(ids, vec![1]);
    assert_eq!(
        link.as_deref(),
        Some(r#"</v1/pets?limit=1&after=1>; rel="next""#)
    );
    let (ids, _) = server.list_ids("/v1/pets");
    assert_eq!(ids.len(), 20);
    let resp = server.get("/v1/pets?limit=101", Some(KEY));
    let msg = assert_error(&resp, 400, "invalid_query");
    assert_names(&msg, "limit", "limit=101");
}

#[test]
fn status_filter_and_paging_keep_the_parameters() {
    let server = Server::start(&[]);
    // ids 1..=9: available, pending, sold, available, ...
    for i in 1..=9u64 {
        let body = match i % 3 {
            1 if i == 1 => json!({"name": "a", "categoryId": 1, "status": "available"}),
            1 => json!({"name": "a", "categoryId": 1}),
            2 => json!({"name": "p", "categoryId": 1, "status": "pending"}),
            _ => json!({"name": "s", "categoryId": 1, "status": "sold"}),
        };
        server.create_pet(&body);
    }
    let resp = server.get("/v1/pets?status=available", Some(KEY));
    assert_eq!(resp.status, 200);
    let pets = resp.json();
    let pets = pets.as_array().unwrap();
    assert_eq!(pets.len(), 3);
    for (pet, id) in pets.iter().zip([1, 4, 7]) {
        assert_eq!(pet["id"], id);
        assert_eq!(pet["status"], "available");
    }

    let cases: &[(&str, &[u64], Option<&str>)] = &[
        ("/v1/pets?status=sold", &[3, 6, 9], None),
        ("/v1/pets?status=pending", &[2, 5, 8], None),
        (
            "/v1/pets?status=sold&limit=2",
            &[3, 6],
            Some(r#"</v1/pets?limit=2&status=sold&after=6>; rel="next""#),
        ),
        ("/v1/pets?limit=2&status=sold&after=6", &[9], None),
        (
            "/v1/pets?after=1&status=pending&limit=1",
            &[2],
            Some(r#"</v1/pets?limit=1&status=pending&after=2>; rel="next""#),
        ),
        ("/v1/pets?after=6&status=pending&limit=1", &[8], None),
        ("/v1/pets?status=available&limit=1&after=4", &[7], None),
        (
            "/v1/pets?limit=2&after=3",
            &[4, 5],
            Some(r#"</v1/pets?limit=2&after=5>; rel="next""#),
        ),
        ("/v1/pets?status=sold&after=3", &[6, 9], None),
        (
            "/v1/pets?status=s%6Fld&limit=%31",
            &[3],
            Some(r#"</v1/pets?limit=1&status=sold&after=3>; rel="next""#),
        ),
        ("/v1/pets?status=sold&after=9", &[], None),
    ];
    for (path, want, want_link) in cases {
        let (ids, link) = server.list_ids(path);
        assert_eq!(&ids, want, "GET {path}");
        assert_eq!(link.as_deref(), *want_link, "Link of GET {path}");
    }
}

#[test]
fn bad_queries_are_400_invalid_query_naming_the_parameter() {
    let server = Server::start(&[]);
    server.create_pet(&json!({"name": "Rex", "categoryId": 1}));
    let cases: &[(&str, Option<&str>)] = &[
        ("/v1/pets?limit=0", Some("limit")),
        ("/v1/pets?limit=101", Some("limit")),
        ("/v1/pets?limit=abc", Some("limit")),
        ("/v1/pets?limit=-1", Some("limit")),
        ("/v1/pets?limit=1.5", Some("limit")),
        ("/v1/pets?limit=", Some("limit")),
        ("/v1/pets?limit=%2B5", Some("limit")),
        ("/v1/pets?limit=+5", Some("limit")),
        ("/v1/pets?limit=18446744073709551617", Some("limit")),
        ("/v1/pets?limit=1&limit=2", Some("limit")),
        ("/v1/pets?limit=5&limit=5", Some("limit")),
        ("/v1/pets?status=lost", Some("status")),
        ("/v1/pets?status=Sold", Some("status")),
        ("/v1/pets?status=", Some("status")),
        ("/v1/pets?status=sold&status=sold", Some("status")),
        ("/v1/pets?status=sold%26limit%3D5", Some("status")),
        // A broken escape is refused before the parameters are known.
        ("/v1/pets?status=%FF", None),
        ("/v1/pets?status=%", None),
        ("/v1/pets?limit=%ZZ", None),
        ("/v1/pets?after=0", Some("after")),
        ("/v1/pets?after=-1", Some("after")),
        ("/v1/pets?after=abc", Some("after")),
        ("/v1/pets?after=9223372036854775808", Some("after")),
        ("/v1/pets?after=18446744073709551616", Some("after")),
        ("/v1/pets?after=", Some("after")),
        ("/v1/pets?after=1&after=2", Some("after")),
        ("/v1/pets?foo=1", Some("foo")),
        ("/v1/pets?limit=5&page=2", Some("page")),
        ("/v1/pets?LIMIT=5", Some("LIMIT")),
        ("/v1/pets/1?x=1", Some("x")),
        ("/v1/pets/1?limit=5", Some("limit")),
    ];
    for (path, field) in cases {
        let resp = server.get(path, Some(KEY));
        let msg = assert_error(&resp, 400, "invalid_query");
        if let Some(field) = field {
            assert_names(&msg, field, path);
        }
    }
    let resp = post_body(&server, br#"{"name":"Rex","categoryId":1}"#);
    assert_eq!(resp.status, 201, "{}", resp.describe());
    let resp = server.post(
        "/v1/pets?limit=5",
        Some(KEY),
        JSON,
        br#"{"name":"Rex","categoryId":1}"#,
    );
    let msg = assert_error(&resp, 400, "invalid_query");
    assert_names(&msg, "limit", "POST /v1/pets?limit=5");
    let (ids, _) = server.list_ids("/v1/pets");
    assert_eq!(ids, vec![1, 2], "the refused POST created nothing");
}

#[test]
fn bad_pet_ids_are_400_invalid_path_and_missing_pets_404() {
    let server = Server::start(&[]);
    server.create_pet(&json!({"name": "Rex", "categoryId": 1}));
    for path in [
        "/v1/pets/0",
        "/v1/pets/-1",
        "/v1/pets/abc",
        "/v1/pets/1.5",
        "/v1/pets/+1",
        "/v1/pets/9223372036854775808",
        "/v1/pets/18446744073709551616",
        "/v1/pets/99999999999999999999999",
    ] {
        let resp = server.get(path, Some(KEY));
        let msg = assert_error(&resp, 400, "invalid_path");
        assert_names(&msg, "petId", path);
    }
    for path in ["/v1/pets/2", "/v1/pets/9223372036854775807"] {
        let resp = server.get(path, Some(KEY));
        assert_error(&resp, 404, "not_found");
    }
    assert_eq!(server.get("/v1/pets/1", Some(KEY)).status, 200);
}

#[test]
fn bad_bodies_are_400_invalid_body_naming_the_field_and_change_nothing() {
    let server = Server::start(&[]);
    let first = server.create_pet(&json!({"name": "Rex", "categoryId": 1}));
    assert_eq!(first["id"], 1);

    let long = "a".repeat(101);
    let long_multibyte = "é".repeat(101);
    let long_body = format!(r#"{{"name":"{long}","categoryId":1}}"#);
    let long_mb_body = format!(r#"{{"name":"{long_multibyte}","categoryId":1}}"#);
    // (body, the field the message must name, if there is one)
    let cases: Vec<(&[u8], Option<&str>)> = vec![
        (b"", None),
        (b"   ", None),
        (b"{", None),
        (b"{\"name\":\"a\",\"categoryId\":1", None),
        (b"{\"name\":\"a\",\"categoryId\":1} x", None),
        (b"{\"name\":\"a\",\"categoryId\":1,}", None),
        (b"nonsense", None),
        (b"[]", None),
        (b"[{\"name\":\"a\",\"categoryId\":1}]", None),
        (b"null", None),
        (b"42", None),
        (b"\"Rex\"", None),
        (b"{\"name\":\"\xff\",\"categoryId\":1}", None),
        (b"\xef\xbb\xbf{\"name\":\"a\",\"categoryId\":1}", None),
        (br#"{"name":"\ud800","categoryId":1}"#, None),
        (br#"{"name":"a","categoryId":1e400}"#, None),
        (b"{}", Some("name")),
        (br#"{"id":5,"name":"a","categoryId":1}"#, Some("id")),
        (br#"{"name":"a","categoryId":1,"id":1}"#, Some("id")),
        (
            br#"{"name":"a","categoryId":1,"color":"red"}"#,
            Some("color"),
        ),
        (br#"{"name":"a","categoryId":1,"Name":"b"}"#, Some("Name")),
        (br#"{"categoryId":1}"#, Some("name")),
        (br#"{"name":"a"}"#, Some("categoryId")),
        (br#"{"name":"a","status":"sold"}"#, Some("categoryId")),
        (br#"{"name":1,"categoryId":1}"#, Some("name")),
        (br#"{"name":null,"categoryId":1}"#, Some("name")),
        (br#"{"name":["a"],"categoryId":1}"#, Some("name")),
        (br#"{"name":"a","categoryId":"1"}"#, Some("categoryId")),
        (br#"{"name":"a","categoryId":null}"#, Some("categoryId")),
        (br#"{"name":"a","categoryId":true}"#, Some("categoryId")),
        (br#"{"name":"a","categoryId":1.5}"#, Some("categoryId")),
        (br#"{"name":"a","categoryId":0}"#, Some("categoryId")),
        (br#"{"name":"a","categoryId":-1}"#, Some("categoryId")),
        (
            br#"{"name":"a","categoryId":9223372036854775808}"#,
            Some("categoryId"),
        ),
        (
            br#"{"name":"a","categoryId":18446744073709551616}"#,
            Some("categoryId"),
        ),
        (
            br#"{"name":"a","categoryId":1,"status":"lost"}"#,
            Some("status"),
        ),
        (
            br#"{"name":"a","categoryId":1,"status":"Sold"}"#,
            Some("status"),
        ),
        (br#"{"name":"a","categoryId":1,"status":1}"#, Some("status")),
        (
            br#"{"name":"a","categoryId":1,"status":null}"#,
            Some("status"),
        ),
        (br#"{"name":"","categoryId":1}"#, Some("name")),
        (br#"{"name":"   ","categoryId":1}"#, Some("name")),
        (br#"{"name":"\t\n","categoryId":1}"#, Some("name")),
        (br#"{"name":"a\u0007b","categoryId":1}"#, Some("name")),
        (br#"{"name":"a\nb","categoryId":1}"#, Some("name")),
        (br#"{"name":"a\u0000","categoryId":1}"#, Some("name")),
        (br#"{"name":"a\u0085b","categoryId":1}"#, Some("name")),
        (br#"{"name":"a","name":"b","categoryId":1}"#, Some("name")),
        (long_body.as_bytes(), Some("name")),
        (long_mb_body.as_bytes(), Some("name")),
    ];
    let deep = format!("{{\"name\":{}", "[".repeat(60_000));
    let cases: Vec<(&[u8], Option<&str>)> =
        cases.into_iter().chain([(deep.as_bytes(), None)]).collect();
    for (body, field) in &cases {
        let resp = post_body(&server, body);
        let context = format!("body {:?}", String::from_utf8_lossy(body));
        let msg = assert_error(&resp, 400, "invalid_body");
        if let Some(field) = field {
            assert_names(&msg, field, &context);
        }
    }
    // Nothing was stored, and no id was used up.
    let next = server.create_pet(&json!({"name": "Tom", "categoryId": 2}));
    assert_eq!(next["id"], 2, "a refused create must not use up an id");
    let (ids, _) = server.list_ids("/v1/pets?limit=100");
    assert_eq!(ids, vec![1, 2]);
    let resp = server.get("/v1/pets/3", Some(KEY));
    assert_error(&resp, 404, "not_found");
}

/// Characters refused anywhere in a name (docs/contract.md, "Pets"): controls,
/// bidirectional embeddings, overrides and isolates, and the noncharacters
/// of the BMP block U+FDD0..U+FDEF (the U+nFFFE/U+nFFFF ones are filtered
/// below).
const REFUSED: &str = "\\p{Cc}\u{202A}-\u{202E}\u{2066}-\u{2069}\u{FDD0}-\u{FDEF}";

/// Any valid name: up to 99 allowed characters (invisible ones included)
/// around one visible character, which is neither White_Space nor
/// Default_Ignorable_Code_Point.
fn valid_name() -> impl Strategy<Value = String> {
    let regex = |r: String| proptest::string::string_regex(&r).expect("a valid regex");
    (
        regex(format!("[^{REFUSED}]{{0,50}}")),
        regex(format!(
            "[^{REFUSED}\\p{{White_Space}}\\p{{Default_Ignorable_Code_Point}}]"
        )),
        regex(format!("[^{REFUSED}]{{0,49}}")),
    )
        .prop_map(|(before, visible, after)| before + &visible + &after)
        .prop_filter("no noncharacter U+nFFFE, U+nFFFF", |s| {
            !s.chars().any(|c| u32::from(c) & 0xFFFE == 0xFFFE)
        })
}

#[test]
fn property_any_valid_pet_round_trips() {
    let server = Server::start(&[]);
    let statuses = [None, Some("available"), Some("pending"), Some("sold")];
    let strategy = (valid_name(), 1..=i64::MAX as u64, 0..statuses.len());
    let mut runner = TestRunner::new(Config {
        cases: 48,
        failure_persistence: None,
        ..Config::default()
    });
    let last_id = std::cell::Cell::new(0u64);
    runner
        .run(&strategy, |(name, category, s)| {
            let mut body = json!({"name": name, "categoryId": category});
            if let Some(status) = statuses[s] {
                body["status"] = Value::from(status);
            }
            let resp = post_body(&server, body.to_string().as_bytes());
            prop_assert_eq!(resp.status, 201, "{}", resp.describe());
            let pet = resp.json();
            let id = pet["id"].as_u64().unwrap_or(0);
            let expected_id = last_id.replace(id) + 1;
            prop_assert_eq!(id, expected_id, "ids are 1, 2, 3, ...");
            prop_assert_eq!(resp.single("location"), format!("/v1/pets/{id}"));
            let want = json!({
                "id": id,
                "name": name,
                "categoryId": category,
                "status": statuses[s].unwrap_or("available"),
            });
            prop_assert_eq!(&pet, &want);
            let got = server.get(&format!("/v1/pets/{id}"), Some(KEY));
            prop_assert_eq!(got.status, 200);
            prop_assert_eq!(got.json(), want);
            Ok(())
        })
        .unwrap();
}

#[test]
fn property_out_of_range_numbers_and_control_characters_are_refused() {
    let server = Server::start(&[]);
    let mut runner = TestRunner::new(Config {
        cases: 32,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        prop_oneof![Just(0u64), 101..=u64::MAX],
        "[a-z]{0,10}",
        prop_oneof![0x00u32..0x20, 0x7fu32..0xa0],
    );
    runner
        .run(&strategy, |(limit, prefix, control)| {
            let resp = server.get(&format!("/v1/pets?limit={limit}"), Some(KEY));
            prop_assert_eq!(resp.status, 400, "limit={}: {}", limit, resp.describe());
            let msg = assert_error(&resp, 400, "invalid_query");
            assert_names(&msg, "limit", &format!("limit={limit}"));

            let name = format!("{prefix}{}x", char::from_u32(control).unwrap());
            let body = json!({"name": name, "categoryId": 1}).to_string();
            let resp = post_body(&server, body.as_bytes());
            let msg = assert_error(&resp, 400, "invalid_body");
            assert_names(&msg, "name", &body);
            Ok(())
        })
        .unwrap();
    let (ids, _) = server.list_ids("/v1/pets");
    assert!(ids.is_empty(), "nothing was created");
}

#[test]
fn concurrent_creates_get_distinct_consecutive_ids() {
    let server = std::sync::Arc::new(Server::start(&[]));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let server = std::sync::Arc::clone(&server);
            std::thread::spawn(move || {
                (0..25)
                    .map(|i| {
                        let pet = server
                            .create_pet(&json!({"name": format!("t{t}-{i}"), "categoryId": 1}));
                        pet["id"].as_u64().unwrap()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut ids: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (1..=100).collect::<Vec<_>>());
    let (listed, link) = server.list_ids("/v1/pets?limit=100");
    assert_eq!(listed, ids);
    assert_eq!(link, None);
}
