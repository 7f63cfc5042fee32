//! Kubernetes protobuf request bodies for the few built-in kinds kubectl's
//! typed clients send that way (`kubectl create namespace|configmap|secret`,
//! `kubectl auth can-i|whoami`): the `k8s\0` envelope (`runtime.Unknown`)
//! and just the fields of Namespace, ConfigMap, Secret and the review kinds
//! (k8s.io/api generated.proto numbering),
//! turned into the JSON the rest of the server handles. Unknown fields are
//! skipped by prost; responses are always JSON, which kubectl accepts.

use std::collections::BTreeMap;

use base64::Engine;
use prost::Message;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::resource::{Builtin, ResourceType};

const MAGIC: &[u8] = b"k8s\0";

#[derive(Clone, PartialEq, Message)]
struct TypeMeta {
    #[prost(string, tag = "1")]
    api_version: String,
    #[prost(string, tag = "2")]
    kind: String,
}

/// `runtime.Unknown`, the envelope after the magic bytes.
#[derive(Clone, PartialEq, Message)]
struct Unknown {
    #[prost(message, optional, tag = "1")]
    type_meta: Option<TypeMeta>,
    #[prost(bytes = "vec", tag = "2")]
    raw: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
struct ObjectMeta {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    generate_name: String,
    #[prost(string, tag = "3")]
    namespace: String,
    #[prost(btree_map = "string, string", tag = "11")]
    labels: BTreeMap<String, String>,
    #[prost(btree_map = "string, string", tag = "12")]
    annotations: BTreeMap<String, String>,
    #[prost(string, repeated, tag = "14")]
    finalizers: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct Namespace {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
}

#[derive(Clone, PartialEq, Message)]
struct ConfigMap {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(btree_map = "string, string", tag = "2")]
    data: BTreeMap<String, String>,
    #[prost(btree_map = "string, bytes", tag = "3")]
    binary_data: BTreeMap<String, Vec<u8>>,
    #[prost(bool, optional, tag = "4")]
    immutable: Option<bool>,
}

#[derive(Clone, PartialEq, Message)]
struct Secret {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(btree_map = "string, bytes", tag = "2")]
    data: BTreeMap<String, Vec<u8>>,
    #[prost(string, tag = "3")]
    type_: String,
    #[prost(btree_map = "string, string", tag = "4")]
    string_data: BTreeMap<String, String>,
    #[prost(bool, optional, tag = "5")]
    immutable: Option<bool>,
}

/// authorization/v1 `ResourceAttributes`.
#[derive(Clone, PartialEq, Message)]
struct ResourceAttributes {
    #[prost(string, tag = "1")]
    namespace: String,
    #[prost(string, tag = "2")]
    verb: String,
    #[prost(string, tag = "3")]
    group: String,
    #[prost(string, tag = "4")]
    version: String,
    #[prost(string, tag = "5")]
    resource: String,
    #[prost(string, tag = "6")]
    subresource: String,
    #[prost(string, tag = "7")]
    name: String,
}

#[derive(Clone, PartialEq, Message)]
struct NonResourceAttributes {
    #[prost(string, tag = "1")]
    path: String,
    #[prost(string, tag = "2")]
    verb: String,
}

/// `SubjectAccessReviewSpec`; `SelfSubjectAccessReviewSpec` is its first two fields.
#[derive(Clone, PartialEq, Message)]
struct AccessReviewSpec {
    #[prost(message, optional, tag = "1")]
    resource_attributes: Option<ResourceAttributes>,
    #[prost(message, optional, tag = "2")]
    non_resource_attributes: Option<NonResourceAttributes>,
    #[prost(string, tag = "3")]
    user: String,
    #[prost(string, repeated, tag = "4")]
    groups: Vec<String>,
    #[prost(string, tag = "6")]
    uid: String,
}

/// Every access review: metadata and spec.
#[derive(Clone, PartialEq, Message)]
struct AccessReview {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<AccessReviewSpec>,
}

#[derive(Clone, PartialEq, Message)]
struct RulesReviewSpec {
    #[prost(string, tag = "1")]
    namespace: String,
}

#[derive(Clone, PartialEq, Message)]
struct RulesReview {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<RulesReviewSpec>,
}

