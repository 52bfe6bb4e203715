//! The PostgreSQL schema, created and migrated at start.
//!
//! `petstore_schema` holds one row, the version the database is at. At
//! start a server takes a transaction-level advisory lock (two replicas
//! starting at once migrate one after the other), reads the version, runs
//! the migrations after it, and records the new version, all in one
//! transaction: a migration is done whole or not at all. A database at a
//! version newer than this binary knows is refused: an older binary could
//! write rows the newer schema does not expect.
//!
//! Version 1:
//! - `petstore_counter`: one row, the last id given. A create's
//!   transaction updates it, so creates commit one after the other, in id
//!   order, with no gap (a sequence or identity column gives neither:
//!   aborts leave holes, and a lower id can commit after a higher one).
//! - `petstore_pets`: typed columns with the contract's CHECKs
//!   (docs/contract.md, "Pets": a name of 1 to 100 characters, a category from 1 to
//!   2^63 - 1 (`bigint`'s maximum), one of the three statuses), plus the
//!   pet's JSON exactly as the core encodes it, the bytes served.
//! - one partial index per status, for a reader filtering by status with
//!   the status as a literal (`WHERE status = 'sold'`): a composite
//!   `(status, id)` index lets the planner walk the primary key and filter
//!   instead. The server itself never asks PostgreSQL for a list (lists
//!   come from its read copy).
//!
//! Version 2: the name's characters as the contract has them (a CHECK
//! built from the core's own tables, [`petstore_core::name_rules`]): no
//! control character, bidirectional control or noncharacter, and at least
//! one character that is neither White_Space nor default-ignorable. So
//! the read copy can apply every row PostgreSQL holds (a row written by
//! hand with a control character passes version 1's CHECKs, and no
//! replica could apply it). A database holding such a row
//! refuses the migration, and the server its start, naming the
//! constraint: fix or delete the row, then start again.

use petstore_core::name_rules;
use tokio_postgres::Client;

use super::describe::describe;

/// The schema version this binary writes and reads.
pub const VERSION: i32 = 2;

/// Migration `i` takes the database from version `i` to `i + 1`.
fn migrations() -> [String; VERSION as usize] {
    [VERSION_1.to_owned(), version_2()]
}

const VERSION_1: &str = r#"
CREATE TABLE petstore_counter (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    last_id bigint NOT NULL CHECK (last_id >= 0)
);
INSERT INTO petstore_counter (last_id) VALUES (0);
CREATE TABLE petstore_pets (
    id bigint PRIMARY KEY CHECK (id >= 1),
    name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
    category_id bigint NOT NULL CHECK (category_id >= 1),
    status text NOT NULL CHECK (status IN ('available', 'pending', 'sold')),
    json text NOT NULL CHECK (starts_with(json, '{"id":' || id || ','))
);
CREATE INDEX petstore_pets_available ON petstore_pets (id) WHERE status = 'available';
CREATE INDEX petstore_pets_pending ON petstore_pets (id) WHERE status = 'pending';
CREATE INDEX petstore_pets_sold ON petstore_pets (id) WHERE status = 'sold';
"#;

/// The name's characters as the core checks them.
fn version_2() -> String {
    let rules = name_rules();
    format!(
        "SET LOCAL standard_conforming_strings = on;
         ALTER TABLE petstore_pets ADD CONSTRAINT petstore_pets_name_contract
             CHECK (name !~ '[{}]' AND name ~ '[^{}]');",
        regex_class(&rules.refused),
        regex_class(&rules.blank)
    )
}

/// A PostgreSQL regular expression's bracket contents for `ranges` of
/// code points, every character written as an escape (none of them is
/// then special). U+0000 cannot be in `text`, so ranges start at U+0001.
fn regex_class(ranges: &[(u32, u32)]) -> String {
    let escape = |u: u32| {
        if u <= 0xFFFF {
            format!("\\u{u:04x}")
        } else {
            format!("\\U{u:08x}")
        }
    };
    ranges
        .iter()
        .filter(|&&(_, hi)| hi >= 1)
        .map(|&(lo, hi)| {
            let lo = lo.max(1);
            if lo == hi {
                escape(lo)
            } else {
                format!("{}-{}", escape(lo), escape(hi))
            }
        })
        .collect()
}

/// Any value, the same in every replica: the key of the advisory lock
/// that serialises migrations.
const MIGRATION_LOCK: i64 = 0x7065_7473_746f_7265; // "petstore"

/// Why the schema could not be made ready.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// The database was migrated by a newer server.
    #[error(
        "the database's petstore schema is at version {found}, and this server knows versions up to {known}: \
         run a newer petstore-server (an older one could write rows the newer schema does not expect)"
    )]
    Newer {
        /// The database's version.
        found: i32,
        /// The newest version this binary knows.
        known: i32,
    },
    /// PostgreSQL refused or failed.
    #[error("cannot create or migrate the schema: {0}")]
    Database(String),
}

/// Creates or migrates the schema to [`VERSION`]; returns the version the
/// database was at (0: new).
pub async fn migrate(client: &mut Client) -> Result<i32, SchemaError> {
    let db = |e: tokio_postgres::Error| SchemaError::Database(describe(&e));
    let tx = client.transaction().await.map_err(db)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(db)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS petstore_schema (
             only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
             version integer NOT NULL
         )",
    )
    .await
    .map_err(db)?;
    let found: i32 = tx
        .query_opt("SELECT version FROM petstore_schema", &[])
        .await
        .map_err(db)?
        .map_or(0, |row| row.get(0));
    if found > VERSION {
        return Err(SchemaError::Newer {
            found,
            known: VERSION,
        });
    }
    for migration in migrations()
        .iter()
        .skip(usize::try_from(found).unwrap_or(0))
    {
        tx.batch_execute(migration).await.map_err(db)?;
    }
    tx.execute(
        "INSERT INTO petstore_schema (version) VALUES ($1)
         ON CONFLICT (only_row) DO UPDATE SET version = EXCLUDED.version",
        &[&VERSION],
    )
    .await
    .map_err(db)?;
    tx.commit().await.map_err(db)?;
    Ok(found)
}
