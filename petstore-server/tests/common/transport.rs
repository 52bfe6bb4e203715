//! The other transports: HTTP/2 in plaintext (h2c, prior knowledge) and
//! HTTP/1.1 or HTTP/2 over TLS, through hyper's own client (rustls for
//! TLS), answered as the same [`Response`] the HTTP/1.1 tests read. A
//! test certificate authority made with rcgen signs the server's
//! certificates.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

#[allow(unused_imports)]
use super::*;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::TlsConnector;

/// How a request travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// HTTP/1.1 in plaintext.
    Http1,
    /// HTTP/2 in plaintext, with prior knowledge.
    H2c,
    /// HTTP/1.1 over TLS (ALPN `http/1.1`).
    Https1,
    /// HTTP/2 over TLS (ALPN `h2`).
    Https2,
}

impl Transport {
    /// Whether it needs a TLS listener.
    pub fn tls(self) -> bool {
        matches!(self, Transport::Https1 | Transport::Https2)
    }

    /// Whether it speaks HTTP/2.
    pub fn h2(self) -> bool {
        matches!(self, Transport::H2c | Transport::Https2)
    }
}

/// A certificate authority for tests, and one server certificate it
/// signed (for `localhost` and 127.0.0.1), written as PEM files.
pub struct TestCa {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    ca_der: CertificateDer<'static>,
    /// The server certificate's PEM file.
    pub cert: PathBuf,
    /// Its private key's PEM file.
    pub key: PathBuf,
}

impl TestCa {
    /// A new authority, and a server certificate in `dir`.
    pub fn new(dir: &Path) -> TestCa {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "petstore test CA");
        let key = rcgen::KeyPair::generate().unwrap();
        let ca = params.self_signed(&key).unwrap();
        let ca = TestCa {
            ca_der: ca.der().clone(),
            issuer: rcgen::Issuer::new(params, key),
            cert: dir.join("server.crt"),
            key: dir.join("server.key"),
        };
        ca.issue("first");
        ca
    }

    /// Signs a new server certificate (common name `name`) with a new
    /// key, and writes both over the files.
    pub fn issue(&self, name: &str) -> Vec<u8> {
        self.issue_until(name, (4096, 1, 1))
    }

    /// As [`TestCa::issue`], valid until midnight UTC of `(year, month,
    /// day)`.
    pub fn issue_until(&self, name: &str, (year, month, day): (i32, u8, u8)) -> Vec<u8> {
        let mut params =
            rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
                .unwrap();
        params.not_after = rcgen::date_time_ymd(year, month, day);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        std::fs::write(&self.cert, cert.pem()).unwrap();
        std::fs::write(&self.key, key.serialize_pem()).unwrap();
        cert.der().to_vec()
    }

    /// A client trusting this authority alone, offering `alpn`.
    pub fn client(&self, alpn: &[&[u8]]) -> TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca_der.clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        TlsConnector::from(Arc::new(config))
    }
}

/// A runtime for a test's async client work.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// One client connection over any [`Transport`].
pub enum Sender {
    /// HTTP/1.1.
    Http1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    /// HTTP/2: requests go out concurrently, as streams.
    H2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

/// Opens a connection to `addr` over `transport` (TLS checked against
/// `ca`), with hyper's connection driven by a task of its own.
pub async fn connect(transport: Transport, addr: SocketAddr, ca: Option<&TestCa>) -> Sender {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    if !transport.tls() {
        return handshake(transport, TokioIo::new(tcp)).await;
    }
    let alpn: &[&[u8]] = if transport.h2() {
        &[b"h2"]
    } else {
        &[b"http/1.1"]
    };
    let connector = ca.expect("a TLS transport needs the test CA").client(alpn);
    let name = ServerName::try_from("localhost").unwrap();
    let tls = tokio::time::timeout(IO_TIMEOUT, connector.connect(name, tcp))
        .await
        .expect("TLS handshake timed out")
        .unwrap();
    let agreed = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
    assert_eq!(agreed.as_deref(), Some(alpn[0]), "ALPN agreed");
    handshake(transport, TokioIo::new(tls)).await
}

async fn handshake<I>(transport: Transport, io: I) -> Sender
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    if transport.h2() {
        let (send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .unwrap();
        tokio::spawn(conn);
        Sender::H2(send)
    } else {
        let (send, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(conn);
        Sender::Http1(send)
    }
}

impl Sender {
    /// Sends one request and reads its whole response (bounded by
    /// [`IO_TIMEOUT`], which only catches a hang).
    pub async fn send(&mut self, request: hyper::Request<Full<Bytes>>) -> Response {
        let sent = async {
            match self {
                Sender::Http1(send) => {
                    send.ready().await?;
                    send.send_request(request).await
                }
                Sender::H2(send) => {
                    send.ready().await?;
                    send.send_request(request).await
                }
            }
        };
        let response = tokio::time::timeout(IO_TIMEOUT, sent)
            .await
            .expect("no response in time")
            .expect("the request failed");
        let (head, body) = response.into_parts();
        let body = tokio::time::timeout(IO_TIMEOUT, body.collect())
            .await
            .expect("no body in time")
            .expect("the body failed")
            .to_bytes();
        Response {
            status: head.status.as_u16(),
            headers: Headers(
                head.headers
                    .iter()
                    .map(|(n, v)| {
                        (
                            n.as_str().to_owned(),
                            String::from_utf8_lossy(v.as_bytes()).into_owned(),
                        )
                    })
                    .collect(),
            ),
            body: body.to_vec(),
        }
    }
}

/// A request to `path` with `headers` and `body`, with the `Host` (or
/// `:authority`) of `addr`.
pub fn build(
    method: &str,
    addr: SocketAddr,
    transport: Transport,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> hyper::Request<Full<Bytes>> {
    let scheme = if transport.tls() { "https" } else { "http" };
    // HTTP/2 carries the authority in the URI (`:authority`); HTTP/1.1
    // in the Host header, with the path alone as the target.
    let uri = if transport.h2() {
        format!("{scheme}://localhost:{}{path}", addr.port())
    } else {
        path.to_owned()
    };
    let mut request = hyper::Request::builder().method(method).uri(uri);
    if !transport.h2() {
        request = request.header("host", format!("localhost:{}", addr.port()));
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request
        .body(Full::new(Bytes::copy_from_slice(body)))
        .unwrap()
}

/// The certificate (DER) the server at `addr` presents to a new TLS
/// connection, checked against `ca`.
pub async fn peer_certificate(addr: SocketAddr, ca: &TestCa) -> Vec<u8> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let tls = tokio::time::timeout(IO_TIMEOUT, ca.client(&[b"h2"]).connect(name, tcp))
        .await
        .expect("TLS handshake timed out")
        .unwrap();
    let certs = tls.get_ref().1.peer_certificates().unwrap();
    certs[0].to_vec()
}
