//! Sockets and connections: the accept loop, TLS, hyper's HTTP/1.1 or
//! HTTP/2 connection per client, the limits that keep hostile clients
//! cheap, and graceful shutdown.
//!
//! Every wait a client can make is bounded (header, body and write
//! timeouts, HTTP/2's watchdog), connections are capped in total and per
//! address, and every handler runs under `catch_unwind`. Each limit and
//! why: docs/operating.md, "Limits that keep hostile clients cheap", and
//! for HTTP/2, docs/http.md, "HTTP/2 and TLS".
//!
//! | file | holds |
//! |---|---|
//! | `mod.rs` | [`run`], [`serve`]: the accept loop |
//! | `limits.rs` | [`ConnLimits`]: the limits of a connection and of the accept loop |
//! | `driver.rs` | the one request driver: hyper's service call, the body, the awaits |
//! | `protocol.rs` | one connection: TLS handshake, HTTP/1.1 or HTTP/2, graceful stop; connections by protocol |
//! | `h2.rs` | HTTP/2's settings and the watchdog of its streams |
//! | `hpack.rs` | which HTTP/2 responses let HPACK index their changing rate-limit values |
//! | `header_timer.rs` | the timer of HTTP/1's header timeout: one table and a ticker, not a timer entry a request |
//! | `stop.rs` | the stop signal every connection holds, cheap to poll |
//! | `test_waker.rs` | (tests only) a waker that counts its wakes |
//! | `panic_test.rs` | (tests only) a handler's panic over TCP: 500, its log line, the connection kept |
//! | `tls.rs` | [`Tls`]: `--tls-cert`/`--tls-key`, reloaded on SIGHUP |
//! | `not_after.rs` | when a certificate chain expires, read from its DER |
//! | `per_address.rs` | [`PerAddress`]: open connections per client address, and their cap |
//! | `proxy_protocol.rs` | `--proxy-protocol`: the client address from a PROXY header |
//! | `write_timeout.rs` | a socket whose stalled writes fail after a bounded time |
//!
//! May use: `util`, `telemetry`, `state.rs`, `http/mod.rs`.

mod driver;
mod h2;
mod header_timer;
mod hpack;
mod limits;
mod not_after;
#[cfg(test)]
mod panic_test;
mod per_address;
mod protocol;
mod proxy_protocol;
mod stop;
#[cfg(test)]
mod test_waker;
mod tls;
mod write_timeout;

use std::convert::Infallible;
use std::future::Future;
use std::net::IpAddr;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::Request;
use hyper_util::rt::TokioTimer;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};

use stop::Stopper;

pub use driver::Reply;
pub use limits::ConnLimits;
pub use per_address::{refused_total, PerAddress, RefusedConnections};
pub use protocol::{served_total, ConnectionsByProtocol, Protocol};
pub use tls::{Tls, TlsError};

use crate::http::{Api, Connection, HttpResponse};
use crate::state::AppState;
use crate::{log_error, log_info};
use protocol::Protocols;

/// The runtime the server runs on: tokio's multi-threaded scheduler with
/// its defaults (one worker per core). The load benchmark's baseline
/// builds its runtime here too, so both run on the same settings.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

/// Serves `listener` (over TLS when `tls` is given; and `admin`'s
/// listener with its API, for `--admin-addr`, in plaintext) until
/// `shutdown` completes, then stops accepting and waits (at most
/// `limits.shutdown_grace`) for the requests in flight.
pub async fn run(
    listener: TcpListener,
    tls: Option<Arc<Tls>>,
    state: Arc<AppState>,
    api: Arc<Api>,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()>,
    admin: Option<(TcpListener, Arc<Api>)>,
) {
    let Some((admin_listener, admin_api)) = admin else {
        return serve_api(listener, tls, state, api, limits, shutdown).await;
    };
    // Both listeners stop at the same signal, after the same drain: the
    // admin one keeps answering `/healthz` (503 `draining`) meanwhile.
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    // The admin listener is for monitors (Prometheus, a balancer's health
    // check on its own port): never behind a PROXY header.
    let admin_limits = ConnLimits {
        proxy_protocol: false,
        ..limits
    };
    tokio::join!(
        async move {
            shutdown.await;
            let _ = stop_tx.send(true);
        },
        serve_api(
            listener,
            tls,
            state.clone(),
            api,
            limits,
            stopped(stop_rx.clone())
        ),
        serve_api(
            admin_listener,
            None,
            state,
            admin_api,
            admin_limits,
            stopped(stop_rx)
        ),
    );
}

