//! Response headers outside rate limiting: deprecation of getPet,
//! `--base-url`, CORS, and the keyless endpoints (`/healthz`,
//! `/v1/openapi.json`, whose document must say what the decisions say).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use common::{assert_error, Response, Server, KEY};
use serde_json::{json, Value};

const DEPRECATION: &str = "@1764892800";
const SUNSET: &str = "Thu, 05 Dec 2030 00:00:00 GMT";
const SUCCESSOR: &str = r#"</v1/pets>; rel="successor-version""#;

fn assert_deprecated(resp: &Response, successor: &str, context: &str) {
    let ctx = format!("{context}: {}", resp.describe());
    assert_eq!(resp.single("deprecation"), DEPRECATION, "{ctx}");
    assert_eq!(resp.single("sunset"), SUNSET, "{ctx}");
    let links: Vec<&str> = resp
        .header_all("link")
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    assert_eq!(links, [successor], "{ctx}");
}

#[test]
fn get_pet_announces_deprecation_and_sunset_on_every_response() {
    let server = Server::start(&[]);
    server.create_pet(&json!({"name": "Rex", "categoryId": 1}));
    let resp = server.get("/v1/pets/1", Some(KEY));
    assert_eq!(resp.status, 200);
    assert_deprecated(&resp, SUCCESSOR, "200");
    let resp = server.get("/v1/pets/2", Some(KEY));
    assert_error(&resp, 404, "not_found");
    assert_deprecated(&resp, SUCCESSOR, "404");
    let resp = server.get("/v1/pets/abc", Some(KEY));
    assert_error(&resp, 400, "invalid_path");
    assert_deprecated(&resp, SUCCESSOR, "400");

    // The other operations are not deprecated.
    let resp = server.get("/v1/pets", Some(KEY));
    let resp2 = server.post(
        "/v1/pets",
        Some(KEY),
        Some("application/json"),
        br#"{"name":"Tom","categoryId":1}"#,
    );
    for r in [resp, resp2] {
        assert!(r.status == 200 || r.status == 201, "{}", r.describe());
        assert!(r.header("deprecation").is_none(), "{}", r.describe());
        assert!(r.header("sunset").is_none(), "{}", r.describe());
    }
}

