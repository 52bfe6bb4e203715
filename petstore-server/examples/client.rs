//! A small, well-behaved client of the petstore HTTP API, on hyper's client
//! (`hyper_util::client::legacy::Client` over plain HTTP): it creates
//! `--create` pets, each `POST` with an `Idempotency-Key`, then lists every
//! pet by following `Link: rel="next"`, then (with `--sell`) sells the
//! first available pet it created as an order (beta): placed, then
//! completed; with `--follow N`, follows the feed of events (beta) from the
//! list's `Events-Cursor` with long polls until it has seen N events,
//! printing each (a 410 makes it list again and follow from there); and
//! prints a summary. It retries
//! with jittered exponential backoff, never sooner than `Retry-After`, and
//! stops at a `429 key_banned`.
//!
//! Run: `cargo run -p petstore-server --example client -- --base http://127.0.0.1:8080/v1 --key KEY [--create N] [--page-size N] [--sell] [--follow N]`
//! (the key may instead come from `PETSTORE_API_KEY`). What it checks, what
//! it retries and why: docs/contract.md, "A client that retries well".

use std::error::Error;
use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::header::{
    HeaderMap, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, LINK, RETRY_AFTER,
};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

type BoxError = Box<dyn Error + Send + Sync>;

/// First step of the exponential backoff.
const BACKOFF_BASE: Duration = Duration::from_millis(250);
/// Largest jittered backoff (a `Retry-After` may ask for more).
const BACKOFF_CAP: Duration = Duration::from_secs(30);
/// How long one request (connect, send, read the whole answer) may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Most pages followed, against a server whose `next` links never end.
const MAX_PAGES: usize = 1_000_000;

/// Command-line flags.
#[derive(Debug, Parser)]
#[command(name = "client", about = "A well-behaved client of the petstore API")]
struct Args {
    /// Base address including `/v1`, e.g. `http://127.0.0.1:8080/v1`
    /// (plain HTTP only).
    #[arg(long)]
    base: String,

    /// The API key, sent as `Authorization: Bearer KEY`.
    #[arg(long, env = "PETSTORE_API_KEY", hide_env_values = true)]
    key: String,

    /// How many pets to create before listing.
    #[arg(long, default_value_t = 0)]
    create: u64,

    /// The `limit` of each page of the listing (1 to 100).
    #[arg(long = "page-size", default_value_t = 20,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    page_size: u32,

    /// After listing, sell one created pet as an order: place it, then
    /// complete it (beta; a single server keeps orders).
    #[arg(long)]
    sell: bool,
    /// After listing (and selling), follow the feed of events (beta)
    /// from the list's `Events-Cursor` until this many events arrived.
    #[arg(long, default_value_t = 0)]
    follow: u64,

    /// Tries of one request (the first and its retries after 429) before
    /// giving up.
    #[arg(long = "max-attempts", default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    max_attempts: u32,

    /// Longest single wait accepted; a `Retry-After` asking for more makes
    /// the client give up instead of sleeping.
    #[arg(long = "max-wait-secs", default_value_t = 120)]
    max_wait_secs: u64,
}

/// What happened, for the summary.
#[derive(Debug, Default)]
struct Stats {
    created: u64,
    listed: u64,
    /// Orders placed and completed.
    sold: u64,
    /// Events of the feed followed.
    followed: u64,
    rate_limited: u64,
    /// Tries after the first, for any reason.
    retries: u64,
    /// Answers that were a kept answer replayed (`Idempotent-Replayed`).
    replayed: u64,
    waited: Duration,
}

/// One complete response.
#[derive(Debug)]
struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Reply {
    /// `code: message` of an Error body, or the start of the body as text.
    fn describe_error(&self) -> String {
        match serde_json::from_slice::<Value>(&self.body) {
            Ok(v) if v.get("code").is_some() => format!(
                "{} ({})",
                v.get("code").and_then(Value::as_str).unwrap_or("?"),
                v.get("message").and_then(Value::as_str).unwrap_or("")
            ),
            _ => {
                let text = String::from_utf8_lossy(&self.body);
                let text: String = text.chars().take(200).collect();
                format!("body {text:?}")
            }
        }
    }

    /// The `code` of an Error body, if the body is one.
    fn error_code(&self) -> Option<String> {
        let v: Value = serde_json::from_slice(&self.body).ok()?;
        Some(v.get("code")?.as_str()?.to_owned())
    }
}

