//! The Swagger 2.0 document (`/openapi/v2`), converted from the OpenAPI v3
//! documents of `openapi`, which stay the one home of every schema and path.
//! kubectl reads it to validate the items of a `kind: List` on the client
//! (kube-openapi's `util/proto`), which refuses definitions it cannot parse,
//! so schemas are converted the way kube-apiserver publishes CRD schemas in
//! v2 (apiextensions' `ToStructuralOpenAPIV2`): no `allOf`/`anyOf`/`oneOf`/
//! `not`; a nullable node loses its type, properties and items and is not
//! required; a node that preserves unknown fields loses its properties and
//! items; an array left without items loses its type. v3's way of describing
//! a reference (`allOf: [{$ref}]` beside a description) becomes v2's `$ref`
//! beside a description. Keys Swagger 2.0 does not have are dropped.
//!
//! This module adds no rule of its own: what v2 says, v3 said first.

use serde_json::{Map, Value, json};

use crate::openapi::REF;

/// Where a v2 document's `$ref`s point.
const V2_REF: &str = "#/definitions/";

/// The keys of a Swagger 2.0 schema object, besides `x-` extensions.
const SCHEMA_KEYS: &[&str] = &[
    "$ref",
    "format",
    "title",
    "description",
    "default",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxProperties",
    "minProperties",
    "required",
    "enum",
    "additionalProperties",
    "type",
    "items",
    "properties",
    "discriminator",
    "readOnly",
    "externalDocs",
    "example",
];

/// The one Swagger 2.0 document of every group/version's v3 document:
/// their paths and their schemas as `definitions`.
pub fn document<'a>(v3: impl IntoIterator<Item = &'a Value>) -> Value {
    let mut paths = Map::new();
    let mut definitions = Map::new();
    let mut info = json!({});
    for doc in v3 {
        info = doc["info"].clone();
        for (path, item) in doc["paths"].as_object().into_iter().flatten() {
            paths.insert(path.clone(), path_item(item));
        }
        for (name, s) in doc["components"]["schemas"].as_object().into_iter().flatten() {
            definitions.entry(name.clone()).or_insert_with(|| schema(s));
        }
    }
    json!({"swagger": "2.0", "info": info, "paths": paths, "definitions": definitions})
}

fn v2_ref(r: &Value) -> Value {
    match r.as_str() {
        Some(r) => json!(r.strip_prefix(REF).map_or_else(|| r.to_owned(), |name| format!("{V2_REF}{name}"))),
        None => r.clone(),
    }
}

fn is_true(v: Option<&Value>) -> bool {
    v.and_then(Value::as_bool) == Some(true)
}

/// One v3 schema as v2 has it (see the module comment for the rules).
pub fn schema(s: &Value) -> Value {
    let Some(m) = s.as_object() else { return s.clone() };
    let mut out = Map::new();
    // `{"allOf": [{"$ref": X}], "description": ...}` is how v3 describes a reference.
    if let Some([only]) = m.get("allOf").and_then(Value::as_array).map(Vec::as_slice)
        && let Some(o) = only.as_object()
        && o.len() == 1
        && let Some(r) = o.get("$ref")
    {
        out.insert("$ref".into(), v2_ref(r));
    }
    for (k, v) in m {
        if !k.starts_with("x-") && !SCHEMA_KEYS.contains(&k.as_str()) {
            continue;
        }
        let v = match k.as_str() {
            "$ref" => v2_ref(v),
            "properties" => {
                Value::Object(v.as_object().into_iter().flatten().map(|(n, p)| (n.clone(), schema(p))).collect())
            }
            "items" if v.is_array() => Value::Array(v.as_array().into_iter().flatten().map(schema).collect()),
            "items" | "additionalProperties" => schema(v),
            _ => v.clone(),
        };
        out.insert(k.clone(), v);
    }
    if is_true(m.get("nullable")) {
        for k in ["type", "properties", "items"] {
            out.remove(k);
        }
    }
    if is_true(m.get("x-kubernetes-preserve-unknown-fields")) {
        out.remove("properties");
        out.remove("items");
    }
    if out.get("type").and_then(Value::as_str) == Some("array") && !out.contains_key("items") {
        out.remove("type");
    }
    let nullable_values = m.get("additionalProperties").is_some_and(|a| is_true(a.get("nullable")));
    let nullable_props: Vec<&str> = m
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(_, p)| is_true(p.get("nullable")))
        .map(|(n, _)| n.as_str())
        .collect();
    if let Some(required) = out.get_mut("required").and_then(Value::as_array_mut) {
        required.retain(|r| !nullable_values && !r.as_str().is_some_and(|r| nullable_props.contains(&r)));
        if required.is_empty() {
            out.remove("required");
        }
    }
    Value::Object(out)
}

