//! Requests without a key from many source addresses: each address has its
//! own bucket, a flood does not touch keyed clients, and the limiter's
//! memory is bounded by its capacity (`PETSTORE_ANONYMOUS_CAPACITY`),
//! which a flood here goes past: evicted addresses start over with a full
//! bucket, recent ones keep theirs.
//!
//! Every address in 127.0.0.0/8 is this machine's, so a client socket
//! bound to 127.0.x.y before connecting is a distinct client to the server.

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

use crate::common::TempDir;

struct Server {
    child: Child,
    addr: SocketAddr,
    /// Holds the keys file; removed after the process is gone.
    _dir: TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Client addresses the server's anonymous limiter remembers at most.
const CAPACITY: u32 = 1_000;

fn start(keys: &str) -> Server {
    let dir = TempDir::new();
    let path = dir.join("keys.json");
    std::fs::write(&path, keys).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_petstore-server"))
        .args(["--addr", "127.0.0.1:0", "--in-memory", "--keys"])
        .arg(&path)
        .env("PETSTORE_ANONYMOUS_CAPACITY", CAPACITY.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("server exited").unwrap();
        if let Some(a) = line.strip_prefix("listening on http://") {
            break a.parse().unwrap();
        }
    };
    Server {
        child,
        addr,
        _dir: dir,
    }
}

fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// One request from `from`, on its own connection: (status, whole response).
async fn request(
    server: SocketAddr,
    from: Ipv4Addr,
    path: &str,
    key: Option<&str>,
) -> (u16, String) {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(IpAddr::V4(from), 0)).unwrap();
    let mut stream = socket.connect(server).await.unwrap();
    let auth = key
        .map(|k| format!("Authorization: Bearer {k}\r\n"))
        .unwrap_or_default();
    let head = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, response)
}

fn header<'a>(response: &'a str, name: &str) -> Option<&'a str> {
    response.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[test]
fn each_address_has_its_own_bucket_and_a_flood_stays_small() {
    let server =
        start(r#"{"keys":[{"name":"k","key":"good-key","plan":"free"}],"anonymousPerMinute":3}"#);
    let addr = server.addr;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let first = Ipv4Addr::new(127, 0, 0, 2);
        for _ in 0..3 {
            let (status, response) = request(addr, first, "/v1/pets", None).await;
            assert_eq!(status, 401, "{response}");
            assert_eq!(
                header(&response, "ratelimit-policy"),
                Some(r#""minute";q=3;w=60"#)
            );
        }
        let (status, response) = request(addr, first, "/v1/pets", None).await;
        assert_eq!(status, 429, "{response}");
        assert!(response.contains(r#""code":"rate_limited""#), "{response}");
        let retry: u64 = header(&response, "retry-after").unwrap().parse().unwrap();
        assert!((1..=20).contains(&retry), "Retry-After {retry}");
        // Another address is another client...
        assert_eq!(
            request(addr, Ipv4Addr::new(127, 0, 0, 3), "/v1/pets", None)
                .await
                .0,
            401
        );
        // ...and a keyed client from the exhausted address is unaffected.
        assert_eq!(
            request(addr, first, "/v1/pets", Some("good-key")).await.0,
            200
        );

        // A flood from three times as many addresses as are remembered.
        let before = rss_kb(server.child.id());
        let addresses: Vec<Ipv4Addr> = (0..3 * CAPACITY)
            .map(|i| Ipv4Addr::from(0x7f01_0000 + i))
            .collect();
        let tracked = || async {
            let (_, metrics) = request(addr, Ipv4Addr::new(127, 0, 0, 9), "/metrics", None).await;
            metrics
                .lines()
                .find_map(|l| l.strip_prefix("petstore_anonymous_clients "))
                .unwrap()
                .parse::<u32>()
                .unwrap()
        };
        let mut most = 0;
        for chunk in addresses.chunks(50) {
            let batch: Vec<_> = chunk
                .iter()
                .map(|from| tokio::spawn(request(addr, *from, "/v1/pets?limit=1", None)))
                .collect();
            for task in batch {
                assert_eq!(task.await.unwrap().0, 401);
            }
            most = most.max(tracked().await);
        }
        let after = rss_kb(server.child.id());
        // Never more than the capacity; at least the current generation
        // (half of it) is there.
        assert!(
            most <= CAPACITY && tracked().await >= CAPACITY / 2,
            "remembered at most {most}, now {}",
            tracked().await
        );
        assert!(
            after < before + 16 * 1024,
            "RSS grew from {before} kB to {after} kB"
        );
        // The first address, emptied before the flood, was evicted: it
        // starts over with a full bucket (3 a minute, 2 left after this).
        let (status, response) = request(addr, first, "/v1/pets", None).await;
        assert_eq!(status, 401, "{response}");
        assert_eq!(
            header(&response, "x-ratelimit-remaining"),
            Some("2"),
            "{response}"
        );
        // The last address of the flood is remembered: its bucket goes on.
        let last = *addresses.last().unwrap();
        let (_, response) = request(addr, last, "/v1/pets", None).await;
        assert_eq!(
            header(&response, "x-ratelimit-remaining"),
            Some("1"),
            "{response}"
        );
        // The server is still answering keyed clients normally.
        assert_eq!(
            request(addr, first, "/v1/pets", Some("good-key")).await.0,
            200
        );
    });
}
