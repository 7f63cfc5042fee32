//! Mesos-style authentication material, read from files: the one
//! credential a framework or an agent sends (HTTP basic, principal and
//! secret), and the list a master accepts. Both file formats are Mesos'
//! own, so files made for a real Mesos cluster work here unchanged.
//!
//! A secret is never logged: [`Credential`]'s `Debug` hides it, and it is
//! never compared here (no `PartialEq`): whoever checks one uses
//! `mpiswarm_guard::secret_eq`, in constant time. A file that gives a
//! principal an empty secret is refused when it is read, at start-up.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// What a client sends as HTTP basic authentication.
#[derive(Clone)]
pub struct Credential {
    pub principal: String,
    pub secret: String,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential").field("principal", &self.principal).field("secret", &"<hidden>").finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    #[error("cannot read the {what} {path}: {source}")]
    Read { what: &'static str, path: PathBuf, source: std::io::Error },
    #[error(
        "the credential file {path} holds neither Mesos credential JSON ({{\"principal\":\"...\",\"secret\":\"...\"}}) nor a line 'PRINCIPAL SECRET'"
    )]
    Credential { path: PathBuf },
    #[error(
        "the credentials file {path} is not Mesos credentials JSON ({source}); expected {{\"credentials\":[{{\"principal\":\"...\",\"secret\":\"...\"}}]}}"
    )]
    Credentials { path: PathBuf, source: serde_json::Error },
    #[error("the secret file {path} is empty: put the principal's secret in it")]
    EmptySecret { path: PathBuf },
    #[error(
        "the {what} {path} gives principal '{principal}' an empty secret: give it a secret (an empty one is no secret)"
    )]
    EmptySecretOf { what: &'static str, path: PathBuf, principal: String },
    #[error("{given} was given without {missing}: pass both, or a credential file instead")]
    Incomplete { given: &'static str, missing: &'static str },
    #[error("pass either a credential file or a principal and a secret file, not both")]
    Both,
}

#[derive(serde::Deserialize)]
struct CredentialJson {
    principal: String,
    #[serde(default)]
    secret: String,
}

#[derive(serde::Deserialize)]
struct CredentialsJson {
    credentials: Vec<CredentialJson>,
}

fn non_empty(what: &'static str, path: &Path, c: &CredentialJson) -> Result<(), CredentialError> {
    if c.secret.is_empty() {
        return Err(CredentialError::EmptySecretOf { what, path: path.to_owned(), principal: c.principal.clone() });
    }
    Ok(())
}

fn read(what: &'static str, path: &Path) -> Result<String, CredentialError> {
    std::fs::read_to_string(path).map_err(|source| CredentialError::Read { what, path: path.to_owned(), source })
}

impl Credential {
    /// A Mesos `--credential` file: `{"principal":"p","secret":"s"}`, or
    /// the text form `p s` (principal and secret separated by whitespace).
    pub fn from_file(path: &Path) -> Result<Self, CredentialError> {
        let text = read("credential file", path)?;
        if let Ok(c) = serde_json::from_str::<CredentialJson>(&text) {
            non_empty("credential file", path, &c)?;
            return Ok(Self { principal: c.principal, secret: c.secret });
        }
        let mut words = text.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some(p), Some(s), None) if !text.trim_start().starts_with('{') => {
                Ok(Self { principal: p.to_owned(), secret: s.to_owned() })
            }
            _ => Err(CredentialError::Credential { path: path.to_owned() }),
        }
    }

    /// The credential from command-line flags: a credential file, or a
    /// principal with a file holding its secret (a Docker or Kubernetes
    /// secret mounted as a file), or none at all.
    pub fn from_flags(
        principal: Option<&str>,
        secret_file: Option<&Path>,
        credential_file: Option<&Path>,
    ) -> Result<Option<Self>, CredentialError> {
        match (principal, secret_file, credential_file) {
            (None, None, None) => Ok(None),
            (None, None, Some(file)) => Self::from_file(file).map(Some),
            (_, _, Some(_)) => Err(CredentialError::Both),
            (Some(_), None, None) => {
                Err(CredentialError::Incomplete { given: "a principal", missing: "a secret file" })
            }
            (None, Some(_), None) => {
                Err(CredentialError::Incomplete { given: "a secret file", missing: "a principal" })
            }
            (Some(principal), Some(path), None) => {
                let secret = read("secret file", path)?.trim_end_matches(['\r', '\n']).to_owned();
                if secret.is_empty() {
                    return Err(CredentialError::EmptySecret { path: path.to_owned() });
                }
                Ok(Some(Self { principal: principal.to_owned(), secret }))
            }
        }
    }

    /// As the clients of [`crate::client`] take it.
    pub fn into_pair(self) -> (String, String) {
        (self.principal, self.secret)
    }
}

