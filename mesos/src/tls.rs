//! Transport security of the Mesos HTTP APIs, for both ends: the
//! certificate and key an offer layer or an agent serves with, the CA a
//! client trusts, and the rule that a component listens beyond loopback
//! only with TLS and credentials. The offer layer, the agent, the
//! controller and `mpiswarm logs` all take these from here, so that the
//! rule and the file formats have one home.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {what} {path}: {source}")]
    Read { what: &'static str, path: PathBuf, source: std::io::Error },
    #[error("{what} {path} holds no PEM {expected}: {reason}")]
    Pem { what: &'static str, path: PathBuf, expected: &'static str, reason: String },
    #[error("the certificate {cert} and the key {key} do not make a TLS server: {reason}")]
    Server { cert: PathBuf, key: PathBuf, reason: String },
    #[error("{given} was given without {missing}: a TLS server needs both")]
    Incomplete { given: &'static str, missing: &'static str },
    #[error(
        "refusing to listen on {addr} {why}: off loopback every connection needs TLS and credentials; pass {flags}, or listen on 127.0.0.1"
    )]
    Insecure { addr: SocketAddr, why: &'static str, flags: &'static str },
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read { what, path: path.to_owned(), source })
}

fn certificates(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem_error = |reason: String| TlsError::Pem { what, path: path.to_owned(), expected: "CERTIFICATE", reason };
    let certs = CertificateDer::pem_slice_iter(&read(what, path)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(e.to_string()))?;
    if certs.is_empty() {
        return Err(pem_error("the file has no BEGIN CERTIFICATE block".into()));
    }
    Ok(certs)
}

/// The rustls server configuration of `--tls-cert` (PEM, the server's
/// certificate first, then its chain) and `--tls-key` (PEM, PKCS#8, PKCS#1 or SEC1).
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let chain = certificates("the TLS certificate", cert)?;
    let key_der = PrivateKeyDer::from_pem_slice(&read("the TLS key", key)?).map_err(|e| TlsError::Pem {
        what: "the TLS key",
        path: key.to_owned(),
        expected: "PRIVATE KEY",
        reason: e.to_string(),
    })?;
    let server = |reason: String| TlsError::Server { cert: cert.to_owned(), key: key.to_owned(), reason };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| server(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| server(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// `--tls-cert` and `--tls-key` together: both (TLS) or neither (plain HTTP).
pub fn server_config_from_flags(
    cert: Option<&Path>,
    key: Option<&Path>,
) -> Result<Option<Arc<rustls::ServerConfig>>, TlsError> {
    match (cert, key) {
        (None, None) => Ok(None),
        (Some(cert), Some(key)) => server_config(cert, key).map(Some),
        (Some(_), None) => Err(TlsError::Incomplete { given: "--tls-cert", missing: "--tls-key" }),
        (None, Some(_)) => Err(TlsError::Incomplete { given: "--tls-key", missing: "--tls-cert" }),
    }
}

/// The one rule of where plain HTTP or anonymous access is allowed:
/// loopback only. `flags` names what the component's user must pass.
pub fn check_listen(addr: SocketAddr, tls: bool, credentials: bool, flags: &'static str) -> Result<(), TlsError> {
    if addr.ip().is_loopback() {
        return Ok(());
    }
    let why = match (tls, credentials) {
        (true, true) => return Ok(()),
        (false, false) => "without TLS and without credentials",
        (false, true) => "without TLS",
        (true, false) => "without credentials",
    };
    Err(TlsError::Insecure { addr, why, flags })
}

/// The CA certificates of `--ca-file` (PEM), which a client trusts instead
/// of the public roots.
#[derive(Clone)]
pub struct CaFile {
    path: PathBuf,
    certificates: Vec<reqwest::Certificate>,
}

impl std::fmt::Debug for CaFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaFile").field("path", &self.path).finish_non_exhaustive()
    }
}

impl CaFile {
    pub fn read(path: &Path) -> Result<Self, TlsError> {
        let certificates = certificates("the CA file", path)?
            .iter()
            .map(|der| {
                reqwest::Certificate::from_der(der).map_err(|e| TlsError::Pem {
                    what: "the CA file",
                    path: path.to_owned(),
                    expected: "CERTIFICATE",
                    reason: e.to_string(),
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { path: path.to_owned(), certificates })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `builder` trusting these CAs only.
    pub fn trust(&self, builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
        self.certificates.iter().cloned().fold(builder.tls_built_in_root_certs(false), |b, c| b.add_root_certificate(c))
    }
}

/// The HTTP client of the Mesos APIs: redirects are not followed
/// automatically (a leader's 307 is followed by [`crate::client`] only as
/// [`crate::redirect`] allows, and only then with the credentials), and
/// `ca`, when given, is the only trust anchor.
pub fn http_client(ca: Option<&CaFile>) -> reqwest::Client {
    let builder = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none());
    let builder = match ca {
        Some(ca) => ca.trust(builder),
        None => builder,
    };
    builder.build().unwrap_or_else(|e| {
        tracing::error!(error = %e, "cannot build the HTTP client; using the default one");
        reqwest::Client::new()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beyond_loopback_both_tls_and_credentials_are_needed_and_the_error_names_the_flags() {
        let any: SocketAddr = "0.0.0.0:5050".parse().unwrap();
        let local: SocketAddr = "127.0.0.1:5050".parse().unwrap();
        assert!(check_listen(local, false, false, "--x").is_ok());
        assert!(check_listen(any, true, true, "--x").is_ok());
        let err = check_listen(any, false, true, "--tls-cert and --tls-key").unwrap_err().to_string();
        assert_eq!(
            err,
            "refusing to listen on 0.0.0.0:5050 without TLS: off loopback every connection needs TLS and credentials; pass --tls-cert and --tls-key, or listen on 127.0.0.1"
        );
        let err = check_listen(any, true, false, "--credentials FILE").unwrap_err().to_string();
        assert!(err.contains("without credentials") && err.contains("--credentials FILE"), "{err}");
    }

    #[test]
    fn a_key_without_a_certificate_and_files_that_are_not_pem_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not pem").unwrap();
        let err = server_config_from_flags(None, Some(&junk)).unwrap_err().to_string();
        assert_eq!(err, "--tls-key was given without --tls-cert: a TLS server needs both");
        let err = server_config(&junk, &junk).unwrap_err().to_string();
        assert!(err.contains("junk.pem") && err.contains("CERTIFICATE"), "{err}");
        let err = CaFile::read(&dir.path().join("ca.crt")).unwrap_err().to_string();
        assert!(err.contains("ca.crt"), "{err}");
    }

    #[test]
    fn a_certificate_and_its_key_make_a_server_and_the_ca_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap().self_signed(&key).unwrap();
        let (cert_path, key_path) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        assert!(server_config_from_flags(Some(&cert_path), Some(&key_path)).unwrap().is_some());
        assert_eq!(CaFile::read(&cert_path).unwrap().path(), cert_path);
        // A key that is not the certificate's is refused at start, not at the first handshake.
        let other = rcgen::KeyPair::generate().unwrap();
        std::fs::write(&key_path, other.serialize_pem()).unwrap();
        let err = server_config(&cert_path, &key_path).unwrap_err().to_string();
        assert!(err.contains("tls.crt") && err.contains("tls.key"), "{err}");
    }
}
