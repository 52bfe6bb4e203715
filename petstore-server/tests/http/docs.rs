//! `GET /docs` and the files it loads: status, types, the CSP, caching,
//! gzip when accepted and not otherwise, HEAD, 405, `--no-docs`, the
//! admin listener, and the admission of `/v1/openapi.json` (no key, no
//! rate limit, its own route label). What the page does in a browser is
//! scripts/docs-browser's.
//!
//! The assets are committed in docs-page/vendor/: a binary built from a
//! checkout without them answers `/docs` 404, and these tests fail
//! saying so.

use crate::common;

use std::io::{Read as _, Write as _};
use std::net::SocketAddr;
use std::process::{Command, Stdio};

use common::{assert_error, Conn, Response, Server};
use serde_json::json;

/// The CSP of the page and of every asset: this origin only.
const CSP: &str = "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// `/docs`, checked to be the page (with a message naming what to check
/// when this binary was built without the assets).
fn page(server: &Server) -> Response {
    let resp = server.get("/docs", None);
    assert_eq!(
        resp.status,
        200,
        "no docs page (was petstore-server/docs-page/vendor missing or damaged at the build? scripts/docs-assets --check): {}",
        resp.describe()
    );
    resp
}

/// The asset URLs the page names (`href="..."`, `src="..."`).
fn asset_paths(page: &Response) -> Vec<String> {
    let html = page.text();
    let mut paths = Vec::new();
    for attr in ["href=\"", "src=\""] {
        let mut rest = html.as_str();
        while let Some(at) = rest.find(attr) {
            rest = &rest[at + attr.len()..];
            let end = rest.find('"').unwrap();
            paths.push(rest[..end].to_owned());
            rest = &rest[end..];
        }
    }
    paths
}

/// The path of the page's asset named `name`.
fn asset(page: &Response, name: &str) -> String {
    asset_paths(page)
        .into_iter()
        .find(|p| p.ends_with(&format!("/{name}")))
        .unwrap_or_else(|| panic!("the page names no {name}: {}", page.text()))
}

fn get_with(server: &Server, path: &str, accept_encoding: &str) -> Response {
    server.request("GET", path, &[("Accept-Encoding", accept_encoding)], None)
}

/// `bytes` gunzipped by the system's gzip.
fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut child = Command::new("gzip")
        .arg("-dc")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("gzip");
    let mut stdin = child.stdin.take().unwrap();
    let input = bytes.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "gzip -dc failed: not gzip data");
    out.stdout
}