/// A xorshift64* generator, seeded from the OS (or the clock if the OS has
/// no randomness to give): jitter needs to differ between clients, not to
/// be unpredictable.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        let seed = getrandom::u64().unwrap_or_else(|_| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0x9E37_79B9_7F4A_7C15)
        });
        Rng(seed | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `[0, max]`.
    fn duration_up_to(&mut self, max: Duration) -> Duration {
        let nanos = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(self.next() % nanos.saturating_add(1))
    }
}

/// The API, one key, and the retry state.
struct Api {
    http: Client<HttpConnector, Full<Bytes>>,
    /// `http://host:port`, the origin every request must go to.
    origin: String,
    /// The base address including `/v1`, without a trailing slash.
    base: String,
    authorization: HeaderValue,
    max_attempts: u32,
    max_wait: Duration,
    /// Retried answers in a row since the last other answer: the backoff
    /// exponent.
    streak: u32,
    rng: Rng,
    stats: Stats,
}

impl Api {
    fn new(args: &Args) -> Result<Api, BoxError> {
        let base = args.base.trim_end_matches('/').to_owned();
        let uri: Uri = base
            .parse()
            .map_err(|e| format!("--base {base:?} is not a URL: {e}"))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some(other) => {
                return Err(format!(
                    "--base {base:?}: scheme {other:?} is not supported (plain http only)"
                )
                .into())
            }
            None => return Err(format!("--base {base:?} has no scheme (http://...)").into()),
        }
        if uri.query().is_some() {
            return Err(format!("--base {base:?} must not have a query").into());
        }
        let authority = uri
            .authority()
            .ok_or_else(|| format!("--base {base:?} has no host"))?;
        let origin = format!("http://{authority}");
        let mut authorization = HeaderValue::from_str(&format!("Bearer {}", args.key))
            .map_err(|_| "--key holds characters a header cannot carry")?;
        authorization.set_sensitive(true);
        Ok(Api {
            http: Client::builder(TokioExecutor::new()).build(HttpConnector::new()),
            origin,
            base,
            authorization,
            max_attempts: args.max_attempts,
            max_wait: Duration::from_secs(args.max_wait_secs),
            streak: 0,
            rng: Rng::new(),
            stats: Stats::default(),
        })
    }

    /// A new `Idempotency-Key`: 128 random bits in hex.
    fn new_idempotency_key(&mut self) -> HeaderValue {
        let key = format!("{:016x}{:016x}", self.rng.next(), self.rng.next());
        HeaderValue::from_str(&key).unwrap_or(HeaderValue::from_static("0"))
    }

    /// One exchange, no retry.
    async fn send_once(
        &self,
        method: &Method,
        uri: &Uri,
        body: Option<&Bytes>,
        idempotency_key: Option<&HeaderValue>,
    ) -> Result<Reply, BoxError> {
        let mut request = Request::builder()
            .method(method.clone())
            .uri(uri.clone())
            .header(AUTHORIZATION, self.authorization.clone())
            .header(ACCEPT, "application/json");
        if body.is_some() {
            request = request.header(CONTENT_TYPE, "application/json");
        }
        if let Some(key) = idempotency_key {
            request = request.header("idempotency-key", key.clone());
        }
        let request = request.body(Full::new(body.cloned().unwrap_or_default()))?;
        let exchange = async {
            let response = self.http.request(request).await?;
            let (parts, body) = response.into_parts();
            let body = body.collect().await?.to_bytes();
            Ok::<_, BoxError>(Reply {
                status: parts.status,
                headers: parts.headers,
                body,
            })
        };
        match tokio::time::timeout(REQUEST_TIMEOUT, exchange).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(e)) => Err(format!("{method} {uri}: {e}").into()),
            Err(_) => {
                Err(format!("{method} {uri}: no complete answer within {REQUEST_TIMEOUT:?}").into())
            }
        }
    }

    /// One request, retried as docs/contract.md, "A client that retries
    /// well", says. Returns the first answer that is not to be retried. A
    /// `POST` gets a new `Idempotency-Key`, sent again with each of its
    /// retries: without one a `POST` whose answer was lost could not be
    /// retried safely.
    async fn send(
        &mut self,
        method: Method,
        uri: &Uri,
        body: Option<Bytes>,
    ) -> Result<Reply, BoxError> {
        let key = (method == Method::POST).then(|| self.new_idempotency_key());
        let mut attempt = 0;
        loop {
            attempt += 1;
            let sent = self
                .send_once(&method, uri, body.as_ref(), key.as_ref())
                .await;
            let (shown, floor) = match &sent {
                Ok(reply) => {
                    let Some(why) = retried(reply) else {
                        self.streak = 0;
                        if reply
                            .headers
                            .get("idempotent-replayed")
                            .map(HeaderValue::as_bytes)
                            == Some(b"true")
                        {
                            self.stats.replayed += 1;
                        }
                        return sent;
                    };
                    if reply.status == StatusCode::TOO_MANY_REQUESTS {
                        self.stats.rate_limited += 1;
                    }
                    let retry_after = retry_after(&reply.headers);
                    let shown = match &retry_after {
                        Some(Ok(d)) => format!("{why} with Retry-After {} s", d.as_secs_f64()),
                        Some(Err(raw)) => format!("{why} with unreadable Retry-After {raw:?}"),
                        None => format!("{why}, no Retry-After"),
                    };
                    if reply.error_code().as_deref() == Some("key_banned") {
                        return Err(format!(
                            "{method} {uri}: {shown}: the key is banned; stopping"
                        )
                        .into());
                    }
                    (shown, retry_after.and_then(Result::ok).unwrap_or_default())
                }
                // No complete answer: the request may or may not have been
                // carried out; the key makes trying again safe.
                Err(e) => (format!("no answer ({e})"), Duration::ZERO),
            };
            if attempt >= self.max_attempts {
                return Err(format!(
                    "{method} {uri}: still {shown} after {attempt} attempts; giving up"
                )
                .into());
            }
            // Full jitter: uniform in [0, min(cap, base * 2^streak)].
            let ceiling = BACKOFF_BASE
                .saturating_mul(1u32 << self.streak.min(20))
                .min(BACKOFF_CAP);
            self.streak = self.streak.saturating_add(1);
            let jittered = self.rng.duration_up_to(ceiling);
            let wait = floor.max(jittered);
            if wait > self.max_wait {
                return Err(format!(
                    "{method} {uri}: {shown}: waiting {:.3} s is more than --max-wait-secs {}; giving up",
                    wait.as_secs_f64(),
                    self.max_wait.as_secs()
                )
                .into());
            }
            eprintln!(
                "{shown} on {method} {uri}; waiting {:.3} s before attempt {}/{}",
                wait.as_secs_f64(),
                attempt + 1,
                self.max_attempts
            );
            tokio::time::sleep(wait).await;
            self.stats.waited += wait;
            self.stats.retries += 1;
        }
    }

    /// `POST /pets`; returns the new pet's id.
    async fn create(
        &mut self,
        name: &str,
        category_id: u64,
        status: &str,
    ) -> Result<u64, BoxError> {
        let uri: Uri = format!("{}/pets", self.base).parse()?;
        let body = json!({"name": name, "categoryId": category_id, "status": status});
        let reply = self
            .send(Method::POST, &uri, Some(Bytes::from(body.to_string())))
            .await?;
        if reply.status != StatusCode::CREATED {
            return Err(format!(
                "POST {uri}: expected 201, got {}: {}",
                reply.status,
                reply.describe_error()
            )
            .into());
        }
        let pet: Value = serde_json::from_slice(&reply.body)
            .map_err(|e| format!("POST {uri}: the 201 body is not JSON: {e}"))?;
        let id = pet
            .get("id")
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("POST {uri}: the 201 body has no integer id: {pet}"))?;
        if pet.get("name").and_then(Value::as_str) != Some(name) {
            return Err(format!("POST {uri}: sent name {name:?}, the 201 body says {pet}").into());
        }
        Ok(id)
    }

    /// A sale as an order: `POST /store/orders` for pet `id` (201, the
    /// order `placed`), then `POST /store/orders/{orderId}/complete` (200,
    /// `completed`). Both carry an `Idempotency-Key`, as every POST here,
    /// so a retry never places a second order.
    async fn sell(&mut self, id: u64) -> Result<(), BoxError> {
        let uri: Uri = format!("{}/store/orders", self.base).parse()?;
        let body = json!({ "petId": id });
        let reply = self
            .send(Method::POST, &uri, Some(Bytes::from(body.to_string())))
            .await?;
        let order = expect_order(&uri, &reply, StatusCode::CREATED, "placed")?;
        let order_id = order
            .get("id")
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("POST {uri}: the order has no integer id: {order}"))?;
        let uri: Uri = format!("{}/store/orders/{order_id}/complete", self.base).parse()?;
        let reply = self.send(Method::POST, &uri, Some(Bytes::new())).await?;
        expect_order(&uri, &reply, StatusCode::OK, "completed")?;
        Ok(())
    }

    /// Follows the feed of events (beta) from `cursor` (a list's
    /// `Events-Cursor`) until `count` events arrived, printing each as
    /// `event ID TYPE SUBJECT`: long polls of `wait=10` that follow each
    /// page's `Link: rel="next"`. A `410 cursor_expired` (the events after
    /// the cursor are no longer kept) lists again and follows from the new
    /// list's cursor: what was missed is in that list.
    async fn follow(&mut self, cursor: String, count: u64, page_size: u32) -> Result<(), BoxError> {
        let base = self.base.clone();
        let feed_after = |cursor: &str| -> Result<Uri, BoxError> {
            Ok(format!("{base}/events?limit=100&wait=10&after={cursor}").parse()?)
        };
        let mut uri = feed_after(&cursor)?;
        let mut last: Option<u64> = None;
        while self.stats.followed < count {
            let reply = self.send(Method::GET, &uri, None).await?;
            if reply.status == StatusCode::GONE {
                eprintln!("GET {uri}: {}; listing again", reply.describe_error());
                let (_, cursor) = self.list_all(page_size).await?;
                let cursor = cursor.ok_or("the list carries no Events-Cursor")?;
                uri = feed_after(&cursor)?;
                last = None;
                continue;
            }
            for event in &page_of(&uri, &reply)? {
                let field = |name: &str| event.get(name).and_then(Value::as_str);
                let (Some(id), Some(kind)) = (field("id"), field("type")) else {
                    return Err(format!("GET {uri}: an event without id or type: {event}").into());
                };
                // Cursors are opaque; this client only checks they rise.
                let position: u64 = id
                    .parse()
                    .map_err(|_| format!("GET {uri}: event id {id:?}"))?;
                if last.is_some_and(|last| position <= last) {
                    return Err(format!("GET {uri}: event {id} out of order").into());
                }
                last = Some(position);
                let subject = event
                    .pointer("/data/id")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                println!("event {id} {kind} {subject}");
                self.stats.followed += 1;
            }
            let next =
                next_link(&reply.headers)?.ok_or_else(|| format!("GET {uri}: no next link"))?;
            uri = resolve(&self.origin, &uri, &next)?;
        }
        Ok(())
    }

    /// Every page of `GET /pets?limit=N`; returns the ids in order, and
    /// the first page's `Events-Cursor` (beta) when it has one.
    async fn list_all(&mut self, page_size: u32) -> Result<(Vec<u64>, Option<String>), BoxError> {
        let mut uri: Uri = format!("{}/pets?limit={page_size}", self.base).parse()?;
        let mut ids: Vec<u64> = Vec::new();
        let mut cursor = None;
        for page in 1..=MAX_PAGES {
            let reply = self.send(Method::GET, &uri, None).await?;
            let pets = page_of(&uri, &reply)?;
            if page == 1 {
                cursor = reply
                    .headers
                    .get("events-cursor")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
            }
            if pets.len() > page_size as usize {
                return Err(format!(
                    "GET {uri}: {} pets on a page of limit {page_size}",
                    pets.len()
                )
                .into());
            }
            for pet in &pets {
                let id = pet
                    .get("id")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| format!("GET {uri}: a pet without an integer id: {pet}"))?;
                if let Some(&last) = ids.last() {
                    if id <= last {
                        return Err(format!(
                            "GET {uri} (page {page}): id {id} follows id {last}; ids must rise strictly"
                        )
                        .into());
                    }
                }
                ids.push(id);
            }
            self.stats.listed = ids.len() as u64;
            let Some(next) = next_link(&reply.headers)? else {
                return Ok((ids, cursor));
            };
            let next = resolve(&self.origin, &uri, &next)?;
            if next == uri {
                return Err(format!("GET {uri}: the next link points at the same page").into());
            }
            if pets.is_empty() {
                return Err(format!("GET {uri}: an empty page with a next link").into());
            }
            uri = next;
        }
        Err(format!("more than {MAX_PAGES} pages; stopping").into())
    }
}

