//! [`Link`]: the connection to Redis, one server (`--redis`) or a Redis
//! Cluster (`--redis-cluster`). Both connect lazily, so a replica starts
//! while Redis is down, deciding alone until it answers.

use ::redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use ::redis::cluster::{ClusterClient, ClusterConfig};
use ::redis::cluster_async::ClusterConnection;
use ::redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo, Slot};
use ::redis::{FromRedisValue, IntoConnectionInfo, Pipeline, RedisResult, ScriptInvocation, Value};

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use super::breaker::{Shard, BREAKER};
use super::groups::{cluster_name, group, group_tag};
use super::nodes::Nodes;
use super::script::Previous;

/// The longest a request waits for Redis before its replica decides
/// alone, unless `--redis-timeout` says otherwise: Redis on the same
/// network answers a call in well under a millisecond, and a request
/// should not wait long for a limit its replica can decide itself.
pub const TIMEOUT: Duration = Duration::from_millis(50);

/// The connection to Redis. Cheap to clone (both are handles to shared
/// connections).
#[derive(Clone)]
pub(super) enum Link {
    /// One Redis server.
    Single(ConnectionManager),
    /// A Redis Cluster.
    Cluster(Cluster),
}

/// The connections to a Redis Cluster, and where its groups live.
#[derive(Clone)]
pub(super) struct Cluster {
    /// The calls of one group each: the client sends each to the master
    /// of its key's slot and follows MOVED and ASK itself (one retry; a
    /// redirected call has not run).
    calls: ClusterConnection,
    /// Each group's master, and a connection to each for the rounds.
    nodes: Arc<Nodes>,
}

/// Where a flusher runs, one call or round in flight each
/// (`mod.rs`, "One flusher per shard").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Lane {
    /// One shard: the one Redis, or a cluster group whose master is not
    /// known.
    Shard(Shard),
    /// The groups a cluster master holds (by [`Nodes`]' numbering).
    Master(u16),
}

