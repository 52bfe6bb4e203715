//! Rate limits: the headers on every kind of response, 429 and its
//! Retry-After, bans, the per-address limit of anonymous requests, the
//! binding window and the plan defaults.

use crate::common;

use common::{
    assert_error, now_unix, parse_ratelimit, sha256_hex, x_ratelimit, RateLimitField, Response,
    Server, KEY,
};
use serde_json::{json, Value};

const FREE_POLICY: &str = r#""minute";q=3;w=60, "day";q=1000;w=86400"#;
const PET: &[u8] = br#"{"name":"Rex","categoryId":1}"#;

/// Free keys f1..f4 on 3/min, the ban after 3 refusals, 5 anonymous
/// requests per minute.
fn limits_keys() -> Value {
    json!({
        "keys": [
            {"name": "main", "key": KEY, "plan": "enterprise",
             "perMinute": 1_000_000, "perDay": 100_000_000},
            {"name": "f1", "key": "f1", "plan": "free"},
            {"name": "f2", "key": "f2", "plan": "free"},
            {"name": "f3", "sha256": sha256_hex("f3"), "plan": "free"},
            {"name": "f4", "key": "f4", "plan": "free"}
        ],
        "plans": {"free": {"perMinute": 3, "perDay": 1000}},
        "ban": {"strikes": 3, "windowSeconds": 60, "banSeconds": 600},
        "anonymousPerMinute": 5
    })
}

fn start() -> Server {
    Server::builder().keys(limits_keys()).start()
}

/// A request and the Unix seconds just before and after it.
fn timed(f: impl FnOnce() -> Response) -> (Response, u64, u64) {
    let before = now_unix();
    let resp = f();
    (resp, before, now_unix())
}

/// Checks the headers of a free-plan (3/min) response after `used`
/// tokens of the minute are gone.
fn assert_free_headers(resp: &Response, used: u64, before: u64, after: u64, context: &str) {
    let ctx = format!("{context}: {}", resp.describe());
    let (limit, remaining, reset) = x_ratelimit(resp);
    assert_eq!(limit, 3, "X-RateLimit-Limit, {ctx}");
    assert_eq!(remaining, 3 - used, "X-RateLimit-Remaining, {ctx}");
    // The bucket is full again `used` * 20 s from now, rounded up.
    let full_in = used * 20;
    assert!(
        reset >= before + full_in.saturating_sub(1) && reset <= after + full_in + 1,
        "X-RateLimit-Reset {reset} not about now ({before}) + {full_in}, {ctx}"
    );
    assert_eq!(resp.single("ratelimit-policy"), FREE_POLICY, "{ctx}");
    let rl = parse_ratelimit(resp.single("ratelimit"));
    assert_eq!(rl.name, "minute", "{ctx}");
    assert_eq!(rl.remaining, 3 - used, "RateLimit r=, {ctx}");
    assert!(
        rl.reset + 1 >= full_in && rl.reset <= full_in,
        "RateLimit t={} not about {full_in}, {ctx}",
        rl.reset
    );
}

#[test]
fn every_kind_of_response_carries_the_rate_limit_headers_and_costs_a_token() {
    let server = start();
    let json = Some("application/json");

    let (r, b, a) = timed(|| server.get("/v1/pets", Some("f1")));
    assert_eq!(r.status, 200);
    assert_free_headers(&r, 1, b, a, "200 listPets");
    let (r, b, a) = timed(|| server.post("/v1/pets", Some("f1"), json, PET));
    assert_eq!(r.status, 201);
    assert_free_headers(&r, 2, b, a, "201 createPet");
    let (r, b, a) = timed(|| server.get("/v1/pets/999", Some("f1")));
    assert_error(&r, 404, "not_found");
    assert_free_headers(&r, 3, b, a, "404 getPet");
    let (r, b, a) = timed(|| server.get("/v1/pets", Some("f1")));
    assert_error(&r, 429, "rate_limited");
    assert_free_headers(&r, 3, b, a, "429 listPets");

    let (r, b, a) = timed(|| server.get("/v1/pets?limit=0", Some("f2")));
    assert_error(&r, 400, "invalid_query");
    assert_free_headers(&r, 1, b, a, "400 invalid_query");
    let (r, b, a) = timed(|| server.get("/v1/pets/abc", Some("f2")));
    assert_error(&r, 400, "invalid_path");
    assert_free_headers(&r, 2, b, a, "400 invalid_path");
    let (r, b, a) = timed(|| server.post("/v1/pets", Some("f2"), json, b"[]"));
    assert_error(&r, 400, "invalid_body");
    assert_free_headers(&r, 3, b, a, "400 invalid_body");

    let (r, b, a) = timed(|| server.get("/v1/store/orders/1", Some("f3")));
    assert_error(&r, 404, "not_found");
    assert_free_headers(&r, 1, b, a, "404 getOrder (sha256 key)");
    let (r, b, a) = timed(|| server.get("/v1/pets/1", Some("f3")));
    assert_eq!(r.status, 200);
    assert_free_headers(&r, 2, b, a, "200 getPet");

    // 401: the per-address bucket of 5 per minute.
    let (r, b, a) = timed(|| server.get("/v1/pets", None));
    assert_error(&r, 401, "unauthorized");
    let ctx = r.describe();
    let (limit, remaining, reset) = x_ratelimit(&r);
    assert_eq!((limit, remaining), (5, 4), "{ctx}");
    assert!(reset >= b + 11 && reset <= a + 13, "reset {reset}: {ctx}");
    assert_eq!(
        r.single("ratelimit-policy"),
        r#""minute";q=5;w=60"#,
        "{ctx}"
    );
    let rl = parse_ratelimit(r.single("ratelimit"));
    assert_eq!((rl.name.as_str(), rl.remaining), ("minute", 4), "{ctx}");
    assert!((11..=12).contains(&rl.reset), "{ctx}");
}

