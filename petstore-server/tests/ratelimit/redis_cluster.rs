//! Replicas sharing one rate limit in a Redis Cluster (`--redis-cluster`):
//! three masters of the harness's own, two server processes. The limit is
//! as exact as on one Redis, bans are shared, the keys spread over every
//! master, a master that dies sends only the keys it holds to each
//! replica's own limiter (no 5xx) until it is back, a state the
//! previous version kept under its key's own hash tag is carried over,
//! and a group whose slot moves to another master keeps its counts.

use crate::common;

use std::time::Duration;

use common::redis::RedisCluster;
use common::*;
use petstore_server::ratelimit::in_redis::{cluster_name, current_name};
use serde_json::{json, Value};

/// Keys of `perDay` 5: seven requests each give five 200s and two 429s.
/// The day binds (a token every 4.8 hours), not a minute of 5 (a token
/// every 12 s, which a slow run of seven requests could see come back):
/// Redis decides on its own `TIME`, with no clock a test could inject.
fn tight(i: usize) -> String {
    format!("cluster-tight-key-{i}")
}

/// Keys with room to spare, for the outage test.
fn roomy(i: usize) -> String {
    format!("cluster-roomy-key-{i}")
}

const BANNED: &str = "cluster-banned-key";
const KEYS: usize = 12;

fn keys() -> Value {
    let mut entries: Vec<Value> = (0..KEYS)
        .map(|i| {
            json!({"name": format!("tight{i}"), "key": tight(i), "plan": "enterprise",
                   "perMinute": 1000, "perDay": 5})
        })
        .collect();
    entries.extend((0..KEYS).map(|i| {
        json!({"name": format!("roomy{i}"), "key": roomy(i), "plan": "enterprise",
               "perMinute": 1000, "perDay": 100_000})
    }));
    entries.push(
        json!({"name": "banned", "key": BANNED, "plan": "enterprise",
                        "perMinute": 1, "perDay": 1000}),
    );
    json!({"keys": entries, "ban": {"strikes": 3, "windowSeconds": 60, "banSeconds": 600}})
}

fn replica(cluster: &RedisCluster) -> Server {
    // A whole second for Redis, not the default 50 ms: a busy machine
    // must not turn a call to a live master into a fallback, which would
    // break the exact counts; a killed master is still given up on.
    Server::builder()
        .keys(keys())
        .arg("--redis-cluster")
        .arg(cluster.urls())
        .arg("--redis-timeout")
        .arg("1000")
        .start()
}

/// The name of a key's state before its group: its SHA-256 as the hash
/// tag, and its quota (where the previous version kept it: `:v2` for the
/// string, without for the hash).
fn own_name(key: &str, per_minute: u32, per_day: u32) -> String {
    format!("{{{}}}:m{per_minute}/d{per_day}", sha256_hex(key))
}

/// The name of a key's state in the cluster: under its group's hash tag,
/// in the script's form.
fn state_name(key: &str, per_minute: u32, per_day: u32) -> String {
    current_name(&cluster_name(&own_name(key, per_minute, per_day)))
}

/// Runs `command` on the master that holds `name`'s slot (the others
/// answer MOVED).
fn on_owner(cluster: &RedisCluster, name: &str, command: &::redis::Cmd) {
    let done = cluster.nodes.iter().any(|node| {
        let mut c = node.connection();
        command.exec(&mut c).is_ok()
    });
    assert!(done, "no master took {name}");
}

fn remaining(resp: &Response) -> u64 {
    resp.header("x-ratelimit-remaining")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no X-RateLimit-Remaining: {}", resp.describe()))
}

#[test]
fn one_exact_limit_across_two_replicas_with_bans_shared_and_keys_on_every_master() {
    let cluster = RedisCluster::start();
    let (a, b) = (replica(&cluster), replica(&cluster));
    for i in 0..KEYS {
        let key = tight(i);
        let mut allowed = Vec::new();
        let mut refused = 0;
        for n in 0..7 {
            let server = if n % 2 == 0 { &a } else { &b };
            let resp = server.get("/v1/pets", Some(&key));
            match resp.status {
                200 => allowed.push(remaining(&resp)),
                429 => {
                    assert_error(&resp, 429, "rate_limited");
                    refused += 1;
                }
                _ => panic!("{key}: {}", resp.describe()),
            }
        }
        // Five tokens for both replicas together, in the order asked.
        assert_eq!(allowed, [4, 3, 2, 1, 0], "{key}");
        assert_eq!(refused, 2, "{key}");
    }
    // Every decision was Redis's: no replica fell back to its own.
    for server in [&a, &b] {
        assert_eq!(server.metric("petstore_redis_fallbacks_total"), 0);
        assert!(server.metric("petstore_redis_decisions_total") > 0);
    }
    // The states spread over every master.
    for i in 0..3 {
        assert!(cluster.keys_on(i) > 0, "master {i} holds no state");
    }
    for i in 0..KEYS {
        assert!(
            cluster
                .node_holding(&state_name(&tight(i), 1000, 5))
                .is_some(),
            "no master holds the state of {}",
            tight(i)
        );
    }

    // A ban started through one replica holds on the other.
    assert_eq!(a.get("/v1/pets", Some(BANNED)).status, 200);
    for server in [&a, &b, &a] {
        let resp = server.get("/v1/pets", Some(BANNED));
        assert_eq!(resp.status, 429, "{}", resp.describe());
    }
    for server in [&b, &a] {
        let resp = server.get("/v1/pets", Some(BANNED));
        assert_error(&resp, 429, "key_banned");
    }
}

