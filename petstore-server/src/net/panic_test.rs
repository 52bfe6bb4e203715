//! A panic in a handler, end to end over real TCP: the server answers
//! 500 `internal`, logs the panic's place, and keeps the connection.
//! The panic is the test-only hook of `AppState` (compiled only for
//! tests): the next list request panics where a bug in it would.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use petstore_core::{Inventory, Quota, SystemClock};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use super::{run, ConnLimits};
use crate::http::Api;
use crate::keys::Keys;
use crate::ratelimit::RateLimits;
use crate::state::AppState;
use crate::store::Store;
use crate::telemetry::log::tests::logged;
use crate::telemetry::panics;

const KEY: &str = "panic-test-key";

/// Reads one response with a `Content-Length` body off `stream`.
fn read_response(stream: &mut TcpStream) -> String {
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&bytes[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if bytes.len() >= end + 4 + length {
                return String::from_utf8_lossy(&bytes[..end + 4 + length]).into_owned();
            }
        }
        let n = stream.read(&mut chunk).expect("read a response");
        assert!(
            n > 0,
            "the connection closed: {}",
            String::from_utf8_lossy(&bytes)
        );
        bytes.extend_from_slice(&chunk[..n]);
    }
}

#[test]
fn a_handler_panic_is_a_logged_500_and_the_connection_lives_on() {
    panics::install_for_tests();
    let keys = Keys::single("test", KEY, Quota::new(1000, 10_000).unwrap());
    let state = Arc::new(AppState::new(
        Store::local(Arc::new(Inventory::in_memory())),
        RateLimits::Local,
        keys,
        None,
        Arc::new(SystemClock::new()),
        None,
    ));
    let runtime = super::runtime().unwrap();
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = runtime.spawn(run(
        listener,
        None,
        state.clone(),
        Arc::new(Api::default()),
        ConnLimits::default(),
        async move {
            let _ = stopped.await;
        },
        None,
    ));

    let mut stream = TcpStream::connect(addr).unwrap();
    // Bounded only to catch a hang.
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let list = format!("GET /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\r\n");
    state.panic_on_next_list.store(true, Ordering::Relaxed);
    stream.write_all(list.as_bytes()).unwrap();
    let first = read_response(&mut stream);
    assert!(first.starts_with("HTTP/1.1 500"), "{first}");
    assert!(first.contains(r#""code":"internal""#), "{first}");
    // The same connection answers the next request.
    stream.write_all(list.as_bytes()).unwrap();
    let second = read_response(&mut stream);
    assert!(second.starts_with("HTTP/1.1 200"), "{second}");

    // The hook's line names the place and the message; the driver's names
    // the place and the request, never the key.
    let place = "src/http/finish.rs:";
    let hook = logged("the test hook's deliberate panic in a list");
    assert_eq!(hook.len(), 1, "{hook:?}");
    assert!(hook[0].contains("ERROR panicked at "), "{hook:?}");
    assert!(hook[0].contains(place), "{hook:?}");
    let driver = logged("handler panicked at ");
    assert!(
        driver
            .iter()
            .any(|l| l.contains(place) && l.contains("on GET /v1/pets; answered 500")),
        "{driver:?}"
    );
    assert!(logged(KEY).is_empty(), "the key was logged");

    let _ = stop.send(());
    runtime.block_on(server).unwrap();
}