#[test]
fn base_url_is_used_for_location_and_links() {
    for (base, via_env) in [
        ("https://petstore.example.com/v1", false),
        ("https://api.example.org/shop/v1", true),
    ] {
        let builder = Server::builder();
        let builder = if via_env {
            builder.env("PETSTORE_BASE_URL", base)
        } else {
            builder.arg("--base-url").arg(base)
        };
        let server = builder.start();
        let resp = server.post(
            "/v1/pets",
            Some(KEY),
            Some("application/json"),
            br#"{"name":"Rex","categoryId":1}"#,
        );
        assert_eq!(resp.status, 201);
        assert_eq!(resp.single("location"), format!("{base}/pets/1"));
        server.create_pet(&json!({"name": "Tom", "categoryId": 1}));
        let (ids, link) = server.list_ids("/v1/pets?limit=1&status=available");
        assert_eq!(ids, vec![1]);
        assert_eq!(
            link,
            Some(format!(
                r#"<{base}/pets?limit=1&status=available&after=1>; rel="next""#
            ))
        );
        let resp = server.get("/v1/pets/1", Some(KEY));
        assert_eq!(resp.status, 200);
        assert_deprecated(
            &resp,
            &format!(r#"<{base}/pets>; rel="successor-version""#),
            base,
        );
    }
}

fn tokens(value: Option<&str>) -> BTreeSet<String> {
    value
        .unwrap_or_default()
        .split(',')
        .map(|t| t.trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .collect()
}

fn preflight(server: &Server, path: &str, origin: &str, method: &str) -> Response {
    server.request(
        "OPTIONS",
        path,
        &[
            ("Origin", origin),
            ("Access-Control-Request-Method", method),
            (
                "Access-Control-Request-Headers",
                "authorization, content-type",
            ),
        ],
        None,
    )
}

#[test]
fn cors_answers_preflight_for_configured_origins_only() {
    let app = "https://app.example.com";
    let local = "http://localhost:3000";
    let server = Server::start(&["--cors-origin", app, "--cors-origin", local]);
    for (origin, path, method) in [
        (app, "/v1/pets", "POST"),
        (app, "/v1/pets", "GET"),
        (local, "/v1/pets/1", "GET"),
    ] {
        let resp = preflight(&server, path, origin, method);
        let ctx = format!(
            "preflight {method} {path} from {origin}: {}",
            resp.describe()
        );
        assert!(resp.status == 200 || resp.status == 204, "{ctx}");
        assert!(
            resp.header("www-authenticate").is_none(),
            "no key needed: {ctx}"
        );
        assert_eq!(resp.single("access-control-allow-origin"), origin, "{ctx}");
        let methods = tokens(resp.header("access-control-allow-methods"));
        assert!(methods.contains(&method.to_ascii_lowercase()), "{ctx}");
        let headers = tokens(resp.header("access-control-allow-headers"));
        assert!(
            headers.contains("authorization") && headers.contains("content-type"),
            "{ctx}"
        );
    }

    // Actual requests from an allowed origin get the header, even errors.
    let resp = server.request(
        "GET",
        "/v1/pets",
        &[("Origin", app), ("Authorization", &format!("Bearer {KEY}"))],
        None,
    );
    assert_eq!(resp.status, 200);
    assert_eq!(resp.single("access-control-allow-origin"), app);
    assert!(
        tokens(resp.header("vary")).contains("origin"),
        "Vary: Origin: {}",
        resp.describe()
    );
    let resp = server.request("GET", "/v1/pets", &[("Origin", local)], None);
    assert_error(&resp, 401, "unauthorized");
    assert_eq!(resp.single("access-control-allow-origin"), local);
    // A create is answered after its body is read, when the request head
    // is gone: the allowed origin was kept (a copy) for its answer.
    let resp = server.request(
        "POST",
        "/v1/pets",
        &[
            ("Origin", local),
            ("Authorization", &format!("Bearer {KEY}")),
            ("Content-Type", "application/json"),
        ],
        Some(br#"{"name":"Rex","categoryId":1}"#),
    );
    assert_eq!(resp.status, 201, "{}", resp.describe());
    assert_eq!(resp.single("access-control-allow-origin"), local);

    // Unknown origins get no CORS headers at all.
    for origin in [
        "https://evil.example",
        "https://app.example.com.evil.example",
        "null",
    ] {
        let resp = preflight(&server, "/v1/pets", origin, "POST");
        assert!(
            resp.header("access-control-allow-origin").is_none()
                && resp.header("access-control-allow-methods").is_none(),
            "preflight from {origin}: {}",
            resp.describe()
        );
        let resp = server.request(
            "GET",
            "/v1/pets",
            &[
                ("Origin", origin),
                ("Authorization", &format!("Bearer {KEY}")),
            ],
            None,
        );
        assert_eq!(resp.status, 200);
        assert!(
            resp.header("access-control-allow-origin").is_none(),
            "GET from {origin}: {}",
            resp.describe()
        );
    }

    // With CORS on, OPTIONS is an allowed method.
    let resp = server.request("DELETE", "/v1/pets", &[], None);
    assert_error(&resp, 405, "method_not_allowed");
    let allow: BTreeSet<String> = tokens(resp.header("allow"))
        .into_iter()
        .filter(|m| m != "head")
        .collect();
    assert_eq!(
        allow,
        BTreeSet::from(["get".to_owned(), "post".to_owned(), "options".to_owned()])
    );
}

#[test]
fn cors_is_off_by_default() {
    let server = Server::start(&[]);
    let resp = preflight(&server, "/v1/pets", "https://app.example.com", "POST");
    assert!(
        resp.header("access-control-allow-origin").is_none(),
        "{}",
        resp.describe()
    );
    assert_error(&resp, 405, "method_not_allowed");
    let resp = server.request(
        "GET",
        "/v1/pets",
        &[
            ("Origin", "https://app.example.com"),
            ("Authorization", &format!("Bearer {KEY}")),
        ],
        None,
    );
    assert_eq!(resp.status, 200);
    assert!(resp.header("access-control-allow-origin").is_none());
}

#[test]
fn healthz_and_openapi_need_no_key() {
    let server = Server::start(&[]);
    for key in [None, Some("wrong-key")] {
        let resp = server.get("/healthz", key);
        assert_eq!(resp.status, 200, "{}", resp.describe());
        let resp = server.get("/v1/openapi.json", key);
        assert_eq!(resp.status, 200, "{}", resp.describe());
        let ct = resp.single("content-type").to_ascii_lowercase();
        assert!(ct.starts_with("application/json"), "{ct}");
        assert!(resp.json().is_object());
    }
}

/// Follows local `$ref`s.
fn resolve<'a>(doc: &'a Value, mut v: &'a Value) -> &'a Value {
    for _ in 0..20 {
        match v.get("$ref").and_then(Value::as_str) {
            Some(r) => {
                let pointer = r
                    .strip_prefix('#')
                    .unwrap_or_else(|| panic!("non-local $ref {r}"));
                v = doc
                    .pointer(pointer)
                    .unwrap_or_else(|| panic!("dangling $ref {r}"));
            }
            None => return v,
        }
    }
    panic!("$ref loop")
}

/// A schema and, recursively, the parts of its `allOf`, refs resolved.
fn flatten<'a>(doc: &'a Value, schema: &'a Value) -> Vec<&'a Value> {
    let schema = resolve(doc, schema);
    let mut out = vec![schema];
    if let Some(parts) = schema["allOf"].as_array() {
        for p in parts {
            out.extend(flatten(doc, p));
        }
    }
    out
}

#[derive(Debug)]
struct Operation<'a> {
    path: String,
    method: String,
    op: &'a Value,
}

fn operations(doc: &Value) -> BTreeMap<String, Operation<'_>> {
    let mut out = BTreeMap::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().unwrap() {
            if let Some(id) = op.get("operationId").and_then(Value::as_str) {
                let previous = out.insert(
                    id.to_owned(),
                    Operation {
                        path: path.clone(),
                        method: method.clone(),
                        op,
                    },
                );
                assert!(previous.is_none(), "operationId {id} twice");
            }
        }
    }
    out
}

