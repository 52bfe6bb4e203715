//! Requests the server refuses although hyper hands them over: a body
//! followed by trailers (HTTP/1.1 chunked trailer fields, an HTTP/2
//! HEADERS frame after the data, with fields, pseudo-headers, or none),
//! 400 `invalid_body` with nothing stored; and over HTTP/2, a value with
//! whitespace around it in a header the server reads, 400
//! `invalid_header` (or the stream reset, where the h2 crate refuses it
//! first); and an `Idempotency-Key` over HTTP/2 as over HTTP/1.1.

use crate::common::*;
use crate::raw_h2::*;

use serde_json::Value;

const PET: &str = r#"{"name":"Rex","categoryId":1}"#;

/// The status and the error code (or `-`) of an [`Answer::Response`].
fn refused(answer: Answer) -> (u16, String) {
    let Answer::Response(status, body) = answer else {
        panic!("not a response: {answer:?}");
    };
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let code = body["code"].as_str().unwrap_or("-").to_owned();
    (status, code)
}

/// A request's head on `stream` with the key and `fields`, its body
/// still to come when `open`.
fn head(method: &str, path: &str, fields: &[(&str, &str)]) -> Vec<u8> {
    let mut block = request_head(method, path, Some("localhost"));
    block.extend(literal("authorization", &format!("Bearer {KEY}")));
    for (name, value) in fields {
        block.extend(literal(name, value));
    }
    block
}

#[test]
fn a_request_that_ends_with_trailers_is_refused_and_stores_nothing() {
    let server = Server::start(&[]);
    let pet = server.create_pet(&serde_json::from_str(PET).unwrap());
    let before = server.list_ids("/v1/pets");
    let json = [("content-type", "application/json")];
    // HTTP/2: trailers with a field; with the pseudo-headers the h2
    // crate drops before hyper sees them; and an empty trailers frame.
    let trailers = [
        literal("x-checksum", "1"),
        [
            literal_indexed_name(2, "POST"),
            literal_indexed_name(4, "/v1/pets"),
        ]
        .concat(),
        Vec::new(),
    ];
    for (i, trailer) in trailers.iter().enumerate() {
        let mut h2 = RawH2::open(server.addr);
        h2.send(HEADERS, END_HEADERS, 1, &head("POST", "/v1/pets", &json));
        h2.send(DATA, 0, 1, PET.as_bytes());
        h2.send(HEADERS, END_HEADERS | END_STREAM, 1, trailer);
        assert_eq!(
            refused(h2.answer(1)),
            (400, "invalid_body".into()),
            "trailer {i}"
        );
    }
    // A transition, its body empty, then trailers.
    let reserve = format!("/v1/pets/{}/reserve", pet["id"]);
    let mut h2 = RawH2::open(server.addr);
    h2.send(HEADERS, END_HEADERS, 1, &head("POST", &reserve, &json));
    h2.send(
        HEADERS,
        END_HEADERS | END_STREAM,
        1,
        &literal("x-checksum", "1"),
    );
    assert_eq!(refused(h2.answer(1)), (400, "invalid_body".into()));
    // HTTP/1.1: a chunked body with a trailer field.
    let request = format!(
        "POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n\
         {:x}\r\n{PET}\r\n0\r\nX-Checksum: 1\r\n\r\n",
        PET.len()
    );
    let response = server.raw(request.as_bytes());
    assert_error(&response, 400, "invalid_body");
    // The same over HTTP/1.1 without the trailer field is a create.
    let plain = request.replace("X-Checksum: 1\r\n", "");
    let created = server.raw(plain.as_bytes());
    assert_eq!(created.status, 201, "{}", created.describe());
    // Nothing else stored, and the pet still available.
    let (ids, _) = server.list_ids("/v1/pets");
    let mut expected = before.0.clone();
    expected.push(created.json()["id"].as_u64().unwrap());
    assert_eq!(ids, expected);
    let got = server.get(&format!("/v1/pets/{}", pet["id"]), Some(KEY));
    assert_eq!(got.json()["status"], "available", "{}", got.describe());
}

