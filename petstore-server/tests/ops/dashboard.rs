//! The Grafana dashboard (`ops/grafana/petstore.json`) and the alert
//! rules (`ops/prometheus/alerts.yml`) against what real servers export:
//! every metric name, label and exact label value their PromQL names must
//! appear in the `/metrics` of a journal server over TLS with Redis (whose
//! Redis is then killed) and of a PostgreSQL server, after traffic that
//! makes each family and value appear (creates, reads, transitions, 429s,
//! a ban, Redis fallbacks, failed reloads).
//!
//! The PromQL is read by a small tokenizer, not by pattern: a metric name
//! is an identifier not followed by `(` that is no PromQL keyword; labels
//! are the names inside `{}` matchers and in `by`, `without`, `on`,
//! `ignoring`, `group_left`, `group_right` lists. Allowed without a
//! server: `up` (Prometheus's own series) and the target labels
//! Prometheus adds to every series, `instance` and `job`.
//!
//! The rules file is read with a YAML subset (each `expr:` a plain scalar
//! or a `|` block, as the file writes them); `promtool check rules`
//! (`scripts/ops-check`) reads it as YAML proper.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use common::postgres::Postgres;
use common::redis::RedisServer;
use common::transport::{build, connect, runtime, TestCa, Transport};
use common::*;
use serde_json::{json, Value};

/// Series Prometheus makes itself, not the server.
const PROMETHEUS_SERIES: [&str; 1] = ["up"];
/// Labels Prometheus adds to every scraped series.
const TARGET_LABELS: [&str; 2] = ["instance", "job"];
/// Identifiers of PromQL that are neither metrics nor labels: the
/// aggregation operators (followed by `by`/`without` rather than `(`),
/// set operators and modifiers, and literals.
const KEYWORDS: [&str; 22] = [
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "by",
    "without",
    "atan2",
    "inf",
    "nan",
];
/// Keywords whose parenthesised list holds label names.
const LABEL_LISTS: [&str; 6] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// What one expression refers to.
#[derive(Debug, Default, PartialEq)]
struct Refs {
    metrics: BTreeSet<String>,
    labels: BTreeSet<String>,
    /// `label="value"` matchers (not regular expressions, not Grafana
    /// variables): the value must exist.
    values: BTreeSet<(String, String)>,
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// The metric names, labels and exact label values of one PromQL
/// expression.
fn refs(expr: &str) -> Refs {
    let chars: Vec<char> = expr.chars().collect();
    let mut refs = Refs::default();
    let mut i = 0;
    let ident_at = |i: &mut usize| -> String {
        let start = *i;
        while *i < chars.len() && is_ident(chars[*i]) {
            *i += 1;
        }
        chars[start..*i].iter().collect()
    };
    let skip_ws = |i: &mut usize| {
        while *i < chars.len() && chars[*i].is_whitespace() {
            *i += 1;
        }
    };
    // A quoted string from its opening quote; returns its text.
    let string_at = |i: &mut usize| -> String {
        let quote = chars[*i];
        *i += 1;
        let mut text = String::new();
        while *i < chars.len() && chars[*i] != quote {
            if chars[*i] == '\\' && quote != '`' {
                *i += 1;
            }
            if let Some(c) = chars.get(*i) {
                text.push(*c);
            }
            *i += 1;
        }
        *i += 1;
        text
    };
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '"' || c == '\'' || c == '`' {
            string_at(&mut i);
        } else if c == '#' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '[' {
            // A range or subquery: durations and Grafana's intervals.
            while i < chars.len() && chars[i] != ']' {
                i += 1;
            }
            i += 1;
        } else if c == '{' {
            i += 1;
            loop {
                skip_ws(&mut i);
                match chars.get(i) {
                    None => break,
                    Some('}') => {
                        i += 1;
                        break;
                    }
                    Some(',') => {
                        i += 1;
                        continue;
                    }
                    Some(_) => {}
                }
                let label = ident_at(&mut i);
                assert!(!label.is_empty(), "a matcher without a label in {expr:?}");
                skip_ws(&mut i);
                let op: String = chars[i..]
                    .iter()
                    .take_while(|c| matches!(c, '=' | '!' | '~'))
                    .collect();
                i += op.len();
                skip_ws(&mut i);
                assert!(
                    matches!(chars.get(i), Some('"' | '\'' | '`')),
                    "a matcher of {label} without a quoted value in {expr:?}"
                );
                let value = string_at(&mut i);
                if label == "__name__" && op == "=" {
                    refs.metrics.insert(value);
                    continue;
                }
                if op == "=" && !value.contains('$') {
                    refs.values.insert((label.clone(), value));
                }
                refs.labels.insert(label);
            }
        } else if c == '$' {
            // A Grafana variable: `$name` or `${name}`.
            i += 1;
            if chars.get(i) == Some(&'{') {
                while i < chars.len() && chars[i] != '}' {
                    i += 1;
                }
                i += 1;
            } else {
                ident_at(&mut i);
            }
        } else if c.is_ascii_digit() || c == '.' {
            // A number (`0.99`, `1e3`, `0x1f`).
            while i < chars.len() && (is_ident(chars[i]) || chars[i] == '.') {
                i += 1;
            }
        } else if is_ident_start(c) {
            let word = ident_at(&mut i);
            let mut next = i;
            skip_ws(&mut next);
            let paren = chars.get(next) == Some(&'(');
            if paren && LABEL_LISTS.contains(&word.as_str()) {
                i = next + 1;
                while i < chars.len() && chars[i] != ')' {
                    if is_ident_start(chars[i]) {
                        refs.labels.insert(ident_at(&mut i));
                    } else {
                        i += 1;
                    }
                }
                i += 1;
            } else if !paren && !KEYWORDS.contains(&word.as_str()) {
                refs.metrics.insert(word);
            }
        } else {
            i += 1;
        }
    }
    refs
}

