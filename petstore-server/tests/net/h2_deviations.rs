//! Where the h2 crate answers a protocol error with another code than
//! the RFCs name, or more harshly than it must. Not mendable in this
//! server's code (the crate decides before hyper or the server sees
//! anything); docs/http.md ("HTTP/2 and TLS") lists them with the
//! crate's version. Each test pins today's answer and names the RFC's
//! expected one: a crate upgrade that fixes it fails the test, which is
//! then updated to the RFC's code (and the docs' list shortened).

use crate::common::*;
use crate::raw_h2::*;

/// A served request after the deviation: the server itself is unharmed.
fn still_serves(server: &Server) {
    let resp = server.get("/v1/pets", Some(KEY));
    assert_eq!(resp.status, 200, "{}", resp.describe());
}

/// Asserts that the connection got GOAWAY `PROTOCOL_ERROR`, today's
/// answer, where `rfc` expects `expected`.
fn pinned(goaway: Option<u32>, rfc: &str, expected: u32) {
    assert_eq!(
        goaway,
        Some(PROTOCOL_ERROR),
        "the h2 crate's answer changed; {rfc} expects {expected:#x}: if that is it now, \
         pin it here and take the deviation out of docs/http.md"
    );
}

#[test]
fn an_initial_window_over_the_maximum_gets_protocol_error() {
    let server = Server::start(&[]);
    let mut h2 = RawH2::open(server.addr);
    // SETTINGS_INITIAL_WINDOW_SIZE (0x4) = 2^31, one over 2^31-1.
    h2.send(SETTINGS, 0, 0, &[0x00, 0x04, 0x80, 0x00, 0x00, 0x00]);
    pinned(h2.goaway(), "RFC 9113 section 6.5.2", FLOW_CONTROL_ERROR);
    still_serves(&server);
}

#[test]
fn a_ping_of_seven_bytes_gets_protocol_error() {
    let server = Server::start(&[]);
    let mut h2 = RawH2::open(server.addr);
    h2.send(PING, 0, 0, &[0; 7]);
    pinned(h2.goaway(), "RFC 9113 section 6.7", FRAME_SIZE_ERROR);
    still_serves(&server);
}

#[test]
fn a_settings_frame_of_five_bytes_gets_protocol_error() {
    let server = Server::start(&[]);
    let mut h2 = RawH2::open(server.addr);
    h2.send(SETTINGS, 0, 0, &[0x00, 0x04, 0x00, 0x00, 0x01]);
    pinned(h2.goaway(), "RFC 9113 section 6.5", FRAME_SIZE_ERROR);
    still_serves(&server);
}

#[test]
fn a_table_size_update_over_the_settings_gets_protocol_error() {
    let server = Server::start(&[]);
    let mut h2 = RawH2::open(server.addr);
    // A dynamic table size update to 8,192 (the default limit is 4,096):
    // 001xxxxx with a 5-bit prefix, 31 + 8,161.
    let mut block = vec![0x3f, 0xe1, 0x3f];
    block.extend(request_head("GET", "/v1/pets", Some("localhost")));
    h2.send(HEADERS, END_HEADERS | END_STREAM, 1, &block);
    pinned(
        h2.goaway(),
        "RFC 7541 section 6.3 (RFC 9113 section 4.3)",
        COMPRESSION_ERROR,
    );
    still_serves(&server);
}

#[test]
fn an_uppercase_header_name_ends_the_whole_connection() {
    let server = Server::start(&[]);
    let mut h2 = RawH2::open(server.addr);
    // Stream 1: a create whose body has not come yet, in flight.
    let mut first = request_head("POST", "/v1/pets", Some("localhost"));
    first.extend(literal("authorization", &format!("Bearer {KEY}")));
    first.extend(literal("content-type", "application/json"));
    h2.send(HEADERS, END_HEADERS, 1, &first);
    // Stream 3: a request with an uppercase field name (malformed, RFC
    // 9113 section 8.2.1).
    let mut second = request_head("GET", "/v1/pets", Some("localhost"));
    second.extend(literal("X-Upper", "1"));
    h2.send(HEADERS, END_HEADERS | END_STREAM, 3, &second);
    // RFC 9113 section 8.1.1 lets a server treat a malformed request as
    // a stream error (RST_STREAM PROTOCOL_ERROR on stream 3 alone), which
    // would leave stream 1 to finish; the crate ends the connection, and
    // stream 1 with it.
    assert_eq!(h2.answer(1), Answer::GoAway(PROTOCOL_ERROR));
    still_serves(&server);
}
