//! `/openapi/v3`: the index and one document per group/version, built from
//! the registry. Custom kinds carry their CRD's schema (descriptions
//! included, so `kubectl explain` is useful); every item path declares the
//! `fieldValidation` parameter so kubectl uses server-side field validation.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::resource::{Builtin, ResourceType};

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

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

fn object_meta() -> Value {
    let s = |d: &str| json!({"type": "string", "description": d});
    json!({"type": "object", "description": "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
    "properties": {
        "name": s("Name must be unique within a namespace."),
        "generateName": s("GenerateName is an optional prefix, used by the server, to generate a unique name ONLY IF the Name field has not been provided."),
        "namespace": s("Namespace defines the space within which each name must be unique."),
        "uid": s("UID is the unique in time and space value for this object."),
        "resourceVersion": s("An opaque value that represents the internal version of this object."),
        "generation": {"type": "integer", "format": "int64", "description": "A sequence number representing a specific generation of the desired state."},
        "creationTimestamp": s("CreationTimestamp is a timestamp representing the server time when this object was created."),
        "deletionTimestamp": s("DeletionTimestamp is RFC 3339 date and time at which this resource will be deleted."),
        "labels": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Map of string keys and values that can be used to organize and categorize objects."},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Annotations is an unstructured key value map stored with a resource."},
        "finalizers": {"type": "array", "items": {"type": "string"}, "description": "Must be empty before the object is deleted from the registry."},
        "ownerReferences": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}, "description": "List of objects depended by this object."},
        "managedFields": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}, "description": "ManagedFields maps workflow-id and version to the set of fields that are managed by that workflow."}
    }})
}

fn kind_schema(t: &ResourceType) -> Value {
    let mut schema =
        t.schema.clone().unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    if let Some(m) = schema.as_object_mut() {
        let props = m.entry("properties").or_insert_with(|| json!({}));
        if let Some(p) = props.as_object_mut() {
            p.insert("apiVersion".into(), json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}));
            p.insert("kind".into(), json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}));
            p.insert("metadata".into(), json!({"allOf": [{"$ref": format!("#/components/schemas/{OBJECT_META}")}], "description": "Standard object's metadata."}));
        }
        m.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([{"group": t.group, "version": t.version, "kind": t.kind}]),
        );
    }
    schema
}

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
            "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{}", definition_name(t))}}}}}})
    };
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
    schemas.insert(OBJECT_META.into(), object_meta());
    let base = if group.is_empty() { format!("/api/{version}") } else { format!("/apis/{group}/{version}") };
    for t in rs {
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

fn hash_of(v: &Value) -> String {
    let mut h = DefaultHasher::new();
    v.to_string().hash(&mut h);
    format!("{:016X}", h.finish())
}

/// The `/openapi/v3` index with a content hash per group/version.
pub fn index(types: &[Arc<ResourceType>]) -> Value {
    let mut gvs: BTreeMap<String, (String, String)> = BTreeMap::new();
    for t in types {
        gvs.entry(t.group_version_path()).or_insert((t.group.clone(), t.version.clone()));
    }
    let mut paths = serde_json::Map::new();
    for (path, (g, v)) in gvs {
        if let Some(doc) = document(types, &g, &v) {
            paths.insert(
                path.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={}", hash_of(&doc))}),
            );
        }
    }
    json!({"paths": paths})
}