fn parameter<'a>(doc: &'a Value, op: &'a Value, name: &str) -> &'a Value {
    op["parameters"]
        .as_array()
        .unwrap_or_else(|| panic!("no parameters on {op}"))
        .iter()
        .map(|p| resolve(doc, p))
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no parameter {name}"))
}

fn response_codes(op: &Value) -> BTreeSet<String> {
    op["responses"]
        .as_object()
        .expect("responses")
        .keys()
        .cloned()
        .collect()
}

#[test]
fn openapi_document_says_what_the_decisions_say() {
    let server = Server::start(&[]);
    let doc = server.get("/v1/openapi.json", None).json();
    let version = doc["openapi"].as_str().expect("openapi field");
    assert!(version.starts_with("3."), "openapi {version}");
    assert_eq!(doc["info"]["version"], "1.0.0");

    let ops = operations(&doc);
    for id in ["listPets", "createPet", "getPet"] {
        assert!(
            ops.contains_key(id),
            "operationId {id} missing: {:?}",
            ops.keys()
        );
    }
    let list = &ops["listPets"];
    let create = &ops["createPet"];
    let get = &ops["getPet"];
    assert_eq!(
        (
            list.method.as_str(),
            create.method.as_str(),
            get.method.as_str()
        ),
        ("get", "post", "get")
    );
    assert!(list.path.ends_with("/pets"), "{}", list.path);
    assert_eq!(list.path, create.path);
    assert!(get.path.ends_with("/pets/{petId}"), "{}", get.path);

    assert_eq!(get.op["deprecated"], true, "getPet is deprecated");
    for op in [list, create] {
        assert_ne!(op.op["deprecated"], true, "{} is not deprecated", op.path);
    }

    // listPets parameters.
    let limit = resolve(&doc, &parameter(&doc, list.op, "limit")["schema"]);
    assert_eq!(limit["type"], "integer");
    assert_eq!(limit["minimum"], 1);
    assert_eq!(limit["maximum"], 100);
    assert_eq!(limit["default"], 20);
    let status = resolve(&doc, &parameter(&doc, list.op, "status")["schema"]);
    let values: BTreeSet<&str> = status["enum"]
        .as_array()
        .expect("status enum")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(values, BTreeSet::from(["available", "pending", "sold"]));
    let after = resolve(&doc, &parameter(&doc, list.op, "after")["schema"]);
    assert_eq!(after["type"], "integer");
    assert_eq!(after["minimum"], 1);
    let pet_id = resolve(&doc, &parameter(&doc, get.op, "petId")["schema"]);
    assert_eq!(pet_id["type"], "integer");
    assert_eq!(pet_id["format"], "int64");

    // The NewPet schema.
    let new_pet = resolve(
        &doc,
        &resolve(&doc, &create.op["requestBody"])["content"]["application/json"]["schema"],
    );
    assert_eq!(new_pet["additionalProperties"], false, "{new_pet}");
    let props: BTreeSet<&str> = new_pet["properties"]
        .as_object()
        .expect("NewPet properties")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(props, BTreeSet::from(["name", "categoryId", "status"]));
    let required: BTreeSet<&str> = new_pet["required"]
        .as_array()
        .expect("NewPet required")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(required, BTreeSet::from(["name", "categoryId"]));
    let name = resolve(&doc, &new_pet["properties"]["name"]);
    assert_eq!(name["minLength"], 1);
    assert_eq!(name["maxLength"], 100);
    let category = resolve(&doc, &new_pet["properties"]["categoryId"]);
    assert_eq!(category["format"], "int64");
    assert_eq!(category["minimum"], 1);

    // Responses.
    for (op, codes) in [
        (list, &["200", "400", "401", "403", "429"][..]),
        (
            create,
            &["201", "400", "401", "403", "413", "415", "429"][..],
        ),
        (get, &["200", "400", "401", "403", "404", "429"][..]),
    ] {
        let have = response_codes(op.op);
        for code in codes {
            assert!(
                have.contains(*code),
                "{} {}: no {code} in {have:?}",
                op.method,
                op.path
            );
        }
    }

    // Each operation names the scope it needs, in `x-required-scope` and
    // its description, and documents its 403 with RFC 6750 3.1's
    // challenge.
    for (op, scope) in [
        (list, "pets:read"),
        (create, "pets:write"),
        (get, "pets:read"),
    ] {
        assert_eq!(
            op.op["x-required-scope"], scope,
            "{} {}",
            op.method, op.path
        );
        let description = op.op["description"].as_str().unwrap_or_default();
        assert!(description.contains(&format!("`{scope}`")), "{description}");
        let forbidden = resolve(&doc, &op.op["responses"]["403"]);
        let challenge = resolve(&doc, &forbidden["headers"]["WWW-Authenticate"]);
        assert!(
            challenge["schema"]["pattern"]
                .as_str()
                .is_some_and(|p| p.contains("insufficient_scope")),
            "{challenge}"
        );
    }

    // Bearer security, globally.
    let schemes = doc["components"]["securitySchemes"]
        .as_object()
        .expect("securitySchemes");
    let bearer = schemes
        .iter()
        .find(|(_, s)| {
            s["type"] == "http"
                && s["scheme"].as_str().map(str::to_ascii_lowercase) == Some("bearer".into())
        })
        .map(|(name, _)| name.clone())
        .expect("an http bearer scheme");
    let global = doc["security"].as_array().expect("global security");
    assert!(
        global.iter().any(|req| req.get(&bearer).is_some()),
        "global security uses {bearer}"
    );

    // The closed set of error codes, on the Error schema.
    let error = resolve(&doc, &doc["components"]["schemas"]["Error"]);
    let codes: BTreeSet<&str> = resolve(&doc, &error["properties"]["code"])["enum"]
        .as_array()
        .expect("Error.code enum")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        codes,
        BTreeSet::from([
            "invalid_body",
            "invalid_query",
            "invalid_path",
            "invalid_header",
            "invalid_idempotency_key",
            "unauthorized",
            "insufficient_scope",
            "not_found",
            "method_not_allowed",
            "request_timeout",
            "status_conflict",
            "cursor_expired",
            "too_many_waiters",
            "idempotency_key_in_use",
            "idempotency_key_reused",
            "payload_too_large",
            "unsupported_media_type",
            "rate_limited",
            "key_banned",
            "internal",
            "not_implemented",
            "unavailable",
        ])
    );
    // Every error response names a component of its own set of codes (so
    // that client generators build one model per set, instead of refusing
    // an enum redefined inline): the Error's fields, `required` and closed,
    // codes from the closed set, and `status` that response's.
    let mut error_responses = 0;
    for op in operations(&doc).values() {
        for (status, response) in op.op["responses"].as_object().unwrap() {
            let Ok(n) = status.parse::<u16>() else {
                continue;
            };
            if n < 400 {
                continue;
            }
            let schema_ref = &resolve(&doc, response)["content"]["application/json"]["schema"];
            assert!(
                schema_ref["$ref"].is_string(),
                "{} {status}: not a named schema",
                op.path
            );
            let schema = resolve(&doc, schema_ref);
            let required: BTreeSet<&str> = schema["required"]
                .as_array()
                .unwrap_or_else(|| panic!("{} {status}: no required", op.path))
                .iter()
                .filter_map(Value::as_str)
                .collect();
            assert_eq!(required, BTreeSet::from(["code", "message", "status"]));
            assert_eq!(schema["additionalProperties"], false, "{schema}");
            let code = resolve(&doc, &schema["properties"]["code"]);
            for c in code["enum"].as_array().expect("a code enum") {
                assert!(
                    codes.contains(c.as_str().unwrap()),
                    "{c} not in the closed set"
                );
            }
            assert_eq!(
                schema["properties"]["status"]["enum"],
                json!([n]),
                "{schema}"
            );
            error_responses += 1;
        }
    }
    assert!(error_responses > 20, "{error_responses}");

    // The served document is the one in the repository.
    let in_repo = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.json"))
        .expect("petstore-server/openapi.json");
    let mut in_repo: Value = serde_json::from_slice(&in_repo).unwrap();
    let mut served = doc.clone();
    // `servers` may be rewritten to the configured base address.
    for d in [&mut in_repo, &mut served] {
        d.as_object_mut().unwrap().remove("servers");
    }
    assert_eq!(served, in_repo, "served openapi.json differs from the file");
}

