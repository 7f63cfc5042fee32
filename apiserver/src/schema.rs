//! Structural-schema handling of an object against its kind's
//! `openAPIV3Schema`, in the order kube-apiserver uses: prune unknown fields
//! (reporting them for `fieldValidation=Strict`), drop non-nullable nulls,
//! apply defaults, then validate (types, required, enum, bounds, patterns,
//! sizes) and, unless a value has the wrong type, run the CEL rules
//! (`cel_rules`). What can be compiled (patterns, rules) is compiled once per
//! schema, in `Compiled`, when the kind is registered. Errors are `Cause`s
//! naming the field path the way Kubernetes prints it (`spec.workers[0].image`).

use std::collections::HashMap;

use regex::Regex;
use serde_json::{Map, Value};

use crate::cel_rules;
use crate::error::{Cause, shown};

/// A schema's regular expressions and CEL rules, compiled once.
pub struct Compiled {
    /// Every `pattern` in the schema (or why it does not compile).
    patterns: HashMap<String, Result<Regex, String>>,
    cel: Option<kube_cel::CompiledSchema>,
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiled")
            .field("patterns", &self.patterns.keys().collect::<Vec<_>>())
            .field("cel", &self.cel.is_some())
            .finish()
    }
}

fn collect_patterns(schema: &Value, out: &mut HashMap<String, Result<Regex, String>>) {
    match schema {
        Value::Object(m) => {
            if let Some(p) = m.get("pattern").and_then(Value::as_str) {
                out.entry(p.to_string()).or_insert_with(|| Regex::new(p).map_err(|e| e.to_string()));
            }
            m.values().for_each(|v| collect_patterns(v, out));
        }
        Value::Array(a) => a.iter().for_each(|v| collect_patterns(v, out)),
        _ => {}
    }
}

impl Compiled {
    pub fn new(schema: &Value) -> Self {
        let mut patterns = HashMap::new();
        collect_patterns(schema, &mut patterns);
        Self { patterns, cel: cel_rules::compile(schema) }
    }

    fn matches(&self, pattern: &str, s: &str) -> Result<bool, String> {
        match self.patterns.get(pattern) {
            Some(Ok(re)) => Ok(re.is_match(s)),
            Some(Err(e)) => Err(e.clone()),
            // Every pattern of the schema was collected; this one is not from it.
            None => Regex::new(pattern).map(|re| re.is_match(s)).map_err(|e| e.to_string()),
        }
    }
}

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

fn invalid(causes: &mut Vec<Cause>, path: &str, v: &Value, detail: String) {
    causes.push(Cause {
        reason: "FieldValueInvalid",
        field: path.into(),
        message: format!("Invalid value: {}: {detail}", shown(v)),
    });
}

fn validate(c: &Compiled, schema: &Value, v: &Value, path: &str, causes: &mut Vec<Cause>) {
    validate_node(c, schema, v, path, causes, true);
}

/// [`validate`], where `required` says whether this node's `required` list
/// is checked (not at the root, whose list includes the envelope).
fn validate_node(c: &Compiled, schema: &Value, v: &Value, path: &str, causes: &mut Vec<Cause>, required: bool) {
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
                match c.matches(p, s) {
                    Ok(false) => invalid(causes, path, v, format!("{path} in body should match '{p}'")),
                    Err(_) => invalid(causes, path, v, format!("the schema's pattern '{p}' does not compile")),
                    Ok(true) => {}
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
                for (i, item) in items.iter().enumerate() {
                    validate(c, item_schema, item, &format!("{path}[{i}]"), causes);
                }
            }
        }
        Value::Object(map) => {
            let required = if required { schema["required"].as_array() } else { None };
            for r in required.into_iter().flatten().filter_map(Value::as_str) {
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
                    validate(c, sub, sub_v, &child(path, k), causes);
                }
            }
        }
        _ => {}
    }
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

