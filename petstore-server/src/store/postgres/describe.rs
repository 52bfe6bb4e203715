//! PostgreSQL's errors as text for the log: its own message when there is
//! one.

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