#[test]
fn the_fourth_request_in_a_minute_is_429_and_takes_no_token() {
    let server = start();
    for i in 1..=3 {
        let resp = server.get("/v1/pets", Some("f1"));
        assert_eq!(resp.status, 200, "request {i}: {}", resp.describe());
    }
    let mut resets = Vec::new();
    for i in 4..=5 {
        let resp = server.get("/v1/pets", Some("f1"));
        assert_error(&resp, 429, "rate_limited");
        let retry = resp.header_u64("retry-after");
        assert!(
            (19..=20).contains(&retry),
            "request {i}: Retry-After {retry}, want about 20 (a refused request takes no token): {}",
            resp.describe()
        );
        let (_, remaining, reset) = x_ratelimit(&resp);
        assert_eq!(remaining, 0);
        resets.push(reset);
    }
    assert!(
        resets[1] <= resets[0] + 1,
        "a refusal pushed the reset back: {resets:?}"
    );
    // Other keys have their own buckets.
    assert_eq!(server.get("/v1/pets", Some("f2")).status, 200);
    assert_eq!(server.get("/v1/pets", Some(KEY)).status, 200);
    // A refused create stores nothing.
    let resp = server.post("/v1/pets", Some("f1"), Some("application/json"), PET);
    assert_eq!(resp.status, 429);
    assert!(server.list_ids("/v1/pets").0.is_empty());
}

#[test]
fn repeated_refusals_ban_the_key() {
    let server = start();
    for _ in 0..3 {
        assert_eq!(server.get("/v1/pets", Some("f1")).status, 200);
    }
    // strikes = 3. The first refusal is no strike (no Retry-After was
    // given before it); each refusal after it comes back before its
    // Retry-After and is one: the third strike, the fourth refusal,
    // starts the ban. Exactly then: not one refusal earlier or later.
    let mut codes = Vec::new();
    let mut banned = None;
    for _ in 0..5 {
        let (resp, before, after) = timed(|| server.get("/v1/pets", Some("f1")));
        assert_eq!(resp.status, 429, "{}", resp.describe());
        let code = resp.json()["code"].as_str().unwrap().to_owned();
        if code == "key_banned" && banned.is_none() {
            banned = Some((resp, before, after));
        }
        codes.push(code);
    }
    assert_eq!(
        codes,
        [
            "rate_limited",
            "rate_limited",
            "rate_limited",
            "key_banned",
            "key_banned"
        ]
    );
    let (banned, before, after) = banned.unwrap();
    assert_error(&banned, 429, "key_banned");
    let retry = banned.header_u64("retry-after");
    assert!(
        (595..=600).contains(&retry),
        "Retry-After of a ban of 600 s: {retry}"
    );
    assert_eq!(banned.single("ratelimit-policy"), FREE_POLICY);
    // Nothing remains while banned, and the window is full again only
    // when the ban ends (docs/http.md, "What counts toward a ban").
    let (limit, remaining, reset) = x_ratelimit(&banned);
    assert_eq!((limit, remaining), (3, 0), "{}", banned.describe());
    assert!(
        reset >= before + 600 && reset <= after + 601,
        "X-RateLimit-Reset {reset} is not the end of the ban (about {before} + 600)"
    );
    let field = parse_ratelimit(banned.single("ratelimit"));
    assert_eq!(field.remaining, 0, "{field:?}");
    assert!((595..=600).contains(&field.reset), "{field:?}");
    // `t` is when the window is full again, Retry-After when a request
    // would be allowed: never the smaller (docs/contract.md).
    assert!(
        field.reset >= retry,
        "t={} < Retry-After {retry}",
        field.reset
    );
    // Every kind of request is refused while banned.
    let resp = server.post("/v1/pets", Some("f1"), Some("application/json"), PET);
    assert_error(&resp, 429, "key_banned");
    let retry = resp.header_u64("retry-after");
    assert!((590..=600).contains(&retry), "{retry}");
    let resp = server.get("/v1/pets/1", Some("f1"));
    assert_error(&resp, 429, "key_banned");
    // Only that key.
    assert_eq!(server.get("/v1/pets", Some("f2")).status, 200);
    assert!(server.list_ids("/v1/pets").0.is_empty());
}

