//! Replicas sharing one rate limit in Redis (`--redis`): two server
//! processes on one Redis of the harness's own, a client alternating
//! between them. And what a Redis failure does: restarted with its AOF,
//! limits go on where they were; stopped, each replica limits alone at
//! the full plan without a 5xx; back, one shared limit again.

use crate::common;

use std::time::{Duration, Instant};

use common::redis::RedisServer;
use common::*;
use serde_json::{json, Value};

const FREE: &str = "replica-free-key";
const STRICT: &str = "replica-strict-key";
const DAILY: &str = "replica-daily-key";
const PROBE: &str = "replica-probe-key";
const BURST: &str = "replica-burst-key";

/// The free plan, and the burst key: their binding window is the day, a
/// token every 12 minutes (86,400 s / 120). Redis decides on its own
/// `TIME`, with no clock a test could inject, so a minute window (a token
/// a second at 60 a minute) would refill while a slow machine sends the
/// requests, and the exact counts below would depend on its speed; a
/// token every 12 minutes is out of any test's reach.
const PER_DAY: u64 = 120;
/// Seconds of one day token of [`PER_DAY`].
const DAY_TOKEN_SECS: u64 = 86_400 / PER_DAY;

fn keys() -> Value {
    json!({
        "keys": [
            {"name": "free", "key": FREE, "plan": "free"},
            {"name": "strict", "key": STRICT, "plan": "pro", "perMinute": 1, "perDay": 100},
            {"name": "daily", "key": DAILY, "plan": "pro", "perMinute": 100, "perDay": 5},
            {"name": "probe", "key": PROBE, "plan": "enterprise",
             "perMinute": 100_000_000, "perDay": 100_000_000},
            {"name": "burst", "key": BURST, "plan": "pro", "perMinute": 100_000, "perDay": PER_DAY}
        ],
        "plans": {"free": {"perMinute": 100_000, "perDay": PER_DAY}},
        "ban": {"strikes": 3, "windowSeconds": 60, "banSeconds": 600},
        "anonymousPerMinute": 4
    })
}

/// The Redis timeout of the replicas here: a whole second, not the
/// default 50 ms, so that a call to a Redis that is up is never given up
/// on because the machine is busy (a test that counts no fallbacks, or
/// one exact limit across replicas, would fail then); a Redis that does
/// not answer still costs a request that second at most.
const REDIS_TIMEOUT_MS: &str = "1000";

fn replica(redis: &RedisServer) -> Server {
    Server::builder()
        .keys(keys())
        .arg("--redis")
        .arg(redis.url())
        .arg("--redis-timeout")
        .arg(REDIS_TIMEOUT_MS)
        .start()
}

/// Requests whose limit Redis decided.
fn redis_answers(server: &Server) -> u64 {
    server.metric("petstore_redis_decisions_total")
}

/// Script calls that got an answer (each decides a batch).
fn redis_calls(server: &Server) -> u64 {
    server.metric("petstore_redis_duration_seconds_count")
}

/// Waits until `server`'s requests are decided in Redis again (its
/// breaker probes once a second), using the probe key, whose limit no
/// test reaches. The bound only cuts off a hang.
fn wait_until_shared(server: &Server) {
    let shared = wait_until(Duration::from_secs(60), || {
        let before = redis_answers(server);
        let r = server.get("/v1/pets", Some(PROBE));
        assert_eq!(r.status, 200, "{}", r.describe());
        redis_answers(server) > before
    });
    assert!(shared, "the replica did not go back to Redis within 60 s");
}