/// The JSON array of a page's `200` (a list's pets, the feed's events).
fn page_of(uri: &Uri, reply: &Reply) -> Result<Vec<Value>, BoxError> {
    if reply.status != StatusCode::OK {
        return Err(format!(
            "GET {uri}: expected 200, got {}: {}",
            reply.status,
            reply.describe_error()
        )
        .into());
    }
    match serde_json::from_slice(&reply.body) {
        Ok(Value::Array(items)) => Ok(items),
        Ok(_) => Err(format!("GET {uri}: the 200 body is not an array").into()),
        Err(e) => Err(format!("GET {uri}: the 200 body is not JSON: {e}").into()),
    }
}

/// Why `reply` is to be retried, or `None` when it is the answer: a 429
/// (`rate_limited`; a `key_banned` stops the client), a 5xx (the server
/// or what it stands on failed; the key makes a retried POST safe), or a
/// 409 `idempotency_key_in_use` (the first try of this very request is
/// still being carried out).
fn retried(reply: &Reply) -> Option<String> {
    let status = reply.status;
    let code = reply.error_code();
    let in_use =
        status == StatusCode::CONFLICT && code.as_deref() == Some("idempotency_key_in_use");
    (status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() || in_use).then(|| {
        format!(
            "{} {}",
            status.as_u16(),
            code.unwrap_or_else(|| "(no error code)".into())
        )
    })
}