#[test]
fn a_dead_master_sends_only_its_keys_to_each_replicas_own_limits_until_it_is_back() {
    let mut cluster = RedisCluster::start();
    let (a, b) = (replica(&cluster), replica(&cluster));
    // One request of every key through A, decided in Redis: 999 left.
    for i in 0..KEYS {
        let resp = a.get("/v1/pets", Some(&roomy(i)));
        assert_eq!(resp.status, 200, "{}", resp.describe());
        assert_eq!(remaining(&resp), 999);
    }
    let holder = |i: usize| {
        cluster
            .node_holding(&state_name(&roomy(i), 1000, 100_000))
            .unwrap_or_else(|| panic!("no master holds {}", roomy(i)))
    };
    let (dead, alive): (Vec<usize>, Vec<usize>) = (0..KEYS).partition(|i| holder(*i) == 0);
    assert!(!dead.is_empty() && !alive.is_empty(), "{dead:?} {alive:?}");

    cluster.nodes[0].kill();
    // Each round asks the dead master's keys first (their breakers open),
    // then the living masters' keys. Once the cluster client has noticed
    // the dead node (a topology refresh can hold every call for a moment,
    // and on a busy machine a call can miss the 50 ms timeout), each round
    // decides exactly the living keys in Redis and exactly the dead keys
    // alone. Three such rounds in a row are asked for: with one breaker
    // for all of Redis a round can only come out so when the breaker's
    // probe happens to fall on the first living key, and the next round's
    // dead keys open it again for the living ones behind them. Never a
    // 5xx meanwhile.
    const DECISIONS: &str = "petstore_redis_decisions_total";
    const FALLBACKS: &str = "petstore_redis_fallbacks_total";
    let (mut rounds, mut in_a_row) = (0, 0);
    let split = wait_until(Duration::from_secs(60), || {
        rounds += 1;
        let (decided, alone) = (b.metric(DECISIONS), b.metric(FALLBACKS));
        for &i in dead.iter().chain(&alive) {
            let resp = b.get("/v1/pets", Some(&roomy(i)));
            assert_eq!(resp.status, 200, "{}", resp.describe());
        }
        let good = b.metric(DECISIONS) - decided == alive.len() as u64
            && b.metric(FALLBACKS) - alone == dead.len() as u64;
        in_a_row = if good { in_a_row + 1 } else { 0 };
        in_a_row == 3
    });
    assert!(
        split,
        "after {rounds} rounds, the keys of the living masters were still not all shared \
         while the dead master's fell back"
    );
    // The fallback's line names the real cause: the dead master cannot
    // be reached, not the redirect to it that the cluster client gave up on.
    let dead_node = format!("127.0.0.1:{}", cluster.nodes[0].port());
    let named = format!("the cluster node {dead_node} cannot be reached (Connection refused");
    let log = b.stderr_once_logged(&named);
    for line in log
        .lines()
        .filter(|l| l.contains("each replica limits alone"))
    {
        assert!(
            !line.contains("Redis: Moved"),
            "a fallback line blames the redirect:\n{line}"
        );
    }

    // Back (same port, same nodes.conf): its keys are shared again once
    // the breaker lets a probe through.
    cluster.nodes[0].restart();
    cluster.wait_ok(0);
    let key = roomy(dead[0]);
    let shared_again = wait_until(Duration::from_secs(30), || {
        let before = b.metric("petstore_redis_decisions_total");
        let resp = b.get("/v1/pets", Some(&key));
        assert_eq!(resp.status, 200, "{}", resp.describe());
        b.metric("petstore_redis_decisions_total") > before
    });
    assert!(shared_again, "{key} was never decided in Redis again");
}