/// [`serve`] with the API's request driver.
async fn serve_api(
    listener: TcpListener,
    tls: Option<Arc<Tls>>,
    state: Arc<AppState>,
    api: Arc<Api>,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()>,
) {
    let body_timeout = limits.body_timeout;
    serve(listener, limits, tls, shutdown, move |peer| {
        // One Arc per connection, cloned only by requests that must wait
        // (a body to read, an fsync): its count is touched by that
        // connection alone, where cloning the shared state's Arc per
        // request would bounce one cache line between all worker threads.
        let connection = Arc::new(Connection::new(state.clone(), api.clone(), peer));
        move |request| driver::reply(&connection, request, body_timeout)
    })
    .await;
}

/// A connection whose PROXY header has been read: its stream, the
/// client's address, its slot, and what is left of its header timeout.
type Proxied = (TcpStream, IpAddr, OwnedSemaphorePermit, Duration);

/// The accept loop with all the limits, around any handler:
/// `connect(peer)` makes the handler of one connection's requests. [`run`]
/// uses it with the API; the load benchmark's baseline server uses it with
/// a handler that does no work, so both have the same runtime and
/// connection settings.
pub async fn serve<C, H, F>(
    listener: TcpListener,
    limits: ConnLimits,
    tls: Option<Arc<Tls>>,
    shutdown: impl Future<Output = ()>,
    mut connect: C,
) where
    C: FnMut(IpAddr) -> H,
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Result<HttpResponse, Infallible>> + Send + 'static,
{
    let mut http1 = http1::Builder::new();
    match header_timer::HeaderTimer::new() {
        Ok(timer) => http1.timer(timer),
        Err(e) => {
            // No thread for its ticker: tokio's timer does the same job,
            // at a timer entry a request.
            log_error!("cannot start the header timer's thread ({e}); using tokio's timer");
            http1.timer(TokioTimer::new())
        }
    };
    http1
        .header_read_timeout(limits.header_timeout)
        .max_header_size(16 * 1024)
        .keep_alive(true);
    let protocols = Arc::new(Protocols {
        http1,
        http2: h2::builder(),
        limits,
        tls,
    });
    // Every connection holds a `Stop`: the stopper counts them, tells
    // them to stop, and waits until they are gone (`stop.rs`).
    let stop = Stopper::new();
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let per_address = PerAddress::new(limits.max_connections_per_address);
    let mut shutdown = pin!(shutdown);

    // A slot is taken before accepting, and the address is checked after:
    // while every slot is held nothing is accepted, so waiting clients
    // stay in the kernel's backlog (bounded memory, no fd per client).
    // The backlog is first in, first out: a connection over its address's
    // cap that waits there is accepted in its turn, closed at once, and
    // its slot goes straight to the next accept, so it delays the clients
    // behind it by one accept and one close, never by a slot. (Accepting
    // first and then waiting for a slot with the connection in hand
    // would hold it just the same, plus its file descriptor.)
    // With `--proxy-protocol`, a connection's address is known only once
    // its header is read: that happens in a task of its own (bounded by
    // the header timeout, holding its slot), which hands the connection
    // back here to be counted per address and served.
    let (ready_tx, mut ready_rx) = mpsc::unbounded_channel::<Proxied>();
    // `header_left`: the header timeout not yet spent. One timeout covers
    // the PROXY header, the TLS handshake and the HTTP head together (a
    // client sending each slowly could otherwise hold a connection for
    // several timeouts), so a proxied connection's head gets only what
    // its PROXY header left. hyper applies the builder's timeout to each
    // head of the connection, so its later keep-alive waits are shorter
    // by that too: by the microseconds a balancer takes to send its
    // header.
    let mut start =
        |stream: TcpStream, ip: IpAddr, slot: OwnedSemaphorePermit, header_left: Duration| {
            let Some(address_slot) = per_address.take(ip) else {
                // Over the address's cap: closed now (the drop); the slot
                // goes back to the caller.
                drop(stream);
                return Some(slot);
            };
            let _ = stream.set_nodelay(true);
            let handler = connect(ip);
            let protocols = protocols.clone();
            let stop = stop.subscribe();
            tokio::spawn(async move {
                // The address's place is given back before the slot (a
                // tuple drops in order): the accept that the freed slot lets
                // through must find the count already lowered, or it would
                // refuse a connection that is within the cap.
                let _slots = (address_slot, slot);
                protocol::serve_connection(protocols, stream, header_left, handler, stop).await;
            });
            None
        };
    let mut permit = None;
    loop {
        let slot = match permit.take() {
            Some(slot) => slot,
            None => tokio::select! {
                slot = permits.clone().acquire_owned() => match slot {
                    Ok(slot) => slot,
                    Err(_) => break, // the semaphore is never closed
                },
                Some((stream, ip, slot, left)) = ready_rx.recv() => {
                    drop(start(stream, ip, slot, left));
                    continue;
                }
                () = &mut shutdown => break,
            },
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    log_error!("accept failed: {e}");
                    permit = Some(slot);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            Some((stream, ip, ready_slot, left)) = ready_rx.recv() => {
                drop(start(stream, ip, ready_slot, left));
                permit = Some(slot);
                continue;
            }
            () = &mut shutdown => break,
        };
        if limits.proxy_protocol {
            // While its header is read, a connection is counted under
            // the socket's own address (its client's is not known yet):
            // otherwise one address could hold every slot with
            // connections that never send a header. A balancer's
            // connections send theirs at once, so they pass through this
            // count in a moment.
            let Some(header_slot) = per_address.take(peer.ip()) else {
                drop(stream);
                permit = Some(slot);
                continue;
            };
            let ready = ready_tx.clone();
            let timeout = limits.header_timeout;
            tokio::spawn(async move {
                let accepted = tokio::time::Instant::now();
                let mut stream = stream;
                let read = proxy_protocol::read_header(&mut stream, peer.ip());
                // Otherwise closed (the drop): no header, a bad one, or
                // none in time. Not logged: anyone can connect.
                if let Ok(Ok(ip)) = tokio::time::timeout(timeout, read).await {
                    let left = timeout.saturating_sub(accepted.elapsed());
                    if left.is_zero() {
                        return; // the whole timeout spent on the header
                    }
                    // Handed over to be counted under the client's address.
                    drop(header_slot);
                    let _ = ready.send((stream, ip, slot, left));
                }
            });
            continue;
        }
        // Over the address's cap: the slot is kept for the next client.
        permit = start(stream, peer.ip(), slot, limits.header_timeout);
    }

    drop(listener);
    if !limits.settle.is_zero() {
        let settled = async {
            while stop.open() > 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        let _ = tokio::time::timeout(limits.settle, settled).await;
    }
    log_info!(
        "shutting down: waiting for {} open connection(s)",
        stop.open()
    );
    // Each connection closes once idle (HTTP/1) or after GOAWAY and its
    // streams (HTTP/2).
    stop.stop();
    tokio::select! {
        () = stop.closed() => log_info!("all connections closed"),
        () = tokio::time::sleep(limits.shutdown_grace) => {
            log_error!("requests still in flight after {:?}; stopping anyway", limits.shutdown_grace);
        }
    }
}
