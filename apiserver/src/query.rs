//! Query strings as Kubernetes clients send them: empty pairs and a leading
//! `&` are fine (kube-rs), booleans follow Go's `ParseBool`, `+` is a space.

use std::collections::HashMap;

use crate::error::{ApiError, ApiResult};

#[derive(Debug, Default, Clone)]
pub struct Query(HashMap<String, String>);

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// Percent-decoding of one query component.
pub fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h * 16 + l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Query {
    pub fn parse(raw: Option<&str>) -> Self {
        let mut map = HashMap::new();
        for pair in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            map.insert(decode(k), decode(v));
        }
        Self(map)
    }

    /// The same query without some parameters.
    pub fn without(&self, keys: &[&str]) -> Self {
        Self(self.0.iter().filter(|(k, _)| !keys.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect())
    }

    /// The same query with `key` set to `value`.
    pub fn with(&self, key: &str, value: &str) -> Self {
        let mut q = self.clone();
        q.0.insert(key.to_string(), value.to_string());
        q
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str).filter(|v| !v.is_empty())
    }

    pub fn flag(&self, key: &str) -> ApiResult<bool> {
        match self.0.get(key).map(String::as_str) {
            None | Some("") => Ok(false),
            Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(true),
            Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(false),
            Some(other) => Err(ApiError::bad_request(format!("invalid boolean {other:?} for query parameter {key:?}"))),
        }
    }

    pub fn number(&self, key: &str) -> ApiResult<Option<u64>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| {
                ApiError::bad_request(format!(
                    "invalid value {v:?} for query parameter {key:?}: not a non-negative integer"
                ))
            }),
        }
    }

    pub fn dry_run(&self) -> ApiResult<bool> {
        match self.get("dryRun") {
            None => Ok(false),
            Some("All") => Ok(true),
            Some(other) => {
                Err(ApiError::bad_request(format!("unsupported dryRun value {other:?}: only \"All\" is supported")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_rs_style_query_strings_parse() {
        let q = Query::parse(Some("&force=true&fieldManager=mpi%2Dcontroller&&fieldSelector=metadata.name%3Djob1"));
        assert!(q.flag("force").unwrap());
        assert_eq!(q.get("fieldManager"), Some("mpi-controller"));
        assert_eq!(q.get("fieldSelector"), Some("metadata.name=job1"));
        assert!(!Query::parse(Some("watch=0")).flag("watch").unwrap());
        assert!(Query::parse(Some("watch=yes")).flag("watch").is_err());
        assert_eq!(decode("a+b%2"), "a b%2");
    }
}
