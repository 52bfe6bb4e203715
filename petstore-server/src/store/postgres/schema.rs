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
//!
//! Version 3: pets change status (reserve, release, sell), and every
//! read copy must see each change, in commit order.
//! - `petstore_changes`: one row, the number of the last status change.
//!   A transition's transaction locks it first, so status changes commit
//!   one after the other in the order of their numbers, with no gap: the
//!   same reasoning as the id counter, and a row of its own so that
//!   transitions and creates do not wait for each other.
//! - `petstore_pets.last_change`: the number of the row's last change (0:
//!   never changed), indexed where above 0, so a copy asks for the rows
//!   changed after the last number it applied. A row shows only its last
//!   change; a copy needs no more, since a status is set, not added to.
//! - `petstore_transition(ids, tos, froms)`: a batch of transitions,
//!   decided in order (a later one sees an earlier one's effect) by a
//!   conditional update, `WHERE id = ids[i] AND status = ANY(froms[i])`,
//!   which also rewrites the status at the end of the stored JSON. Each
//!   item's row says what became of it: its change number, name and
//!   category when it moved; otherwise the status that refused it, or
//!   none (no such pet). A function, so that a batch is one statement
//!   and one round trip, whatever its size, and the per-item statements
//!   it runs read the latest rows (each takes a new snapshot, after the
//!   counter's lock).
//!
//! A status changed by hand must set `last_change` too (the counter's
//! next number, in the same transaction that takes it), or no copy sees
//! it until its replica restarts.

use petstore_core::name_rules;
use tokio_postgres::Client;

use super::describe::describe;

/// The schema version this binary writes and reads.
pub const VERSION: i32 = 3;

/// Migration `i` takes the database from version `i` to `i + 1`.
fn migrations() -> [String; VERSION as usize] {
    [VERSION_1.to_owned(), version_2(), VERSION_3.to_owned()]
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

/// Status changes, numbered in commit order; see the module's notes.
/// `froms[i]` is the statuses transition `i` needs, comma-separated.
const VERSION_3: &str = r#"
CREATE TABLE petstore_changes (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    last_change bigint NOT NULL CHECK (last_change >= 0)
);
INSERT INTO petstore_changes (last_change) VALUES (0);
ALTER TABLE petstore_pets
    ADD COLUMN last_change bigint NOT NULL DEFAULT 0 CHECK (last_change >= 0);
CREATE INDEX petstore_pets_changed ON petstore_pets (last_change) WHERE last_change > 0;
CREATE FUNCTION petstore_transition(ids bigint[], tos text[], froms text[])
RETURNS TABLE (item integer, change bigint, pet_name text, pet_category bigint, pet_status text)
LANGUAGE plpgsql AS $$
DECLARE
    base bigint;
    last bigint;
BEGIN
    -- The counter first: every status writer waits here, so the rows
    -- read below are the latest and the numbers commit in order.
    SELECT c.last_change INTO base FROM petstore_changes c FOR UPDATE;
    last := base;
    FOR i IN 1 .. coalesce(array_length(ids, 1), 0) LOOP
        item := i;
        UPDATE petstore_pets p
        SET status = tos[i],
            last_change = last + 1,
            json = regexp_replace(p.json, '"status":"[a-z]+"}$', '"status":"' || tos[i] || '"}')
        WHERE p.id = ids[i] AND p.status = ANY (string_to_array(froms[i], ','))
        RETURNING p.last_change, p.name, p.category_id, p.status
        INTO change, pet_name, pet_category, pet_status;
        IF FOUND THEN
            last := last + 1;
        ELSE
            change := NULL;
            pet_name := NULL;
            pet_category := NULL;
            SELECT p.status INTO pet_status FROM petstore_pets p WHERE p.id = ids[i];
        END IF;
        RETURN NEXT;
    END LOOP;
    IF last > base THEN
        UPDATE petstore_changes SET last_change = last;
        PERFORM pg_notify('petstore_pets', 'change ' || last);
    END IF;
END
$$;
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
