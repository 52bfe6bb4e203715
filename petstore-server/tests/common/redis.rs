//! A private Redis for the tests: `redis-server` started on a free port
//! of 127.0.0.1 with its own directory, never the machine's Redis; killed
//! (and its directory removed) when the guard drops. Tests can kill it
//! hard, stop it, and start it again on the same port and directory.
//!
//! [`RedisCluster`] is three such servers made one Redis Cluster of three
//! masters (`redis-cli --cluster create`), for `--redis-cluster`.
//!
//! Without `redis-server` the test fails, naming the package to install:
//! the Redis tests are part of `cargo test --workspace` and never skip.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// The binary, found on `PATH`.
const BIN: &str = "redis-server";

/// A `redis-server` process of the test's own.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: super::TempDir,
    aof: bool,
    cluster: bool,
}

impl RedisServer {
    /// Starts one without persistence.
    pub fn start() -> RedisServer {
        RedisServer::start_with(false)
    }

    /// Starts one with the append-only file on (`appendfsync always`, so a
    /// `kill -9` loses nothing it acknowledged), in its own directory.
    pub fn start_with_aof() -> RedisServer {
        RedisServer::start_with(true)
    }

    fn start_with(aof: bool) -> RedisServer {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").expect("bind a probe port");
            l.local_addr().expect("probe port").port()
        };
        let mut server = RedisServer {
            child: None,
            port,
            dir: super::TempDir::new(),
            aof,
            cluster: false,
        };
        server.restart();
        server
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A plain (blocking) connection.
    pub fn connection(&self) -> redis::Connection {
        let client = redis::Client::open(self.url()).expect("redis url");
        client
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("connect to the test's redis-server")
    }

    /// (Re)starts the process on the same port and directory, and waits
    /// until it answers PING (and has loaded its AOF).
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "redis-server is already running");
        let port = self.port.to_string();
        let spawned = Command::new(BIN)
            .args(["--port", &port, "--bind", "127.0.0.1", "--save", ""])
            .args(["--appendonly", if self.aof { "yes" } else { "no" }])
            .args(["--appendfsync", "always"])
            .args(if self.cluster {
                // Its own nodes.conf in its directory, so that a restart
                // rejoins with its slots; the other shards go on serving
                // while one is down (no full coverage required).
                &[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "2000",
                    "--cluster-require-full-coverage",
                    "no",
                ][..]
            } else {
                &[][..]
            })
            .arg("--dir")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match spawned {
            Ok(child) => child,
            Err(e) => panic!(
                "cannot run `{BIN}` ({e}): the Redis tests need Redis 7 installed \
                 (Debian/Ubuntu: `apt-get install redis-server`)"
            ),
        };
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ok = redis::Client::open(self.url())
                .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(200)))
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
            if ok.is_ok() {
                return;
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!("redis-server exited at start with {status} (port {port} taken?)");
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer PING within 20 s"
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// `kill -STOP` (`pause`) or `kill -CONT`: a Redis that accepts
    /// connections (the kernel does) but does not answer, as an
    /// overloaded or swapping one.
    pub fn signal(&self, pause: bool) {
        let pid = self.child.as_ref().expect("redis-server running").id();
        let sig = if pause { "-STOP" } else { "-CONT" };
        let status = Command::new("kill")
            .arg(sig)
            .arg(pid.to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {sig} {pid}");
    }

    /// `kill -9`: the process goes without a word, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // A stopped process dies of SIGKILL too; nothing to resume.
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // `dir` goes with the fields, after the process is gone.
        self.kill();
    }
}

/// A port `p` free with `p + 10000` (a cluster node's bus port) free too.
fn cluster_port() -> u16 {
    for _ in 0..200 {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind a probe port");
        let port = l.local_addr().expect("probe port").port();
        if port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
    panic!("no free pair of ports for a Redis Cluster node");
}

/// A Redis Cluster of three masters of the test's own, no replicas.
#[derive(Debug)]
pub struct RedisCluster {
    /// The masters, in the order `redis-cli --cluster create` was given.
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts three cluster-enabled servers, makes them one cluster, and
    /// waits until every node says `cluster_state:ok`.
    pub fn start() -> RedisCluster {
        let nodes: Vec<RedisServer> = (0..3)
            .map(|_| {
                let mut node = RedisServer {
                    child: None,
                    port: cluster_port(),
                    dir: super::TempDir::new(),
                    aof: false,
                    cluster: true,
                };
                node.restart();
                node
            })
            .collect();
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let created = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output();
        let created = match created {
            Ok(out) => out,
            Err(e) => panic!(
                "cannot run `redis-cli` ({e}): the Redis Cluster tests need it \
                 (Debian/Ubuntu: `apt-get install redis-tools`)"
            ),
        };
        assert!(
            created.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&created.stdout)
        );
        let cluster = RedisCluster { nodes };
        for i in 0..3 {
            cluster.wait_ok(i);
        }
        cluster
    }

    /// The seed nodes, as `--redis-cluster` takes them.
    pub fn urls(&self) -> String {
        let urls: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}", n.port))
            .collect();
        urls.join(",")
    }

    /// Waits until node `i` says the cluster is ok (every slot served).
    pub fn wait_ok(&self, i: usize) {
        let ok = super::wait_until(Duration::from_secs(30), || {
            let info = redis::Client::open(self.nodes[i].url())
                .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(500)))
                .and_then(|mut c| redis::cmd("CLUSTER").arg("INFO").query::<String>(&mut c));
            info.is_ok_and(|text| text.contains("cluster_state:ok"))
        });
        assert!(
            ok,
            "node {i} of the Redis Cluster never said cluster_state:ok"
        );
    }

    /// The index of the node whose database holds `name`.
    pub fn node_holding(&self, name: &str) -> Option<usize> {
        (0..self.nodes.len()).find(|i| {
            let mut c = self.nodes[*i].connection();
            redis::cmd("EXISTS")
                .arg(name)
                .query::<u64>(&mut c)
                .is_ok_and(|n| n == 1)
        })
    }

    /// The number of keys in node `i`'s database.
    pub fn keys_on(&self, i: usize) -> u64 {
        let mut c = self.nodes[i].connection();
        redis::cmd("DBSIZE").query(&mut c).expect("DBSIZE")
    }
}
