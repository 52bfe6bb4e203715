//! `GET /v1/openapi.json`: the OpenAPI document of the contract,
//! embedded so the binary serves exactly the file in the repository.

use hyper::body::Bytes;

/// The OpenAPI document, embedded so the binary serves exactly the file in
/// the repository.
pub const OPENAPI: &str = include_str!("../../openapi.json");

/// The one server URL of [`OPENAPI`], as written in the file.
const OPENAPI_SERVER_URL: &str = "\"url\": \"/v1\"";

/// The document as served for `base_url`: the file itself when there is
/// no configured base address (`/v1`), else the file with that address as
/// its server URL, so that generated clients and tools call the public
/// address instead of guessing `http://localhost/v1`. Built once at start
/// ([`Api::new`](super::Api::new)), never per request. A text replacement, not a
/// parse and re-encode, so every other byte stays the file's (a unit test
/// checks that the file names its server URL exactly once).
pub fn openapi_document(base_url: &str) -> Bytes {
    if base_url == "/v1" {
        return Bytes::from_static(OPENAPI.as_bytes());
    }
    // A JSON string literal of the URL (`--base-url` refuses quotes
    // already; the encoder makes sure).
    let url = serde_json::to_string(base_url).unwrap_or_else(|_| "\"/v1\"".into());
    Bytes::from(OPENAPI.replacen(OPENAPI_SERVER_URL, &format!("\"url\": {url}"), 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_openapi_document_names_the_base_url_as_its_server() {
        assert_eq!(OPENAPI.matches(OPENAPI_SERVER_URL).count(), 1);
        let servers = |doc: &Bytes| {
            let v: serde_json::Value = serde_json::from_slice(doc).unwrap();
            v["servers"].clone()
        };
        let plain = openapi_document("/v1");
        assert_eq!(plain.as_ref(), OPENAPI.as_bytes());
        assert_eq!(servers(&plain)[0]["url"], "/v1");
        for base in [
            "https://pets.example.com/v1",
            "/api/v1",
            "http://10.0.0.1:8080/x/v1",
        ] {
            let doc = openapi_document(base);
            assert_eq!(servers(&doc)[0]["url"], base);
            assert_eq!(servers(&doc).as_array().map(Vec::len), Some(1));
            // Nothing else changed.
            let mut a: serde_json::Value = serde_json::from_slice(&doc).unwrap();
            let mut b: serde_json::Value = serde_json::from_str(OPENAPI).unwrap();
            a["servers"] = serde_json::Value::Null;
            b["servers"] = serde_json::Value::Null;
            assert_eq!(a, b, "{base}");
        }
    }
}
