//! The OpenAPI documents as served: `/openapi/v3` (index and one document
//! per group/version) and `/openapi/v2` (JSON, or gnostic protobuf for
//! client-go), built once per set of served resources and kept until a CRD
//! change replaces the registry's snapshot. Building them costs far more
//! than serving bytes (the v3 index alone hashes every document), and
//! kubectl asks for them on every `apply`.
//!
//! What the documents say is `openapi` (v3, the one home of the schemas) and
//! `openapi_v2`/`gnostic` (derived from v3); this module only caches and
//! negotiates. No lock is held while a document is built, and a request
//! that arrives while v2 is being built awaits it without blocking a thread.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::resource::ResourceType;

/// The registry snapshot the documents were built from.
type Types = Arc<Vec<Arc<ResourceType>>>;

/// The documents of one registry snapshot.
pub struct Published {
    built_from: Types,
    index: Bytes,
    /// Each group/version's document, keyed by its path under `/openapi/v3`.
    v3: BTreeMap<String, Bytes>,
    /// Built on first request: most clients never ask for v2.
    v2: tokio::sync::OnceCell<V2>,
}

/// `/openapi/v2` in both forms, with the entity tag both share (kube-openapi
/// varies them by `Accept`).
pub struct V2 {
    pub json: Bytes,
    pub protobuf: Bytes,
    pub etag: String,
}

/// The media types `/openapi/v2` is served in, as kube-apiserver (kube-openapi's handler) offers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum V2Format {
    Json,
    Protobuf,
}

/// What client-go sends; the answer names the form without the `@`.
const PROTOBUF_DEPRECATED: &str = "com.github.proto-openapi.spec.v2@v1.0+protobuf";
const PROTOBUF: &str = "com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// Every media type `/openapi/v2` can be asked for (for a 406's message).
pub const V2_MEDIA_TYPES: &str = "application/json, application/com.github.proto-openapi.spec.v2@v1.0+protobuf, application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

impl V2Format {
    /// The first acceptable form in the client's order of preference
    /// (goautoneg's, as kube-openapi uses it: by `q`, then concrete before
    /// wildcard), or None (406). A missing Accept header means `*/*`; a
    /// range with `q=0` is not acceptable (RFC 9110; goautoneg ignores that).
    pub fn negotiate(accept: &str) -> Option<Self> {
        let accept = if accept.trim().is_empty() { "*/*" } else { accept };
        let mut clauses: Vec<(f32, &str, &str)> = accept
            .split(',')
            .filter_map(|clause| {
                let mut parts = clause.split(';');
                let range = parts.next()?.trim();
                let (ty, sub) = match range.split_once('/') {
                    Some((t, s)) => (t.trim(), s.trim()),
                    None if range == "*" => ("*", "*"),
                    None => return None,
                };
                let q = parts
                    .filter_map(|p| p.split_once('='))
                    .find(|(k, _)| k.trim() == "q")
                    .map_or(1.0, |(_, v)| v.trim().parse().unwrap_or(0.0));
                Some((q, ty, sub))
            })
            .filter(|(q, _, _)| *q > 0.0)
            .collect();
        clauses.sort_by(|a, b| {
            b.0.total_cmp(&a.0).then((a.1 == "*").cmp(&(b.1 == "*"))).then((a.2 == "*").cmp(&(b.2 == "*")))
        });
        let offered = [("json", Self::Json), (PROTOBUF_DEPRECATED, Self::Protobuf), (PROTOBUF, Self::Protobuf)];
        clauses.iter().find_map(|(_, ty, sub)| {
            if *ty != "application" && *ty != "*" {
                return None;
            }
            offered.iter().find(|(s, _)| *sub == "*" || sub == s).map(|(_, f)| *f)
        })
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Self::Json => "application/json",
            Self::Protobuf => "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
        }
    }
}

fn hash_of(bytes: &[u8]) -> String {
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    format!("{:016X}", h.finish())
}