/// Prune, default and validate an object in place. `compiled` is
/// `Compiled::new(schema)`; `old` is the stored object on update (for CEL
/// transition rules).
pub fn check(schema: &Value, compiled: &Compiled, object: &mut Value, old: Option<&Value>) -> Checked {
    let mut out = Checked::default();
    let Some(obj) = object.as_object_mut() else {
        out.causes.push(Cause { reason: "FieldValueInvalid", field: "".into(), message: "must be an object".into() });
        return out;
    };
    // apiVersion, kind and metadata belong to the server, not to the schema:
    // the body is moved out of the object (not copied) and back in below.
    let body_keys: Vec<String> = obj.keys().filter(|k| !is_envelope(k)).cloned().collect();
    let body: Map<String, Value> = body_keys.into_iter().filter_map(|k| obj.remove(&k).map(|v| (k, v))).collect();
    let mut value = Value::Object(body);
    prune_and_default(schema, &mut value, "", &mut out.unknown);
    // The envelope is not the schema's to require (checked below without it).
    validate_node(compiled, schema, &value, "", &mut out.causes, false);
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
    // As kube-apiserver: a value of the wrong type blocks the CEL rules.
    let blocked = out.causes.iter().any(|c| c.reason == "FieldValueTypeInvalid");
    if let (Some(rules), false) = (&compiled.cel, blocked) {
        // The rules see `self` with the envelope, as in Kubernetes.
        cel_rules::check(rules, schema, object, old, &mut out.causes);
    }
    out
}

fn is_envelope(k: &str) -> bool {
    matches!(k, "apiVersion" | "kind" | "metadata")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(schema: &Value, o: &mut Value) -> Checked {
        check(schema, &Compiled::new(schema), o, None)
    }

    #[test]
    fn patterns_are_compiled_once_and_a_bad_one_is_reported() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "name": {"type": "string", "pattern": "^[a-z]+$"},
            "odd": {"type": "string", "pattern": "("}}}}});
        let compiled = Compiled::new(&schema);
        assert_eq!(compiled.patterns.len(), 2);
        let c = check(&schema, &compiled, &mut json!({"spec": {"name": "Abc", "odd": "x"}}), None);
        let got: Vec<_> = c.causes.iter().map(|c| (c.field.as_str(), c.message.as_str())).collect();
        assert_eq!(
            got,
            [
                ("spec.name", "Invalid value: \"Abc\": spec.name in body should match '^[a-z]+$'"),
                ("spec.odd", "Invalid value: \"x\": the schema's pattern '(' does not compile"),
            ]
        );
    }

    #[test]
    fn a_value_of_the_wrong_type_blocks_the_cel_rules() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": "self.n > 1", "message": "n must exceed 1"}],
            "properties": {"n": {"type": "integer"}}}}});
        let c = run(&schema, &mut json!({"spec": {"n": "x"}}));
        assert_eq!(c.causes.iter().map(|c| c.reason).collect::<Vec<_>>(), ["FieldValueTypeInvalid"]);
        let c = run(&schema, &mut json!({"spec": {"n": 1}}));
        assert_eq!(c.causes.len(), 1);
        assert_eq!(
            (c.causes[0].field.as_str(), c.causes[0].message.as_str()),
            ("spec", "Invalid value: \"object\": n must exceed 1")
        );
    }

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
        let c = run(&schema(), &mut o);
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
        let c = run(&schema, &mut o);
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
        let c = run(&schema(), &mut o);
        let fields: Vec<_> = c.causes.iter().map(|c| (c.field.as_str(), c.reason)).collect();
        assert!(fields.contains(&("spec.workers", "FieldValueInvalid")), "{fields:?}");
        assert!(fields.contains(&("spec.policy", "FieldValueNotSupported")), "{fields:?}");
        assert!(fields.contains(&("spec.image", "FieldValueTypeInvalid")), "{fields:?}");
        let mut missing = json!({"spec": {}});
        let c = run(&schema(), &mut missing);
        assert_eq!(c.causes[0].field, "spec.image");
        assert_eq!(c.causes[0].message, "Required value");
    }
}