/// The document and the router agree: every operation it lists is a
/// route of the server (a request without a key is refused with 401, not
/// 404 or 405), and the beta transitions are as the server answers
/// them, their examples included.
#[test]
fn openapi_document_lists_the_routes_and_the_transitions_as_answered() {
    let server = Server::start(&[]);
    let doc = server.get("/v1/openapi.json", None).json();
    let ops = operations(&doc);
    for (id, op) in &ops {
        let path = format!("/v1{}", op.path.replace("{petId}", "1"));
        let resp = server.request(&op.method.to_ascii_uppercase(), &path, &[], None);
        assert_error(&resp, 401, "unauthorized");
        assert!(resp.header("www-authenticate").is_some(), "{id} {path}");
    }

    // Pets 1 to 7, pet 3 reserved and pet 7 sold: the examples' pets.
    for i in 1..=7 {
        server.create_pet(&json!({"name": format!("p{i}"), "categoryId": 1}));
    }
    let act = |path: &str| server.post(path, Some(KEY), None, b"");
    assert_eq!(act("/v1/pets/3/reserve").status, 200);
    assert_eq!(act("/v1/pets/7/sell").status, 200);
    for (id, action) in [
        ("reservePet", "reserve"),
        ("releasePet", "release"),
        ("sellPet", "sell"),
    ] {
        let op = ops.get(id).unwrap_or_else(|| panic!("{id} missing"));
        assert_eq!(op.method, "post", "{id}");
        assert_eq!(op.path, format!("/pets/{{petId}}/{action}"), "{id}");
        assert_eq!(op.op["x-stability-level"], "beta", "{id}");
        assert_ne!(op.op["deprecated"], true, "{id}");
        let body = resolve(&doc, &op.op["requestBody"]);
        assert_eq!(body["required"], false, "{id}: the body is optional");
        let pet_id = resolve(&doc, &parameter(&doc, op.op, "petId")["schema"]);
        assert_eq!(pet_id["format"], "int64");
        let key = parameter(&doc, op.op, "Idempotency-Key");
        assert_eq!(
            (&key["in"], &key["required"]),
            (&json!("header"), &json!(false))
        );
        assert_eq!(
            response_codes(op.op),
            BTreeSet::from(
                [
                    "200", "400", "401", "403", "404", "408", "409", "413", "415", "422", "429",
                    "500", "501", "503"
                ]
                .map(String::from)
            ),
            "{id}"
        );
        let ok = &resolve(&doc, &op.op["responses"]["200"])["content"]["application/json"];
        assert_eq!(ok["schema"]["$ref"], "#/components/schemas/Pet", "{id}");
        // Each error example is the server's answer to that request.
        for (status, path) in [
            ("409", None),
            ("400", Some(format!("/v1/pets/abc/{action}"))),
        ] {
            let content =
                &resolve(&doc, &op.op["responses"][status])["content"]["application/json"];
            let example = &content["example"];
            let path = path.unwrap_or_else(|| {
                // `pet N is ...`: the example's own pet.
                let message = example["message"].as_str().unwrap();
                let n = message.split(' ').nth(1).unwrap();
                format!("/v1/pets/{n}/{action}")
            });
            let resp = act(&path);
            let code = example["code"].as_str().unwrap();
            let message = assert_error(&resp, status.parse().unwrap(), code);
            assert_eq!(message, example["message"], "{id} {status}");
            // And the example's code is in its response's code set.
            let schema = resolve(&doc, &content["schema"]);
            let codes = &resolve(&doc, &schema["properties"]["code"])["enum"];
            assert!(
                codes.as_array().unwrap().contains(&example["code"]),
                "{id} {status}: {codes}"
            );
        }
    }
}

