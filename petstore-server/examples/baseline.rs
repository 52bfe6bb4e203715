//! The ruler of the load benchmark (`scripts/load`): raw hyper with the
//! same runtime and connection settings as petstore-server
//! ([`petstore_server::server::runtime`], [`petstore_server::server::serve`]),
//! answering every request with one fixed, pre-encoded page of 20 pets and
//! doing no other work. It is the physical limit the server is measured
//! against, not a product.
//!
//! Run: `cargo run --release -p petstore-server --example baseline -- 127.0.0.1:0`
//! (prints `listening on http://IP:PORT` like the server).

use std::convert::Infallible;
use std::process::ExitCode;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::Response;
use petstore_server::server::{self, serve, Limits};
use tokio::net::TcpListener;

/// 20 pets, as `GET /v1/pets?limit=20` answers them on a seeded server.
/// Static (leaked once), so handing it to a response touches no shared
/// reference count: the ruler does no avoidable work.
fn page() -> Bytes {
    let statuses = ["available", "pending", "sold"];
    let pets: Vec<String> = (1..=20)
        .map(|id| {
            format!(
                r#"{{"id":{id},"name":"pet-{id:06}","categoryId":{},"status":"{}"}}"#,
                id % 10 + 1,
                statuses[id % 3]
            )
        })
        .collect();
    Bytes::from_static(format!("[{}]", pets.join(",")).leak().as_bytes())
}

fn main() -> ExitCode {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8081".into());
    let runtime = match server::runtime() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let listener = match TcpListener::bind(&addr).await {
            Ok(listener) => listener,
            Err(e) => {
                eprintln!("cannot listen on {addr}: {e}");
                return ExitCode::FAILURE;
            }
        };
        if let Ok(local) = listener.local_addr() {
            println!("listening on http://{local}");
        }
        let body = page();
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        serve(listener, Limits::default(), shutdown, move |_peer| {
            let body = body.clone();
            move |_request| {
                let mut response = Response::new(Full::new(body.clone()));
                response
                    .headers_mut()
                    .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                async move { Ok::<_, Infallible>(response) }
            }
        })
        .await;
        ExitCode::SUCCESS
    })
}