#[test]
fn a_free_key_gets_exactly_its_quota_across_two_replicas() {
    let redis = RedisServer::start();
    let replicas = [replica(&redis), replica(&redis)];
    // Taken before the first request: whatever Redis' clock did since,
    // it did within this much time.
    let started = Instant::now();
    let mut first_reset = None;
    for i in 0..PER_DAY {
        let r = replicas[(i % 2) as usize].get("/v1/pets", Some(FREE));
        assert_eq!(r.status, 200, "request {i}: {}", r.describe());
        let (limit, remaining, reset) = x_ratelimit(&r);
        assert_eq!(limit, PER_DAY);
        // One shared bucket: down by one per request, whichever answers.
        assert_eq!(remaining, PER_DAY - 1 - i, "request {i}");
        // One clock and one state: each request moves the instant the
        // bucket is full again by exactly its token (GCRA, 120 a day: 720 s).
        let reset0 = *first_reset.get_or_insert(reset);
        assert_eq!(
            reset,
            reset0 + i * DAY_TOKEN_SECS,
            "request {i}: X-RateLimit-Reset"
        );
    }
    for server in &replicas {
        let r = server.get("/v1/pets", Some(FREE));
        assert_error(&r, 429, "rate_limited");
        assert_eq!(r.header_u64("x-ratelimit-remaining"), 0);
        // The next token comes a token's time after the first request
        // (its 720 s, less what has passed since, rounded up).
        let retry = r.header_u64("retry-after");
        let waited = started.elapsed().as_secs();
        assert!(
            (DAY_TOKEN_SECS.saturating_sub(waited + 1)..=DAY_TOKEN_SECS).contains(&retry),
            "Retry-After {retry} after {waited} s"
        );
    }
    // In Redis: one state, named by the key's SHA-256 and its quota, with
    // a TTL; never the key.
    let mut connection = redis.connection();
    let names: Vec<String> = ::redis::cmd("KEYS")
        .arg("*")
        .query(&mut connection)
        .unwrap();
    assert_eq!(
        names,
        [format!("{{{}}}:m100000/d{PER_DAY}:v3", sha256_hex(FREE))]
    );
    let ttl: i64 = ::redis::cmd("PTTL")
        .arg(&names[0])
        .query(&mut connection)
        .unwrap();
    // Until the day bucket is full again (120 tokens of 720 s from the
    // first request: a day), 1 ms for the bucket's end and a second's
    // margin; less what has passed since the first request (and a second
    // for the rounding of Redis' clock to ms).
    let most = 86_401_001;
    let passed = i64::try_from(started.elapsed().as_millis()).unwrap();
    assert!(
        (most - passed - 1_000..=most).contains(&ttl),
        "TTL {ttl} ms, {passed} ms after the first request"
    );
}