#[test]
fn anonymous_requests_are_limited_per_address_and_keys_are_not_affected() {
    let server = start();
    // Requests with valid keys do not use the anonymous bucket.
    for _ in 0..3 {
        assert_eq!(server.get("/v1/pets", Some(KEY)).status, 200);
    }
    let attempts: [Option<&str>; 5] = [None, Some("guess-1"), None, Some("guess-2"), None];
    for (i, key) in attempts.iter().enumerate() {
        let resp = server.get("/v1/pets", *key);
        assert_error(&resp, 401, "unauthorized");
        let (limit, remaining, _) = x_ratelimit(&resp);
        assert_eq!((limit, remaining), (5, 4 - i as u64), "{}", resp.describe());
    }
    for key in [None, Some("guess-3"), Some(KEY.trim_end_matches('n'))] {
        let resp = server.get("/v1/pets", key);
        assert_error(&resp, 429, "rate_limited");
        let retry = resp.header_u64("retry-after");
        assert!(
            (1..=12).contains(&retry),
            "Retry-After {retry} for 5/min: {}",
            resp.describe()
        );
        let (limit, remaining, _) = x_ratelimit(&resp);
        assert_eq!((limit, remaining), (5, 0));
        assert_eq!(resp.single("ratelimit-policy"), r#""minute";q=5;w=60"#);
    }
    // A keyed client from the same address is unaffected.
    let resp = server.get("/v1/pets", Some("f1"));
    assert_eq!(resp.status, 200, "{}", resp.describe());
    assert_eq!(x_ratelimit(&resp).0, 3, "the key's own bucket");
    let resp = server.post("/v1/pets", Some(KEY), Some("application/json"), PET);
    assert_eq!(resp.status, 201);
    // Unlimited endpoints stay open.
    assert_eq!(server.get("/healthz", None).status, 200);
    assert_eq!(server.get("/v1/openapi.json", None).status, 200);
}

#[test]
fn healthz_and_openapi_do_not_use_the_anonymous_bucket() {
    let server = start();
    for _ in 0..8 {
        assert_eq!(server.get("/healthz", None).status, 200);
        assert_eq!(server.get("/v1/openapi.json", None).status, 200);
    }
    let resp = server.get("/v1/pets", None);
    assert_error(&resp, 401, "unauthorized");
    assert_eq!(x_ratelimit(&resp).1, 4, "{}", resp.describe());
}

#[test]
fn the_headers_describe_the_window_with_fewer_requests_left() {
    let server = Server::builder()
        .keys(json!({"keys": [
            {"name": "tiny", "key": "tiny", "plan": "enterprise", "perMinute": 10, "perDay": 2},
            {"name": "tie", "key": "tie", "plan": "enterprise", "perMinute": 3, "perDay": 3}
        ]}))
        .start();
    let policy = r#""minute";q=10;w=60, "day";q=2;w=86400"#;
    let (r, b, a) = timed(|| server.get("/v1/pets", Some("tiny")));
    assert_eq!(r.status, 200);
    let (limit, remaining, reset) = x_ratelimit(&r);
    assert_eq!(
        (limit, remaining),
        (2, 1),
        "the day window binds: {}",
        r.describe()
    );
    assert!(
        reset >= b + 43_199 && reset <= a + 43_201,
        "day bucket full again in 43,200 s: {}",
        r.describe()
    );
    assert_eq!(r.single("ratelimit-policy"), policy);
    let rl = parse_ratelimit(r.single("ratelimit"));
    assert_eq!((rl.name.as_str(), rl.remaining), ("day", 1));
    assert!((43_199..=43_200).contains(&rl.reset), "{rl:?}");

    let r = server.get("/v1/pets", Some("tiny"));
    assert_eq!(r.status, 200);
    let rl: RateLimitField = parse_ratelimit(r.single("ratelimit"));
    assert_eq!((rl.name.as_str(), rl.remaining), ("day", 0), "{rl:?}");
    assert_eq!(x_ratelimit(&r).1, 0);
    let r = server.get("/v1/pets", Some("tiny"));
    assert_error(&r, 429, "rate_limited");
    let retry = r.header_u64("retry-after");
    assert!(
        (43_198..=43_200).contains(&retry),
        "waiting for the day window: Retry-After {retry}"
    );

    let r = server.get("/v1/pets", Some("tie"));
    assert_eq!(r.status, 200);
    assert_eq!(x_ratelimit(&r).0, 3);
    assert_eq!(x_ratelimit(&r).1, 2);
    assert_eq!(
        parse_ratelimit(r.single("ratelimit")).name,
        "minute",
        "tie: minute"
    );
    assert_eq!(
        r.single("ratelimit-policy"),
        r#""minute";q=3;w=60, "day";q=3;w=86400"#
    );
}

#[test]
fn plan_defaults_are_the_specification_table() {
    let server = Server::builder()
        .keys(json!({"keys": [
            {"name": "free", "key": "k-free", "plan": "free"},
            {"name": "pro", "key": "k-pro", "plan": "pro"},
            {"name": "business", "key": "k-business", "plan": "business"},
            {"name": "enterprise", "key": "k-enterprise", "plan": "enterprise",
             "perMinute": 5000, "perDay": 2_000_000}
        ]}))
        .start();
    for (key, minute, day) in [
        ("k-free", 60, 1_000),
        ("k-pro", 300, 10_000),
        ("k-business", 1_000, 100_000),
        ("k-enterprise", 5_000, 2_000_000),
    ] {
        let r = server.get("/v1/pets", Some(key));
        assert_eq!(r.status, 200, "{}", r.describe());
        assert_eq!(x_ratelimit(&r).0, minute, "{key}");
        assert_eq!(x_ratelimit(&r).1, minute - 1, "{key}");
        assert_eq!(
            r.single("ratelimit-policy"),
            format!(r#""minute";q={minute};w=60, "day";q={day};w=86400"#),
            "{key}"
        );
        let rl = parse_ratelimit(r.single("ratelimit"));
        assert_eq!((rl.name.as_str(), rl.remaining), ("minute", minute - 1));
    }
    let r = server.get("/v1/pets", None);
    assert_eq!(r.status, 401);
    assert_eq!(x_ratelimit(&r).0, 60, "anonymous default");
    assert_eq!(r.single("ratelimit-policy"), r#""minute";q=60;w=60"#);
}

#[test]
fn racing_requests_on_nearly_empty_buckets_are_200_or_429_never_500() {
    const KEYS: usize = 1500;
    const CLIENTS: usize = 4;
    // KEYS keys of 1 request per minute; CLIENTS clients on kept-alive
    // connections walk through them in lockstep, so requests for the same
    // key race each other just as its only token goes.
    let keys: Vec<Value> = (0..KEYS)
        .map(|i| json!({"name": format!("k{i}"), "key": format!("k{i}"), "plan": "free"}))
        .collect();
    let server = std::sync::Arc::new(
        Server::builder()
            .keys(json!({
                "keys": keys,
                "plans": {"free": {"perMinute": 1, "perDay": 1000}},
                "ban": {"strikes": 100, "windowSeconds": 60, "banSeconds": 600}
            }))
            .start(),
    );
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(CLIENTS));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let server = std::sync::Arc::clone(&server);
            let barrier = std::sync::Arc::clone(&barrier);
            std::thread::spawn(move || {
                let mut conn = server.connect();
                (0..KEYS)
                    .map(|i| {
                        let req = format!(
                            "GET /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k{i}\r\n\r\n"
                        );
                        barrier.wait();
                        conn.send(req.as_bytes()).unwrap();
                        conn.read_response().status
                    })
                    .collect::<Vec<u16>>()
            })
        })
        .collect();
    let results: Vec<Vec<u16>> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let mut problems = Vec::new();
    for i in 0..KEYS {
        let statuses: Vec<u16> = results.iter().map(|r| r[i]).collect();
        let ok = statuses.iter().filter(|&&s| s == 200).count();
        let limited = statuses.iter().filter(|&&s| s == 429).count();
        if ok != 1 || limited != CLIENTS - 1 {
            problems.push(format!("key k{i}: {statuses:?}"));
        }
    }
    assert!(
        problems.is_empty(),
        "each key allows exactly one request, the others get 429:\n{}\nserver stderr (start):\n{}",
        problems.join("\n"),
        server.stderr_text().chars().take(3000).collect::<String>()
    );
}