/// The `Retry-After` of a response: `None` if absent, `Err(raw)` if it is
/// neither delay-seconds nor an IMF-fixdate (RFC 9110 §10.2.3).
fn retry_after(headers: &HeaderMap) -> Option<Result<Duration, String>> {
    let value = headers.get(RETRY_AFTER)?;
    let Ok(text) = value.to_str() else {
        return Some(Err(String::from_utf8_lossy(value.as_bytes()).into_owned()));
    };
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        // All digits: only an overflow can fail; treat it as "very long".
        return Some(Ok(Duration::from_secs(text.parse().unwrap_or(u64::MAX))));
    }
    match http_date(text) {
        Some(at) => {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            Some(Ok(Duration::from_secs(at).saturating_sub(now)))
        }
        None => Some(Err(text.to_owned())),
    }
}

/// Unix seconds of an IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`.
fn http_date(text: &str) -> Option<u64> {
    let parts: Vec<&str> = text.split(' ').collect();
    let [weekday, day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    if weekday.len() != 4 || !weekday.ends_with(',') || day.len() != 2 || year.len() != 4 {
        return None;
    }
    let day: u64 = day.parse().ok()?;
    let year: u64 = year.parse().ok()?;
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| m == month)? as u64 + 1;
    let hms: Vec<u64> = time
        .split(':')
        .map(|p| if p.len() == 2 { p.parse().ok() } else { None })
        .collect::<Option<_>>()?;
    let [h, m, s] = hms.as_slice() else {
        return None;
    };
    if !(1..=31).contains(&day) || year < 1970 || *h > 23 || *m > 59 || *s > 60 {
        return None;
    }
    // Days from civil (Howard Hinnant), for years from 1970.
    let (y, mo) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * mo + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    Some(days * 86_400 + h * 3_600 + m * 60 + s)
}

