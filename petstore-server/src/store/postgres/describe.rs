//! PostgreSQL's errors as text for the log (its own message when there
//! is one), and a connection thrown away after an error.

use deadpool_postgres::Object;

/// An error's text with PostgreSQL's own message when there is one
/// (`tokio_postgres::Error`'s display alone says only "db error").
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => match std::error::Error::source(e) {
            Some(source) => format!("{e}: {source}"),
            None => e.to_string(),
        },
    }
}

/// Throws a connection away (it may sit in a failed or open
/// transaction): it is never handed out again. Returns the error's text.
pub(super) fn discard(client: Object, e: &tokio_postgres::Error) -> String {
    drop(Object::take(client));
    describe(e)
}

pub(super) fn pool_error(e: &deadpool_postgres::PoolError) -> String {
    match e {
        deadpool_postgres::PoolError::Backend(e) => describe(e),
        other => other.to_string(),
    }
}