#[test]
fn an_http2_value_with_whitespace_around_it_is_refused() {
    let server = Server::start(&[]);
    let before = server.list_ids("/v1/pets");
    let key = format!("Bearer {KEY}");
    let send = |block: Vec<u8>, body: Option<&str>| {
        let mut h2 = RawH2::open(server.addr);
        match body {
            None => h2.send(HEADERS, END_HEADERS | END_STREAM, 1, &block),
            Some(body) => {
                h2.send(HEADERS, END_HEADERS, 1, &block);
                h2.send(DATA, END_STREAM, 1, body.as_bytes());
            }
        }
        h2.answer(1)
    };
    let get = |fields: &[(&str, &str)]| {
        let mut block = request_head("GET", "/v1/pets", Some("localhost"));
        for (name, value) in fields {
            block.extend(literal(name, value));
        }
        send(block, None)
    };
    // As sent by any client: served.
    assert!(matches!(
        get(&[("authorization", &key)]),
        Answer::Response(200, _)
    ));
    for (name, value) in [
        ("authorization", format!("{key} ")),
        ("authorization", format!(" {key}")),
        ("authorization", format!("{key}\t")),
        ("host", " localhost".to_owned()),
        ("host", "localhost\t".to_owned()),
    ] {
        // With the key, unless the padded value is the key's.
        let mut fields = vec![(name, value.as_str())];
        if name != "authorization" {
            fields.push(("authorization", key.as_str()));
        }
        let (status, code) = refused(get(&fields));
        assert_eq!(
            (status, code.as_str()),
            (400, "invalid_header"),
            "{name}: {value:?}"
        );
    }
    // Content-Type, read by a create.
    let block = head("POST", "/v1/pets", &[("content-type", "application/json ")]);
    assert_eq!(
        refused(send(block, Some(PET))),
        (400, "invalid_header".into())
    );
    // Content-Length and :authority: the h2 crate resets the stream
    // before the server sees the request (a malformed request's stream
    // error, RFC 9113 section 8.1.1).
    let block = head(
        "POST",
        "/v1/pets",
        &[
            ("content-type", "application/json"),
            ("content-length", " 29"),
        ],
    );
    assert_eq!(send(block, Some(PET)), Answer::Reset(PROTOCOL_ERROR));
    let mut block = request_head("GET", "/v1/pets", Some(" localhost"));
    block.extend(literal("authorization", &key));
    assert_eq!(send(block, None), Answer::Reset(PROTOCOL_ERROR));
    assert_eq!(server.list_ids("/v1/pets"), before, "nothing stored");
    // HTTP/1.1's parser trims the same whitespace: served as before.
    let response = server.get("/v1/pets", Some(&format!("{KEY} \t")));
    assert_eq!(response.status, 200, "{}", response.describe());
}

#[test]
fn an_http2_idempotency_key_is_read_as_over_http1() {
    let server = Server::start(&[]);
    let send = |fields: &[(&str, &str)]| {
        let mut fields = fields.to_vec();
        fields.push(("content-type", "application/json"));
        let mut h2 = RawH2::open(server.addr);
        h2.send(HEADERS, END_HEADERS, 1, &head("POST", "/v1/pets", &fields));
        h2.send(DATA, END_STREAM, 1, PET.as_bytes());
        h2.answer(1)
    };
    for (fields, code) in [
        (&[("idempotency-key", "k ")][..], "invalid_header"),
        (&[("idempotency-key", "\tk")][..], "invalid_header"),
        (&[("idempotency-key", "")][..], "invalid_idempotency_key"),
        (&[("idempotency-key", "a b")][..], "invalid_idempotency_key"),
        (&[("idempotency-key", "\"k")][..], "invalid_idempotency_key"),
        (
            &[("idempotency-key", "k"), ("idempotency-key", "k")][..],
            "invalid_idempotency_key",
        ),
    ] {
        assert_eq!(refused(send(fields)), (400, code.into()), "{fields:?}");
    }
    assert_eq!(
        server.list_ids("/v1/pets").0,
        Vec::<u64>::new(),
        "nothing stored"
    );
    // A good key: created once, then replayed.
    let first = send(&[("idempotency-key", "\"h2-key\"")]);
    let again = send(&[("idempotency-key", "h2-key")]);
    // (The raw reader decodes only the indexed statuses; a 201 reads as
    // 0. The body tells: the same pet, twice.)
    let (Answer::Response(_, first), Answer::Response(_, again)) = (&first, &again) else {
        panic!("not two responses: {first:?} {again:?}");
    };
    let pet: Value = serde_json::from_slice(first).unwrap();
    assert_eq!(
        (pet["id"].as_u64(), pet["name"].as_str()),
        (Some(1), Some("Rex"))
    );
    assert_eq!(first, again);
    assert_eq!(server.list_ids("/v1/pets").0, vec![1]);
}
