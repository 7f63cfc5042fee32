//! Structural-schema handling of a custom resource against its CRD's
//! `openAPIV3Schema`, in the order kube-apiserver uses: prune unknown fields
//! (reporting them for `fieldValidation=Strict`), drop non-nullable nulls,
//! apply defaults, then validate (types, required, enum, bounds, patterns,
//! sizes) and run the CEL rules. Errors are `Cause`s naming the field path the
//! way Kubernetes prints it (`spec.workers[0].image`).

use regex::Regex;
use serde_json::{Map, Value};

use crate::cel_rules;
use crate::error::Cause;

/// Result of checking one object.
#[derive(Debug, Default)]
pub struct Checked {
    pub causes: Vec<Cause>,
    /// Dotted paths of fields that were pruned (unknown to the schema).
    pub unknown: Vec<String>,
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_string() } else { format!("{path}.{key}") }
}

fn preserves(schema: &Value) -> bool {
    schema["x-kubernetes-preserve-unknown-fields"].as_bool() == Some(true)
}

/// Prune fields not in the schema and nulls in non-nullable fields, apply defaults.
fn prune_and_default(schema: &Value, value: &mut Value, path: &str, unknown: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            let props = schema["properties"].as_object();
            let additional = &schema["additionalProperties"];
            let embedded = schema["x-kubernetes-embedded-resource"].as_bool() == Some(true);
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                let sub =
                    props.and_then(|p| p.get(&k)).or(if additional.is_object() { Some(additional) } else { None });
                match sub {
                    Some(sub) => {
                        if map[&k].is_null() && sub["nullable"].as_bool() != Some(true) {
                            map.remove(&k);
                            continue;
                        }
                        if let Some(v) = map.get_mut(&k) {
                            prune_and_default(sub, v, &child(path, &k), unknown);
                        }
                    }
                    None => {
                        let kept = preserves(schema)
                            || additional.as_bool() == Some(true)
                            || (embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata"));
                        if !kept {
                            unknown.push(child(path, &k));
                            map.remove(&k);
                        }
                    }
                }
            }
            if let Some(props) = props {
                for (k, sub) in props {
                    if !map.contains_key(k)
                        && let Some(d) = sub.get("default")
                    {
                        let mut d = d.clone();
                        prune_and_default(sub, &mut d, &child(path, k), &mut vec![]);
                        map.insert(k.clone(), d);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, v) in items.iter_mut().enumerate() {
                    prune_and_default(item_schema, v, &format!("{path}[{i}]"), unknown);
                }
            }
        }
        _ => {}
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// How Kubernetes shows a value inside "Invalid value: X".
pub fn shown(v: &Value) -> String {
    match v {
        Value::Object(_) => "\"object\"".into(),
        Value::Array(_) => "\"array\"".into(),
        other => other.to_string(),
    }
}

fn invalid(causes: &mut Vec<Cause>, path: &str, v: &Value, detail: String) {
    causes.push(Cause {
        reason: "FieldValueInvalid",
        field: path.into(),
        message: format!("Invalid value: {}: {detail}", shown(v)),
    });
}

fn validate(schema: &Value, v: &Value, old: Option<&Value>, path: &str, causes: &mut Vec<Cause>) {
    let int_or_string = schema["x-kubernetes-int-or-string"].as_bool() == Some(true);
    if let Some(t) = schema["type"].as_str() {
        let actual = type_name(v);
        let ok = actual == t
            || (t == "number" && actual == "integer")
            || (v.is_null() && schema["nullable"].as_bool() == Some(true))
            || (int_or_string && matches!(actual, "integer" | "string"));
        if !ok {
            causes.push(Cause {
                reason: "FieldValueTypeInvalid",
                field: path.into(),
                message: format!("Invalid value: \"{actual}\": {path} in body must be of type {t}: \"{actual}\""),
            });
            return;
        }
    }
    if let Some(options) = schema["enum"].as_array()
        && !options.contains(v)
    {
        let list = options.iter().map(|o| o.to_string()).collect::<Vec<_>>().join(", ");
        causes.push(Cause {
            reason: "FieldValueNotSupported",
            field: path.into(),
            message: format!("Unsupported value: {}: supported values: {list}", shown(v)),
        });
    }
    match v {
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            if let Some(min) = schema["minimum"].as_f64() {
                let excl = schema["exclusiveMinimum"].as_bool() == Some(true);
                if x < min || (excl && x == min) {
                    let rel = if excl { "greater than" } else { "greater than or equal to" };
                    invalid(causes, path, v, format!("{path} in body should be {rel} {}", schema["minimum"]));
                }
            }
            if let Some(max) = schema["maximum"].as_f64() {
                let excl = schema["exclusiveMaximum"].as_bool() == Some(true);
                if x > max || (excl && x == max) {
                    let rel = if excl { "less than" } else { "less than or equal to" };
                    invalid(causes, path, v, format!("{path} in body should be {rel} {}", schema["maximum"]));
                }
            }
        }
        Value::String(s) => {
            let len = s.chars().count() as u64;
            if let Some(max) = schema["maxLength"].as_u64()
                && len > max
            {
                causes.push(Cause {
                    reason: "FieldValueTooLong",
                    field: path.into(),
                    message: format!("Too long: may not be more than {max} bytes"),
                });
            }
            if let Some(min) = schema["minLength"].as_u64()
                && len < min
            {
                invalid(causes, path, v, format!("{path} in body should be at least {min} chars long"));
            }
            if let Some(p) = schema["pattern"].as_str() {
                match Regex::new(p) {
                    Ok(re) if !re.is_match(s) => invalid(causes, path, v, format!("{path} in body should match '{p}'")),
                    Err(_) => invalid(causes, path, v, format!("the schema's pattern '{p}' does not compile")),
                    _ => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(max) = schema["maxItems"].as_u64()
                && items.len() as u64 > max
            {
                causes.push(Cause {
                    reason: "FieldValueTooMany",
                    field: path.into(),
                    message: format!("Too many: {}: must have at most {max} items", items.len()),
                });
            }
            if let Some(min) = schema["minItems"].as_u64()
                && (items.len() as u64) < min
            {
                invalid(causes, path, v, format!("{path} in body should have at least {min} items"));
            }
            duplicates(schema, items, path, causes);
            if let Some(item_schema) = schema.get("items") {
                let old_items = old.and_then(Value::as_array);
                for (i, item) in items.iter().enumerate() {
                    let old_item = old_items.and_then(|o| o.get(i));
                    validate(item_schema, item, old_item, &format!("{path}[{i}]"), causes);
                }
            }
        }
        Value::Object(map) => {
            for r in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                if !map.contains_key(r) {
                    causes.push(Cause {
                        reason: "FieldValueRequired",
                        field: child(path, r),
                        message: "Required value".into(),
                    });
                }
            }
            if let Some(max) = schema["maxProperties"].as_u64()
                && map.len() as u64 > max
            {
                causes.push(Cause {
                    reason: "FieldValueTooMany",
                    field: path.into(),
                    message: format!("Too many: {}: must have at most {max} items", map.len()),
                });
            }
            let props = schema["properties"].as_object();
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, sub_v) in map {
                let sub = props.and_then(|p| p.get(k)).or(additional);
                if let Some(sub) = sub {
                    let old_sub = old.and_then(|o| o.get(k));
                    validate(sub, sub_v, old_sub, &child(path, k), causes);
                }
            }
        }
        _ => {}
    }
    cel_rules::check(schema, v, old, path, causes);
}

