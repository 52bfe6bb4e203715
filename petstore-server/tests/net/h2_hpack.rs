//! HTTP/2 header compression of the rate-limit values that change on
//! every response (`X-RateLimit-Remaining`, `X-RateLimit-Reset`,
//! `RateLimit`): the connection's first response indexes them, which
//! puts their names in the table; later ones send them never-indexed,
//! naming them by that table entry, so that no value that never comes
//! again takes room in the table. Read off the wire: what HPACK
//! representation each field has.

use std::time::{Duration, Instant};

use crate::common::*;
use crate::raw_h2::*;

/// How often the server lets a response index the values again
/// (`net/hpack.rs`'s `REINDEX`): a connection's responses within it of
/// its start index only in its first.
const REINDEX: Duration = Duration::from_secs(30);

/// The header blocks of `count` list responses on one new connection,
/// with a key of 60 requests a minute, so that each response's values
/// are new (a key far below its limit gets the same ones again, which
/// the table then has),
/// one request at a time; `None` when they took longer than [`REINDEX`]
/// (a response then may index again, as it should).
fn list_blocks(server: &Server, count: u32) -> Option<Vec<Vec<u8>>> {
    let started = Instant::now();
    let mut h2 = RawH2::open(server.addr);
    let mut blocks = Vec::new();
    for i in 0..count {
        let stream = 1 + 2 * i;
        let mut head = request_head("GET", "/v1/pets?limit=2", Some("localhost"));
        head.extend(literal("authorization", &format!("Bearer {FREE_KEY}")));
        h2.send(HEADERS, END_HEADERS | END_STREAM, stream, &head);
        blocks.push(h2.response_block(stream));
    }
    (started.elapsed() < REINDEX).then_some(blocks)
}

fn never_indexed(block: &[u8]) -> Vec<Field> {
    fields(block)
        .into_iter()
        .filter(|f| matches!(f, Field::Literal(Indexing::Never, _)))
        .collect()
}

#[test]
fn changing_values_are_never_indexed_after_the_first_response_named_by_its_entries() {
    let server = Server::start(&[]);
    // A connection slower than REINDEX (a very busy machine) is tried
    // again: its later responses may rightly index.
    let blocks = (0..5)
        .find_map(|_| list_blocks(&server, 4))
        .expect("four requests on one connection within 30 s, in five tries");
    let first = fields(&blocks[0]);
    assert!(
        never_indexed(&blocks[0]).is_empty(),
        "the first response indexes: {first:?}"
    );
    // Its three changing names (and the others new to the table) are
    // spelled out and added to it.
    let added = first
        .iter()
        .filter(|f| **f == Field::Literal(Indexing::Incremental, None))
        .count();
    assert!(added >= 3, "{first:?}");
    for block in &blocks[1..] {
        let never = never_indexed(block);
        assert_eq!(never.len(), 3, "{:?}", fields(block));
        for field in never {
            let Field::Literal(_, Some(name)) = field else {
                panic!("a never-indexed value spelled out its name: {block:?}");
            };
            assert!(name >= FIRST_DYNAMIC, "named by the dynamic table: {name}");
        }
        // Nothing else is spelled out: every other field is indexed, or
        // a literal of a name the table has (`content-length`, `date`).
        assert!(
            fields(block)
                .iter()
                .all(|f| !matches!(f, Field::Literal(_, None))),
            "{:?}",
            fields(block)
        );
    }
}
