//! The inventory in PostgreSQL (`--postgres`), against a private
//! PostgreSQL that each test starts and stops itself.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::postgres::Postgres;
use common::{Server, KEY};
use serde_json::json;

#[test]
fn smoke() {
    let pg = Postgres::start();
    let server = Server::builder().postgres(&pg.url()).start();
    let pet = server.create_pet(&json!({"name": "Rex", "categoryId": 1}));
    assert_eq!(pet["id"], 1);
    let got = server.get("/v1/pets/1", Some(KEY));
    assert_eq!(got.status, 200);
    eprintln!("{}", server.stderr_text());
    assert_eq!(pg.psql("SELECT json FROM petstore_pets"), got.text());
}