fn path_item(item: &Value) -> Value {
    let Some(m) = item.as_object() else { return item.clone() };
    m.iter()
        .map(|(k, v)| {
            let v = match k.as_str() {
                "get" | "put" | "post" | "delete" | "options" | "head" | "patch" => operation(v),
                "parameters" => Value::Array(v.as_array().into_iter().flatten().map(parameter).collect()),
                _ => v.clone(),
            };
            (k.clone(), v)
        })
        .collect::<Map<_, _>>()
        .into()
}

/// A v3 parameter's `schema` (type, format...) sits on the parameter itself in v2.
fn parameter(p: &Value) -> Value {
    let Some(m) = p.as_object() else { return p.clone() };
    let mut out: Map<String, Value> =
        m.iter().filter(|(k, _)| *k != "schema").map(|(k, v)| (k.clone(), v.clone())).collect();
    if let Some(s) = m.get("schema").and_then(Value::as_object) {
        for (k, v) in s {
            out.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    Value::Object(out)
}

/// v3 media-type maps (`content`) become v2's `produces`/`consumes` and a
/// plain `schema`; a request body becomes the `body` parameter.
fn operation(op: &Value) -> Value {
    let Some(m) = op.as_object() else { return op.clone() };
    let mut out: Map<String, Value> = m
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "parameters" | "requestBody" | "responses"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut params: Vec<Value> =
        m.get("parameters").and_then(Value::as_array).into_iter().flatten().map(parameter).collect();
    if let Some(body) = m.get("requestBody") {
        let (types, s) = content(body);
        out.insert("consumes".into(), json!(types));
        params.push(json!({"name": "body", "in": "body", "required": is_true(body.get("required")),
            "schema": s.unwrap_or_else(|| json!({}))}));
    }
    if !params.is_empty() {
        out.insert("parameters".into(), Value::Array(params));
    }
    if let Some(responses) = m.get("responses").and_then(Value::as_object) {
        let mut produces: Vec<String> = vec![];
        let mut v2 = Map::new();
        for (code, r) in responses {
            let (types, s) = content(r);
            for t in types {
                if !produces.contains(&t) {
                    produces.push(t);
                }
            }
            let mut response = json!({"description": r["description"].as_str().unwrap_or_default()});
            if let Some(s) = s {
                response["schema"] = s;
            }
            v2.insert(code.clone(), response);
        }
        if !produces.is_empty() {
            out.insert("produces".into(), json!(produces));
        }
        out.insert("responses".into(), Value::Object(v2));
    }
    Value::Object(out)
}

/// The media types of a v3 `content` map and the schema of the first.
fn content(v: &Value) -> (Vec<String>, Option<Value>) {
    let Some(c) = v.get("content").and_then(Value::as_object) else { return (vec![], None) };
    (c.keys().cloned().collect(), c.values().next().and_then(|m| m.get("schema")).map(schema))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_described_reference_becomes_a_v2_reference() {
        let s = json!({"allOf": [{"$ref": "#/components/schemas/io.k8s.X"}], "description": "d"});
        assert_eq!(schema(&s), json!({"$ref": "#/definitions/io.k8s.X", "description": "d"}));
    }

    #[test]
    fn nullable_and_open_nodes_lose_what_kubectl_cannot_parse() {
        let s = json!({"type": "object", "required": ["a", "b"], "properties": {
            "a": {"type": "object", "nullable": true, "properties": {"x": {"type": "string"}}},
            "b": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"y": {"type": "string"}}},
            "c": {"type": "array", "x-kubernetes-preserve-unknown-fields": true, "items": {"type": "string"}},
            "d": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": true},
        }});
        assert_eq!(
            schema(&s),
            json!({"type": "object", "required": ["b"], "properties": {
                "a": {},
                "b": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "c": {"x-kubernetes-preserve-unknown-fields": true},
                "d": {"x-kubernetes-int-or-string": true},
            }})
        );
    }

    #[test]
    fn a_v3_operation_becomes_a_v2_operation() {
        let op = json!({"operationId": "patchX", "x-kubernetes-action": "patch",
            "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}}],
            "requestBody": {"required": true, "content": {"application/merge-patch+json": {"schema": {"type": "object"}}}},
            "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/X"}}}}}});
        assert_eq!(
            operation(&op),
            json!({"operationId": "patchX", "x-kubernetes-action": "patch",
                "consumes": ["application/merge-patch+json"], "produces": ["application/json"],
                "parameters": [{"name": "fieldValidation", "in": "query", "type": "string", "uniqueItems": true},
                    {"name": "body", "in": "body", "required": true, "schema": {"type": "object"}}],
                "responses": {"200": {"description": "OK", "schema": {"$ref": "#/definitions/X"}}}})
        );
    }
}
