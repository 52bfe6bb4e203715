//! HTTP/2 header compression of the rate-limit values that change on
//! every response (`X-RateLimit-Remaining`, `X-RateLimit-Reset`,
//! `RateLimit`): the connection's first response indexes them, which
//! puts their names in the table; later ones send them never-indexed
//! while the key's bucket is between its ends, naming them by that table
//! entry, so that no value that never comes again takes room in the
//! table. The same for the next `Link` of a page after the first (a
//! client walking the pages). Read off the wire: what HPACK
//! representation each field has.

use std::time::{Duration, Instant};

use crate::common::*;
use crate::raw_h2::*;

/// A key of 6 requests a minute: one token back every 10 s.
const SIX: &str = "test-key-six-a-minute";

/// What the requests must take at most for the test to know what each
/// response says: less than one token's refill (10 s; the server's
/// `REINDEX`, 30 s, is longer).
const QUICK: Duration = Duration::from_secs(10);

/// The header blocks of five list responses on one new HTTP/2 connection
/// to a new server, one request at a time, with [`SIX`]'s bucket already
/// drawn on once (over HTTP/1.1): 4, 3, 2 and 1 left (between the
/// bucket's ends), then 0 (empty). `None` when they took [`QUICK`] or
/// longer.
fn list_blocks() -> Option<Vec<Vec<u8>>> {
    let server = Server::builder()
        .keys(serde_json::json!({
            "keys": [{"name": "six", "key": SIX, "plan": "free", "perMinute": 6}]
        }))
        .start();
    let started = Instant::now();
    let path = "/v1/pets?limit=2";
    let resp = server.get(path, Some(SIX));
    assert_eq!(resp.status, 200, "{}", resp.describe());
    let mut h2 = RawH2::open(server.addr);
    let mut blocks = Vec::new();
    for stream in [1, 3, 5, 7, 9] {
        let mut head = request_head("GET", path, Some("localhost"));
        head.extend(literal("authorization", &format!("Bearer {SIX}")));
        h2.send(HEADERS, END_HEADERS | END_STREAM, stream, &head);
        blocks.push(h2.response_block(stream));
    }
    (started.elapsed() < QUICK).then_some(blocks)
}

fn never_indexed(block: &[u8]) -> Vec<Field> {
    fields(block)
        .into_iter()
        .filter(|f| matches!(f, Field::Literal(Indexing::Never, _)))
        .collect()
}

#[test]
fn values_that_will_not_come_again_are_never_indexed_named_by_the_first_responses_entries() {
    // A machine too busy to send six requests in 10 s is tried again.
    let blocks = (0..3)
        .find_map(|_| list_blocks())
        .expect("six requests within 10 s, in three tries");
    // The connection's first response indexes, though its values will not
    // come again: its changing names (and the others new to the table)
    // are spelled out and added to it.
    let first = fields(&blocks[0]);
    assert!(never_indexed(&blocks[0]).is_empty(), "{first:?}");
    let added = first
        .iter()
        .filter(|f| **f == Field::Literal(Indexing::Incremental, None))
        .count();
    assert!(added >= 3, "{first:?}");
    // The next ones, still between the bucket's ends: the three changing
    // values never-indexed, each naming its field by the first response's
    // table entry, and nothing else spelled out.
    for block in &blocks[1..4] {
        let all = fields(block);
        let never = never_indexed(block);
        assert_eq!(never.len(), 3, "{all:?}");
        for field in never {
            let Field::Literal(_, Some(name)) = field else {
                panic!("a never-indexed value spelled out its name: {all:?}");
            };
            assert!(name >= FIRST_DYNAMIC, "named by the dynamic table: {all:?}");
        }
        assert!(
            all.iter().all(|f| !matches!(f, Field::Literal(_, None))),
            "{all:?}"
        );
    }
    // At the empty end the values come again (until a token is back):
    // indexed, and no name spelled out.
    let empty = fields(&blocks[4]);
    assert!(never_indexed(&blocks[4]).is_empty(), "{empty:?}");
    assert!(
        empty.iter().all(|f| !matches!(f, Field::Literal(_, None))),
        "{empty:?}"
    );
}

/// HPACK's static table entry for `link` (RFC 7541 appendix A).
const LINK: usize = 45;

#[test]
fn a_walk_through_the_pages_sends_its_next_links_never_indexed_and_a_first_page_indexes_its_own() {
    let server = Server::start(&[]);
    for name in ["Rex", "Tom", "Kit", "Max", "Bo"] {
        server.create_pet(&serde_json::json!({"name": name, "categoryId": 1}));
    }
    let mut h2 = RawH2::open(server.addr);
    let mut link_of = |stream: u32, path: &str| {
        let mut head = request_head("GET", path, Some("localhost"));
        head.extend(literal("authorization", &format!("Bearer {KEY}")));
        h2.send(HEADERS, END_HEADERS | END_STREAM, stream, &head);
        let all = fields(&h2.response_block(stream));
        // The one field named `link`: by the static table, as no link
        // was indexed before on this connection.
        let links: Vec<&Field> = all
            .iter()
            .filter(|f| matches!(f, Field::Literal(_, Some(LINK))))
            .collect();
        assert_eq!(links.len(), 1, "{path}: {all:?}");
        links[0].clone()
    };
    // A client walking the pages: each next link is new, and goes out
    // never-indexed.
    for (stream, after) in [(1, 1), (3, 2), (5, 3)] {
        let path = format!("/v1/pets?limit=1&after={after}");
        assert_eq!(
            link_of(stream, &path),
            Field::Literal(Indexing::Never, Some(LINK)),
            "{path}"
        );
    }
    // A first page's next link is the one a polling client gets again:
    // added to the table.
    assert_eq!(
        link_of(7, "/v1/pets?limit=1"),
        Field::Literal(Indexing::Incremental, Some(LINK))
    );
}