#[derive(Clone, PartialEq, Message)]
struct TokenReviewSpec {
    #[prost(string, tag = "1")]
    token: String,
    #[prost(string, repeated, tag = "2")]
    audiences: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct TokenReview {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<TokenReviewSpec>,
}

/// `SelfSubjectReview` asks nothing: metadata only.
#[derive(Clone, PartialEq, Message)]
struct SelfSubjectReview {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
}

/// A review's protobuf body as the JSON `reviews` reads.
fn review_json(rt: &ResourceType, raw: &[u8]) -> ApiResult<Value> {
    Ok(match rt.kind.as_str() {
        "SelfSubjectRulesReview" => {
            let r = RulesReview::decode(raw).map_err(|e| bad(rt, e))?;
            json!({"metadata": meta_json(r.metadata), "spec": {"namespace": r.spec.unwrap_or_default().namespace}})
        }
        "TokenReview" => {
            let r = TokenReview::decode(raw).map_err(|e| bad(rt, e))?;
            let spec = r.spec.unwrap_or_default();
            json!({"metadata": meta_json(r.metadata), "spec": {"token": spec.token, "audiences": spec.audiences}})
        }
        "SelfSubjectReview" => {
            let r = SelfSubjectReview::decode(raw).map_err(|e| bad(rt, e))?;
            json!({"metadata": meta_json(r.metadata)})
        }
        _ => {
            let r = AccessReview::decode(raw).map_err(|e| bad(rt, e))?;
            let spec = r.spec.unwrap_or_default();
            let mut v = json!({"metadata": meta_json(r.metadata), "spec": {}});
            if let Some(a) = spec.resource_attributes {
                v["spec"]["resourceAttributes"] = json!({"namespace": a.namespace, "verb": a.verb, "group": a.group,
                    "version": a.version, "resource": a.resource, "subresource": a.subresource, "name": a.name});
            }
            if let Some(a) = spec.non_resource_attributes {
                v["spec"]["nonResourceAttributes"] = json!({"path": a.path, "verb": a.verb});
            }
            if !spec.user.is_empty() {
                v["spec"]["user"] = json!(spec.user);
            }
            if !spec.groups.is_empty() {
                v["spec"]["groups"] = json!(spec.groups);
            }
            if !spec.uid.is_empty() {
                v["spec"]["uid"] = json!(spec.uid);
            }
            v
        }
    })
}

pub fn is_protobuf(content_type: &str) -> bool {
    content_type.trim().starts_with("application/vnd.kubernetes.protobuf")
}

fn meta_json(m: Option<ObjectMeta>) -> Value {
    let m = m.unwrap_or_default();
    let mut v = json!({});
    for (k, s) in [("name", m.name), ("generateName", m.generate_name), ("namespace", m.namespace)] {
        if !s.is_empty() {
            v[k] = json!(s);
        }
    }
    if !m.labels.is_empty() {
        v["labels"] = json!(m.labels);
    }
    if !m.annotations.is_empty() {
        v["annotations"] = json!(m.annotations);
    }
    if !m.finalizers.is_empty() {
        v["finalizers"] = json!(m.finalizers);
    }
    v
}

fn b64(map: BTreeMap<String, Vec<u8>>) -> BTreeMap<String, String> {
    map.into_iter().map(|(k, v)| (k, base64::engine::general_purpose::STANDARD.encode(v))).collect()
}

fn bad(rt: &ResourceType, e: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("the protobuf body could not be decoded as {}: {e}", rt.kind))
}