#[test]
fn a_state_where_the_previous_version_kept_it_is_carried_over_never_refilled_or_lifted() {
    let cluster = RedisCluster::start();
    let (seconds, micros): (String, String) = ::redis::cmd("TIME")
        .query(&mut cluster.nodes[0].connection())
        .unwrap();
    let now_ms = seconds.parse::<u64>().unwrap() * 1000 + micros.parse::<u64>().unwrap() / 1000;
    // The previous version's text form (`:v2`), for a day.
    let set_text = |name: &str, text: String| {
        let mut set = ::redis::cmd("SET");
        set.arg(format!("{name}:v2"))
            .arg(text)
            .arg("PX")
            .arg(86_400_000u64);
        on_owner(&cluster, name, &set);
    };
    // As the previous version left them, each under its key's own hash
    // tag (another slot than its group's): tight0's day spent, in the
    // text form; tight1 with one token of five left, in the hash form
    // of the version before; the banned key banned for ten minutes.
    let spent = own_name(&tight(0), 1000, 5);
    set_text(&spent, format!("0:0:{}:0:::", now_ms + 86_400_000));
    let one_left = own_name(&tight(1), 1000, 5);
    let mut hset = ::redis::cmd("HSET");
    hset.arg(&one_left)
        .arg("mm")
        .arg(0)
        .arg("mf")
        .arg(0)
        .arg("dm")
        .arg(now_ms + 4 * 17_280_000)
        .arg("df")
        .arg(0)
        .arg("r")
        .arg("");
    on_owner(&cluster, &one_left, &hset);
    set_text(
        &own_name(BANNED, 1, 1000),
        format!("0:0:0:0:{}::", now_ms + 600_000),
    );

    let (a, b) = (replica(&cluster), replica(&cluster));
    let resp = a.get("/v1/pets", Some(&tight(0)));
    assert_error(&resp, 429, "rate_limited");
    let resp = a.get("/v1/pets", Some(&tight(1)));
    assert_eq!(resp.status, 200, "{}", resp.describe());
    assert_eq!(remaining(&resp), 0);
    assert_error(&b.get("/v1/pets", Some(&tight(1))), 429, "rate_limited");
    assert_error(&b.get("/v1/pets", Some(BANNED)), 429, "key_banned");
    // A key the previous version never saw starts afresh.
    let resp = b.get("/v1/pets", Some(&tight(2)));
    assert_eq!(resp.status, 200, "{}", resp.describe());
    assert_eq!(remaining(&resp), 4);
    // Each state now lives under its group's tag; the previous forms are
    // left as they were (a replica of the previous version, during a
    // rolling deploy, goes on with them).
    for (key, quota) in [(tight(1), (1000, 5)), (tight(2), (1000, 5))] {
        assert!(
            cluster
                .node_holding(&state_name(&key, quota.0, quota.1))
                .is_some(),
            "{key}"
        );
    }
    assert!(cluster.node_holding(&format!("{spent}:v2")).is_some());
    assert!(cluster.node_holding(&one_left).is_some());
    for server in [&a, &b] {
        assert_eq!(server.metric("petstore_redis_fallbacks_total"), 0);
    }
}

/// The master whose slots hold `name` (the others answer MOVED).
fn owner_of(cluster: &RedisCluster, name: &str) -> usize {
    (0..cluster.nodes.len())
        .find(|i| {
            ::redis::cmd("EXISTS")
                .arg(name)
                .query::<u64>(&mut cluster.nodes[*i].connection())
                .is_ok()
        })
        .unwrap_or_else(|| panic!("no master owns {name}"))
}

