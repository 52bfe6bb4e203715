//! HTTP/2 frames written and read by hand, for what no client library
//! sends: malformed frames, header blocks encoded byte by byte. Only what
//! the tests need of HPACK: literal fields without indexing, the static
//! table's `:status` values in a response, and how each field of a
//! response's header block is represented (not what it says).

use crate::common::IO_TIMEOUT;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};

/// Frame types (RFC 9113 section 6).
pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const CONTINUATION: u8 = 0x9;

/// Flags.
pub const END_STREAM: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;

/// Error codes (RFC 9113 section 7).
pub const PROTOCOL_ERROR: u32 = 0x1;
pub const FLOW_CONTROL_ERROR: u32 = 0x3;
pub const FRAME_SIZE_ERROR: u32 = 0x6;
pub const COMPRESSION_ERROR: u32 = 0x9;

/// One frame as read.
#[derive(Debug)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

/// How the server answered one stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// A response: its status (0 when not one of the static table's) and
    /// its body.
    Response(u16, Vec<u8>),
    /// RST_STREAM with this code.
    Reset(u32),
    /// GOAWAY with this code.
    GoAway(u32),
    /// The connection ended without either.
    Closed,
}

/// A frame's bytes.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// A literal field without indexing, new name (RFC 7541 section 6.2.2);
/// both strings shorter than 127 bytes.
pub fn literal(name: &str, value: &str) -> Vec<u8> {
    let mut out = vec![0x00, name.len() as u8];
    out.extend_from_slice(name.as_bytes());
    out.push(value.len() as u8);
    out.extend_from_slice(value.as_bytes());
    out
}

/// A literal field without indexing whose name is the static table's
/// entry `index` (below 15), e.g. 1 for `:authority`.
pub fn literal_indexed_name(index: u8, value: &str) -> Vec<u8> {
    let mut out = vec![index, value.len() as u8];
    out.extend_from_slice(value.as_bytes());
    out
}

/// A request's pseudo-headers: `method` and `path` as literals, scheme
/// `http`, and `:authority` unless `authority` is `None`.
pub fn request_head(method: &str, path: &str, authority: Option<&str>) -> Vec<u8> {
    let mut out = literal_indexed_name(2, method);
    out.push(0x86); // :scheme http
    out.extend(literal_indexed_name(4, path));
    if let Some(authority) = authority {
        out.extend(literal_indexed_name(1, authority));
    }
    out
}

/// A raw HTTP/2 connection, past the preface and an empty SETTINGS.
pub struct RawH2 {
    stream: TcpStream,
}

impl RawH2 {
    pub fn open(addr: SocketAddr) -> RawH2 {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        let mut raw = RawH2 { stream };
        raw.send_bytes(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        raw.send(SETTINGS, 0, 0, &[]);
        raw
    }

    /// Sends bytes; a server that already closed is not an error here
    /// (what it answered before is read next).
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        let _ = self.stream.write_all(bytes);
    }

    pub fn send(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        self.send_bytes(&frame(kind, flags, stream, payload));
    }

    /// The next frame; `None` when the connection ended (a read that
    /// times out fails the test: [`IO_TIMEOUT`] only catches a hang).
    pub fn next_frame(&mut self) -> Option<Frame> {
        let mut head = [0u8; 9];
        match self.stream.read_exact(&mut head) {
            Ok(()) => {}
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                panic!("no frame within {IO_TIMEOUT:?}")
            }
            Err(_) => return None,
        }
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0; len];
        self.stream.read_exact(&mut payload).ok()?;
        Some(Frame {
            kind: head[3],
            flags: head[4],
            stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff,
            payload,
        })
    }

    /// How the server answers `stream` (or the connection, first).
    pub fn answer(&mut self, stream: u32) -> Answer {
        let mut status = None;
        let mut body = Vec::new();
        while let Some(frame) = self.next_frame() {
            match frame.kind {
                GOAWAY => return Answer::GoAway(code_at(&frame.payload, 4)),
                RST_STREAM if frame.stream == stream => {
                    return Answer::Reset(code_at(&frame.payload, 0))
                }
                HEADERS if frame.stream == stream => {
                    status = Some(static_status(frame.payload.first().copied()));
                }
                DATA if frame.stream == stream => body.extend_from_slice(&frame.payload),
                _ => {}
            }
            if frame.stream == stream && frame.flags & END_STREAM != 0 {
                return Answer::Response(status.unwrap_or(0), body);
            }
        }
        Answer::Closed
    }

    /// The header block of the response to `stream` (its HEADERS frame and
    /// any CONTINUATION after it), read until the stream ends; the body
    /// is skipped. Panics when the server answers otherwise.
    pub fn response_block(&mut self, stream: u32) -> Vec<u8> {
        let mut block = Vec::new();
        while let Some(frame) = self.next_frame() {
            if frame.stream != stream {
                continue;
            }
            match frame.kind {
                HEADERS | CONTINUATION => block.extend_from_slice(&frame.payload),
                DATA => {}
                other => panic!("stream {stream}: frame type {other:#x}, not a response"),
            }
            if frame.flags & END_STREAM != 0 {
                return block;
            }
        }
        panic!("the connection ended before stream {stream}'s response");
    }

    /// The code of the GOAWAY the server sends next, skipping any other
    /// frame; `None` when the connection ends without one.
    pub fn goaway(&mut self) -> Option<u32> {
        while let Some(frame) = self.next_frame() {
            if frame.kind == GOAWAY {
                return Some(code_at(&frame.payload, 4));
            }
        }
        None
    }
}