/// Decode a protobuf body for `rt` into JSON, or 415 for kinds it does not cover.
pub fn decode(rt: &ResourceType, body: &[u8]) -> ApiResult<Value> {
    let unsupported = || {
        ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (protobuf is accepted only for namespaces, configmaps, secrets and the review kinds, not {plural}); send {plural} as JSON or YAML: `kubectl apply -f` and `kubectl create -f` do, and a `kubectl create {singular} ...` generator can be piped: add `--dry-run=client -o yaml | kubectl apply -f -`",
            plural = rt.plural,
            singular = rt.singular
        ))
    };
    if !matches!(rt.builtin, Some(Builtin::Namespace | Builtin::ConfigMap | Builtin::Secret | Builtin::Review)) {
        return Err(unsupported());
    }
    let inner = body.strip_prefix(MAGIC).ok_or_else(|| bad(rt, "missing the k8s protobuf envelope"))?;
    let unknown = Unknown::decode(inner).map_err(|e| bad(rt, e))?;
    let tm = unknown.type_meta.unwrap_or_default();
    let raw = unknown.raw.as_slice();
    let mut v = match rt.builtin {
        Some(Builtin::Review) => review_json(rt, raw)?,
        Some(Builtin::Namespace) => {
            let ns = Namespace::decode(raw).map_err(|e| bad(rt, e))?;
            json!({"metadata": meta_json(ns.metadata)})
        }
        Some(Builtin::ConfigMap) => {
            let cm = ConfigMap::decode(raw).map_err(|e| bad(rt, e))?;
            let mut v = json!({"metadata": meta_json(cm.metadata)});
            if !cm.data.is_empty() {
                v["data"] = json!(cm.data);
            }
            if !cm.binary_data.is_empty() {
                v["binaryData"] = json!(b64(cm.binary_data));
            }
            if let Some(i) = cm.immutable {
                v["immutable"] = json!(i);
            }
            v
        }
        _ => {
            let s = Secret::decode(raw).map_err(|e| bad(rt, e))?;
            let mut v = json!({"metadata": meta_json(s.metadata)});
            let mut data = b64(s.data);
            // stringData is write-only: it lands in data, as on a real cluster.
            for (k, val) in s.string_data {
                data.insert(k, base64::engine::general_purpose::STANDARD.encode(val));
            }
            if !data.is_empty() {
                v["data"] = json!(data);
            }
            if !s.type_.is_empty() {
                v["type"] = json!(s.type_);
            }
            if let Some(i) = s.immutable {
                v["immutable"] = json!(i);
            }
            v
        }
    };
    v["apiVersion"] = json!(if tm.api_version.is_empty() { rt.api_version() } else { tm.api_version });
    v["kind"] = json!(if tm.kind.is_empty() { rt.kind.clone() } else { tm.kind });
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_protobuf_configmap_becomes_json() {
        let cm = ConfigMap {
            metadata: Some(ObjectMeta {
                name: "c1".into(),
                labels: [("a".to_string(), "b".to_string())].into(),
                ..Default::default()
            }),
            data: [("k".to_string(), "v".to_string())].into(),
            binary_data: [("bin".to_string(), vec![0u8, 1])].into(),
            immutable: None,
        };
        let envelope = Unknown {
            type_meta: Some(TypeMeta { api_version: "v1".into(), kind: "ConfigMap".into() }),
            raw: cm.encode_to_vec(),
        };
        let mut body = MAGIC.to_vec();
        body.extend(envelope.encode_to_vec());
        let rt = crate::registry::Registry::default().find("", "v1", "configmaps").expect("configmaps");
        let v = decode(&rt, &body).expect("decodes");
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1", "labels": {"a": "b"}}, "data": {"k": "v"}, "binaryData": {"bin": "AAE="}})
        );
        assert_eq!(decode(&rt, b"not protobuf").unwrap_err().code, 400);
    }

    #[test]
    fn a_protobuf_access_review_becomes_the_json_reviews_read() {
        let review = AccessReview {
            metadata: None,
            spec: Some(AccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    namespace: "team-a".into(),
                    verb: "create".into(),
                    group: "mpiswarm.io".into(),
                    resource: "mpijobs".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        };
        let envelope = Unknown {
            type_meta: Some(TypeMeta {
                api_version: "authorization.k8s.io/v1".into(),
                kind: "SelfSubjectAccessReview".into(),
            }),
            raw: review.encode_to_vec(),
        };
        let mut body = MAGIC.to_vec();
        body.extend(envelope.encode_to_vec());
        let rt = crate::registry::Registry::default()
            .find("authorization.k8s.io", "v1", "selfsubjectaccessreviews")
            .expect("served");
        let v = decode(&rt, &body).expect("decodes");
        assert_eq!(v["kind"], "SelfSubjectAccessReview");
        assert_eq!(v["spec"]["resourceAttributes"]["namespace"], "team-a");
        assert_eq!(v["spec"]["resourceAttributes"]["resource"], "mpijobs");
        assert!(v["spec"].get("nonResourceAttributes").is_none());
    }
}
