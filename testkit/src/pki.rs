//! A throwaway certificate authority for tests of TLS between components:
//! a CA, a server certificate it signed for `localhost` and `127.0.0.1`,
//! and a Mesos credentials pair, all as files in a temporary directory
//! (the components read them from files, as they do in a cluster).

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

pub struct TestPki {
    pub dir: tempfile::TempDir,
    /// The CA certificate (PEM): what clients pass as `--ca-file`.
    pub ca_file: PathBuf,
    /// The server certificate (PEM), for `--tls-cert`.
    pub cert_file: PathBuf,
    /// Its key (PEM), for `--tls-key`.
    pub key_file: PathBuf,
    /// Another CA's certificate: trusting it must not be enough.
    pub other_ca_file: PathBuf,
}

fn ca(name: &str) -> (rcgen::Certificate, KeyPair, CertificateParams) {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let key = KeyPair::generate().expect("CA key");
    let cert = params.self_signed(&key).expect("CA certificate");
    (cert, key, params)
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("writing a test certificate file");
    path
}

impl TestPki {
    pub fn new() -> Self {
        Self::for_hosts(&["localhost", "127.0.0.1"])
    }

    /// A PKI whose server certificate names `hosts` (DNS names or IP
    /// addresses), for a server that listens beyond loopback.
    pub fn for_hosts(hosts: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir for certificates");
        let (ca_cert, ca_key, ca_params) = ca("mpiswarm-test-ca");
        let issuer = Issuer::new(ca_params, ca_key);
        let mut params =
            CertificateParams::new(hosts.iter().map(|h| h.to_string()).collect::<Vec<_>>()).expect("server parameters");
        params.distinguished_name.push(DnType::CommonName, "mpiswarm-test-server");
        let key = KeyPair::generate().expect("server key");
        let cert = params.signed_by(&key, &issuer).expect("server certificate");
        let (other, _, _) = ca("some-other-ca");
        Self {
            ca_file: write(dir.path(), "ca.crt", &ca_cert.pem()),
            cert_file: write(dir.path(), "tls.crt", &cert.pem()),
            key_file: write(dir.path(), "tls.key", &key.serialize_pem()),
            other_ca_file: write(dir.path(), "other-ca.crt", &other.pem()),
            dir,
        }
    }

    /// Writes a master's credentials file accepting `principal`/`secret`.
    pub fn credentials_file(&self, principal: &str, secret: &str) -> PathBuf {
        let json = format!(r#"{{"credentials":[{{"principal":"{principal}","secret":"{secret}"}}]}}"#);
        write(self.dir.path(), "credentials.json", &json)
    }

    /// Writes `secret` alone to a file, as a mounted Docker secret holds it.
    pub fn secret_file(&self, name: &str, secret: &str) -> PathBuf {
        write(self.dir.path(), name, &format!("{secret}\n"))
    }
}

impl Default for TestPki {
    fn default() -> Self {
        Self::new()
    }
}
