//! `--tls-cert` and `--tls-key`: the certificate chain and private key
//! (PEM) the public listener serves TLS with, and their reload on SIGHUP.
//!
//! Why rustls with the `ring` provider: no OpenSSL to install or patch,
//! and ring builds in a fraction of aws-lc-rs's time on a small machine.
//! TLS 1.2 and 1.3 only (rustls has nothing older); ALPN offers `h2`
//! first, then `http/1.1`, so a client that speaks both gets HTTP/2.
//!
//! Why a lock around an `Arc<ServerConfig>`: a reload swaps in a whole
//! new configuration, which only handshakes that start afterwards see;
//! a connection already open keeps the configuration (and certificate)
//! it was made with, since its TLS session holds its own `Arc`. The read
//! lock is held for one `Arc` clone per connection.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

use super::not_after::earliest_not_after;
use crate::telemetry::certificate::certificate_in_force;
use crate::util::file_read::read_regular_file;

/// A PEM file larger than this is refused: a certificate chain is a few
/// kilobytes, and the file is read whole into memory.
const MAX_PEM_FILE: u64 = 1024 * 1024;

/// Why the certificate or key could not be put in force. Each names the
/// file (never its contents).
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The file could not be read, or is not a regular file.
    #[error("cannot read {what} file {path}: {reason}")]
    Read {
        /// `the TLS certificate` or `the TLS private key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The operating system's or the file check's words.
        reason: String,
    },
    /// The file holds no PEM block of the kind expected, or a broken one.
    #[error("{what} file {path} holds no usable PEM {kind}: {reason}")]
    Pem {
        /// `the TLS certificate` or `the TLS private key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// `certificate` or `private key`.
        kind: &'static str,
        /// What the PEM parser said.
        reason: String,
    },
    /// rustls refused the pair (a key that does not match the
    /// certificate, an unsupported key type).
    #[error("the TLS certificate {cert} and key {key} cannot be used together: {reason}")]
    Pair {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// rustls's words.
        reason: String,
    },
}

/// The TLS configuration in force, and the files it is read from.
#[derive(Debug)]
pub struct Tls {
    cert: PathBuf,
    key: PathBuf,
    config: RwLock<Arc<ServerConfig>>,
}

impl Tls {
    /// Reads the certificate chain at `cert` and the private key at `key`
    /// (both PEM), blocking.
    ///
    /// # Errors
    ///
    /// [`TlsError`] naming the file that cannot be read or parsed, or the
    /// pair rustls refuses.
    pub fn load(cert: &Path, key: &Path) -> Result<Tls, TlsError> {
        let (config, not_after) = read_config(cert, key)?;
        certificate_in_force(not_after);
        Ok(Tls {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            config: RwLock::new(Arc::new(config)),
        })
    }

    /// Reads both files again, blocking, and puts the new pair in force
    /// for the connections that start from now on. On error the pair in
    /// force stays.
    ///
    /// # Errors
    ///
    /// As [`Tls::load`].
    pub fn reload(&self) -> Result<(), TlsError> {
        let (config, not_after) = read_config(&self.cert, &self.key)?;
        *self.config.write() = Arc::new(config);
        certificate_in_force(not_after);
        Ok(())
    }

    /// The certificate file.
    pub fn cert_path(&self) -> &Path {
        &self.cert
    }

    /// An acceptor with the configuration in force now.
    pub fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.config.read().clone())
    }
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    read_regular_file(path, MAX_PEM_FILE)
        .map(|(bytes, _)| bytes)
        .map_err(|e| TlsError::Read {
            what,
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
}

/// The configuration of the pair, and when its chain expires (as far as
/// it can be read: `not_after.rs`).
fn read_config(cert_path: &Path, key_path: &Path) -> Result<(ServerConfig, Option<i64>), TlsError> {
    const CERT: &str = "the TLS certificate";
    const KEY: &str = "the TLS private key";
    let pem_error = |what, path: &Path, kind, reason: String| TlsError::Pem {
        what,
        path: path.to_path_buf(),
        kind,
        reason,
    };
    let cert_pem = read(CERT, cert_path)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(CERT, cert_path, "certificate", e.to_string()))?;
    if chain.is_empty() {
        return Err(pem_error(
            CERT,
            cert_path,
            "certificate",
            "no CERTIFICATE block".into(),
        ));
    }
    let key_pem = read(KEY, key_path)?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| pem_error(KEY, key_path, "private key", e.to_string()))?;
    let pair_error = |reason: String| TlsError::Pair {
        cert: cert_path.to_path_buf(),
        key: key_path.to_path_buf(),
        reason,
    };
    let not_after = earliest_not_after(&chain);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| pair_error(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| pair_error(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok((config, not_after))
}