#[test]
fn racing_anonymous_requests_at_the_edge_are_401_or_429_never_500() {
    // 600 per minute: drained first (until the first 429), then a token
    // every 100 ms that the clients race for. Two clients send no key (a
    // short path to the bucket), two a long unknown key (looking it up
    // takes a while after the clock was read): the late readers of the
    // clock often reach the bucket first. The race is made, not hoped
    // for: the bucket is empty when it starts, and the clients go on
    // until the race has seen both a token won (401) and a refusal (429),
    // however fast or slow the machine (a cap on requests catches a hang).
    const CLIENTS: usize = 4;
    const AT_LEAST: u64 = 200;
    const CAP: u64 = 200_000;
    let server = std::sync::Arc::new(
        Server::builder()
            .keys(json!({
                "keys": [{"name": "main", "key": KEY, "plan": "pro"}],
                "anonymousPerMinute": 600
            }))
            .start(),
    );
    let mut drain = server.connect();
    // The bound below counts the tokens that refilled since the bucket was
    // last found empty: from an instant taken before the request that
    // found it so (the server read its clock after it), not after, so
    // that time the test loses before its clients start is counted too.
    let mut started = std::time::Instant::now();
    let drained = (0..20_000).any(|_| {
        started = std::time::Instant::now();
        drain
            .send(b"GET /v1/pets HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        match drain.read_response().status {
            401 => false,
            429 => true,
            other => panic!("draining: {other}"),
        }
    });
    assert!(drained, "600 a minute never ran out");
    let won = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let refused = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let server = std::sync::Arc::clone(&server);
            let (won, refused) = (won.clone(), refused.clone());
            std::thread::spawn(move || {
                let mut conn = server.connect();
                let request = if c % 2 == 0 {
                    "GET /v1/pets HTTP/1.1\r\nHost: x\r\n\r\n".to_owned()
                } else {
                    format!(
                        "GET /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n",
                        "g".repeat(8000)
                    )
                };
                let mut statuses = std::collections::BTreeMap::<u16, u64>::new();
                let race_seen = || {
                    won.load(std::sync::atomic::Ordering::Relaxed)
                        && refused.load(std::sync::atomic::Ordering::Relaxed)
                };
                for sent in 0..CAP {
                    if sent >= AT_LEAST && race_seen() {
                        break;
                    }
                    conn.send(request.as_bytes()).unwrap();
                    let status = conn.read_response().status;
                    match status {
                        401 => won.store(true, std::sync::atomic::Ordering::Relaxed),
                        429 => refused.store(true, std::sync::atomic::Ordering::Relaxed),
                        _ => {}
                    }
                    *statuses.entry(status).or_default() += 1;
                }
                statuses
            })
        })
        .collect();
    let mut total = std::collections::BTreeMap::<u16, u64>::new();
    for c in clients {
        for (status, n) in c.join().unwrap() {
            *total.entry(status).or_default() += n;
        }
    }
    let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let others: Vec<_> = total
        .iter()
        .filter(|(s, _)| **s != 401 && **s != 429)
        .collect();
    assert!(
        others.is_empty(),
        "statuses {total:?}; server stderr (start):\n{}",
        server.stderr_text().chars().take(3000).collect::<String>()
    );
    // The race happened: tokens were won and requests refused at the edge.
    let allowed = total.get(&401).copied().unwrap_or(0);
    assert!(
        allowed > 0 && total.get(&429).copied().unwrap_or(0) > 0,
        "{total:?}"
    );
    // And no more got through than the bucket refilled meanwhile (one
    // token per 100 ms, the one that may have been due at the start).
    assert!(
        allowed <= elapsed_ms / 100 + 2,
        "{allowed} anonymous requests let through in {elapsed_ms} ms at the edge"
    );
    assert_eq!(server.get("/v1/pets", Some(KEY)).status, 200);
}