/// One link-value of a `Link` header (RFC 8288 §3).
#[derive(Debug, PartialEq)]
struct LinkValue {
    target: String,
    /// The relation types of the first `rel` parameter, lower-cased.
    rels: Vec<String>,
    /// Whether an `anchor` parameter moves the link's context elsewhere.
    anchored: bool,
}

/// `tchar` of RFC 9110 §5.6.2.
fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

fn trim_ows(s: &str) -> &str {
    s.trim_start_matches([' ', '\t'])
}

/// Parses one `Link` field value: `<uri>; rel="next"; title="x", <uri2>`.
fn parse_link_field(value: &str) -> Result<Vec<LinkValue>, String> {
    let bad = |why: &str| format!("malformed Link header {value:?}: {why}");
    let mut links = Vec::new();
    let mut rest = value;
    loop {
        // Empty list elements (`, ,`) are allowed (RFC 9110 §5.6.1).
        rest = rest.trim_start_matches([' ', '\t', ',']);
        if rest.is_empty() {
            return Ok(links);
        }
        let after = rest.strip_prefix('<').ok_or_else(|| bad("expected `<`"))?;
        let end = after.find('>').ok_or_else(|| bad("no closing `>`"))?;
        let target = after[..end].to_owned();
        rest = &after[end + 1..];
        let mut rels = None;
        let mut anchored = false;
        loop {
            rest = trim_ows(rest);
            if rest.is_empty() || rest.starts_with(',') {
                break;
            }
            rest = trim_ows(
                rest.strip_prefix(';')
                    .ok_or_else(|| bad("expected `;` or `,`"))?,
            );
            if rest.is_empty() || rest.starts_with([',', ';']) {
                continue;
            }
            let name_end = rest.find(|c| !is_tchar(c)).unwrap_or(rest.len());
            if name_end == 0 {
                return Err(bad("a parameter without a name"));
            }
            let name = rest[..name_end].to_ascii_lowercase();
            rest = trim_ows(&rest[name_end..]);
            let mut param = String::new();
            if let Some(r) = rest.strip_prefix('=') {
                rest = trim_ows(r);
                if let Some(r) = rest.strip_prefix('"') {
                    let mut chars = r.char_indices();
                    let mut closed = None;
                    while let Some((i, c)) = chars.next() {
                        match c {
                            '\\' => match chars.next() {
                                Some((_, escaped)) => param.push(escaped),
                                None => break,
                            },
                            '"' => {
                                closed = Some(i + 1);
                                break;
                            }
                            c => param.push(c),
                        }
                    }
                    let closed = closed.ok_or_else(|| bad("an unterminated quoted string"))?;
                    rest = &r[closed..];
                } else {
                    let end = rest.find(|c| !is_tchar(c)).unwrap_or(rest.len());
                    param = rest[..end].to_owned();
                    rest = &rest[end..];
                }
            }
            match name.as_str() {
                // Only the first `rel` counts (RFC 8288 §3.3).
                "rel" if rels.is_none() => {
                    rels = Some(
                        param
                            .split_ascii_whitespace()
                            .map(str::to_ascii_lowercase)
                            .collect(),
                    );
                }
                "anchor" => anchored = true,
                _ => {}
            }
        }
        links.push(LinkValue {
            target,
            rels: rels.unwrap_or_default(),
            anchored,
        });
    }
}