/// A master's `--credentials` file: `{"credentials":[{"principal":..,"secret":..}]}`,
/// as principal -> secret.
pub fn read_credentials(path: &Path) -> Result<HashMap<String, String>, CredentialError> {
    let text = read("credentials file", path)?;
    let file: CredentialsJson =
        serde_json::from_str(&text).map_err(|source| CredentialError::Credentials { path: path.to_owned(), source })?;
    for c in &file.credentials {
        non_empty("credentials file", path, c)?;
    }
    Ok(file.credentials.into_iter().map(|c| (c.principal, c.secret)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_credential_file_is_json_or_text() {
        let dir = tempfile::tempdir().unwrap();
        let json = file(&dir, "c.json", r#"{"principal":"agent","secret":"s3"}"#);
        let text = file(&dir, "c.txt", "agent s3\n");
        for path in [&json, &text] {
            let c = Credential::from_file(path).unwrap();
            assert_eq!((c.principal.as_str(), c.secret.as_str()), ("agent", "s3"), "{}", path.display());
        }
        let bad = file(&dir, "bad", r#"{"user":"agent"}"#);
        let err = Credential::from_file(&bad).unwrap_err().to_string();
        assert!(err.contains("bad") && err.contains("PRINCIPAL SECRET"), "{err}");
    }

    #[test]
    fn a_principal_needs_a_secret_file_and_the_secret_is_never_printed() {
        let dir = tempfile::tempdir().unwrap();
        let secret = file(&dir, "secret", "s3cret\n");
        let c = Credential::from_flags(Some("agent"), Some(&secret), None).unwrap().unwrap();
        assert_eq!(c.secret, "s3cret");
        assert!(!format!("{c:?}").contains("s3cret"));
        assert!(Credential::from_flags(None, None, None).unwrap().is_none());
        let err = Credential::from_flags(Some("agent"), None, None).unwrap_err().to_string();
        assert!(err.contains("without a secret file"), "{err}");
        let empty = file(&dir, "empty", "\n");
        let err = Credential::from_flags(Some("agent"), Some(&empty), None).unwrap_err().to_string();
        assert!(err.contains("empty") && err.contains(&empty.display().to_string()), "{err}");
        let missing = dir.path().join("nope");
        let err = Credential::from_flags(Some("agent"), Some(&missing), None).unwrap_err().to_string();
        assert!(err.contains("nope"), "{err}");
    }

    #[test]
    fn a_credentials_list_in_the_wrong_format_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let good = file(&dir, "creds.json", r#"{"credentials":[{"principal":"p","secret":"s"}]}"#);
        assert_eq!(read_credentials(&good).unwrap(), HashMap::from([("p".to_owned(), "s".to_owned())]));
        let bad = file(&dir, "bad.json", r#"{"principal":"p"}"#);
        let err = read_credentials(&bad).unwrap_err().to_string();
        assert!(err.contains("bad.json") && err.contains("\"credentials\""), "{err}");
        let err = read_credentials(&dir.path().join("nope.json")).unwrap_err().to_string();
        assert!(err.contains("nope.json"), "{err}");
    }

    #[test]
    fn an_empty_secret_is_refused_naming_the_file_and_the_principal() {
        let dir = tempfile::tempdir().unwrap();
        let list = file(
            &dir,
            "creds.json",
            r#"{"credentials":[{"principal":"p","secret":"s"},{"principal":"q","secret":""}]}"#,
        );
        let err = read_credentials(&list).unwrap_err().to_string();
        assert!(
            err.contains(&list.display().to_string()) && err.contains("'q'") && err.contains("empty secret"),
            "{err}"
        );
        let missing = file(&dir, "nosecret.json", r#"{"credentials":[{"principal":"q"}]}"#);
        let err = read_credentials(&missing).unwrap_err().to_string();
        assert!(err.contains("nosecret.json") && err.contains("empty secret"), "{err}");
        let one = file(&dir, "c.json", r#"{"principal":"agent","secret":""}"#);
        let err = Credential::from_file(&one).unwrap_err().to_string();
        assert!(err.contains("c.json") && err.contains("'agent'") && err.contains("empty secret"), "{err}");
    }
}
