//! HTTP basic authentication against Mesos credentials, as every mpiswarm
//! server that takes them checks it (the offer layer's `--credentials`, a
//! node agent's `--http-credentials`): the `Authorization` header parsed,
//! the secret compared only by `mpiswarm_guard::secret_eq` (constant time),
//! the refusal worded once. Who may then do what is each server's own
//! decision; this only says who is asking.

use std::collections::HashMap;
use std::path::Path;

use base64::Engine as _;

use crate::credential::{CredentialError, read_credentials};

/// The `WWW-Authenticate` challenge of a 401, as Mesos sends it.
pub const CHALLENGE: &str = "Basic realm=\"mesos\"";

/// Why a request is not authenticated: the 401's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unauthenticated {
    #[error("Authentication required: send HTTP basic credentials")]
    Missing,
    #[error("Authentication failed for principal '{0}'")]
    Failed(String),
}

/// The principals a server accepts, with their secrets.
#[derive(Clone)]
pub struct Principals {
    secrets: HashMap<String, String>,
}

impl std::fmt::Debug for Principals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<_> = self.secrets.keys().collect();
        names.sort();
        f.debug_struct("Principals").field("names", &names).finish_non_exhaustive()
    }
}

impl Principals {
    pub fn new(secrets: HashMap<String, String>) -> Self {
        Self { secrets }
    }

    /// A Mesos credentials file (`{"credentials":[{"principal":..,"secret":..}]}`).
    pub fn read(path: &Path) -> Result<Self, CredentialError> {
        read_credentials(path).map(Self::new)
    }

    /// The principal an `Authorization` header value proves, or why not.
    pub fn authenticate(&self, authorization: Option<&str>) -> Result<String, Unauthenticated> {
        let (principal, secret) = authorization.and_then(basic).ok_or(Unauthenticated::Missing)?;
        match self.secrets.get(&principal) {
            Some(expected) if mpiswarm_guard::secret_eq(&secret, expected) => Ok(principal),
            _ => Err(Unauthenticated::Failed(principal)),
        }
    }
}

/// `Basic base64(principal:secret)` -> (principal, secret).
fn basic(value: &str) -> Option<(String, String)> {
    let encoded = value.strip_prefix("Basic ").or_else(|| value.strip_prefix("basic "))?;
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (principal, secret) = text.split_once(':')?;
    Some((principal.to_owned(), secret.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(principal: &str, secret: &str) -> String {
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{principal}:{secret}")))
    }

    #[test]
    fn only_a_listed_principal_with_its_own_secret_passes() {
        let p =
            Principals::new(HashMap::from([("ops".to_owned(), "s3:cret".to_owned()), ("a".to_owned(), "x".into())]));
        assert_eq!(p.authenticate(Some(&header("ops", "s3:cret"))), Ok("ops".to_owned()), "a colon in the secret");
        assert_eq!(p.authenticate(Some(&header("ops", "x"))), Err(Unauthenticated::Failed("ops".into())));
        assert_eq!(p.authenticate(Some(&header("nobody", "x"))), Err(Unauthenticated::Failed("nobody".into())));
        assert_eq!(p.authenticate(None), Err(Unauthenticated::Missing));
        for malformed in ["Bearer abc", "Basic !!!", "Basic bm9jb2xvbg=="] {
            assert_eq!(p.authenticate(Some(malformed)), Err(Unauthenticated::Missing), "{malformed}");
        }
        assert_eq!(Unauthenticated::Failed("ops".into()).to_string(), "Authentication failed for principal 'ops'");
        assert!(!format!("{p:?}").contains("s3:cret"), "Debug hides the secrets: {p:?}");
    }
}
