//! Credentials on disk: the bearer token, a self-signed CA and a serving
//! certificate (rcgen), and the kubeconfig that carries them. The token and
//! the CA survive restarts so that a kubeconfig handed out stays valid; the
//! serving certificate is re-issued at each start for the current address.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::Error;

fn write_private(path: &Path, contents: &str) -> Result<(), Error> {
    mpiswarm_guard::private::write(path, contents.as_bytes()).map_err(|e| Error::Io(path.display().to_string(), e))
}

/// Narrows a secret an earlier version left readable by others, before it is
/// read; a missing one is left missing (it is created below).
pub(crate) fn narrow_existing(path: &Path) -> Result<(), Error> {
    mpiswarm_guard::private::narrow_existing(path).map_err(|e| Error::Io(path.display().to_string(), e))
}

/// The token in `DIR/token`, created on first start.
pub fn token(dir: &Path) -> Result<String, Error> {
    let path = dir.join("token");
    narrow_existing(&path)?;
    if let Ok(t) = std::fs::read_to_string(&path)
        && !t.trim().is_empty()
    {
        return Ok(t.trim().to_string());
    }
    let t = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
    write_private(&path, &t)?;
    Ok(t)
}

/// TLS material: the CA in PEM (for the kubeconfig) and the server config.
pub struct Tls {
    pub ca_pem: String,
    pub config: Arc<rustls::ServerConfig>,
}

fn tls_err(e: impl std::fmt::Display) -> Error {
    Error::Tls(e.to_string())
}

fn ca_params() -> Result<CertificateParams, Error> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(tls_err)?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, "mpiswarm-apiserver-ca");
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    Ok(params)
}

/// Load or create `DIR/ca.crt`+`ca.key`, issue `DIR/server.crt`+`server.key`
/// for localhost, 127.0.0.1 and the listen address.
pub fn load_or_create(dir: &Path, listen: SocketAddr) -> Result<Tls, Error> {
    let (ca_crt, ca_key) = (dir.join("ca.crt"), dir.join("ca.key"));
    narrow_existing(&ca_key)?;
    let (ca_pem, ca_key_pair) = match (std::fs::read_to_string(&ca_crt), std::fs::read_to_string(&ca_key)) {
        (Ok(c), Ok(k)) => (c, KeyPair::from_pem(&k).map_err(tls_err)?),
        _ => {
            let params = ca_params()?;
            let key = KeyPair::generate().map_err(tls_err)?;
            let cert = params.self_signed(&key).map_err(tls_err)?;
            write_private(&ca_key, &key.serialize_pem())?;
            std::fs::write(&ca_crt, cert.pem()).map_err(|e| Error::Io(ca_crt.display().to_string(), e))?;
            (cert.pem(), key)
        }
    };
    // The CA's parameters are fixed, so the stored key and these parameters
    // reproduce the issuer of the stored CA certificate.
    let issuer = Issuer::new(ca_params()?, ca_key_pair);
    let mut sans = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    let ip = listen.ip().to_string();
    if !sans.contains(&ip) && !listen.ip().is_unspecified() {
        sans.push(ip);
    }
    let mut params = CertificateParams::new(sans).map_err(tls_err)?;
    params.distinguished_name.push(DnType::CommonName, "mpiswarm-apiserver");
    let key = KeyPair::generate().map_err(tls_err)?;
    let cert = params.signed_by(&key, &issuer).map_err(tls_err)?;
    std::fs::write(dir.join("server.crt"), cert.pem()).map_err(|e| Error::Io("server.crt".into(), e))?;
    write_private(&dir.join("server.key"), &key.serialize_pem())?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(tls_err)?
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(cert.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .map_err(tls_err)?;
    let mut config = config;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Tls { ca_pem, config: Arc::new(config) })
}

/// The user the kubeconfig names; whoever holds the token is this user
/// (in the audit log too).
pub const KUBECONFIG_USER: &str = "mpiswarm-admin";

/// `DIR/kubeconfig` for this server.
pub fn kubeconfig(server: &str, token: &str, ca_pem: Option<&str>) -> String {
    use base64::Engine;
    let ca = ca_pem
        .map(|pem| {
            format!("    certificate-authority-data: {}\n", base64::engine::general_purpose::STANDARD.encode(pem))
        })
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: mpiswarm\n  cluster:\n    server: {server}\n{ca}users:\n- name: {KUBECONFIG_USER}\n  user:\n    token: {token}\ncontexts:\n- name: mpiswarm\n  context:\n    cluster: mpiswarm\n    user: {KUBECONFIG_USER}\n    namespace: default\ncurrent-context: mpiswarm\n"
    )
}
