//! One contract whatever the protocol: the same table of requests over
//! HTTP/1.1, HTTP/2 in plaintext (h2c with prior knowledge), HTTP/1.1
//! over TLS and HTTP/2 over TLS, through hyper's client, with the same
//! statuses, codes and headers. And what differs by design: HTTP/2
//! responses carry no connection-specific header, rate limits charge
//! each stream, the access log and `/metrics` name the protocol.

use crate::common;

use common::transport::{build, connect, runtime, Sender, TestCa, Transport};
use common::*;

const ORIGIN: &str = "https://shop.example";
const DEPRECATION: &str = "@1764892800";
const SUNSET: &str = "Thu, 05 Dec 2030 00:00:00 GMT";

/// What one case expects.
struct Case {
    method: &'static str,
    path: &'static str,
    headers: &'static [(&'static str, &'static str)],
    body: &'static [u8],
    status: u16,
    /// The error code, for an error.
    code: Option<&'static str>,
    /// Headers that must be present, with their exact value (or any
    /// value, for "").
    must_have: &'static [(&'static str, &'static str)],
}

const AUTH: (&str, &str) = ("authorization", "Bearer test-key-main");
const JSON: (&str, &str) = ("content-type", "application/json");

const CASES: &[Case] = &[
    Case {
        method: "POST",
        path: "/v1/pets",
        headers: &[AUTH, JSON],
        body: br#"{"name":"Rex","categoryId":1}"#,
        status: 201,
        code: None,
        must_have: &[("x-ratelimit-limit", ""), ("ratelimit-policy", "")],
    },
    Case {
        method: "POST",
        path: "/v1/pets",
        headers: &[AUTH, JSON],
        body: br#"{"name":"Ada","categoryId":2,"status":"sold"}"#,
        status: 201,
        code: None,
        must_have: &[],
    },
    Case {
        method: "GET",
        path: "/v1/pets?limit=1",
        headers: &[AUTH],
        body: b"",
        status: 200,
        code: None,
        must_have: &[
            ("link", r#"</v1/pets?limit=1&after=1>; rel="next""#),
            ("x-ratelimit-remaining", ""),
            ("x-ratelimit-reset", ""),
            ("ratelimit", ""),
        ],
    },
    Case {
        method: "GET",
        path: "/v1/pets?status=sold",
        headers: &[AUTH],
        body: b"",
        status: 200,
        code: None,
        must_have: &[("content-type", "application/json")],
    },
    Case {
        method: "GET",
        path: "/v1/pets/1",
        headers: &[AUTH],
        body: b"",
        status: 200,
        code: None,
        must_have: &[
            ("deprecation", DEPRECATION),
            ("sunset", SUNSET),
            ("link", r#"</v1/pets>; rel="successor-version""#),
        ],
    },
    Case {
        method: "GET",
        path: "/v1/pets/999",
        headers: &[AUTH],
        body: b"",
        status: 404,
        code: Some("not_found"),
        must_have: &[("deprecation", DEPRECATION)],
    },
    Case {
        method: "GET",
        path: "/v1/pets/01",
        headers: &[AUTH],
        body: b"",
        status: 400,
        code: Some("invalid_path"),
        must_have: &[],
    },
    // The transitions of pet 1 (Rex, available): no body, then `{}`,
    // then the same again, refused.
    Case {
        method: "POST",
        path: "/v1/pets/1/reserve",
        headers: &[AUTH],
        body: b"",
        status: 200,
        code: None,
        must_have: &[("content-type", "application/json"), ("ratelimit", "")],
    },
    Case {
        method: "POST",
        path: "/v1/pets/1/sell",
        headers: &[AUTH, JSON],
        body: b"{}",
        status: 200,
        code: None,
        must_have: &[("x-ratelimit-remaining", "")],
    },
    Case {
        method: "POST",
        path: "/v1/pets/1/sell",
        headers: &[AUTH],
        body: b"",
        status: 409,
        code: Some("status_conflict"),
        must_have: &[("x-ratelimit-remaining", "")],
    },
    Case {
        method: "GET",
        path: "/v1/pets?limit=0",
        headers: &[AUTH],
        body: b"",
        status: 400,
        code: Some("invalid_query"),
        must_have: &[],
    },
    Case {
        method: "GET",
        path: "/v1/pets",
        headers: &[],
        body: b"",
        status: 401,
        code: Some("unauthorized"),
        must_have: &[("www-authenticate", CHALLENGE), ("x-ratelimit-limit", "")],
    },
    Case {
        method: "POST",
        path: "/v1/pets",
        headers: &[AUTH, JSON],
        body: br#"{"name":"Rex","categoryId":1,"id":7}"#,
        status: 400,
        code: Some("invalid_body"),
        must_have: &[],
    },
    Case {
        method: "POST",
        path: "/v1/pets",
        headers: &[AUTH, ("content-type", "text/plain")],
        body: b"Rex",
        status: 415,
        code: Some("unsupported_media_type"),
        must_have: &[],
    },
    Case {
        method: "DELETE",
        path: "/v1/pets",
        headers: &[AUTH],
        body: b"",
        status: 405,
        code: Some("method_not_allowed"),
        must_have: &[("allow", "")],
    },
    Case {
        method: "GET",
        path: "/v1/nowhere",
        headers: &[AUTH],
        body: b"",
        status: 404,
        code: Some("not_found"),
        must_have: &[],
    },
    Case {
        method: "GET",
        path: "/v1/store/orders/999999",
        headers: &[AUTH],
        body: b"",
        status: 404,
        code: Some("not_found"),
        must_have: &[],
    },
    Case {
        method: "OPTIONS",
        path: "/v1/pets",
        headers: &[
            ("origin", ORIGIN),
            ("access-control-request-method", "POST"),
        ],
        body: b"",
        status: 204,
        code: None,
        must_have: &[("access-control-allow-origin", ORIGIN)],
    },
    Case {
        method: "GET",
        path: "/v1/pets",
        headers: &[AUTH, ("origin", ORIGIN)],
        body: b"",
        status: 200,
        code: None,
        must_have: &[("access-control-allow-origin", ORIGIN)],
    },
    Case {
        method: "HEAD",
        path: "/v1/pets",
        headers: &[AUTH],
        body: b"",
        status: 200,
        code: None,
        must_have: &[("x-ratelimit-limit", "")],
    },
    Case {
        method: "GET",
        path: "/v1/openapi.json",
        headers: &[],
        body: b"",
        status: 200,
        code: None,
        must_have: &[("content-type", "application/json")],
    },
];

/// A server for `transport`, with CORS on and the access log, TLS with a
/// fresh authority when the transport needs it.
fn start(transport: Transport) -> (Server, Option<TestCa>) {
    let builder = Server::builder()
        .arg("--cors-origin")
        .arg(ORIGIN)
        .arg("--access-log");
    if !transport.tls() {
        return (builder.start(), None);
    }
    // Dropped (and removed) on return: the server reads the pair once,
    // at its start, and the client trusts the authority from memory.
    let dir = TempDir::new();
    let ca = TestCa::new(&dir);
    let server = builder
        .arg("--tls-cert")
        .arg(ca.cert.to_str().unwrap())
        .arg("--tls-key")
        .arg(ca.key.to_str().unwrap())
        .start();
    (server, Some(ca))
}

fn check_case(case: &Case, resp: &Response, transport: Transport) {
    let ctx = format!(
        "{:?} {} {}: {}",
        transport,
        case.method,
        case.path,
        resp.describe()
    );
    assert_eq!(resp.status, case.status, "{ctx}");
    if let Some(code) = case.code {
        assert_error(resp, case.status, code);
    }
    for (name, value) in case.must_have {
        let got = resp
            .header(name)
            .unwrap_or_else(|| panic!("no {name}: {ctx}"));
        if !value.is_empty() {
            assert_eq!(got, *value, "{name}: {ctx}");
        }
    }
    if case.code.is_none() && case.method != "OPTIONS" && case.path.starts_with("/v1/pets") {
        assert_has_ratelimit_headers(resp);
    }
    if transport.h2() {
        // RFC 9113 section 8.2.2: no connection-specific header fields.
        for name in ["connection", "keep-alive", "transfer-encoding"] {
            assert!(resp.header(name).is_none(), "{name} over HTTP/2: {ctx}");
        }
    }
}

#[test]
fn the_contract_is_the_same_over_every_protocol() {
    let rt = runtime();
    for transport in [
        Transport::Http1,
        Transport::H2c,
        Transport::Https1,
        Transport::Https2,
    ] {
        let (server, ca) = start(transport);
        rt.block_on(async {
            let mut sender = connect(transport, server.addr, ca.as_ref()).await;
            for case in CASES {
                let request = build(
                    case.method,
                    server.addr,
                    transport,
                    case.path,
                    case.headers,
                    case.body,
                );
                let resp = sender.send(request).await;
                check_case(case, &resp, transport);
                if resp.header("connection") == Some("close") {
                    // HTTP/1.1: a body refused unread closes the connection.
                    sender = connect(transport, server.addr, ca.as_ref()).await;
                }
            }
        });
        // The access log names the protocol of each request.
        let (protocol, tls) = match transport {
            Transport::Http1 => ("http1", false),
            Transport::H2c => ("h2", false),
            Transport::Https1 => ("http1", true),
            Transport::Https2 => ("h2", true),
        };
        let wanted = format!(r#""protocol":"{protocol}","tls":{tls}"#);
        assert!(
            wait_until(IO_TIMEOUT, || server.stderr_text().contains(&wanted)),
            "{transport:?}: no access-log line with {wanted}:\n{}",
            server.stderr_text()
        );
        // And /metrics counts the connection under its protocol.
        let metric = format!(r#"petstore_connections_total{{protocol="{protocol}",tls="{tls}"}}"#);
        let body = rt.block_on(async {
            let mut sender = connect(transport, server.addr, ca.as_ref()).await;
            let request = build("GET", server.addr, transport, "/metrics", &[], b"");
            sender.send(request).await.text()
        });
        let count: u64 = body
            .lines()
            .find_map(|l| l.strip_prefix(&metric)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{transport:?}: no {metric} in /metrics:\n{body}"));
        assert!(count >= 1, "{transport:?}: {metric} = {count}");
    }
}

#[test]
fn a_body_over_the_cap_is_413_on_every_protocol_and_http2_keeps_the_connection() {
    let rt = runtime();
    let big = vec![b' '; 70 * 1024];
    for transport in [Transport::Http1, Transport::H2c, Transport::Https2] {
        let (server, ca) = start(transport);
        rt.block_on(async {
            let mut sender = connect(transport, server.addr, ca.as_ref()).await;
            let request = build(
                "POST",
                server.addr,
                transport,
                "/v1/pets",
                &[AUTH, JSON],
                &big,
            );
            let resp = sender.send(request).await;
            assert_error(&resp, 413, "payload_too_large");
            if transport.h2() {
                // The stream is reset alone; the connection serves on.
                assert!(resp.header("connection").is_none(), "{}", resp.describe());
                let request = build("GET", server.addr, transport, "/v1/pets", &[AUTH], b"");
                assert_eq!(sender.send(request).await.status, 200);
            } else {
                assert_eq!(resp.single("connection"), "close");
            }
        });
    }
}

#[test]
fn rate_limits_charge_each_http2_stream_not_the_connection() {
    let rt = runtime();
    for transport in [Transport::H2c, Transport::Https2] {
        let (server, ca) = start(transport);
        let statuses = rt.block_on(async {
            let sender = connect(transport, server.addr, ca.as_ref()).await;
            let Sender::H2(send) = sender else {
                panic!("an HTTP/2 transport")
            };
            // Five streams at once on one connection, for a key of 3 a
            // minute: three pass, two are refused, whatever their order.
            let mut streams = Vec::new();
            for _ in 0..5 {
                let mut sender = Sender::H2(send.clone());
                let request = build(
                    "GET",
                    server.addr,
                    transport,
                    "/v1/pets",
                    &[("authorization", "Bearer test-key-free")],
                    b"",
                );
                streams.push(tokio::spawn(async move { sender.send(request).await }));
            }
            let mut responses = Vec::new();
            for stream in streams {
                responses.push(stream.await.unwrap());
            }
            responses
        });
        let mut ok = 0;
        let mut remaining = Vec::new();
        for resp in &statuses {
            match resp.status {
                200 => {
                    ok += 1;
                    remaining.push(resp.header_u64("x-ratelimit-remaining"));
                }
                429 => {
                    assert_error(resp, 429, "rate_limited");
                    assert!(resp.header_u64("retry-after") >= 1);
                }
                other => panic!("{transport:?}: status {other}: {}", resp.describe()),
            }
        }
        remaining.sort_unstable();
        assert_eq!(ok, 3, "{transport:?}");
        assert_eq!(
            remaining,
            vec![0, 1, 2],
            "{transport:?}: each stream charged once"
        );
    }
}
