//! `/openapi/v3`: the index and one document per group/version, built from
//! the registry. Custom kinds carry their CRD's schema (descriptions
//! included, so `kubectl explain` is useful); every item path declares the
//! `fieldValidation` parameter so kubectl uses server-side field validation.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::resource::{Builtin, ResourceType};

/// Where a v3 document's `$ref`s point.
pub const REF: &str = "#/components/schemas/";

/// The component name kube-apiserver uses for a kind.
pub fn definition_name(t: &ResourceType) -> String {
    if let Some(d) = &t.definition {
        return d.clone();
    }
    match t.builtin {
        Some(Builtin::Crd) => {
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition".into()
        }
        Some(Builtin::EventsV1) => format!("io.k8s.api.events.v1.{}", t.kind),
        Some(Builtin::Lease) => format!("io.k8s.api.coordination.v1.{}", t.kind),
        Some(_) => format!("io.k8s.api.core.v1.{}", t.kind),
        None => {
            let mut parts: Vec<&str> = t.group.split('.').collect();
            parts.reverse();
            format!("{}.{}.{}", parts.join("."), t.version, t.kind)
        }
    }
}

fn kind_schema(t: &ResourceType) -> Value {
    let mut schema =
        t.schema.clone().unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    if let Some(m) = schema.as_object_mut() {
        let props = m.entry("properties").or_insert_with(|| json!({}));
        if let Some(p) = props.as_object_mut() {
            p.insert("apiVersion".into(), json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}));
            p.insert("kind".into(), json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}));
            let (meta_name, _) = crate::builtins::object_meta();
            p.insert(
                "metadata".into(),
                json!({"allOf": [{"$ref": format!("{REF}{meta_name}")}], "description": "Standard object's metadata."}),
            );
        }
        m.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([{"group": t.group, "version": t.version, "kind": t.kind}]),
        );
    }
    schema
}

/// The operations of a kind's item path, or of a review's collection path (create only).
fn operations(t: &ResourceType) -> Value {
    let gvk = json!({"group": t.group, "version": t.version, "kind": t.kind});
    let params = json!([
        {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
    ]);
    let op = |id: &str, action: &str| {
        json!({"operationId": format!("{id}{}", t.kind), "parameters": params,
            "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk,
            "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": format!("{REF}{}", definition_name(t))}}}}}})
    };
    if t.builtin == Some(Builtin::Review) {
        return json!({"post": op("create", "post")});
    }
    json!({"get": op("read", "get"), "put": op("replace", "put"), "patch": op("patch", "patch"), "delete": op("delete", "delete")})
}

/// The document for one group/version, or None when nothing is served there.
pub fn document(types: &[Arc<ResourceType>], group: &str, version: &str) -> Option<Value> {
    let rs: Vec<&Arc<ResourceType>> = types.iter().filter(|t| t.group == group && t.version == version).collect();
    if rs.is_empty() {
        return None;
    }
    let mut paths = serde_json::Map::new();
    let mut schemas = serde_json::Map::new();
    let (meta_name, meta) = crate::builtins::object_meta();
    schemas.insert(meta_name.clone(), meta.clone());
    let base = if group.is_empty() { format!("/api/{version}") } else { format!("/apis/{group}/{version}") };
    for t in rs {
        if t.builtin == Some(Builtin::Review) {
            // A review is only ever created: one POST on its collection.
            let collection = if t.namespaced {
                format!("{base}/namespaces/{{namespace}}/{}", t.plural)
            } else {
                format!("{base}/{}", t.plural)
            };
            paths.insert(collection, operations(t));
            schemas.insert(definition_name(t), kind_schema(t));
            continue;
        }
        let item = if t.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}/{{name}}", t.plural)
        } else {
            format!("{base}/{}/{{name}}", t.plural)
        };
        paths.insert(item.clone(), operations(t));
        if t.status_subresource {
            paths.insert(format!("{item}/status"), operations(t));
        }
        schemas.insert(definition_name(t), kind_schema(t));
    }
    Some(json!({"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths, "components": {"schemas": schemas}}))
}

/// Every group/version's document, keyed by its path under `/openapi/v3`
/// (`api/v1`, `apis/apps/v1`).
pub fn documents(types: &[Arc<ResourceType>]) -> BTreeMap<String, Value> {
    let mut gvs: BTreeMap<String, (&str, &str)> = BTreeMap::new();
    for t in types {
        gvs.entry(t.group_version_path()).or_insert((&t.group, &t.version));
    }
    gvs.into_iter().filter_map(|(path, (g, v))| Some((path, document(types, g, v)?))).collect()
}

/// The `/openapi/v3` index: each group/version's path with the content hash
/// of its document, which clients use as a cache key.
pub fn index<'a>(hashes: impl IntoIterator<Item = (&'a str, &'a str)>) -> Value {
    let paths: serde_json::Map<String, Value> = hashes
        .into_iter()
        .map(|(path, hash)| (path.to_owned(), json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}")})))
        .collect();
    json!({"paths": paths})
}
