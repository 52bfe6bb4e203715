//! Which PostgreSQL server the replica is connected to ([`Servers`]),
//! learnt once per new connection by [`Connector`], the pool's way of
//! connecting; and how long making one connection may take
//! ([`connecting`]), for the pool and the `LISTEN` connection alike.
//!
//! Why: a connection string may name several hosts
//! (`postgresql://h1:5432,h2:5432/db?target_session_attrs=read-write`);
//! tokio-postgres tries them in turn and keeps the first that accepts
//! (with `read-write`, the first that is not a standby), but neither the
//! client nor the connection tells which one that was. So each new
//! connection asks the server, once, for its own address and port
//! (`inet_server_addr()`, `inet_server_port()`: one simple query, one
//! round trip, never per query), and the log names the server the pool
//! reaches when that changes (after a promotion, the new primary), and
//! every failure names it too. The password is never part of any of it.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use deadpool_postgres::Connect;
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio_postgres::config::Host;
use tokio_postgres::{Client, Config, NoTls, SimpleQueryMessage};

use crate::log_info;

/// Asks the server for the address and port its end of this connection
/// has (both NULL over a Unix socket), and for the port it listens on.
const WHERE_AM_I: &str =
    "SELECT host(inet_server_addr()), inet_server_port(), current_setting('port')";

/// The hosts a connection string names, and the server the newest
/// connection reached: what the log says of where PostgreSQL is.
#[derive(Debug)]
pub(super) struct Servers {
    /// Every host of the connection string with its port and the
    /// database, as the string gives them (`h1:5432,h2:5432/db`).
    named: String,
    /// The server the newest connection reached (`address:port/db`).
    reached: Mutex<Option<String>>,
    /// The database, for [`Servers::reached`]'s text.
    db: String,
}

impl Default for Servers {
    /// What tokio-postgres connects to when the string names nothing.
    fn default() -> Servers {
        Servers::new(&Config::new())
    }
}

impl Servers {
    pub(super) fn new(config: &Config) -> Servers {
        let db = config
            .get_dbname()
            .or(config.get_user())
            .unwrap_or("postgres")
            .to_owned();
        Servers {
            named: format!("{}/{db}", hosts(config)),
            reached: Mutex::new(None),
            db,
        }
    }

    /// Every host the connection string names, with the database.
    pub(super) fn named(&self) -> &str {
        &self.named
    }

    /// The server the newest connection reached, or the hosts named when
    /// none was reached yet: where a failure happened.
    pub(super) fn current(&self) -> String {
        self.reached
            .lock()
            .clone()
            .unwrap_or_else(|| self.named.clone())
    }

    /// A new connection reached `at` (`address:port`): logged when it is
    /// another server than the last connection's.
    fn reach(&self, at: &str) {
        let at = format!("{at}/{}", self.db);
        let mut reached = self.reached.lock();
        if reached.as_deref() == Some(at.as_str()) {
            return;
        }
        match reached.as_deref() {
            Some(before) => log_info!(
                "PostgreSQL: connected to {at} (of {}); the connections before were to {before}",
                self.named
            ),
            None => log_info!("PostgreSQL: connected to {at} (of {})", self.named),
        }
        *reached = Some(at);
    }
}

/// `host:port` for each host of `config`, comma-separated, as
/// tokio-postgres pairs them (one port for all, or one each).
pub(super) fn hosts(config: &Config) -> String {
    let ports = config.get_ports();
    let port = |i: usize| ports.get(i).or(ports.first()).copied().unwrap_or(5432);
    let named: Vec<String> = if config.get_hosts().is_empty() {
        config
            .get_hostaddrs()
            .iter()
            .enumerate()
            .map(|(i, a)| address(&a.to_string(), port(i)))
            .collect()
    } else {
        config
            .get_hosts()
            .iter()
            .enumerate()
            .map(|(i, host)| match host {
                Host::Tcp(h) => address(h, port(i)),
                Host::Unix(p) => format!("{}:{}", p.display(), port(i)),
            })
            .collect()
    };
    if named.is_empty() {
        "localhost:5432".to_owned()
    } else {
        named.join(",")
    }
}

