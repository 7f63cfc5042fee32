//! Protobuf `bytes` fields (`uuid`, `data`): base64 in JSON, as stout writes
//! them (standard alphabet, padded). Decoding also accepts unpadded input,
//! which some clients send.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Raw bytes that travel as base64 in JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Bytes(pub Vec<u8>);

impl Bytes {
    pub fn as_slice(&self) -> &[u8] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// A fresh random status-update uuid (16 bytes, as Mesos requires).
    pub fn random_uuid() -> Self {
        Self(uuid::Uuid::new_v4().as_bytes().to_vec())
    }

    pub fn to_base64(&self) -> String {
        STANDARD.encode(&self.0)
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(value: Vec<u8>) -> Self {
        Self(value)
    }
}

impl From<&[u8]> for Bytes {
    fn from(value: &[u8]) -> Self {
        Self(value.to_vec())
    }
}

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_base64())
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        STANDARD
            .decode(text.as_bytes())
            .or_else(|_| STANDARD_NO_PAD.decode(text.trim_end_matches('=').as_bytes()))
            .map(Bytes)
            .map_err(|e| serde::de::Error::custom(format!("'{text}' is not valid base64: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_as_padded_base64() {
        let b = Bytes(b"hello".to_vec());
        assert_eq!(serde_json::to_string(&b).unwrap(), "\"aGVsbG8=\"");
        let back: Bytes = serde_json::from_str("\"aGVsbG8=\"").unwrap();
        assert_eq!(back, b);
        let unpadded: Bytes = serde_json::from_str("\"aGVsbG8\"").unwrap();
        assert_eq!(unpadded, b);
    }

    #[test]
    fn invalid_base64_names_the_value() {
        let err = serde_json::from_str::<Bytes>("\"!!not base64\"").unwrap_err();
        assert!(err.to_string().contains("!!not base64"), "{err}");
    }
}