/// The target of the one `rel="next"` link of a response, if any.
fn next_link(headers: &HeaderMap) -> Result<Option<String>, String> {
    let mut next = None;
    for value in headers.get_all(LINK) {
        let text = value
            .to_str()
            .map_err(|_| format!("a Link header is not visible ASCII: {value:?}"))?;
        for link in parse_link_field(text)? {
            if link.anchored || !link.rels.iter().any(|r| r == "next") {
                continue;
            }
            if next.is_some() {
                return Err(format!("two rel=\"next\" links in {headers:?}"));
            }
            next = Some(link.target);
        }
    }
    Ok(next)
}

/// RFC 3986 §5.2.4.
fn remove_dot_segments(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').collect();
    for (i, seg) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        match *seg {
            "." => {
                if last {
                    out.push("");
                }
            }
            ".." => {
                if out.len() > 1 {
                    out.pop();
                }
                if last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    let joined = out.join("/");
    if path.starts_with('/') && !joined.starts_with('/') {
        format!("/{joined}")
    } else {
        joined
    }
}

/// Resolves a link target against the page it came from (RFC 3986 §5.2),
/// refusing one that leaves the API's origin: the key must not travel to
/// another host.
fn resolve(origin: &str, current: &Uri, reference: &str) -> Result<Uri, BoxError> {
    let reference = reference.split('#').next().unwrap_or_default();
    let has_scheme = reference.split_once(':').is_some_and(|(scheme, _)| {
        scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    });
    let current_path = current.path();
    let absolute = if has_scheme {
        reference.to_owned()
    } else if let Some(rest) = reference.strip_prefix("//") {
        format!("{}://{rest}", current.scheme_str().unwrap_or("http"))
    } else if reference.starts_with('/') {
        let (path, query) = split_query(reference);
        format!("{origin}{}{query}", remove_dot_segments(path))
    } else if reference.starts_with('?') {
        format!("{origin}{current_path}{reference}")
    } else if reference.is_empty() {
        current.to_string()
    } else {
        let dir = &current_path[..current_path.rfind('/').map_or(0, |i| i + 1)];
        let (path, query) = split_query(reference);
        format!(
            "{origin}{}{query}",
            remove_dot_segments(&format!("{dir}{path}"))
        )
    };
    let uri: Uri = absolute
        .parse()
        .map_err(|e| format!("next link {reference:?} resolves to {absolute:?}, not a URL: {e}"))?;
    let mut link_origin = String::new();
    if let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) {
        let _ = write!(link_origin, "{scheme}://{authority}");
    }
    if !link_origin.eq_ignore_ascii_case(origin) {
        return Err(format!(
            "next link {reference:?} leaves {origin} (for {link_origin:?}); not sending the key there"
        )
        .into());
    }
    Ok(uri)
}

/// The order of `reply`, when it has the `status` and the order's is `want`.
fn expect_order(
    uri: &Uri,
    reply: &Reply,
    status: StatusCode,
    want: &str,
) -> Result<Value, BoxError> {
    if reply.status != status {
        return Err(format!(
            "POST {uri}: expected {status}, got {}: {}",
            reply.status,
            reply.describe_error()
        )
        .into());
    }
    let order: Value = serde_json::from_slice(&reply.body)
        .map_err(|e| format!("POST {uri}: the body is not JSON: {e}"))?;
    if order.get("status").and_then(Value::as_str) != Some(want) {
        return Err(format!("POST {uri}: expected an order {want}, got {order}").into());
    }
    Ok(order)
}

fn split_query(reference: &str) -> (&str, &str) {
    match reference.find('?') {
        Some(i) => reference.split_at(i),
        None => (reference, ""),
    }
}

async fn run(api: &mut Api, args: &Args) -> Result<(), BoxError> {
    const STATUSES: [&str; 3] = ["available", "pending", "sold"];
    let mut created = Vec::new();
    for i in 0..args.create {
        let name = format!("client-pet-{}", i + 1);
        let id = api
            .create(&name, i % 5 + 1, STATUSES[(i % 3) as usize])
            .await?;
        created.push(id);
        api.stats.created += 1;
    }
    let (listed, cursor) = api.list_all(args.page_size).await?;
    // Both lists rise strictly: check that every created id is listed.
    created.sort_unstable();
    let missing: Vec<u64> = created
        .iter()
        .filter(|id| listed.binary_search(id).is_err())
        .copied()
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "{} created pet(s) missing from the listing, ids {missing:?}",
            missing.len()
        )
        .into());
    }
    // Pets were created in turn available, pending, sold: the first is
    // available.
    if let (true, Some(&first)) = (args.sell, created.first()) {
        api.sell(first).await?;
        api.stats.sold += 1;
    }
    if args.follow > 0 {
        let cursor = cursor.ok_or("the list carries no Events-Cursor (a replica?)")?;
        api.follow(cursor, args.follow, args.page_size).await?;
    }
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse();
    let mut api = match Api::new(&args) {
        Ok(api) => api,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let started = Instant::now();
    let result = run(&mut api, &args).await;
    let stats = &api.stats;
    println!("pets created:  {}", stats.created);
    println!("pets listed:   {}", stats.listed);
    println!("pets sold:     {}", stats.sold);
    println!("events:        {}", stats.followed);
    println!("429 received:  {}", stats.rate_limited);
    println!("retries:       {}", stats.retries);
    println!("replayed:      {}", stats.replayed);
    println!("time waited:   {:.3} s", stats.waited.as_secs_f64());
    println!("time total:    {:.3} s", started.elapsed().as_secs_f64());
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_link_fields() {
        let links = parse_link_field(
            r#"</v1/pets?limit=20&after=40>; rel="next", <https://x/a,b>;title="a, \"b\"";REL=prev"#,
        )
        .unwrap();
        assert_eq!(links.len(), 2);
        assert_eq!(links[0].target, "/v1/pets?limit=20&after=40");
        assert_eq!(links[0].rels, ["next"]);
        assert_eq!(links[1].target, "https://x/a,b");
        assert_eq!(links[1].rels, ["prev"]);
        let links = parse_link_field(r#"<a>; rel="prev NEXT"; rel=last , , <b>"#).unwrap();
        assert_eq!(links[0].rels, ["prev", "next"]);
        assert!(links[1].rels.is_empty());
        assert!(parse_link_field(r#"<a>; rel="next"#).is_err());
        assert!(parse_link_field("a; rel=next").is_err());
    }

    #[test]
    fn resolves_against_the_origin() {
        let origin = "http://127.0.0.1:8080";
        let current: Uri = "http://127.0.0.1:8080/v1/pets?limit=20".parse().unwrap();
        let r = |s: &str| resolve(origin, &current, s).map(|u| u.to_string());
        assert_eq!(
            r("/v1/pets?limit=20&after=40").unwrap(),
            "http://127.0.0.1:8080/v1/pets?limit=20&after=40"
        );
        assert_eq!(
            r("pets?after=2").unwrap(),
            "http://127.0.0.1:8080/v1/pets?after=2"
        );
        assert_eq!(
            r("../v1/./pets?after=2#x").unwrap(),
            "http://127.0.0.1:8080/v1/pets?after=2"
        );
        assert_eq!(
            r("?after=3").unwrap(),
            "http://127.0.0.1:8080/v1/pets?after=3"
        );
        assert_eq!(
            r("http://127.0.0.1:8080/v1/pets?after=4").unwrap(),
            "http://127.0.0.1:8080/v1/pets?after=4"
        );
        assert!(r("http://evil.example/v1/pets").is_err());
        assert!(r("//evil.example/v1/pets").is_err());
    }

    #[test]
    fn reads_retry_after() {
        let mut h = HeaderMap::new();
        assert!(retry_after(&h).is_none());
        h.insert(RETRY_AFTER, HeaderValue::from_static("7"));
        assert_eq!(retry_after(&h), Some(Ok(Duration::from_secs(7))));
        h.insert(
            RETRY_AFTER,
            HeaderValue::from_static("Sun, 06 Nov 1994 08:49:37 GMT"),
        );
        assert_eq!(retry_after(&h), Some(Ok(Duration::ZERO)));
        h.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h), Some(Err("soon".into())));
        assert_eq!(
            http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(
            http_date("Thu, 05 Dec 2030 00:00:00 GMT"),
            Some(1_922_659_200)
        );
    }
}
