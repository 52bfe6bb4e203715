//! Long-poll followers of the feed of events (beta), for
//! `scripts/bench/events`: `--waiters N` requests each wait on
//! `GET /v1/events?after=...&wait=30`, following their next link. Two
//! modes:
//!
//! - `--hold SECS`: keep them waiting that long, then exit (the script
//!   measures the server's CPU and the lists' throughput meanwhile).
//! - `--commits M`: once all are waiting (`petstore_event_waiters` in
//!   `/metrics` of `--metrics`), create M pets through `--write` (another
//!   replica's address, or the same server), one at a time, and time from
//!   each 201 to each waiter's answer holding that pet's event; print
//!   p50, p99 and the largest in milliseconds.
//!
//! With `--stream`, each follower holds a stream of events (`Accept:
//! text/event-stream`) instead of long polls: the same two modes.
//!
//! Run: `cargo run --release -p petstore-server --example waiters -- --base http://127.0.0.1:8080/v1 --key KEY --waiters 1000 --commits 50`

use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use parking_lot::Mutex;
use serde_json::Value;

type BoxError = Box<dyn Error + Send + Sync>;
type Http = Client<HttpConnector, Full<Bytes>>;

#[derive(Debug, Parser)]
struct Args {
    /// Where the waiters wait, including `/v1`.
    #[arg(long)]
    base: String,
    /// Where the pets are created (default: `--base`).
    #[arg(long)]
    write: Option<String>,
    /// Where `/metrics` is (default: `--base` without `/v1`).
    #[arg(long)]
    metrics: Option<String>,
    #[arg(long)]
    key: String,
    #[arg(long, default_value_t = 1000)]
    waiters: usize,
    /// Hold the waiters this many seconds, then exit.
    #[arg(long)]
    hold: Option<u64>,
    /// Create this many pets, one at a time, and time their events.
    #[arg(long, default_value_t = 0)]
    commits: usize,
    /// Follow with streams of events (Server-Sent Events), not long polls.
    #[arg(long)]
    stream: bool,
}

/// When each waiter got each pet's event: `(pet id, arrival)`.
type Arrivals = Arc<Mutex<Vec<(u64, Instant)>>>;

async fn send(
    http: &Http,
    method: Method,
    uri: &str,
    key: &str,
    body: Option<String>,
) -> Result<(StatusCode, hyper::HeaderMap, Bytes), BoxError> {
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .header("authorization", format!("Bearer {key}"));
    if body.is_some() {
        request = request.header("content-type", "application/json");
    }
    let request = request.body(Full::new(Bytes::from(body.unwrap_or_default())))?;
    let response = http.request(request).await?;
    let (parts, body) = response.into_parts();
    Ok((
        parts.status,
        parts.headers,
        body.collect().await?.to_bytes(),
    ))
}