#[test]
fn the_page_and_its_assets_are_served_with_their_types_csp_and_caching() {
    let server = Server::start(&[]);
    let page = page(&server);
    assert_eq!(page.single("content-type"), "text/html; charset=utf-8");
    assert_eq!(page.single("content-security-policy"), CSP);
    assert_eq!(page.single("cache-control"), "no-cache");
    assert_eq!(page.single("x-content-type-options"), "nosniff");
    let html = page.text();
    assert!(html.contains(r#"data-spec="/v1/openapi.json""#), "{html}");
    assert!(html.contains(r#"data-try-it-out="true""#), "{html}");
    // No inline script or style: the CSP forbids them.
    assert!(
        !html.contains("<script>") && !html.contains("<style"),
        "{html}"
    );

    let paths = asset_paths(&page);
    assert_eq!(paths.len(), 5, "{paths:?}");
    for path in &paths {
        // One versioned folder for all: /docs/{fingerprint}/{name}.
        let folder = path.rsplit_once('/').unwrap().0;
        assert_eq!(folder, asset(&page, "init.js").rsplit_once('/').unwrap().0);
        assert!(folder.starts_with("/docs/") && folder.len() > "/docs/".len());
        let resp = server.get(path, None);
        assert_eq!(resp.status, 200, "{path}: {}", resp.describe());
        let want = match path.rsplit_once('.').unwrap().1 {
            "js" => "text/javascript; charset=utf-8",
            "css" => "text/css; charset=utf-8",
            "png" => "image/png",
            other => panic!("{path}: an asset of type {other}"),
        };
        assert_eq!(resp.single("content-type"), want, "{path}");
        assert_eq!(
            resp.single("cache-control"),
            "public, max-age=31536000, immutable",
            "{path}"
        );
        assert_eq!(resp.single("content-security-policy"), CSP, "{path}");
        assert_eq!(resp.single("x-content-type-options"), "nosniff", "{path}");
        assert!(!resp.body.is_empty(), "{path}");
    }

    // Offline: no validator badge; and the start is a served file.
    let init = server.get(&asset(&page, "init.js"), None).text();
    assert!(init.contains("validatorUrl: null"), "{init}");
    assert!(init.contains("SwaggerUIBundle("), "{init}");
    // The stylesheet's images are files of this origin, never `data:`
    // (the CSP would refuse them): each one it names is served.
    let css_path = asset(&page, "swagger-ui.css");
    let css = server.get(&css_path, None).text();
    assert!(
        !css.contains("data:"),
        "an inline image is left in the stylesheet"
    );
    let folder = css_path.rsplit_once('/').unwrap().0;
    let mut images = 0;
    for (i, _) in css.match_indices("url(") {
        let name = css[i + 4..].split(')').next().unwrap();
        let resp = server.get(&format!("{folder}/{name}"), None);
        assert_eq!(resp.status, 200, "{name}: {}", resp.describe());
        assert!(resp.single("content-type").starts_with("image/"), "{name}");
        images += 1;
    }
    assert!(images > 0, "the stylesheet names no image");
}

#[test]
fn assets_are_gzipped_only_when_the_client_accepts_it() {
    let server = Server::start(&[]);
    let page = page(&server);
    for name in ["swagger-ui-bundle.js", "swagger-ui.css"] {
        let path = asset(&page, name);
        let plain = server.get(&path, None);
        assert_eq!(plain.status, 200);
        assert_eq!(plain.header("content-encoding"), None, "{name}");
        assert_eq!(plain.single("vary"), "accept-encoding", "{name}");
        for accepted in [
            "gzip",
            "gzip, deflate, br, zstd",
            "br;q=1.0, gzip;q=0.5",
            "*",
        ] {
            let zipped = get_with(&server, &path, accepted);
            assert_eq!(zipped.status, 200);
            assert_eq!(
                zipped.single("content-encoding"),
                "gzip",
                "{name} {accepted}"
            );
            assert_eq!(zipped.single("vary"), "accept-encoding");
            assert_eq!(zipped.single("content-security-policy"), CSP);
            assert_eq!(
                zipped.header_u64("content-length"),
                zipped.body.len() as u64
            );
            // Compressed, and the same bytes once decompressed.
            assert!(zipped.body.len() * 3 < plain.body.len(), "{name}");
            assert_eq!(gunzip(&zipped.body), plain.body, "{name}");
        }
        for refused in ["identity", "br, deflate", "gzip;q=0", "gzip;q=0, *"] {
            let resp = get_with(&server, &path, refused);
            assert_eq!(resp.header("content-encoding"), None, "{name} {refused}");
            assert_eq!(resp.body, plain.body, "{name} {refused}");
        }
    }
    // The small files have no gzip copy: always as they are.
    let init = get_with(&server, &asset(&page, "init.js"), "gzip");
    assert_eq!(init.header("content-encoding"), None);
    assert_eq!(init.header("vary"), None);
    assert_eq!(
        get_with(&server, "/docs", "gzip").header("content-encoding"),
        None
    );
}

#[test]
fn head_405_and_unknown_paths_under_docs() {
    let server = Server::start(&["--cors-origin", "https://app.example"]);
    let page = page(&server);
    let bundle = asset(&page, "swagger-ui-bundle.js");
    for (path, encoding) in [
        ("/docs", "gzip"),
        (bundle.as_str(), "gzip"),
        (bundle.as_str(), "identity"),
    ] {
        let get = get_with(&server, path, encoding);
        // Read to the close: whatever follows the head would be a body.
        let mut conn = server.connect();
        let request = format!(
            "HEAD {path} HTTP/1.1\r\nHost: x\r\nAccept-Encoding: {encoding}\r\nConnection: close\r\n\r\n"
        );
        conn.send(request.as_bytes()).unwrap();
        let mut bytes = Vec::new();
        conn.stream.read_to_end(&mut bytes).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200 "), "{path}: {head}");
        assert_eq!(body, "", "HEAD {path} sent a body");
        let header = |name: &str| {
            head.lines()
                .filter_map(|l| l.split_once(": "))
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.to_owned())
        };
        let length = get.body.len().to_string();
        assert_eq!(header("content-length").as_ref(), Some(&length), "{path}");
        for name in [
            "content-type",
            "content-encoding",
            "cache-control",
            "content-security-policy",
        ] {
            assert_eq!(header(name).as_deref(), get.header(name), "{path} {name}");
        }
    }
    for path in ["/docs", bundle.as_str()] {
        for method in ["POST", "PUT", "DELETE"] {
            let resp = server.request(method, path, &[], Some(b"x"));
            assert_error(&resp, 405, "method_not_allowed");
            assert_eq!(
                resp.single("allow"),
                "GET, HEAD, OPTIONS",
                "{method} {path}"
            );
        }
        // The preflight of any route, as on /v1/openapi.json.
        let preflight = server.request(
            "OPTIONS",
            path,
            &[
                ("Origin", "https://app.example"),
                ("Access-Control-Request-Method", "GET"),
            ],
            None,
        );
        assert_eq!(preflight.status, 204, "{}", preflight.describe());
    }
    let folder = bundle.rsplit_once('/').unwrap().0;
    for path in [
        "/docs/".to_owned(),
        "/docs/swagger-ui-bundle.js".to_owned(),
        format!("{folder}/"),
        format!("{folder}/swagger-ui-bundle.js.map"),
        format!("{folder}/../openapi.json"),
        "/docs/0000000000000000/swagger-ui-bundle.js".to_owned(),
        format!("{folder}x/swagger-ui-bundle.js"),
        format!("{folder}/init.js/x"),
    ] {
        assert_error(&server.get(&path, None), 404, "not_found");
    }
}

#[test]
fn no_docs_turns_the_page_off_and_leaves_the_document() {
    let on = Server::start(&[]);
    let bundle = asset(&page(&on), "swagger-ui-bundle.js");
    let server = Server::start(&["--no-docs"]);
    for path in ["/docs", bundle.as_str()] {
        let resp = server.get(path, None);
        assert_error(&resp, 404, "not_found");
        assert_eq!(resp.header("content-security-policy"), None);
    }
    assert_eq!(server.get("/v1/openapi.json", None).status, 200);
    let env = Server::builder().env("PETSTORE_NO_DOCS", "true").start();
    assert_error(&env.get("/docs", None), 404, "not_found");
}

/// The admin listener shows the page as a reference: the document it
/// shows, no operation to try (they are on the public port).
#[test]
fn the_admin_listener_serves_the_page_and_its_document() {
    let server = Server::start(&["--admin-addr", "127.0.0.1:0"]);
    let admin = server.admin_addr();
    let get = |addr: SocketAddr, path: &str| {
        let mut c = Conn::open(addr);
        c.send(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .unwrap();
        c.read_response()
    };
    let public = page(&server);
    assert!(public.text().contains(r#"data-try-it-out="true""#));
    let there = get(admin, "/docs");
    assert_eq!(there.status, 200, "{}", there.describe());
    assert_eq!(there.single("content-security-policy"), CSP);
    assert!(
        there.text().contains(r#"data-try-it-out="false""#),
        "{}",
        there.text()
    );
    for path in asset_paths(&there) {
        assert_eq!(get(admin, &path).status, 200, "{path}");
    }
    let doc = get(admin, "/v1/openapi.json");
    assert_eq!(doc.status, 200);
    assert_eq!(doc.body, server.get("/v1/openapi.json", None).body);
    assert_error(&get(admin, "/v1/pets"), 404, "not_found");

    let off = Server::start(&["--admin-addr", "127.0.0.1:0", "--no-docs"]);
    let admin = off.admin_addr();
    assert_error(&get(admin, "/docs"), 404, "not_found");
    assert_error(&get(admin, "/v1/openapi.json"), 404, "not_found");
    assert_eq!(get(admin, "/healthz").status, 200);
}

/// Admitted as `/v1/openapi.json` is: no key, no rate limit (an address
/// over its anonymous limit still gets the page), counted and logged
/// under its own route templates.
#[test]
fn the_page_is_admitted_like_the_document_and_counted_under_its_routes() {
    let mut keys = common::default_keys();
    keys["anonymousPerMinute"] = json!(1);
    let server = Server::builder().keys(keys).arg("--access-log").start();
    let page = page(&server);
    let init = asset(&page, "init.js");
    // The one anonymous token of the minute, then a refusal.
    assert_eq!(server.get("/v1/pets", None).status, 401);
    assert_error(&server.get("/v1/pets", None), 429, "rate_limited");
    for _ in 0..3 {
        let resp = server.get("/docs", None);
        assert_eq!(resp.status, 200);
        assert_eq!(resp.header("ratelimit"), None);
        assert_eq!(server.get(&init, None).status, 200);
        assert_eq!(server.get("/v1/openapi.json", None).status, 200);
    }
    let metrics = server.get("/metrics", None).text();
    for line in [
        r#"petstore_requests_total{route="/docs",method="GET",status="200"} 4"#,
        r#"petstore_requests_total{route="/docs/{asset}",method="GET",status="200"} 3"#,
    ] {
        assert!(metrics.contains(line), "no {line} in:\n{metrics}");
    }
    let log = server.stderr_once_logged(r#""route":"/docs/{asset}""#);
    assert!(
        log.contains(r#""method":"GET","route":"/docs","status":200"#),
        "{log}"
    );
}