/// Many connections of one key at once on two replicas: each replica
/// sends the requests that arrive while the key's call is in flight
/// together in its next call (one script call decides a batch). Exactly
/// the plan still goes through, each token to one request: the 200s'
/// `X-RateLimit-Remaining` are 119 down to 0, each once. (The day binds,
/// a token every 12 minutes: no token comes back during the run, however
/// long it takes.)
#[test]
fn concurrent_requests_of_one_key_on_two_replicas_are_each_counted_once() {
    let redis = RedisServer::start();
    let replicas = [replica(&redis), replica(&redis)];
    const THREADS: usize = 24;
    const EACH: usize = 10;
    let answers: Vec<(u16, u64)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let replicas = &replicas;
                scope.spawn(move || {
                    let mut seen = Vec::new();
                    for i in 0..EACH {
                        let r = replicas[(t + i) % 2].get("/v1/pets", Some(BURST));
                        seen.push((r.status, r.header_u64("x-ratelimit-remaining")));
                    }
                    seen
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let mut remaining: Vec<u64> = answers
        .iter()
        .filter(|(status, _)| *status == 200)
        .map(|(_, remaining)| *remaining)
        .collect();
    remaining.sort_unstable();
    assert_eq!(remaining, (0..PER_DAY).collect::<Vec<u64>>(), "{answers:?}");
    assert!(
        answers
            .iter()
            .all(|(status, remaining)| *status == 200 || (*status == 429 && *remaining == 0)),
        "{answers:?}"
    );
    // Every request was decided in Redis, in fewer calls than requests.
    let decided: u64 = replicas.iter().map(redis_answers).sum();
    let calls: u64 = replicas.iter().map(redis_calls).sum();
    assert_eq!(decided, (THREADS * EACH) as u64);
    assert!(calls < decided, "{calls} calls for {decided} requests");
    assert_eq!(
        replicas
            .iter()
            .map(|s| s.metric("petstore_redis_fallbacks_total"))
            .sum::<u64>(),
        0
    );
}

/// Every operation through Redis: the request that waited for its
/// decision goes on with the checks after the rate limit (query, path,
/// content type, body) exactly as in process, and each request, refused
/// by those checks or not, costs one token in Redis.
#[test]
fn every_operation_is_charged_in_redis_and_checked_after_the_limit() {
    let redis = RedisServer::start();
    let server = replica(&redis);
    let created = server.post(
        "/v1/pets",
        Some(FREE),
        Some("application/json"),
        br#"{"name":"Rex","categoryId":1}"#,
    );
    assert_eq!(created.status, 201, "{}", created.describe());
    let steps: [(&str, u16); 6] = [
        ("/v1/pets/1", 200),
        ("/v1/pets/2", 404),
        ("/v1/pets/x1", 400),
        ("/v1/pets?limit=0", 400),
        ("/v1/store/orders/1", 404),
        ("/v1/pets?limit=1", 200),
    ];
    let mut remaining = vec![x_ratelimit(&created).1];
    for (path, status) in steps {
        let r = server.get(path, Some(FREE));
        assert_eq!(r.status, status, "{path}: {}", r.describe());
        remaining.push(r.header_u64("x-ratelimit-remaining"));
    }
    let bad_type = server.post("/v1/pets", Some(FREE), Some("text/plain"), b"{}");
    assert_error(&bad_type, 415, "unsupported_media_type");
    remaining.push(bad_type.header_u64("x-ratelimit-remaining"));
    assert_eq!(
        remaining,
        (PER_DAY - 8..PER_DAY).rev().collect::<Vec<u64>>()
    );
    assert_eq!(redis_answers(&server), 8);
    assert_eq!(server.metric("petstore_redis_fallbacks_total"), 0);
    // Without a key: the address's bucket in Redis, and a 401.
    let anonymous = server.get("/v1/pets", None);
    assert_error(&anonymous, 401, "unauthorized");
    assert_eq!(x_ratelimit(&anonymous), (4, 3, x_ratelimit(&anonymous).2));
    assert_eq!(redis_answers(&server), 9);
}

#[test]
fn strikes_split_across_replicas_lead_to_a_ban_both_enforce() {
    let redis = RedisServer::start();
    let (a, b) = (replica(&redis), replica(&redis));
    assert_eq!(a.get("/v1/pets", Some(STRICT)).status, 200);
    // Refused, told to come back in 60 s; then three came back early,
    // on alternating replicas: the third strike bans.
    assert_error(&b.get("/v1/pets", Some(STRICT)), 429, "rate_limited");
    assert_error(&a.get("/v1/pets", Some(STRICT)), 429, "rate_limited");
    assert_error(&b.get("/v1/pets", Some(STRICT)), 429, "rate_limited");
    let banned = a.get("/v1/pets", Some(STRICT));
    assert_error(&banned, 429, "key_banned");
    assert_eq!(banned.header_u64("retry-after"), 600);
    let other = b.get("/v1/pets", Some(STRICT));
    assert_error(&other, 429, "key_banned");
    assert!(other.header_u64("retry-after") <= 600);
    a.stderr_once_logged("key \"strict\" banned for 600 s");
}

#[test]
fn a_small_custom_per_day_holds_across_both() {
    let redis = RedisServer::start();
    let replicas = [replica(&redis), replica(&redis)];
    let started = Instant::now();
    for i in 0..5u64 {
        let r = replicas[(i % 2) as usize].get("/v1/pets", Some(DAILY));
        assert_eq!(r.status, 200, "request {i}: {}", r.describe());
        assert_eq!(x_ratelimit(&r).1, 4 - i);
    }
    for server in &replicas {
        let r = server.get("/v1/pets", Some(DAILY));
        assert_error(&r, 429, "rate_limited");
        // The day's next token: 86,400 s / 5 after the first request,
        // less what has passed since (rounded up).
        let retry = r.header_u64("retry-after");
        let waited = started.elapsed().as_secs();
        assert!(
            (17_280u64.saturating_sub(waited + 1)..=17_280).contains(&retry),
            "Retry-After {retry} after {waited} s"
        );
    }
}

#[test]
fn redis_restarted_with_its_aof_keeps_the_limits_and_the_script_reloads() {
    let mut redis = RedisServer::start_with_aof();
    let server = replica(&redis);
    for i in 0..2u64 {
        let r = server.get("/v1/pets", Some(DAILY));
        assert_eq!(x_ratelimit(&r).1, 4 - i);
    }
    // A crash of Redis: the AOF (fsynced on every write) holds the state;
    // the restarted Redis has no scripts (NOSCRIPT, then a reload).
    redis.kill();
    redis.restart();
    wait_until_shared(&server);
    let r = server.get("/v1/pets", Some(DAILY));
    assert_eq!(r.status, 200, "{}", r.describe());
    assert_eq!(x_ratelimit(&r).1, 2, "the day's count went on where it was");
    // Scripts flushed under a running server: EVALSHA meets NOSCRIPT,
    // loads the script and goes on, still in Redis.
    ::redis::cmd("SCRIPT")
        .arg("FLUSH")
        .exec(&mut redis.connection())
        .unwrap();
    let before = redis_answers(&server);
    let r = server.get("/v1/pets", Some(DAILY));
    assert_eq!(r.status, 200, "{}", r.describe());
    assert_eq!(x_ratelimit(&r).1, 1);
    assert_eq!(redis_answers(&server), before + 1);
    assert!(!server.stderr_text().contains("answered 5"));
}

#[test]
fn redis_stopped_each_replica_limits_alone_then_one_limit_again() {
    let mut redis = RedisServer::start();
    let replicas = [replica(&redis), replica(&redis)];
    redis.kill();
    // Redis is gone: no 5xx, and each replica gives the full plan, alone.
    for (n, server) in replicas.iter().enumerate() {
        for i in 0..5u64 {
            let r = server.get("/v1/pets", Some(DAILY));
            assert_eq!(r.status, 200, "replica {n}, request {i}: {}", r.describe());
            assert_eq!(x_ratelimit(&r).1, 4 - i);
        }
        assert_error(&server.get("/v1/pets", Some(DAILY)), 429, "rate_limited");
        assert_eq!(server.get("/healthz", None).status, 200);
        assert!(server.metric("petstore_redis_fallbacks_total") >= 6);
    }
    for server in &replicas {
        // The change of mode is logged once.
        let log = server.stderr_once_logged("each replica limits alone");
        assert_eq!(log.matches("each replica limits alone").count(), 1, "{log}");
    }
    // Redis back (empty: no AOF): one shared limit again, 120 across both.
    redis.restart();
    for server in &replicas {
        wait_until_shared(server);
    }
    for i in 0..PER_DAY {
        let r = replicas[(i % 2) as usize].get("/v1/pets", Some(FREE));
        assert_eq!(r.status, 200, "request {i}: {}", r.describe());
        assert_eq!(x_ratelimit(&r).1, PER_DAY - 1 - i);
    }
    assert_error(
        &replicas[0].get("/v1/pets", Some(FREE)),
        429,
        "rate_limited",
    );
    for server in &replicas {
        server.stderr_once_logged("Redis answers again");
    }
}

/// A PROXY v2 header (as HAProxy's `send-proxy-v2`) naming `client`.
fn proxy_v2(client: [u8; 4]) -> Vec<u8> {
    let mut h = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    h.extend_from_slice(&[0x21, 0x11, 0, 12]);
    h.extend_from_slice(&client);
    h.extend_from_slice(&[127, 0, 0, 1, 0x9c, 0x40, 0x1f, 0x90]);
    h
}

/// One request without a key behind `header`, on a new connection.
fn anonymous_get(server: &Server, header: &[u8]) -> Response {
    let mut bytes = header.to_vec();
    bytes.extend_from_slice(b"GET /v1/pets HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    server.raw(&bytes)
}

fn proxied_replica(redis: &RedisServer, extra: &[&str]) -> Server {
    let mut builder = Server::builder()
        .keys(keys())
        .arg("--redis")
        .arg(redis.url())
        .arg("--redis-timeout")
        .arg(REDIS_TIMEOUT_MS)
        .arg("--proxy-protocol")
        .arg("--access-log");
    for a in extra {
        builder = builder.arg(*a);
    }
    builder.start()
}

#[test]
fn anonymous_limits_hold_across_replicas_by_the_address_of_the_proxy_header() {
    let redis = RedisServer::start();
    let replicas = [proxied_replica(&redis, &[]), proxied_replica(&redis, &[])];
    // 4 a minute per address (`anonymousPerMinute`), shared: v1 and v2
    // headers naming the same client, on alternating replicas.
    for i in 0..4u64 {
        let header = if i % 2 == 0 {
            proxy_v1("203.0.113.5").into_bytes()
        } else {
            proxy_v2([203, 0, 113, 5])
        };
        let r = anonymous_get(&replicas[(i % 2) as usize], &header);
        assert_error(&r, 401, "unauthorized");
        assert_eq!(r.header_u64("x-ratelimit-remaining"), 3 - i, "request {i}");
    }
    for server in &replicas {
        let r = anonymous_get(server, proxy_v1("203.0.113.5").as_bytes());
        assert_error(&r, 429, "rate_limited");
    }
    // Another client behind the same balancer has its own bucket.
    let r = anonymous_get(&replicas[1], &proxy_v2([203, 0, 113, 6]));
    assert_eq!(r.header_u64("x-ratelimit-remaining"), 3);
    // The logs name the client, not the balancer.
    replicas[0].stderr_once_logged(r#""client":"203.0.113.5""#);
}

#[test]
fn with_proxy_protocol_a_connection_without_the_header_is_closed() {
    let redis = RedisServer::start();
    let server = proxied_replica(&redis, &[]);
    let mut conn = server.connect();
    conn.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert!(conn.closed_within(Duration::from_secs(30)));
    assert!(
        conn.buffered().is_empty(),
        "answered without a PROXY header"
    );
    // With one, the same request is answered.
    let mut bytes = proxy_v1("192.0.2.1").into_bytes();
    bytes.extend_from_slice(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(server.raw(&bytes).status, 200);
}

#[test]
fn the_per_address_cap_counts_the_address_of_the_proxy_header() {
    let redis = RedisServer::start();
    let server = proxied_replica(&redis, &["--max-connections-per-address", "1"]);
    let mut held = server.connect();
    held.send(proxy_v1("198.51.100.1").as_bytes()).unwrap();
    // The first connection from 198.51.100.1 is served (keep-alive)...
    held.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert_eq!(held.read_response().status, 200);
    // ...a second one from the same client is closed at once, although
    // every connection comes from 127.0.0.1...
    let mut second = server.connect();
    second.send(proxy_v1("198.51.100.1").as_bytes()).unwrap();
    assert!(second.closed_within(Duration::from_secs(30)));
    // ...and another client is served.
    let mut bytes = proxy_v1("198.51.100.2").into_bytes();
    bytes.extend_from_slice(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(server.raw(&bytes).status, 200);
}

#[test]
fn a_redis_that_does_not_answer_costs_a_request_at_most_its_timeout() {
    let redis = RedisServer::start();
    let server = replica(&redis);
    wait_until_shared(&server);
    redis.signal(true);
    // Stopped: connections are accepted by the kernel, nothing answers.
    // The first request waits out the timeout, the next ones skip
    // Redis (the breaker): all answered, none with a 5xx. Redis stays
    // stopped until all five are answered, so a request that waited for
    // Redis rather than for its timeout would never be answered: the
    // bound on each request only cuts off that hang (the harness's read
    // gives up after IO_TIMEOUT, 10 s, too); how fast a loaded machine
    // answers is a benchmark's question, never a test's verdict.
    for i in 0..5u64 {
        let started = Instant::now();
        let r = server.get("/v1/pets", Some(DAILY));
        assert_eq!(r.status, 200, "request {i}: {}", r.describe());
        assert_eq!(x_ratelimit(&r).1, 4 - i);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "request {i} took {:?}: it waited for the stopped Redis",
            started.elapsed()
        );
    }
    assert!(server.metric("petstore_redis_fallbacks_total") >= 5);
    assert_eq!(server.get("/healthz", None).status, 200);
    redis.signal(false);
    wait_until_shared(&server);
    // The replies that came too late are not taken for later requests'.
    for i in 0..3u64 {
        let r = server.get("/v1/pets", Some(FREE));
        assert_eq!(x_ratelimit(&r).1, PER_DAY - 1 - i);
    }
}

#[test]
fn a_redis_that_may_evict_states_is_warned_about_at_start() {
    // An evicting policy with a memory cap would refill quotas and lift
    // bans under memory pressure, silently: the replica says so.
    let evicting = RedisServer::start();
    let mut c = evicting.connection();
    for (name, value) in [("maxmemory", "64mb"), ("maxmemory-policy", "allkeys-lru")] {
        let _: () = ::redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query(&mut c)
            .unwrap();
    }
    let warned = replica(&evicting);
    assert!(
        wait_until(Duration::from_secs(30), || warned
            .stderr_text()
            .contains("maxmemory-policy allkeys-lru")),
        "{}",
        warned.stderr_text()
    );
    assert!(warned
        .stderr_text()
        .contains("WARNING: Redis has maxmemory"));
    // The default (no cap) is fine, and said to be.
    let fine = RedisServer::start();
    let quiet = replica(&fine);
    assert!(
        wait_until(Duration::from_secs(30), || quiet
            .stderr_text()
            .contains("limiter states are never evicted")),
        "{}",
        quiet.stderr_text()
    );
    assert!(!quiet.stderr_text().contains("WARNING: Redis has maxmemory"));
}

#[test]
fn a_poisoned_state_is_reset_and_takes_no_other_key_off_the_shared_limits() {
    // Something that is not a state written at one's name (a value of
    // another type would fail the script with WRONGTYPE): that state is
    // reset, once and logged with its name; every other state stays
    // shared, rather than one failure sending them all to each replica's
    // own limiter.
    let redis = RedisServer::start();
    let server = replica(&redis);
    let name = format!("{{{}}}:m100000/d{PER_DAY}:v3", sha256_hex(FREE));
    let mut c = redis.connection();
    let _: () = ::redis::cmd("SET")
        .arg(&name)
        .arg("garbage")
        .query(&mut c)
        .unwrap();
    for i in 0..20u64 {
        let r = server.get("/v1/pets", Some(FREE));
        assert_eq!(r.status, 200, "{}", r.describe());
        assert_eq!(
            x_ratelimit(&r).1,
            PER_DAY - 1 - i,
            "the reset state counts from full"
        );
        assert_eq!(server.get("/v1/pets", Some(PROBE)).status, 200);
    }
    assert_eq!(server.metric("petstore_redis_fallbacks_total"), 0);
    assert_eq!(server.metric("petstore_redis_decisions_total"), 40);
    assert_eq!(server.metric("petstore_redis_state_errors_total"), 1);
    let kind: String = ::redis::cmd("TYPE").arg(&name).query(&mut c).unwrap();
    assert_eq!(kind, "string", "the state is the script's again");
    let state: Vec<u8> = ::redis::cmd("GET").arg(&name).query(&mut c).unwrap();
    assert_ne!(state, b"garbage");
    let log = server.stderr_once_logged(&format!("the limiter state {name}"));
    assert_eq!(
        log.matches(&format!("the limiter state {name}")).count(),
        1,
        "{log}"
    );
    assert!(
        !log.contains("each replica limits alone at the full plan"),
        "{log}"
    );
}

#[test]
fn a_ban_redis_reported_holds_while_redis_is_away() {
    // A ban kept only in Redis would be lifted by a stopped Redis: every
    // request of a banned key would be served again. A ban each replica
    // has seen from Redis is remembered by its own limiter.
    let redis = RedisServer::start();
    let (a, b) = (replica(&redis), replica(&redis));
    assert_eq!(a.get("/v1/pets", Some(STRICT)).status, 200);
    for server in [&b, &a, &b] {
        assert_error(&server.get("/v1/pets", Some(STRICT)), 429, "rate_limited");
    }
    for server in [&a, &b] {
        assert_error(&server.get("/v1/pets", Some(STRICT)), 429, "key_banned");
    }
    redis.signal(true);
    for server in [&a, &b] {
        for _ in 0..5 {
            let r = server.get("/v1/pets", Some(STRICT));
            assert_error(&r, 429, "key_banned");
            assert!(r.header_u64("retry-after") <= 600);
        }
        assert!(server.metric("petstore_redis_fallbacks_total") >= 5);
    }
    redis.signal(false);
}

#[test]
fn a_ban_a_replica_started_alone_is_shared_once_redis_is_back() {
    // The other way round: while Redis is away, a replica's own
    // limiter decides, and may start a ban that Redis never saw. Once
    // Redis answers, the ban rides along in that replica's next call, so
    // the other replica enforces it too (it answered 200 before).
    let redis = RedisServer::start();
    let (a, b) = (replica(&redis), replica(&redis));
    wait_until_shared(&a);
    wait_until_shared(&b);
    let shared_before = redis_answers(&a);
    redis.signal(true);
    // perMinute 1, 3 strikes: one allowed, three refusals, then the ban,
    // all decided by `a` alone.
    assert_eq!(a.get("/v1/pets", Some(STRICT)).status, 200);
    for _ in 0..3 {
        assert_error(&a.get("/v1/pets", Some(STRICT)), 429, "rate_limited");
    }
    assert_error(&a.get("/v1/pets", Some(STRICT)), 429, "key_banned");
    assert_eq!(
        redis_answers(&a),
        shared_before,
        "the outage's requests fell back"
    );
    redis.signal(false);
    // `a`'s next call to Redis (the probe key's) carries the ban.
    wait_until_shared(&a);
    wait_until_shared(&b);
    let fallbacks = b.metric("petstore_redis_fallbacks_total");
    let r = b.get("/v1/pets", Some(STRICT));
    assert_error(&r, 429, "key_banned");
    let retry = r.header_u64("retry-after");
    assert!((1..=600).contains(&retry), "Retry-After {retry}");
    assert_eq!(
        b.metric("petstore_redis_fallbacks_total"),
        fallbacks,
        "`b` was told by Redis"
    );
}

/// Writes what the previous version leaves for the free key (`:v2`,
/// text): its day bucket with two tokens left, as of Redis's own `TIME`.
/// Returns the state's name, without a suffix.
fn leave_previous_text_with_two_tokens(c: &mut ::redis::Connection) -> String {
    let (seconds, micros): (String, String) = ::redis::cmd("TIME").query(c).unwrap();
    let now_ms = seconds.parse::<u64>().unwrap() * 1000 + micros.parse::<u64>().unwrap() / 1000;
    let free = format!("{{{}}}:m100000/d{PER_DAY}", sha256_hex(FREE));
    let _: () = ::redis::cmd("SET")
        .arg(format!("{free}:v2"))
        .arg(format!(
            "0:0:{}:0:::",
            now_ms + (PER_DAY - 2) * DAY_TOKEN_SECS * 1000
        ))
        .arg("PX")
        .arg(86_400_000)
        .query(c)
        .unwrap();
    free
}

#[test]
fn a_state_the_previous_version_kept_as_text_is_carried_over_on_deploy() {
    // What the previous version left (`:v2`, text): the free key with two
    // day tokens left. A deploy must not refill it (the ban's carry-over
    // is in the script's differential test and the cluster's test).
    let redis = RedisServer::start();
    let mut c = redis.connection();
    let free = leave_previous_text_with_two_tokens(&mut c);
    let server = replica(&redis);
    let r = server.get("/v1/pets", Some(FREE));
    assert_eq!(r.status, 200, "{}", r.describe());
    assert_eq!(x_ratelimit(&r).1, 1, "two tokens were left, one is taken");
    assert_eq!(server.get("/v1/pets", Some(FREE)).status, 200);
    assert_error(&server.get("/v1/pets", Some(FREE)), 429, "rate_limited");
    assert_eq!(server.metric("petstore_redis_fallbacks_total"), 0);
    // The state is in this version's form now; the text is left as it
    // was, for the previous version's replicas during a rolling deploy.
    let mut names: Vec<String> = ::redis::cmd("KEYS").arg("*").query(&mut c).unwrap();
    names.sort();
    assert_eq!(names, [format!("{free}:v2"), format!("{free}:v3")]);
}

#[test]
fn a_state_decided_lately_but_gone_is_named_again_and_carried_over() {
    // A state this replica decided a moment ago is named alone in its
    // next call (its previous forms are not named). Should it be gone
    // (its TTL ran out) while the previous version's text is there, the
    // script must not decide it as a fresh state: the replica calls
    // again, naming the text, which is carried over.
    let redis = RedisServer::start();
    let mut c = redis.connection();
    let server = replica(&redis);
    let r = server.get("/v1/pets", Some(FREE));
    assert_eq!(r.status, 200, "{}", r.describe());
    assert_eq!(x_ratelimit(&r).1, PER_DAY - 1);
    let calls = redis_calls(&server);
    // The state gone, and the previous version's text left with two day
    // tokens.
    let free = format!("{{{}}}:m100000/d{PER_DAY}", sha256_hex(FREE));
    let _: () = ::redis::cmd("DEL")
        .arg(format!("{free}:v3"))
        .query(&mut c)
        .unwrap();
    leave_previous_text_with_two_tokens(&mut c);
    let r = server.get("/v1/pets", Some(FREE));
    assert_eq!(r.status, 200, "{}", r.describe());
    assert_eq!(x_ratelimit(&r).1, 1, "two tokens were left, one is taken");
    assert_eq!(server.metric("petstore_redis_fallbacks_total"), 0);
    // Two calls when the replica named the state alone (unread, then
    // named again); one if a slow machine let it forget the state first.
    // Either way the text was carried.
    let more = redis_calls(&server) - calls;
    assert!((1..=2).contains(&more), "{more} calls");
    assert_eq!(server.get("/v1/pets", Some(FREE)).status, 200);
    assert_error(&server.get("/v1/pets", Some(FREE)), 429, "rate_limited");
    let exists: bool = ::redis::cmd("EXISTS")
        .arg(format!("{free}:v3"))
        .query(&mut c)
        .unwrap();
    assert!(exists, "the state is in this version's form again");
}
