//! `--access-log`: one JSON line per request on stderr:
//!
//! ```text
//! {"time":"2026-11-22T12:00:00.123Z","method":"GET","route":"/v1/pets/{petId}","status":200,"micros":84,"key":"shop-frontend","client":"127.0.0.1","protocol":"h2","tls":true}
//! ```
//!
//! The route is the template, not the path, so lines group by operation
//! and ids do not leak into log indexes. `key` is the key entry's *name*
//! (or `null`); the key itself and the `Authorization` header are never
//! written anywhere.

use std::io::Write as _;
use std::net::IpAddr;
use std::time::Duration;

use serde::Serialize;

/// One access-log line.
#[derive(Debug, Serialize)]
pub struct Line<'a> {
    /// When the response was ready (RFC 3339, UTC).
    pub time: String,
    /// The request method.
    pub method: &'a str,
    /// The route template, e.g. `/v1/pets/{petId}`; `unknown` for no route.
    pub route: &'a str,
    /// The response status.
    pub status: u16,
    /// Microseconds from the request's head to its response.
    pub micros: u64,
    /// The name of the key's entry, when a valid key was sent.
    pub key: Option<&'a str>,
    /// The client's address.
    pub client: IpAddr,
    /// `http1` or `h2`.
    pub protocol: &'static str,
    /// Whether the connection is TLS.
    pub tls: bool,
}

/// An access-log line with `--log-format json`: the fields every log line
/// has (`ts`, `level`, `msg`), then the request's.
#[derive(Serialize)]
struct Structured<'a> {
    ts: &'a str,
    level: &'static str,
    msg: &'static str,
    method: &'a str,
    route: &'a str,
    status: u16,
    micros: u64,
    key: Option<&'a str>,
    client: IpAddr,
    protocol: &'static str,
    tls: bool,
}

impl Line<'_> {
    /// Writes the line to stderr in one `write` (lines from concurrent
    /// requests never interleave).
    pub fn write(&self) {
        let bytes = match super::log::format() {
            super::log::Format::Text => serde_json::to_vec(self),
            super::log::Format::Json => serde_json::to_vec(&Structured {
                ts: &self.time,
                level: "INFO",
                msg: "request",
                method: self.method,
                route: self.route,
                status: self.status,
                micros: self.micros,
                key: self.key,
                client: self.client,
                protocol: self.protocol,
                tls: self.tls,
            }),
        };
        let mut bytes = bytes.unwrap_or_default();
        bytes.push(b'\n');
        let _ = std::io::stderr().lock().write_all(&bytes);
    }
}

/// Whole microseconds of a duration.
pub fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_one_json_object_without_secrets() {
        let line = Line {
            time: crate::telemetry::log::now(),
            method: "GET",
            route: "/v1/pets/{petId}",
            status: 200,
            micros: 84,
            key: Some("shop \"frontend\""),
            client: IpAddr::from([127, 0, 0, 1]),
            protocol: "h2",
            tls: true,
        };
        let v: serde_json::Value = serde_json::to_value(&line).unwrap();
        assert_eq!(v["route"], "/v1/pets/{petId}");
        assert_eq!((&v["protocol"], &v["tls"]), (&"h2".into(), &true.into()));
        assert_eq!(v["key"], "shop \"frontend\"");
        assert_eq!(v["client"], "127.0.0.1");
        assert_eq!(v.as_object().map(|o| o.len()), Some(9));
    }
}