/// A scrape: per series name, per label, the values seen.
type Exported = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// Reads OpenMetrics text into `into`.
fn parse_scrape(text: &str, into: &mut Exported) {
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        let labels = into.entry(line[..name_end].to_owned()).or_default();
        if line[name_end..].starts_with('{') {
            // `name="value",...}`: values are quoted with `\` escapes.
            let mut rest = line[name_end + 1..].chars().peekable();
            loop {
                let name: String = rest.by_ref().take_while(|c| *c != '=').collect();
                assert_eq!(rest.next(), Some('"'), "{line}");
                let mut value = String::new();
                while let Some(c) = rest.next() {
                    match c {
                        '\\' => value.extend(rest.next()),
                        '"' => break,
                        c => value.push(c),
                    }
                }
                labels
                    .entry(name.trim_start_matches(',').to_owned())
                    .or_default()
                    .insert(value);
                if rest.peek() == Some(&'}') {
                    break;
                }
            }
        }
    }
}

/// What in `refs` (of the expression `expr`, from `origin`) the server
/// does not export.
fn problems(origin: &str, expr: &str, refs: &Refs, exported: &Exported) -> Vec<String> {
    let mut out = Vec::new();
    let ours: Vec<&BTreeMap<String, BTreeSet<String>>> = refs
        .metrics
        .iter()
        .filter_map(|m| exported.get(m))
        .collect();
    for metric in &refs.metrics {
        if !exported.contains_key(metric) && !PROMETHEUS_SERIES.contains(&metric.as_str()) {
            out.push(format!(
                "{origin}: metric {metric} is not exported ({expr})"
            ));
        }
    }
    for label in &refs.labels {
        if !TARGET_LABELS.contains(&label.as_str()) && !ours.iter().any(|l| l.contains_key(label)) {
            out.push(format!(
                "{origin}: label {label} is on none of {:?} ({expr})",
                refs.metrics
            ));
        }
    }
    for (label, value) in &refs.values {
        if !TARGET_LABELS.contains(&label.as_str())
            && !ours
                .iter()
                .any(|l| l.get(label).is_some_and(|v| v.contains(value)))
        {
            out.push(format!(
                "{origin}: no series of {:?} has {label}=\"{value}\" ({expr})",
                refs.metrics
            ));
        }
    }
    out
}

fn repo_file(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
}