/// `host:port`, an IPv6 address in brackets.
fn address(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The pool's way of connecting: tokio-postgres's own (every host in
/// turn, `target_session_attrs` honoured), then one question to the
/// server reached, whose answer goes to [`Servers`].
pub(super) struct Connector {
    pub(super) servers: std::sync::Arc<Servers>,
}

type Connected = Result<(Client, JoinHandle<()>), tokio_postgres::Error>;

impl Connect for Connector {
    fn connect(&self, config: &Config) -> Pin<Box<dyn Future<Output = Connected> + Send + '_>> {
        let config = config.clone();
        Box::pin(async move {
            let (client, connection) = config.connect(NoTls).await?;
            let task = tokio::spawn(async move {
                // Its end is seen by the client: the next query fails.
                let _ = connection.await;
            });
            match client.simple_query(WHERE_AM_I).await {
                Ok(messages) => {
                    if let Some(at) = server_address(&messages) {
                        self.servers.reach(&at);
                    }
                    Ok((client, task))
                }
                Err(e) => {
                    task.abort();
                    Err(e)
                }
            }
        })
    }
}

/// `address:port` from [`WHERE_AM_I`]'s row; over a Unix socket, the
/// listening port only.
fn server_address(messages: &[SimpleQueryMessage]) -> Option<String> {
    messages.iter().find_map(|m| match m {
        SimpleQueryMessage::Row(row) => match (row.get(0), row.get(1), row.get(2)) {
            (Some(host), Some(port), _) => Some(address(host, port.parse().unwrap_or_default())),
            (_, _, Some(port)) => Some(format!("local socket:{port}")),
            _ => None,
        },
        _ => None,
    })
}

/// Connecting to one host, or taking a connection from the pool.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The bound on making one new connection: [`CONNECT_TIMEOUT`] per host
/// named. tokio-postgres bounds each host's attempt by the config's
/// connect timeout and then tries the next; a bound of one attempt
/// for all would end at a first host that never answers (a machine
/// gone, its packets dropped), and the second host, the one to fail over
/// to, would never be tried.
pub(super) fn connecting(config: &Config) -> Duration {
    let hosts = config
        .get_hosts()
        .len()
        .max(config.get_hostaddrs().len())
        .max(1);
    CONNECT_TIMEOUT.saturating_mul(u32::try_from(hosts).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn every_host_is_named_in_both_forms_and_never_the_password() {
        for (string, want) in [
            (
                "postgresql://u:s3cret@h1:5432,h2:5433/shop?target_session_attrs=read-write",
                "h1:5432,h2:5433/shop",
            ),
            (
                "host=h1,h2 port=5432,5433 user=u password=s3cret dbname=shop \
                 target_session_attrs=read-write",
                "h1:5432,h2:5433/shop",
            ),
            ("host=h1,h2 port=6000 user=u", "h1:6000,h2:6000/u"),
            ("postgresql://[::1]:5432/db", "[::1]:5432/db"),
        ] {
            let config = Config::from_str(string).unwrap();
            let servers = Servers::new(&config);
            assert_eq!(servers.named(), want, "{string}");
            assert_eq!(servers.current(), want, "none reached yet");
            servers.reach("10.0.0.2:5433");
            let db = want.rsplit('/').next().unwrap();
            assert_eq!(servers.current(), format!("10.0.0.2:5433/{db}"));
            assert!(!format!("{servers:?}").contains("s3cret"));
        }
    }

    #[test]
    fn a_new_connection_may_try_every_host_for_its_whole_connect_timeout() {
        let two = Config::from_str("host=h1,h2 port=5432 target_session_attrs=read-write").unwrap();
        assert_eq!(connecting(&two), CONNECT_TIMEOUT * 2);
        let one = Config::from_str("postgresql://h1/db").unwrap();
        assert_eq!(connecting(&one), CONNECT_TIMEOUT);
    }
}