/// Every status an operation can answer is declared with a model: 500 on
/// every operation, 503 where the inventory can refuse to store; the
/// numbers of the headers and the error body say their `format`, and
/// every string a client reads has a bound.
#[test]
fn openapi_document_declares_500_503_formats_and_bounds() {
    let server = Server::start(&[]);
    let doc = server.get("/v1/openapi.json", None).json();
    let ops = operations(&doc);
    assert!(ops.len() >= 4, "{:?}", ops.keys());
    for (id, op) in &ops {
        let internal = resolve(&doc, &op.op["responses"]["500"]);
        let schema = &internal["content"]["application/json"]["schema"];
        assert!(
            schema.is_object(),
            "{id}: no 500 with a JSON body in {:?}",
            response_codes(op.op)
        );
        let codes: Vec<&Value> = flatten(&doc, schema)
            .iter()
            .filter_map(|p| resolve(&doc, &p["properties"]["code"])["enum"].as_array())
            .flatten()
            .collect();
        assert!(
            codes.contains(&&json!("internal")),
            "{id}: 500 code {codes:?}"
        );
        // 503 only where a pet, an order or a change can fail to be
        // stored, or (replicas) where a pet or an order another replica
        // made may not be confirmed; and where the server has as many
        // requests waiting for events as it takes.
        let writes = [
            "listEvents",
            "createPet",
            "getPet",
            "getOrder",
            "reservePet",
            "releasePet",
            "sellPet",
            "placeOrder",
            "completeOrder",
            "cancelOrder",
        ];
        assert_eq!(
            response_codes(op.op).contains("503"),
            writes.contains(&id.as_str()),
            "{id}: 503 {:?}",
            response_codes(op.op)
        );
    }

    let headers = &doc["components"]["headers"];
    for (name, format) in [
        ("X-RateLimit-Limit", "int64"),
        ("X-RateLimit-Remaining", "int64"),
        ("X-RateLimit-Reset", "int64"),
        ("Retry-After", "int64"),
    ] {
        let schema = &headers[name]["schema"];
        assert_eq!(schema["type"], "integer", "{name}");
        assert_eq!(schema["format"], format, "{name}");
    }
    assert!(
        headers["X-RateLimit-Reset"]["description"]
            .as_str()
            .unwrap()
            .contains("Unix time"),
        "X-RateLimit-Reset is a Unix time"
    );
    // Every header with a pattern bounds its length.
    let mut patterned = 0;
    for (name, header) in headers.as_object().unwrap() {
        let schema = &header["schema"];
        if schema.get("pattern").is_some() {
            patterned += 1;
            let max = schema["maxLength"].as_u64();
            assert!(
                max.is_some_and(|m| m > 0),
                "{name} has a pattern but no maxLength"
            );
        }
    }
    assert!(patterned >= 5, "{patterned} headers with a pattern");

    let error = &doc["components"]["schemas"]["Error"]["properties"];
    assert_eq!(error["status"]["format"], "int32");
    let max_message = error["message"]["maxLength"]
        .as_u64()
        .expect("Error.message maxLength");
    // A message quoting the longest input the server takes stays within
    // that bound: 64 characters of it, escaped at worst.
    let long = format!(
        "/v1/pets/{}",
        "\u{7f}".repeat(3_000).replace('\u{7f}', "%7F")
    );
    let resp = server.get(&long, Some(KEY));
    let msg = assert_error(&resp, 400, "invalid_path");
    assert!(
        (msg.chars().count() as u64) <= max_message,
        "{} characters over maxLength {max_message}: {msg:?}",
        msg.chars().count()
    );

    // placeOrder's 400 example is what the server answers for that body.
    let place = &ops["placeOrder"];
    let example = &place.op["responses"]["400"]["content"]["application/json"]["example"];
    let message = example["message"].as_str().expect("an example message");
    let auth = format!("Bearer {KEY}");
    let headers = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
    ];
    let body = br#"{"petId":1,"holdSeconds":30}"#;
    let resp = server.request("POST", "/v1/store/orders", &headers, Some(body));
    assert_eq!(assert_error(&resp, 400, "invalid_body"), message);

    // The header limit the description states is the server's, 100
    // fields (tests/ops/lifecycle.rs checks the 431 itself).
    let description = doc["info"]["description"].as_str().unwrap();
    assert!(
        description.contains("more than 100 header fields"),
        "the description must state the 100-field limit"
    );
    assert!(!description.contains("64 header fields"));

    // /healthz lies outside the base address: its bodies have a schema,
    // 503 `degraded` with a reason, and 503 `draining` (tests/ops/drain.rs)
    // included.
    let health = &doc["components"]["schemas"]["Health"];
    let states: BTreeSet<&str> = health["properties"]["status"]["enum"]
        .as_array()
        .expect("Health.status enum")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(states, BTreeSet::from(["ok", "degraded", "draining"]));
    assert_eq!(health["properties"]["reason"]["type"], "string");
    assert_eq!(health["additionalProperties"], false);
    let ok = server.get("/healthz", None);
    assert_eq!(ok.status, 200);
    assert_eq!(ok.json(), json!({"status": "ok"}));
}

/// With `--base-url`, the document's server URL is that address, so tools
/// do not guess `http://localhost/v1`; without it, `/v1` as in the file.
#[test]
fn openapi_server_url_is_the_configured_base_url() {
    let plain = Server::start(&[]);
    let doc = plain.get("/v1/openapi.json", None).json();
    assert_eq!(
        doc["servers"],
        json!([{"url": "/v1", "description": doc["servers"][0]["description"]}])
    );

    let base = "https://pets.example.com/api/v1";
    let server = Server::builder().arg("--base-url").arg(base).start();
    let resp = server.get("/v1/openapi.json", None);
    assert_eq!(resp.status, 200);
    let served = resp.json();
    assert_eq!(served["servers"].as_array().map(Vec::len), Some(1));
    assert_eq!(served["servers"][0]["url"], base);
    // Everything else is the file.
    let (mut a, mut b) = (served, doc);
    a["servers"] = Value::Null;
    b["servers"] = Value::Null;
    assert_eq!(a, b);
    // The same bytes on every request (built once at start).
    let again = server.get("/v1/openapi.json", None);
    assert_eq!(again.body, resp.body);
}
