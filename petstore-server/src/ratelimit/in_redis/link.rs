//! [`Link`]: the connection to Redis, one server (`--redis`) or a Redis
//! Cluster (`--redis-cluster`). Both connect lazily, so a replica starts
//! while Redis is down, deciding alone until it answers.

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::Slot;
use redis::{
    Cmd, ErrorKind, FromRedisValue, RedisResult, Script, ScriptInvocation, ServerErrorKind,
};

use std::borrow::Cow;
use std::time::Duration;

use super::breaker::{Shard, BREAKER};
use super::groups::{cluster_name, group_tag};
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
    /// A Redis Cluster: the client sends each call to the master of its
    /// key's slot and follows MOVED and ASK itself.
    Cluster(ClusterConnection),
}

impl Link {
    /// A link to the Redis at `url` (`redis://host:port/db`), each call
    /// and connection bounded by `timeout`.
    pub(super) fn single(url: &str, timeout: Duration) -> Result<Link, String> {
        let client = redis::Client::open(url).map_err(|e| format!("--redis: {e}"))?;
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
        if urls.is_empty() {
            return Err("--redis-cluster: no seed node given".into());
        }
        let client = ClusterClient::builder(urls.iter().map(String::as_str))
            .connection_timeout(timeout)
            .response_timeout(timeout)
            .retries(1)
            .build()
            .map_err(|e| format!("--redis-cluster: {e}"))?;
        let config = ClusterConfig::new()
            .set_connection_timeout(timeout)
            .set_response_timeout(timeout);
        Ok(Link::Cluster(
            client.get_pending_async_connection_with_config(config),
        ))
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
        let mut command = redis::cmd("CONFIG");
        command.arg("GET").arg(name);
        let reply: Vec<String> = match self {
            Link::Single(connection) => command.query_async(&mut connection.clone()).await?,
            Link::Cluster(connection) => command.query_async(&mut connection.clone()).await?,
        };
        Ok(reply.get(1).cloned())
    }

    /// Runs `call`, an `EVALSHA` of `script`, where its first key lives;
    /// on `NOSCRIPT` (a restarted or flushed Redis: the call did not run)
    /// loads the script and runs it once more, as redis-rs's
    /// `ScriptInvocation` does.
    pub(super) async fn eval<T: FromRedisValue>(
        &self,
        script: &Script,
        call: &Cmd,
    ) -> RedisResult<T> {
        async fn on<C: ConnectionLike, T: FromRedisValue>(
            mut connection: C,
            script: &Script,
            call: &Cmd,
        ) -> RedisResult<T> {
            match call.query_async(&mut connection).await {
                Err(e) if matches!(e.kind(), ErrorKind::Server(ServerErrorKind::NoScript)) => {
                    script.load_async(&mut connection).await?;
                    call.query_async(&mut connection).await
                }
                ran => ran,
            }
        }
        match self {
            Link::Single(connection) => on(connection.clone(), script, call).await,
            Link::Cluster(connection) => on(connection.clone(), script, call).await,
        }
    }

    /// Runs the script `invocation` (EVALSHA, loading the script on
    /// `NOSCRIPT`) where its key lives.
    pub(super) async fn invoke<T: FromRedisValue>(
        &self,
        invocation: &ScriptInvocation<'_>,
    ) -> RedisResult<T> {
        match self {
            Link::Single(connection) => invocation.invoke_async(&mut connection.clone()).await,
            Link::Cluster(connection) => invocation.invoke_async(&mut connection.clone()).await,
        }
    }
}