#[test]
fn a_dead_master_holding_only_a_states_previous_form_sends_that_state_to_the_replicas_own_limits() {
    let mut cluster = RedisCluster::start();
    let a = replica(&cluster);
    // A key whose previous form's slot is on another master than its
    // group's, and a key with both on the living masters.
    let home = |i: usize| owner_of(&cluster, &own_name(&roomy(i), 1000, 100_000));
    let group = |i: usize| owner_of(&cluster, &state_name(&roomy(i), 1000, 100_000));
    let split = (0..KEYS)
        .find(|i| home(*i) != group(*i))
        .expect("a key whose two slots are on two masters");
    let (dead, living) = (home(split), group(split));
    let whole = (0..KEYS)
        .find(|i| home(*i) != dead && group(*i) != dead)
        .expect("a key away from the dead master");
    cluster.nodes[dead].kill();

    // Never a 5xx: the state whose previous form cannot be read is
    // limited by the replica alone (it must not start afresh in Redis,
    // or the deploy would refill it)...
    let fallbacks = a.metric("petstore_redis_fallbacks_total");
    for _ in 0..5 {
        let resp = a.get("/v1/pets", Some(&roomy(split)));
        assert_eq!(resp.status, 200, "{}", resp.describe());
    }
    assert_eq!(a.metric("petstore_redis_fallbacks_total"), fallbacks + 5);
    a.stderr_once_logged("reading a limiter state's previous form");
    // ...while a state away from the dead master stays shared. (Once the
    // cluster client has noticed the dead node: a topology refresh can
    // hold a call for a moment.)
    let shared = wait_until(Duration::from_secs(60), || {
        let decided = a.metric("petstore_redis_decisions_total");
        let resp = a.get("/v1/pets", Some(&roomy(whole)));
        assert_eq!(resp.status, 200, "{}", resp.describe());
        a.metric("petstore_redis_decisions_total") > decided
    });
    assert!(shared, "{} was never decided in Redis", roomy(whole));
    // Nothing was written for it under its group.
    let written: u64 = ::redis::cmd("EXISTS")
        .arg(state_name(&roomy(split), 1000, 100_000))
        .query(&mut cluster.nodes[living].connection())
        .unwrap();
    assert_eq!(written, 0);
}

/// A key for the move test: five a day, as the tight keys.
const MOVING: &str = "cluster-moving-key";

/// Moves hash slot `slot` from master `from` to master `to` as
/// `redis-cli --cluster reshard` does: importing and migrating, its keys
/// migrated, then every master told its new owner.
fn move_slot(cluster: &RedisCluster, slot: u64, from: usize, to: usize) {
    let run = |i: usize, command: &mut ::redis::Cmd| -> ::redis::Value {
        command
            .query(&mut cluster.nodes[i].connection())
            .unwrap_or_else(|e| panic!("master {i}: {e}"))
    };
    let id = |i: usize| -> String {
        ::redis::cmd("CLUSTER")
            .arg("MYID")
            .query(&mut cluster.nodes[i].connection())
            .expect("CLUSTER MYID")
    };
    let (from_id, to_id) = (id(from), id(to));
    run(
        to,
        ::redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg("IMPORTING")
            .arg(&from_id),
    );
    run(
        from,
        ::redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg("MIGRATING")
            .arg(&to_id),
    );
    loop {
        let keys: Vec<String> = ::redis::cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(slot)
            .arg(100)
            .query(&mut cluster.nodes[from].connection())
            .expect("CLUSTER GETKEYSINSLOT");
        if keys.is_empty() {
            break;
        }
        run(
            from,
            ::redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(cluster.nodes[to].port())
                .arg("")
                .arg(0)
                .arg(5000)
                .arg("KEYS")
                .arg(&keys),
        );
    }
    for i in [to, from, 3 - to - from] {
        run(
            i,
            ::redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg("NODE")
                .arg(&to_id),
        );
    }
}

/// A group's slot that moves to another master under a running replica
/// (a reshard): the master it left answers MOVED, the cluster client
/// follows it, and the counts go on where they were, every request
/// still decided in Redis.
#[test]
fn a_group_that_moves_to_another_master_keeps_its_exact_counts() {
    let cluster = RedisCluster::start();
    let mut keys = keys();
    keys["keys"].as_array_mut().unwrap().push(
        json!({"name": "moving", "key": MOVING, "plan": "enterprise", "perMinute": 1000, "perDay": 5}),
    );
    let a = Server::builder()
        .keys(keys)
        .arg("--redis-cluster")
        .arg(cluster.urls())
        .arg("--redis-timeout")
        .arg("1000")
        .start();
    for expected in [4, 3] {
        assert_eq!(remaining(&a.get("/v1/pets", Some(MOVING))), expected);
    }
    let name = state_name(MOVING, 1000, 5);
    let from = cluster
        .node_holding(&name)
        .expect("a master holds the moving key's state");
    let slot: u64 = ::redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(&name)
        .query(&mut cluster.nodes[0].connection())
        .expect("CLUSTER KEYSLOT");
    let to = (from + 1) % 3;
    move_slot(&cluster, slot, from, to);
    assert_eq!(cluster.node_holding(&name), Some(to));
    for expected in [2, 1, 0] {
        assert_eq!(remaining(&a.get("/v1/pets", Some(MOVING))), expected);
    }
    assert_error(&a.get("/v1/pets", Some(MOVING)), 429, "rate_limited");
    // Redis decided every request, the moved group's included.
    assert_eq!(a.metric("petstore_redis_fallbacks_total"), 0);
    assert!(a.metric("petstore_redis_decisions_total") >= 6);
    assert_eq!(cluster.node_holding(&name), Some(to));
}
