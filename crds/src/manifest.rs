//! Reading an MpiJob from YAML or JSON text with errors that name the field,
//! e.g. `spec.profile: unknown variant `gpu``. Serde alone reports a line and
//! column; users think in field paths.

use crate::spec::MpiJob;

/// Why a manifest could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{path}: {message}")]
    Field { path: String, message: String },
    #[error("not a YAML document: {0}")]
    Syntax(String),
    #[error("apiVersion/kind is {found:?}; expected {API_VERSION}/MpiJob", API_VERSION = crate::API_VERSION)]
    WrongKind { found: String },
}

/// Parses one MpiJob document. Unknown fields are ignored, as the API server
/// prunes them; everything else must match the types.
pub fn parse_manifest(text: &str) -> Result<MpiJob, ManifestError> {
    let value: serde_json::Value = serde_yaml::from_str(text).map_err(|e| ManifestError::Syntax(e.to_string()))?;
    let api_version = value.get("apiVersion").and_then(|v| v.as_str()).unwrap_or_default();
    let kind = value.get("kind").and_then(|v| v.as_str()).unwrap_or_default();
    if api_version != crate::API_VERSION || kind != "MpiJob" {
        return Err(ManifestError::WrongKind { found: format!("{api_version}/{kind}") });
    }
    serde_path_to_error::deserialize(value)
        .map_err(|e| ManifestError::Field { path: e.path().to_string(), message: e.inner().to_string() })
}