/// One follower, for ever: long polls from `after`, noting each created
/// pet's arrival. The cursor comes from the next link and the pets' ids
/// from a scan of the body, not a JSON parse: what this client spends per
/// answer is time on the same cores as the server, and in the figure.
async fn follow(http: Http, base: String, key: String, mut after: String, arrivals: Arrivals) {
    loop {
        let uri = format!("{base}/events?after={after}&limit=1000&wait=30");
        let Ok((status, headers, body)) = send(&http, Method::GET, &uri, &key, None).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let arrived = Instant::now();
        if status != StatusCode::OK {
            eprintln!("GET {uri}: {status}");
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        let ids = created_ids(&body);
        arrivals
            .lock()
            .extend(ids.into_iter().map(|id| (id, arrived)));
        if let Some(next) = headers
            .get("link")
            .and_then(|v| v.to_str().ok())
            .and_then(|link| link.split("after=").nth(1))
            .and_then(|rest| rest.split('>').next())
        {
            after = next.to_owned();
        }
    }
}

/// The ids of the pets created in `body` (events' JSON, a page or a
/// stream's chunk), by a scan.
fn created_ids(body: &[u8]) -> Vec<u64> {
    const CREATED: &[u8] = br#""type":"pet.created","at":""#;
    const DATA_ID: &[u8] = br#""data":{"id":"#;
    let mut rest = body;
    let mut ids = Vec::new();
    while let Some(at) = find(rest, CREATED) {
        rest = &rest[at + CREATED.len()..];
        if let Some(at) = find(rest, DATA_ID) {
            rest = &rest[at + DATA_ID.len()..];
            let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
            if let Some(id) = std::str::from_utf8(&rest[..digits])
                .ok()
                .and_then(|d| d.parse().ok())
            {
                ids.push(id);
            }
        }
    }
    ids
}

/// One follower on a stream of events, for ever (opened again if it
/// ends), noting each created pet's arrival as its chunk comes.
async fn stream(http: Http, base: String, key: String, after: String, arrivals: Arrivals) {
    loop {
        let request = Request::get(format!("{base}/events?after={after}"))
            .header("authorization", format!("Bearer {key}"))
            .header("accept", "text/event-stream")
            .body(Full::new(Bytes::new()));
        let Ok(request) = request else { return };
        let Ok(response) = http.request(request).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        if response.status() != StatusCode::OK {
            eprintln!("stream: {}", response.status());
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        let mut body = response.into_body();
        while let Some(Ok(frame)) = body.frame().await {
            let arrived = Instant::now();
            if let Some(data) = frame.data_ref() {
                arrivals
                    .lock()
                    .extend(created_ids(data).into_iter().map(|id| (id, arrived)));
            }
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

async fn metric(http: &Http, url: &str, name: &str) -> Result<u64, BoxError> {
    let (_, _, body) = send(http, Method::GET, url, "", None).await?;
    let text = String::from_utf8_lossy(&body);
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0))
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args = Args::parse();
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let http: Http = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(args.waiters + 16)
        .build(connector);
    let metrics = args
        .metrics
        .clone()
        .unwrap_or_else(|| format!("{}/metrics", args.base.trim_end_matches("/v1")));
    // Where the feed stands now: the waiters follow from there.
    let (_, headers, _) = send(
        &http,
        Method::GET,
        &format!("{}/pets?limit=1", args.base),
        &args.key,
        None,
    )
    .await?;
    let cursor = headers
        .get("events-cursor")
        .and_then(|v| v.to_str().ok())
        .ok_or("no Events-Cursor on the list")?
        .to_owned();
    let arrivals: Arrivals = Arc::default();
    for _ in 0..args.waiters {
        let (http, base, key) = (http.clone(), args.base.clone(), args.key.clone());
        let (cursor, arrivals) = (cursor.clone(), Arc::clone(&arrivals));
        if args.stream {
            tokio::spawn(stream(http, base, key, cursor, arrivals));
        } else {
            tokio::spawn(follow(http, base, key, cursor, arrivals));
        }
    }
    let started = Instant::now();
    while metric(&http, &metrics, "petstore_event_waiters").await? < args.waiters as u64 {
        if started.elapsed() > Duration::from_secs(60) {
            return Err("the waiters did not all wait within 60 s".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("{} waiters waiting", args.waiters);
    if let Some(secs) = args.hold {
        tokio::time::sleep(Duration::from_secs(secs)).await;
        return Ok(());
    }
    let write = args.write.clone().unwrap_or_else(|| args.base.clone());
    let mut latencies = Vec::with_capacity(args.commits * args.waiters);
    for i in 0..args.commits {
        let body = format!(r#"{{"name":"waited-{i}","categoryId":1}}"#);
        let (status, _, created) = send(
            &http,
            Method::POST,
            &format!("{write}/pets"),
            &args.key,
            Some(body),
        )
        .await?;
        let acknowledged = Instant::now();
        if status != StatusCode::CREATED {
            return Err(format!("POST: {status}").into());
        }
        let pet: Value = serde_json::from_slice(&created)?;
        let id = pet["id"].as_u64().ok_or("no id")?;
        // Every waiter's answer for this pet, then the next commit.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let got: Vec<Instant> = arrivals
                .lock()
                .iter()
                .filter(|(p, _)| *p == id)
                .map(|(_, at)| *at)
                .collect();
            if got.len() >= args.waiters {
                latencies.extend(
                    got.iter()
                        .map(|at| at.saturating_duration_since(acknowledged)),
                );
                break;
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "pet {id}: {} of {} waiters answered within 30 s",
                    got.len(),
                    args.waiters
                )
                .into());
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        // The waiters wait again before the next commit.
        while metric(&http, &metrics, "petstore_event_waiters").await? < args.waiters as u64 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    latencies.sort();
    println!(
        "commit-to-follower ms over {} answers: p50 {:.2} p99 {:.2} max {:.2}",
        latencies.len(),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        percentile(&latencies, 1.0)
    );
    Ok(())
}