impl Link {
    /// A link to the Redis at `url` (`redis://host:port/db`), each call
    /// and connection bounded by `timeout`.
    pub(super) fn single(url: &str, timeout: Duration) -> Result<Link, String> {
        let client = ::redis::Client::open(url).map_err(|e| format!("--redis: {e}"))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1)
            .set_max_delay(BREAKER);
        let connection = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|e| format!("--redis: {e}"))?;
        Ok(Link::Single(connection))
    }

    /// A link to the Redis Cluster that the seed nodes `urls` belong to,
    /// each call and connection bounded by `timeout`.
    pub(super) fn cluster(urls: &[String], timeout: Duration) -> Result<Link, String> {
        let Some(seed) = urls.first() else {
            return Err("--redis-cluster: no seed node given".into());
        };
        let seed = seed
            .as_str()
            .into_connection_info()
            .map_err(|e| format!("--redis-cluster: {e}"))?;
        let client = ClusterClient::builder(urls.iter().map(String::as_str))
            .connection_timeout(timeout)
            .response_timeout(timeout)
            .retries(1)
            .build()
            .map_err(|e| format!("--redis-cluster: {e}"))?;
        let config = ClusterConfig::new()
            .set_connection_timeout(timeout)
            .set_response_timeout(timeout);
        Ok(Link::Cluster(Cluster {
            calls: client.get_pending_async_connection_with_config(config),
            nodes: Arc::new(Nodes::new(seed, timeout)),
        }))
    }

    /// The lane of the state named `name`: in a cluster, its group's
    /// master when known (and the cluster's slots are read when none is).
    pub(super) fn lane(&self, name: &str) -> Lane {
        match self {
            Link::Single(_) => Lane::Shard(None),
            Link::Cluster(cluster) => {
                cluster.nodes.read_if_unknown(&cluster.calls);
                match cluster.nodes.master(group(name)) {
                    Some(master) => Lane::Master(master),
                    None => Lane::Shard(self.shard(name)),
                }
            }
        }
    }

    /// The cluster's slots are to be read again: a round failed, or one
    /// of its groups has moved.
    pub(super) fn moved(&self) {
        if let Link::Cluster(cluster) = self {
            cluster.nodes.read_again(&cluster.calls);
        }
    }

    /// Sends the `count` commands of `pipeline` in one write: to the
    /// master of `lane`, or, for a lane of one shard, where the client
    /// routes its (one) command. Every reply, an error among them for a
    /// command that failed alone (a cluster master's MOVED or ASK: the
    /// command did not run there).
    pub(super) async fn round(
        &self,
        pipeline: &Pipeline,
        count: usize,
        lane: Lane,
    ) -> RedisResult<Vec<Value>> {
        match (self, lane) {
            (Link::Single(connection), _) => {
                connection
                    .clone()
                    .req_packed_commands(pipeline, 0, count)
                    .await
            }
            (Link::Cluster(cluster), Lane::Master(master)) => {
                match cluster.nodes.connection(master) {
                    Some(mut connection) => {
                        connection.req_packed_commands(pipeline, 0, count).await
                    }
                    // Read again meanwhile, with fewer masters: as a redirection.
                    None => Err(::redis::RedisError::from((
                        ::redis::ErrorKind::Server(::redis::ServerErrorKind::TryAgain),
                        "the cluster's masters were read again",
                    ))),
                }
            }
            (Link::Cluster(cluster), Lane::Shard(_)) => {
                cluster
                    .calls
                    .clone()
                    .req_packed_commands(pipeline, 0, count)
                    .await
            }
        }
    }

    /// Loads the script `code` where `lane`'s calls go (a round found it
    /// missing there).
    pub(super) async fn load_script(&self, code: &str, lane: Lane) -> RedisResult<()> {
        let mut command = ::redis::cmd("SCRIPT");
        command.arg("LOAD").arg(code);
        match (self, lane) {
            (Link::Single(connection), _) => command.query_async(&mut connection.clone()).await,
            (Link::Cluster(cluster), Lane::Master(master)) => {
                match cluster.nodes.connection(master) {
                    Some(mut connection) => command.query_async(&mut connection).await,
                    None => Ok(()),
                }
            }
            // A lane of one shard: its call may go to any master (it
            // follows a redirection), so on every master.
            (Link::Cluster(cluster), Lane::Shard(_)) => {
                let routing = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
                cluster
                    .calls
                    .clone()
                    .route_command(command, routing)
                    .await
                    .map(drop)
            }
        }
    }

    /// The shard of the state named `name`: its group's hash slot in a
    /// cluster (`groups.rs`).
    pub(super) fn shard(&self, name: &str) -> Shard {
        match self {
            Link::Single(_) => None,
            Link::Cluster(_) => Some(Slot::for_key(group_tag(name))),
        }
    }

    /// The shard of the slot of `name`'s own hash tag: where, in a
    /// cluster, earlier versions kept the state (`{<sha256>}...`).
    pub(super) fn home_shard(&self, name: &str) -> Shard {
        match self {
            Link::Single(_) => None,
            Link::Cluster(_) => Some(Slot::for_key(name)),
        }
    }

    /// Where the state `name` is kept: at `name` on one Redis, at its
    /// group's name in a cluster ([`cluster_name`]).
    pub(super) fn place<'a>(&self, name: &'a str) -> Cow<'a, str> {
        match self {
            Link::Single(_) => Cow::Borrowed(name),
            Link::Cluster(_) => Cow::Owned(cluster_name(name)),
        }
    }

    /// Where a state missing at its place has its previous form: the
    /// hash beside it on one Redis; in a cluster, under its own hash tag
    /// (another slot), for the replica to read.
    pub(super) fn previous(&self) -> Previous {
        match self {
            Link::Single(_) => Previous::Hash,
            Link::Cluster(_) => Previous::Unread,
        }
    }

    /// `CONFIG GET name` on Redis (one node of a cluster): the value.
    pub(super) async fn config_get(&self, name: &str) -> RedisResult<Option<String>> {
        let mut command = ::redis::cmd("CONFIG");
        command.arg("GET").arg(name);
        let reply: Vec<String> = match self {
            Link::Single(connection) => command.query_async(&mut connection.clone()).await?,
            Link::Cluster(cluster) => command.query_async(&mut cluster.calls.clone()).await?,
        };
        Ok(reply.get(1).cloned())
    }

    /// Runs the script `invocation` (EVALSHA, loading the script on
    /// `NOSCRIPT`) where its key lives.
    pub(super) async fn invoke<T: FromRedisValue>(
        &self,
        invocation: &ScriptInvocation<'_>,
    ) -> RedisResult<T> {
        match self {
            Link::Single(connection) => invocation.invoke_async(&mut connection.clone()).await,
            Link::Cluster(cluster) => invocation.invoke_async(&mut cluster.calls.clone()).await,
        }
    }
}