/// Every PromQL expression of the dashboard, named by its panel, and
/// its variables' `label_values(metric, label)` queries as expressions of
/// their own (`metric{label=~".+"}`).
fn dashboard_exprs(dashboard: &Value) -> Vec<(String, String)> {
    fn walk(v: &Value, title: &str, out: &mut Vec<(String, String)>) {
        match v {
            Value::Object(map) => {
                let title = map
                    .get("title")
                    .or_else(|| map.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or(title);
                if let Some(Value::String(expr)) = map.get("expr") {
                    out.push((format!("panel {title:?}"), expr.clone()));
                }
                if let Some(Value::String(query)) = map.get("definition") {
                    let args = query
                        .strip_prefix("label_values(")
                        .and_then(|q| q.strip_suffix(')'))
                        .unwrap_or_else(|| panic!("variable {title:?}: {query}"));
                    let (metric, label) = args.split_once(',').expect(query);
                    out.push((
                        format!("variable {title:?}"),
                        format!("{}{{{}=~\".+\"}}", metric.trim(), label.trim()),
                    ));
                }
                for (_, child) in map {
                    walk(child, title, out);
                }
            }
            Value::Array(items) => items.iter().for_each(|c| walk(c, title, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(dashboard, "", &mut out);
    out
}

/// Every rule's `expr` in alerts.yml with its `alert` name, and each
/// rule's `runbook`: a YAML subset, as the file writes them (a plain or
/// quoted scalar after `expr:`, or a `|` block below it).
fn rule_exprs(yaml: &str) -> (Vec<(String, String)>, Vec<String>) {
    let lines: Vec<&str> = yaml.lines().collect();
    let mut alert = String::new();
    let (mut exprs, mut runbooks) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let indent = line.len() - line.trim_start().len();
        let body = line.trim_start().trim_start_matches("- ");
        if let Some(name) = body.strip_prefix("alert:") {
            alert = name.trim().to_owned();
        } else if let Some(value) = body.strip_prefix("runbook:") {
            runbooks.push(value.trim().to_owned());
        } else if let Some(value) = body.strip_prefix("expr:") {
            let value = value.trim();
            let expr = if value.starts_with('|') || value.starts_with('>') {
                let mut block = Vec::new();
                while let Some(next) = lines.get(i + 1) {
                    let deeper = next.len() - next.trim_start().len() > indent;
                    if !deeper && !next.trim().is_empty() {
                        break;
                    }
                    block.push(next.trim());
                    i += 1;
                }
                block.join("\n")
            } else if let Some(quoted) = value.strip_prefix('\'') {
                quoted.trim_end_matches('\'').replace("''", "'")
            } else {
                assert!(
                    !value.starts_with('"'),
                    "write {alert}'s expr plain or as a | block"
                );
                value.to_owned()
            };
            exprs.push((format!("alert {alert}"), expr));
        }
        i += 1;
    }
    (exprs, runbooks)
}

/// GitHub's anchor of a Markdown heading's text.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// A request over TLS to `addr` (HTTP/1.1 or HTTP/2 by `transport`).
fn tls_request(
    ca: &TestCa,
    addr: std::net::SocketAddr,
    transport: Transport,
    (method, path, key): (&str, &str, Option<&str>),
    body: &[u8],
) -> Response {
    let auth = key.map(|k| format!("Bearer {k}"));
    let mut headers = vec![("content-type", "application/json")];
    if let Some(auth) = &auth {
        headers.push(("authorization", auth.as_str()));
    }
    runtime().block_on(async {
        let mut sender = connect(transport, addr, Some(ca)).await;
        let request = build(method, addr, transport, path, &headers, body);
        sender.send(request).await
    })
}

/// The value of the series `series` (name and labels as printed) in a
/// scrape.
fn value(scrape: &str, series: &str) -> Option<f64> {
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// A journal server over TLS with Redis: creates, reads, a compaction of
/// its journal, 429s and a ban decided in Redis, then Redis killed
/// (fallbacks, an open breaker), and a broken certificate reloaded.
/// Returns its last scrape.
fn journal_tls_redis_scrape() -> String {
    let mut redis = RedisServer::start();
    {
        let dir = TempDir::new();
        let ca = TestCa::new(&dir);
        let data = TempDir::new();
        let server = Server::builder()
            .data(&data)
            .arg("--tls-cert")
            .arg(ca.cert.to_str().unwrap())
            .arg("--tls-key")
            .arg(ca.key.to_str().unwrap())
            .arg("--redis")
            .arg(redis.url())
            // Compacts once anything was written: the snapshot's metrics.
            .arg("--compact-min-size")
            .arg("1")
            .arg("--compact-ratio")
            .arg("1")
            .start();
        let call = |transport, request, body: &[u8]| {
            tls_request(&ca, server.addr, transport, request, body)
        };
        let pet = br#"{"name":"Rex","categoryId":1}"#;
        for transport in [Transport::Https1, Transport::Https2] {
            let created = call(transport, ("POST", "/v1/pets", Some(KEY)), pet);
            assert_eq!(created.status, 201, "{}", created.describe());
            assert_eq!(
                call(transport, ("GET", "/v1/pets", Some(KEY)), b"").status,
                200
            );
            assert_eq!(
                call(transport, ("GET", "/v1/pets/1", Some(KEY)), b"").status,
                200
            );
        }
        server.stderr_once_logged("compacted the journal into");
        // The free plan allows 3 a minute; three 429s within the window
        // ban the key (the default keys file), and a banned key's
        // requests are refused as `key_banned`.
        let mut statuses = Vec::new();
        for _ in 0..8 {
            statuses.push(call(Transport::Https1, ("GET", "/v1/pets", Some(FREE_KEY)), b"").status);
        }
        assert_eq!(&statuses[..3], [200, 200, 200], "{statuses:?}");
        assert!(statuses[3..].iter().all(|s| *s == 429), "{statuses:?}");
        let metrics = || call(Transport::Https1, ("GET", "/metrics", None), b"").text();
        let before = metrics();
        assert!(
            value(
                &before,
                r#"petstore_rate_limit_refusals_total{reason="key_banned"}"#
            )
            .is_some_and(|banned| banned >= 1.0),
            "{before}"
        );
        assert_eq!(value(&before, "petstore_redis_breakers_open"), Some(0.0));
        assert!(
            value(&before, "petstore_journal_compactions_total").is_some_and(|n| n >= 1.0),
            "{before}"
        );

        // Redis gone: the limits are decided here, and the breaker opens.
        redis.kill();
        for _ in 0..3 {
            assert_eq!(
                call(Transport::Https2, ("GET", "/v1/pets", Some(KEY)), b"").status,
                200
            );
        }
        let after = metrics();
        assert!(
            value(&after, "petstore_redis_fallbacks_total").unwrap_or(0.0) >= 1.0,
            "{after}"
        );
        assert_eq!(
            value(&after, "petstore_redis_breakers_open"),
            Some(1.0),
            "{after}"
        );

        assert_eq!(
            value(&after, r#"petstore_reload_failures_total{file="tls"}"#),
            Some(0.0)
        );
        // A broken certificate and keys file: both reloads fail, and
        // each is counted under its own file.
        std::fs::write(&ca.key, "-----BEGIN PRIVATE KEY-----\nbroken\n").unwrap();
        server.write_keys_text("{ not json");
        server.signal("HUP");
        server.stderr_once_logged("the previous certificate and key stay in force");
        server.stderr_once_logged("the previous keys stay in force");
        let last = metrics();
        assert_eq!(
            value(&last, r#"petstore_reload_failures_total{file="tls"}"#),
            Some(1.0),
            "{last}"
        );
        assert_eq!(
            value(&last, r#"petstore_reload_failures_total{file="keys"}"#),
            Some(1.0),
            "{last}"
        );
        last
    }
}

/// A PostgreSQL server: creates, transitions and reads through its read
/// copy. Returns its scrape.
fn postgres_scrape() -> String {
    let pg = Postgres::start();
    let server = Server::builder().postgres(&pg.url()).start();
    for i in 1..=3 {
        server.create_pet(&json!({"name": format!("p{i}"), "categoryId": 1}));
    }
    assert_eq!(
        server
            .post("/v1/pets/1/reserve", Some(KEY), None, b"")
            .status,
        200
    );
    assert_eq!(
        server.post("/v1/pets/2/sell", Some(KEY), None, b"").status,
        200
    );
    // The read copy has caught up with what was committed.
    assert!(
        wait_until(Duration::from_secs(30), || server
            .list_ids("/v1/pets")
            .0
            .len()
            == 3),
        "{}",
        server.stderr_text()
    );
    server.get("/metrics", None).text()
}

#[test]
fn every_name_and_label_of_the_dashboard_and_the_alerts_is_exported() {
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_file("ops/grafana/petstore.json")).unwrap(),
    )
    .unwrap();
    let rules = std::fs::read_to_string(repo_file("ops/prometheus/alerts.yml")).unwrap();
    let mut exprs = dashboard_exprs(&dashboard);
    let panels = exprs.len();
    let (alerts, runbooks) = rule_exprs(&rules);
    // Every rule of the file was read, with its runbook.
    let rule_count = rules.matches("- alert:").count();
    assert_eq!(alerts.len(), rule_count, "{alerts:?}");
    assert_eq!(runbooks.len(), rule_count, "{runbooks:?}");
    assert!(panels >= 20 && rule_count >= 8, "{panels} {rule_count}");
    exprs.extend(alerts);

    // Each runbook is a section of docs/operating.md.
    let operating = std::fs::read_to_string(repo_file("docs/operating.md")).unwrap();
    let anchors: BTreeSet<String> = operating
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|l| anchor(l.trim_start_matches('#')))
        .collect();
    for runbook in &runbooks {
        let section = runbook
            .strip_prefix("docs/operating.md#")
            .unwrap_or_else(|| panic!("runbook {runbook} is not in docs/operating.md"));
        assert!(
            anchors.contains(section),
            "no section #{section} in docs/operating.md"
        );
    }

    let mut exported = Exported::new();
    parse_scrape(&journal_tls_redis_scrape(), &mut exported);
    parse_scrape(&postgres_scrape(), &mut exported);
    let mut missing = Vec::new();
    for (origin, expr) in &exprs {
        let refs = refs(expr);
        assert!(!refs.metrics.is_empty(), "{origin}: no metric in {expr}");
        missing.extend(problems(origin, expr, &refs, &exported));
    }
    assert!(
        missing.is_empty(),
        "not exported by the server:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_tokenizer_reads_names_labels_and_values() {
    let got = refs(
        r#"histogram_quantile(0.99, sum by (le, route) (rate(petstore_request_duration_seconds_bucket{instance=~"$instance", method="GET"}[$__rate_interval])))"#,
    );
    let set = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(
        got.metrics,
        set(&["petstore_request_duration_seconds_bucket"])
    );
    assert_eq!(got.labels, set(&["instance", "le", "method", "route"]));
    assert_eq!(
        got.values,
        [("method".to_owned(), "GET".to_owned())]
            .into_iter()
            .collect()
    );
    let got = refs(
        "petstore_storage_writable == 0 unless on (instance, job) petstore_postgres_up\n\
         or max by (instance) (a:b + time() - c offset 5m) > 1e3 and bool x{y!=\"z\"}",
    );
    assert_eq!(
        got.metrics,
        set(&[
            "a:b",
            "c",
            "petstore_postgres_up",
            "petstore_storage_writable",
            "x"
        ])
    );
    assert_eq!(got.labels, set(&["instance", "job", "y"]));
    assert!(got.values.is_empty(), "a != matcher names no value");
}

#[test]
fn a_renamed_metric_label_or_value_is_reported() {
    let mut exported = Exported::new();
    parse_scrape(
        "# TYPE petstore_requests counter\n\
         petstore_requests_total{route=\"/v1/pets\",method=\"GET\",status=\"200\"} 1\n\
         petstore_pets 3\n# EOF\n",
        &mut exported,
    );
    let check = |expr: &str| problems("test", expr, &refs(expr), &exported);
    assert!(
        check(r#"sum by (route, instance) (petstore_requests_total{status="200"})"#).is_empty()
    );
    assert!(check("up == 0").is_empty());
    for wrong in [
        "petstore_request_total",
        "sum by (path) (petstore_requests_total)",
        r#"petstore_requests_total{status="201"}"#,
        "petstore_pets{route=~\".+\"}",
    ] {
        assert_eq!(check(wrong).len(), 1, "{wrong}: {:?}", check(wrong));
    }
}