impl Published {
    fn build(types: Types) -> Self {
        let v3: BTreeMap<String, Bytes> = crate::openapi::documents(&types)
            .into_iter()
            .map(|(path, doc)| (path, Bytes::from(doc.to_string())))
            .collect();
        let hashes: Vec<(&str, String)> = v3.iter().map(|(p, d)| (p.as_str(), hash_of(d))).collect();
        let index = crate::openapi::index(hashes.iter().map(|(p, h)| (*p, h.as_str()))).to_string().into();
        Self { built_from: types, index, v3, v2: tokio::sync::OnceCell::new() }
    }

    /// `/openapi/v3`.
    pub fn index(&self) -> Bytes {
        self.index.clone()
    }

    /// `/openapi/v3/<path>`, e.g. `apis/apps/v1`.
    pub fn v3(&self, path: &str) -> Option<Bytes> {
        self.v3.get(path).cloned()
    }

    /// `/openapi/v2`, converted from the v3 documents on first use.
    pub async fn v2(&self) -> &V2 {
        self.v2
            .get_or_init(|| async {
                let v3 = crate::openapi::documents(&self.built_from);
                let doc = crate::openapi_v2::document(v3.values());
                let json = Bytes::from(doc.to_string());
                V2 { etag: hash_of(&json), protobuf: crate::gnostic::encode(&doc).into(), json }
            })
            .await
    }
}

/// The documents of the registry snapshot last asked about.
#[derive(Default)]
pub struct Cache {
    current: Mutex<Option<Arc<Published>>>,
}

impl Cache {
    /// The documents for `types`, built now if the snapshot changed since
    /// the last request (outside the lock; two racing builders build the
    /// same thing and the later one is kept).
    pub fn get(&self, types: &Types) -> Arc<Published> {
        if let Some(p) = crate::locks::lock(&self.current).as_ref().filter(|p| Arc::ptr_eq(&p.built_from, types)) {
            return p.clone();
        }
        let built = Arc::new(Published::build(types.clone()));
        *crate::locks::lock(&self.current) = Some(built.clone());
        built
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_is_served_in_the_form_asked_for() {
        use V2Format::*;
        assert_eq!(V2Format::negotiate("application/com.github.proto-openapi.spec.v2@v1.0+protobuf"), Some(Protobuf));
        assert_eq!(V2Format::negotiate("application/com.github.proto-openapi.spec.v2.v1.0+protobuf"), Some(Protobuf));
        assert_eq!(V2Format::negotiate("application/json"), Some(Json));
        assert_eq!(V2Format::negotiate(""), Some(Json));
        assert_eq!(V2Format::negotiate("*/*"), Some(Json));
        assert_eq!(
            V2Format::negotiate("application/json;q=0.5, application/com.github.proto-openapi.spec.v2@v1.0+protobuf"),
            Some(Protobuf)
        );
        assert_eq!(
            V2Format::negotiate("*/*;q=0.1, application/com.github.proto-openapi.spec.v2@v1.0+protobuf"),
            Some(Protobuf)
        );
        assert_eq!(V2Format::negotiate("application/yaml"), None);
        assert_eq!(V2Format::negotiate("text/html, application/json;q=0"), None);
    }

    #[tokio::test]
    async fn documents_are_built_once_per_registry_snapshot() {
        let registry = crate::registry::Registry::default();
        let cache = Cache::default();
        let types = registry.all();
        let first = cache.get(&types);
        assert!(Arc::ptr_eq(&first, &cache.get(&registry.all())), "same snapshot, same documents");
        assert!(first.v3("api/v1").is_some() && first.v3("apis/nosuch/v1").is_none());
        assert!(std::ptr::eq(first.v2().await, first.v2().await), "v2 is built once");

        registry.reload(std::iter::empty());
        let second = cache.get(&registry.all());
        assert!(!Arc::ptr_eq(&first, &second), "a reloaded registry gets new documents");
    }
}