/// How one field of a header block is represented (RFC 7541 section 6).
#[derive(Debug, PartialEq, Eq, Clone)]
pub enum Field {
    /// The whole field from the table: its index.
    Indexed(usize),
    /// A literal value: how it may be indexed, and its name's table index
    /// (`None`: the name is spelled out).
    Literal(Indexing, Option<usize>),
    /// A dynamic table size update.
    SizeUpdate,
}

/// A literal field's indexing (RFC 7541 section 6.2).
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Indexing {
    /// Added to the dynamic table.
    Incremental,
    /// Not added.
    Without,
    /// Not added, here or by any intermediary.
    Never,
}

/// The first entry of HPACK's dynamic table (the static table has 61).
pub const FIRST_DYNAMIC: usize = 62;

/// The representations of a header block's fields, in order. Strings are
/// skipped by their length, Huffman-coded or not: what a field says is
/// not read, only how it is sent.
pub fn fields(block: &[u8]) -> Vec<Field> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < block.len() {
        let first = block[at];
        let literal = |indexing, prefix, at: &mut usize| {
            let name = integer(block, at, prefix);
            if name == 0 {
                skip_string(block, at);
            }
            skip_string(block, at);
            Field::Literal(indexing, (name != 0).then_some(name))
        };
        out.push(if first & 0x80 != 0 {
            Field::Indexed(integer(block, &mut at, 7))
        } else if first & 0x40 != 0 {
            literal(Indexing::Incremental, 6, &mut at)
        } else if first & 0x20 != 0 {
            integer(block, &mut at, 5);
            Field::SizeUpdate
        } else if first & 0x10 != 0 {
            literal(Indexing::Never, 4, &mut at)
        } else {
            literal(Indexing::Without, 4, &mut at)
        });
    }
    out
}

/// An integer with a `prefix`-bit prefix at `at` (RFC 7541 section 5.1).
fn integer(block: &[u8], at: &mut usize, prefix: u32) -> usize {
    let max = (1usize << prefix) - 1;
    let mut value = usize::from(block[*at]) & max;
    *at += 1;
    if value < max {
        return value;
    }
    let mut shift = 0;
    loop {
        let byte = block[*at];
        *at += 1;
        value += usize::from(byte & 0x7f) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            return value;
        }
    }
}

/// Skips a string literal (RFC 7541 section 5.2).
fn skip_string(block: &[u8], at: &mut usize) {
    let len = integer(block, at, 7);
    *at += len;
}

/// The error code at `at` in a frame's payload.
fn code_at(payload: &[u8], at: usize) -> u32 {
    let bytes: [u8; 4] = payload[at..at + 4].try_into().unwrap();
    u32::from_be_bytes(bytes)
}

/// A response's `:status` when the encoder used the static table's
/// entry (RFC 7541 appendix A: indexes 8 to 14), else 0.
fn static_status(first: Option<u8>) -> u16 {
    match first {
        Some(0x88) => 200,
        Some(0x89) => 204,
        Some(0x8a) => 206,
        Some(0x8b) => 304,
        Some(0x8c) => 400,
        Some(0x8d) => 404,
        Some(0x8e) => 500,
        _ => 0,
    }
}