/// `x-kubernetes-list-type: map` items are unique by their keys, `set` items
/// are unique; the first repeat is reported at its index.
fn duplicates(schema: &Value, items: &[Value], path: &str, causes: &mut Vec<Cause>) {
    let key_of = |item: &Value| -> Option<Value> {
        match schema["x-kubernetes-list-type"].as_str() {
            Some("map") => {
                let keys = schema["x-kubernetes-list-map-keys"].as_array()?;
                Some(Value::Object(
                    keys.iter().filter_map(Value::as_str).map(|k| (k.to_string(), item[k].clone())).collect(),
                ))
            }
            Some("set") => Some(item.clone()),
            _ => None,
        }
    };
    let mut seen: Vec<Value> = vec![];
    for (i, item) in items.iter().enumerate() {
        let Some(key) = key_of(item) else { return };
        if seen.contains(&key) {
            causes.push(Cause {
                reason: "FieldValueDuplicate",
                field: format!("{path}[{i}]"),
                message: format!("Duplicate value: {key}"),
            });
        } else {
            seen.push(key);
        }
    }
}

/// Prune, default and validate a custom resource in place. `old` is the
/// stored object on update (for CEL transition rules).
pub fn check(schema: &Value, object: &mut Value, old: Option<&Value>) -> Checked {
    let mut out = Checked::default();
    let Some(obj) = object.as_object_mut() else {
        out.causes.push(Cause { reason: "FieldValueInvalid", field: "".into(), message: "must be an object".into() });
        return out;
    };
    // apiVersion, kind and metadata belong to the server, not to the schema.
    let mut body: Map<String, Value> =
        obj.iter().filter(|(k, _)| !is_envelope(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    let mut value = Value::Object(std::mem::take(&mut body));
    prune_and_default(schema, &mut value, "", &mut out.unknown);
    let old_body = old.map(|o| {
        Value::Object(
            o.as_object()
                .map(|m| m.iter().filter(|(k, _)| !is_envelope(k)).map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default(),
        )
    });
    // The root schema's own rules see `self` with the envelope, as in Kubernetes.
    let mut root_schema = schema.clone();
    if let Some(m) = root_schema.as_object_mut() {
        m.remove("x-kubernetes-validations");
        m.remove("required");
    }
    validate(&root_schema, &value, old_body.as_ref(), "", &mut out.causes);
    if let Some(m) = value.as_object() {
        for r in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            if !m.contains_key(r) && !is_envelope(r) {
                out.causes.push(Cause {
                    reason: "FieldValueRequired",
                    field: r.into(),
                    message: "Required value".into(),
                });
            }
        }
    }
    if let Value::Object(m) = value {
        obj.retain(|k, _| is_envelope(k));
        obj.extend(m);
    }
    cel_rules::check(schema, object, old, "", &mut out.causes);
    out
}

fn is_envelope(k: &str) -> bool {
    matches!(k, "apiVersion" | "kind" | "metadata")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["image"], "properties": {
                "image": {"type": "string", "minLength": 1},
                "workers": {"type": "integer", "minimum": 1, "default": 2},
                "policy": {"type": "string", "enum": ["pack", "spread"]},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }})
    }

    #[test]
    fn defaults_are_applied_and_unknown_fields_pruned_and_reported() {
        let mut o = json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x"},
            "spec": {"image": "i", "bogus": 1, "extra": {"kept": true}}, "top": 1});
        let c = check(&schema(), &mut o, None);
        assert!(c.causes.is_empty(), "{:?}", c.causes);
        assert_eq!(c.unknown, vec!["spec.bogus".to_string(), "top".to_string()]);
        assert_eq!(o["spec"]["workers"], 2);
        assert_eq!(o["spec"]["extra"]["kept"], true);
        assert_eq!(o["metadata"]["name"], "x");
        assert!(o.get("top").is_none());
    }

    #[test]
    fn list_map_keys_and_set_items_must_be_unique() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "env": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}, "value": {"type": "string"}}}},
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}
        }}}});
        let mut o = json!({"spec": {"env": [{"name": "A", "value": "1"}, {"name": "B"}, {"name": "A", "value": "2"}], "tags": ["x", "y", "x"]}});
        let c = check(&schema, &mut o, None);
        let got: Vec<_> = c.causes.iter().map(|c| (c.field.as_str(), c.reason, c.message.as_str())).collect();
        assert_eq!(
            got,
            [
                ("spec.env[2]", "FieldValueDuplicate", "Duplicate value: {\"name\":\"A\"}"),
                ("spec.tags[2]", "FieldValueDuplicate", "Duplicate value: \"x\""),
            ]
        );
    }

    #[test]
    fn each_invalid_field_is_named_in_its_own_cause() {
        let mut o = json!({"spec": {"workers": 0, "policy": "random", "image": 5}});
        let c = check(&schema(), &mut o, None);
        let fields: Vec<_> = c.causes.iter().map(|c| (c.field.as_str(), c.reason)).collect();
        assert!(fields.contains(&("spec.workers", "FieldValueInvalid")), "{fields:?}");
        assert!(fields.contains(&("spec.policy", "FieldValueNotSupported")), "{fields:?}");
        assert!(fields.contains(&("spec.image", "FieldValueTypeInvalid")), "{fields:?}");
        let mut missing = json!({"spec": {}});
        let c = check(&schema(), &mut missing, None);
        assert_eq!(c.causes[0].field, "spec.image");
        assert_eq!(c.causes[0].message, "Required value");
    }
}
