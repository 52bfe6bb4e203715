//! One client connection to the server and the responses it reads.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

#[allow(unused_imports)]
use super::*;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::OnceLock;

/// The headers of a response: a case-insensitive multimap in order.
#[derive(Debug, Clone, Default)]
pub struct Headers(pub Vec<(String, String)>);

impl Headers {
    /// Every value of this header, in order.
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// One parsed HTTP response.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The headers.
    pub headers: Headers,
    /// The body (de-chunked).
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of a header.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.all(name).first().copied()
    }

    /// Every value of a header.
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers.all(name)
    }

    /// The one value of a header; panics if it is absent or repeated.
    pub fn single(&self, name: &str) -> &str {
        let all = self.headers.all(name);
        assert_eq!(
            all.len(),
            1,
            "expected exactly one `{name}` header: {}",
            self.describe()
        );
        all[0]
    }

    /// A header parsed as an integer.
    pub fn header_u64(&self, name: &str) -> u64 {
        let v = self.single(name);
        v.trim().parse().unwrap_or_else(|_| {
            panic!(
                "`{name}: {v}` is not a non-negative integer: {}",
                self.describe()
            )
        })
    }

    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.describe()))
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Status, headers and (the start of) the body, for failure messages.
    pub fn describe(&self) -> String {
        let mut s = format!("HTTP {}\n", self.status);
        for (n, v) in &self.headers.0 {
            s.push_str(&format!("{n}: {v}\n"));
        }
        let body = self.text();
        let body: String = body.chars().take(2000).collect();
        s.push_str(&body);
        s
    }
}

/// One client connection.
#[derive(Debug)]
pub struct Conn {
    /// The socket.
    pub stream: TcpStream,
    buf: Vec<u8>,
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

impl Conn {
    /// Connects; panics on failure.
    pub fn open(addr: SocketAddr) -> Conn {
        Conn::try_open(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"))
    }

    /// Connects.
    pub fn try_open(addr: SocketAddr) -> io::Result<Conn> {
        Conn::from_stream(TcpStream::connect_timeout(&addr, Duration::from_secs(5))?)
    }

    /// A connection over an already connected stream (e.g. one bound to
    /// another source address).
    pub fn from_stream(stream: TcpStream) -> io::Result<Conn> {
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            buf: Vec::new(),
        })
    }

    /// Writes these bytes.
    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    /// Reads one response within [`IO_TIMEOUT`]; panics on failure.
    pub fn read_response(&mut self) -> Response {
        self.try_read_response(IO_TIMEOUT)
            .unwrap_or_else(|e| panic!("reading the response: {e}"))
    }

    /// Reads one response; fails if a read waits longer than `timeout`.
    pub fn try_read_response(&mut self, timeout: Duration) -> io::Result<Response> {
        self.stream.set_read_timeout(Some(timeout))?;
        loop {
            let resp = self.read_one()?;
            // Skip interim responses (100 Continue).
            if !(100..200).contains(&resp.status) || resp.status == 101 {
                return Ok(resp);
            }
        }
    }

    /// Reads more bytes into the buffer; `Ok(0)` at end of stream. A read
    /// interrupted by a signal (EINTR: the test process has children) is
    /// tried again, as `read_exact` would.
    fn fill(&mut self) -> io::Result<usize> {
        let mut chunk = [0u8; 16384];
        let n = loop {
            match self.stream.read(&mut chunk) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other?,
            }
        };
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    fn eof() -> io::Error {
        io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed")
    }

    fn read_one(&mut self) -> io::Result<Response> {
        let head_end = loop {
            if let Some(pos) = find(&self.buf, b"\r\n\r\n") {
                break pos;
            }
            if self.fill()? == 0 {
                return Err(Conn::eof());
            }
        };
        let head: Vec<u8> = self.buf.drain(..head_end + 4).collect();
        let head = String::from_utf8_lossy(&head[..head_end]).into_owned();
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or_default();
        if !version.starts_with("HTTP/1.") {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad status line {status_line:?}"),
            ));
        }
        let status: u16 = parts.next().and_then(|s| s.parse().ok()).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad status line {status_line:?}"),
            )
        })?;
        let mut headers = Headers::default();
        for line in lines {
            if let Some((n, v)) = line.split_once(':') {
                headers
                    .0
                    .push((n.trim().to_ascii_lowercase(), v.trim().to_owned()));
            }
        }
        let chunked = headers
            .all("transfer-encoding")
            .iter()
            .any(|v| v.to_ascii_lowercase().contains("chunked"));
        let length = headers
            .all("content-length")
            .first()
            .and_then(|v| v.trim().parse::<usize>().ok());
        let body = if (100..200).contains(&status) || status == 204 || status == 304 {
            Vec::new()
        } else if chunked {
            self.read_chunked()?
        } else if let Some(len) = length {
            while self.buf.len() < len {
                if self.fill()? == 0 {
                    return Err(Conn::eof());
                }
            }
            self.buf.drain(..len).collect()
        } else {
            while self.fill()? != 0 {}
            std::mem::take(&mut self.buf)
        };
        Ok(Response {
            status,
            headers,
            body,
        })
    }

    fn read_line(&mut self) -> io::Result<String> {
        loop {
            if let Some(pos) = find(&self.buf, b"\r\n") {
                let line: Vec<u8> = self.buf.drain(..pos + 2).collect();
                return Ok(String::from_utf8_lossy(&line[..pos]).into_owned());
            }
            if self.fill()? == 0 {
                return Err(Conn::eof());
            }
        }
    }

    fn read_chunked(&mut self) -> io::Result<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            let line = self.read_line()?;
            let size_text = line.split(';').next().unwrap_or_default().trim();
            let size = usize::from_str_radix(size_text, 16).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidData, format!("chunk size {line:?}"))
            })?;
            if size == 0 {
                // Trailers, up to the empty line.
                while !self.read_line()?.is_empty() {}
                return Ok(body);
            }
            while self.buf.len() < size + 2 {
                if self.fill()? == 0 {
                    return Err(Conn::eof());
                }
            }
            body.extend(self.buf.drain(..size));
            self.buf.drain(..2);
        }
    }

    /// Whether the peer has closed the connection (or reset it), waiting
    /// at most `timeout` for a sign of it; bytes that arrive meanwhile are
    /// kept for [`Conn::read_response`].
    pub fn closed_within(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            match self.fill() {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return false
                }
                Err(_) => return true,
            }
        }
    }

    /// Bytes received but not yet consumed.
    pub fn buffered(&self) -> &[u8] {
        &self.buf
    }
}

/// A PROXY v1 header naming `client` as the source.
pub fn proxy_v1(client: &str) -> String {
    format!("PROXY TCP4 {client} 127.0.0.1 40000 8080\r\n")
}

/// The runtime `connect_from` binds its sockets with: one worker,
/// shared by the test binary.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    })
}

/// A connection to `server` from `source`, with a receive buffer of
/// `receive_buffer` bytes when given (set before connecting, so the
/// advertised window is small from the start).
pub fn connect_from(
    source: Ipv4Addr,
    server: SocketAddr,
    receive_buffer: Option<u32>,
) -> io::Result<Conn> {
    let stream = runtime().block_on(async move {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(SocketAddr::new(IpAddr::V4(source), 0))?;
        if let Some(size) = receive_buffer {
            socket.set_recv_buffer_size(size)?;
        }
        tokio::time::timeout(Duration::from_secs(5), socket.connect(server))
            .await
            .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))?
    })?;
    let stream: TcpStream = stream.into_std()?;
    stream.set_nonblocking(false)?;
    Conn::from_stream(stream)
}
