//! `--proxy-protocol`: the PROXY protocol header (v1 text or v2 binary,
//! as HAProxy's `send-proxy` / `send-proxy-v2` send it) that a load
//! balancer puts before the first byte of each connection, naming the
//! client it accepted. Behind a load balancer every connection comes from
//! the balancer's address; the header's source address is the client's,
//! for the anonymous rate limit, the per-address connection cap and the
//! logs.
//!
//! The parsing is the `ppp` crate's; this module only takes the header's
//! bytes off the connection, and exactly those: v2 says its length after
//! a fixed 16-byte prefix, v1 ends at its `\r\n` (at most 107 bytes), so
//! no byte of the HTTP request behind it is consumed (the rest of the
//! stream goes to hyper as it is). A connection whose first bytes are not
//! a header is refused: with the flag on, a client that reaches the
//! server around the balancer must not choose its own address.
//!
//! A header that names no address (v1 `UNKNOWN`, v2 `LOCAL`, as a
//! balancer's own health checks send) leaves the socket's peer address.

use std::net::IpAddr;

use ppp::{v1, v2, HeaderResult};
use tokio::io::{AsyncRead, AsyncReadExt};

/// v2's signature, the first 12 bytes of its header.
const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";

/// The longest v1 header (the specification's bound).
const V1_MAX: usize = 107;

/// The longest v2 header read: the fixed 16 bytes and the addresses plus
/// TLVs, which a balancer keeps small; a longer one is refused rather
/// than buffered.
const V2_MAX: usize = 16 + 1024;

/// Why a connection's header was refused.
#[derive(Debug, thiserror::Error)]
pub enum ProxyHeaderError {
    /// The connection broke or ended before a whole header.
    #[error("reading the PROXY header: {0}")]
    Io(#[from] std::io::Error),
    /// The first bytes are not a PROXY header.
    #[error("the connection does not start with a PROXY protocol header")]
    Missing,
    /// A header `ppp` could not parse, or longer than allowed.
    #[error("invalid PROXY protocol header")]
    Invalid,
}

/// Reads the PROXY header at the start of `stream` and returns the
/// client's address: the header's source, or `peer` (the socket's) when
/// the header names none. Reads nothing past the header.
pub async fn read_header<S: AsyncRead + Unpin>(
    stream: &mut S,
    peer: IpAddr,
) -> Result<IpAddr, ProxyHeaderError> {
    // 12 bytes first: both versions are longer (v1 at least 15), so this
    // never reads into the request.
    let mut bytes = vec![0u8; 12];
    stream.read_exact(&mut bytes).await?;
    if bytes.as_slice() == V2_SIGNATURE {
        let mut rest = [0u8; 4];
        stream.read_exact(&mut rest).await?;
        bytes.extend_from_slice(&rest);
        let length = usize::from(u16::from_be_bytes([rest[2], rest[3]]));
        if 16 + length > V2_MAX {
            return Err(ProxyHeaderError::Invalid);
        }
        bytes.resize(16 + length, 0);
        stream.read_exact(&mut bytes[16..]).await?;
    } else if bytes.starts_with(b"PROXY ") {
        // Byte by byte up to the line's end: a read past it would take
        // bytes of the request. (At most 95 more reads, once per
        // connection.)
        while !bytes.ends_with(b"\r\n") {
            if bytes.len() >= V1_MAX {
                return Err(ProxyHeaderError::Invalid);
            }
            bytes.push(stream.read_u8().await?);
        }
    } else {
        return Err(ProxyHeaderError::Missing);
    }
    source(&bytes, peer)
}

/// The client address a complete header names (`peer` when none).
fn source(bytes: &[u8], peer: IpAddr) -> Result<IpAddr, ProxyHeaderError> {
    match HeaderResult::parse(bytes) {
        HeaderResult::V2(Ok(header)) => Ok(match (header.command, header.addresses) {
            (v2::Command::Proxy, v2::Addresses::IPv4(a)) => IpAddr::V4(a.source_address),
            (v2::Command::Proxy, v2::Addresses::IPv6(a)) => IpAddr::V6(a.source_address),
            _ => peer,
        }),
        HeaderResult::V1(Ok(header)) => Ok(match header.addresses {
            v1::Addresses::Tcp4(a) => IpAddr::V4(a.source_address),
            v1::Addresses::Tcp6(a) => IpAddr::V6(a.source_address),
            v1::Addresses::Unknown => peer,
        }),
        _ => Err(ProxyHeaderError::Invalid),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    const PEER: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    async fn read(input: &[u8]) -> (Result<IpAddr, ProxyHeaderError>, Vec<u8>) {
        let mut stream = input;
        let result = read_header(&mut stream, PEER).await;
        (result, stream.to_vec())
    }

    fn v2(command: u8, family: u8, addresses: &[u8]) -> Vec<u8> {
        let mut h = V2_SIGNATURE.to_vec();
        h.push(0x20 | command);
        h.push(family);
        h.extend_from_slice(&(addresses.len() as u16).to_be_bytes());
        h.extend_from_slice(addresses);
        h
    }

    #[tokio::test]
    async fn both_versions_give_the_source_and_leave_the_request() {
        let (ip, rest) = read(b"PROXY TCP4 192.0.2.9 10.0.0.1 5555 80\r\nGET / HTTP/1.1\r\n").await;
        assert_eq!(ip.unwrap(), "192.0.2.9".parse::<IpAddr>().unwrap());
        assert_eq!(rest, b"GET / HTTP/1.1\r\n");
        let (ip, _) = read(b"PROXY TCP6 2001:db8::1 2001:db8::2 5555 80\r\n").await;
        assert_eq!(ip.unwrap(), "2001:db8::1".parse::<IpAddr>().unwrap());
        let (ip, rest) = read(b"PROXY UNKNOWN\r\nGET").await;
        assert_eq!(ip.unwrap(), PEER);
        assert_eq!(rest, b"GET");

        let mut addresses = vec![198, 51, 100, 7, 10, 0, 0, 1];
        addresses.extend_from_slice(&[0x15, 0xb3, 0, 80]);
        let mut input = v2(1, 0x11, &addresses);
        input.extend_from_slice(b"GET");
        let (ip, rest) = read(&input).await;
        assert_eq!(ip.unwrap(), "198.51.100.7".parse::<IpAddr>().unwrap());
        assert_eq!(rest, b"GET");
        // LOCAL (a balancer's health check): the socket's address.
        let (ip, _) = read(&v2(0, 0x00, &[])).await;
        assert_eq!(ip.unwrap(), PEER);
    }

    #[tokio::test]
    async fn anything_else_is_refused() {
        for input in [
            &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
            b"PROXY TCP4 nonsense\r\n",
            b"PROXY TCP4 192.0.2.9 10.0.0.1 5555 80",
            b"PROX",
        ] {
            let (result, _) = read(input).await;
            assert!(result.is_err(), "{:?}", String::from_utf8_lossy(input));
        }
        let long = format!("PROXY TCP4 {}\r\n", "1".repeat(200));
        assert!(read(long.as_bytes()).await.0.is_err());
    }
}
