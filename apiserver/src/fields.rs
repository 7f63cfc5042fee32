//! Field ownership (`metadata.managedFields`): field sets, their fieldsV1
//! encoding, and how non-apply updates move ownership. Server-side apply
//! itself is in `apply`.
//!
//! A field set is the set of leaf paths a manager owns, in fieldsV1 notation:
//! map keys are walked (`f:`), `x-kubernetes-list-type: map` items are owned
//! by key (`k:{...}`), set items by value (`v:`), other lists are atomic
//! leaves (the default for custom resources without list-type annotations). Apply takes ownership of what the
//! applied configuration names, conflicts with other managers that own a field
//! it would change (409 unless forced), and removes fields this manager owned
//! before but no longer names and nobody else owns. Updates by other verbs take
//! ownership of the fields they changed, as Kubernetes does.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

pub type Path = Vec<String>;
pub type FieldSet = BTreeSet<Path>;

/// Which part of the object a request may touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The main resource; `status` is excluded when there is a status subresource.
    Main {
        skip_status: bool,
    },
    Status,
}

pub(crate) const SYSTEM_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "generateName",
];

/// How a list is merged and owned, from the schema (atomic by default).
pub(crate) enum ListKind<'a> {
    Atomic,
    /// `x-kubernetes-list-type: map` with its key fields.
    Map(Vec<&'a str>),
    /// `x-kubernetes-list-type: set`.
    Set,
}

pub(crate) fn list_kind(schema: Option<&Value>) -> ListKind<'_> {
    let Some(s) = schema else { return ListKind::Atomic };
    match s["x-kubernetes-list-type"].as_str() {
        Some("map") => ListKind::Map(
            s["x-kubernetes-list-map-keys"].as_array().into_iter().flatten().filter_map(Value::as_str).collect(),
        ),
        Some("set") => ListKind::Set,
        _ => ListKind::Atomic,
    }
}

pub(crate) fn prop<'a>(schema: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    let s = schema?;
    s["properties"].get(key).or_else(|| s.get("additionalProperties").filter(|a| a.is_object()))
}

/// The `k:{...}` segment of a list-map item (keys in schema order, as JSON).
pub(crate) fn item_key(item: &Value, keys: &[&str]) -> String {
    let obj: Map<String, Value> = keys.iter().map(|k| (k.to_string(), item[*k].clone())).collect();
    format!("k:{}", Value::Object(obj))
}

/// Walk `v`, recording leaf paths. Segments are in fieldsV1 notation
/// (`f:name`, `k:{"type":"Ready"}`, `v:"x"`), so a path encodes as it is.
fn leaves(v: &Value, schema: Option<&Value>, prefix: &mut Path, out: &mut FieldSet) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, sub) in m {
                prefix.push(format!("f:{k}"));
                leaves(sub, prop(schema, k), prefix, out);
                prefix.pop();
            }
        }
        Value::Array(items) => match list_kind(schema) {
            ListKind::Map(keys) if !keys.is_empty() => {
                let item_schema = schema.and_then(|s| s.get("items"));
                for item in items {
                    prefix.push(item_key(item, &keys));
                    out.insert(prefix.clone());
                    leaves(item, item_schema, prefix, out);
                    prefix.pop();
                }
            }
            ListKind::Set => {
                for item in items {
                    prefix.push(format!("v:{item}"));
                    out.insert(prefix.clone());
                    prefix.pop();
                }
            }
            _ => {
                if !prefix.is_empty() {
                    out.insert(prefix.clone());
                }
            }
        },
        _ => {
            if !prefix.is_empty() {
                out.insert(prefix.clone());
            }
        }
    }
}

/// The fields an object (or an applied configuration) sets within `scope`.
pub fn fields_of(object: &Value, scope: Scope, schema: Option<&Value>) -> FieldSet {
    let mut out = FieldSet::new();
    let Some(m) = object.as_object() else { return out };
    for (k, v) in m {
        let wanted = match (scope, k.as_str()) {
            (_, "apiVersion" | "kind") => false,
            (Scope::Status, key) => key == "status",
            (Scope::Main { skip_status }, "status") => !skip_status,
            _ => true,
        };
        if !wanted {
            continue;
        }
        if k == "metadata" {
            for (mk, mv) in v.as_object().into_iter().flatten() {
                if SYSTEM_METADATA.contains(&mk.as_str()) {
                    continue;
                }
                let mut p = vec!["f:metadata".to_string(), format!("f:{mk}")];
                // finalizers are a set in ObjectMeta's schema.
                let meta_schema = (mk == "finalizers").then(|| json!({"x-kubernetes-list-type": "set"}));
                leaves(mv, meta_schema.as_ref(), &mut p, &mut out);
            }
        } else {
            let mut p = vec![format!("f:{k}")];
            leaves(v, prop(schema, k), &mut p, &mut out);
        }
    }
    out
}

/// Encode as `fieldsV1` (`{"f:spec":{"f:replicas":{}}}`).
pub fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut cur = &mut root;
        for (i, seg) in path.iter().enumerate() {
            let entry = cur.entry(seg.clone()).or_insert_with(|| json!({}));
            let Value::Object(next) = entry else { break };
            if i + 1 == path.len() && !next.is_empty() {
                next.insert(".".into(), json!({}));
            }
            cur = next;
        }
    }
    // A node that is both owned itself and has children carries ".".
    fn mark(v: &mut Value, set: &FieldSet, prefix: &mut Path) {
        if let Value::Object(m) = v {
            let keys: Vec<String> = m.keys().filter(|k| *k != ".").cloned().collect();
            for k in keys {
                prefix.push(k.clone());
                if let Some(child) = m.get_mut(&k) {
                    if set.contains(prefix) && child.as_object().is_some_and(|c| !c.is_empty()) {
                        child["."] = json!({});
                    }
                    mark(child, set, prefix);
                }
                prefix.pop();
            }
        }
    }
    let mut v = Value::Object(root);
    mark(&mut v, set, &mut vec![]);
    v
}

fn parse_into(v: &Value, prefix: &mut Path, out: &mut FieldSet) {
    let Some(m) = v.as_object() else { return };
    if m.is_empty() {
        if !prefix.is_empty() {
            out.insert(prefix.clone());
        }
        return;
    }
    for (k, sub) in m {
        if k == "." {
            out.insert(prefix.clone());
        } else {
            prefix.push(k.clone());
            parse_into(sub, prefix, out);
            prefix.pop();
        }
    }
}

pub fn from_fields_v1(v: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    parse_into(v, &mut vec![], &mut out);
    out
}

pub(crate) fn overlaps(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// Does list item `item` match the `k:`/`v:` segment?
pub(crate) fn item_matches(item: &Value, seg: &str) -> bool {
    if let Some(k) = seg.strip_prefix("k:") {
        return serde_json::from_str::<Map<String, Value>>(k)
            .is_ok_and(|keys| keys.iter().all(|(f, want)| item.get(f).unwrap_or(&Value::Null) == want));
    }
    if let Some(v) = seg.strip_prefix("v:") {
        return serde_json::from_str::<Value>(v).is_ok_and(|want| *item == want);
    }
    false
}

fn step<'a>(cur: &'a Value, seg: &str) -> Option<&'a Value> {
    match seg.strip_prefix("f:") {
        Some(k) => cur.get(k),
        None => cur.as_array()?.iter().find(|i| item_matches(i, seg)),
    }
}

pub fn get_path<'a>(v: &'a Value, path: &Path) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, seg| step(cur, seg))
}

pub(crate) fn remove_path(v: &mut Value, path: &Path) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut cur = v;
    for seg in parents {
        let next = match seg.strip_prefix("f:") {
            Some(k) => cur.get_mut(k),
            None => cur.as_array_mut().and_then(|a| a.iter_mut().find(|i| item_matches(i, seg))),
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    match last.strip_prefix("f:") {
        Some(k) => {
            if let Some(m) = cur.as_object_mut() {
                m.remove(k);
            }
        }
        None => {
            if let Some(a) = cur.as_array_mut() {
                a.retain(|i| !item_matches(i, last));
            }
        }
    }
}

/// One `managedFields` entry, decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub time: String,
    pub subresource: String,
    pub fields: FieldSet,
}

pub fn entries(object: &Value) -> Vec<Entry> {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| Entry {
            manager: e["manager"].as_str().unwrap_or_default().into(),
            operation: e["operation"].as_str().unwrap_or("Update").into(),
            api_version: e["apiVersion"].as_str().unwrap_or_default().into(),
            time: e["time"].as_str().unwrap_or_default().into(),
            subresource: e["subresource"].as_str().unwrap_or_default().into(),
            fields: from_fields_v1(&e["fieldsV1"]),
        })
        .collect()
}

pub fn encode(entries: &[Entry]) -> Value {
    entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut v = json!({"manager": e.manager, "operation": e.operation, "apiVersion": e.api_version,
                "time": e.time, "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(&e.fields)});
            if !e.subresource.is_empty() {
                v["subresource"] = json!(e.subresource);
            }
            v
        })
        .collect()
}

/// The identity of the entry a request writes.
pub struct Writer<'a> {
    pub manager: &'a str,
    pub subresource: &'a str,
    pub api_version: &'a str,
    pub now: &'a str,
    /// The kind's openAPIV3Schema, for list types (None: every list is atomic).
    pub schema: Option<&'a Value>,
}

/// Record that `writer` (a non-apply verb) changed `old` into `new`: it takes
/// the changed fields from everybody else. With no old object, every field.
pub fn record_update(old: Option<&Value>, new: &mut Value, scope: Scope, w: &Writer<'_>) {
    let new_fields = fields_of(new, scope, w.schema);
    let changed: FieldSet = match old {
        None => new_fields.clone(),
        Some(old) => {
            let old_fields = fields_of(old, scope, w.schema);
            new_fields
                .iter()
                .filter(|p| get_path(old, p) != get_path(new, p))
                .cloned()
                .chain(old_fields.difference(&new_fields).cloned())
                .collect()
        }
    };
    let mut list = old.map(entries).unwrap_or_default();
    // Fields that no longer exist are owned by nobody.
    for e in &mut list {
        e.fields.retain(|p| get_path(new, p).is_some() && !changed.contains(p));
    }
    let owned_now: FieldSet = changed.into_iter().filter(|p| get_path(new, p).is_some()).collect();
    if !owned_now.is_empty() {
        match list
            .iter_mut()
            .find(|e| e.manager == w.manager && e.operation == "Update" && e.subresource == w.subresource)
        {
            Some(e) => {
                e.fields.extend(owned_now);
                e.time = w.now.into();
                e.api_version = w.api_version.into();
            }
            None => list.push(Entry {
                manager: w.manager.into(),
                operation: "Update".into(),
                api_version: w.api_version.into(),
                time: w.now.into(),
                subresource: w.subresource.into(),
                fields: owned_now,
            }),
        }
    }
    set_entries(new, &list);
}

pub(crate) fn set_entries(object: &mut Value, list: &[Entry]) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        let encoded = encode(list);
        if encoded.as_array().is_some_and(|a| a.is_empty()) {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), encoded);
        }
    }
}

/// Compare two objects ignoring managedFields timestamps and the resourceVersion.
pub fn same_content(a: &Value, b: &Value) -> bool {
    fn strip(v: &Value) -> Value {
        let mut v = v.clone();
        if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
            if let Some(Value::Array(mf)) = meta.get_mut("managedFields") {
                for e in mf.iter_mut().filter_map(Value::as_object_mut) {
                    e.remove("time");
                }
            }
        }
        v
    }
    strip(a) == strip(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(manager: &'static str) -> Writer<'static> {
        Writer { manager, subresource: "", api_version: "v1", now: "2025-01-01T00:00:00Z", schema: None }
    }

    const MAIN: Scope = Scope::Main { skip_status: true };

    #[test]
    fn fields_v1_round_trips() {
        let o = json!({"metadata": {"name": "x", "labels": {"a": "b"}}, "spec": {"r": 1, "l": [1, 2], "m": {}}});
        let set = fields_of(&o, MAIN, None);
        assert_eq!(
            to_fields_v1(&set),
            json!({"f:metadata": {"f:labels": {"f:a": {}}}, "f:spec": {"f:r": {}, "f:l": {}, "f:m": {}}})
        );
        assert_eq!(from_fields_v1(&to_fields_v1(&set)), set);
    }

    #[test]
    fn an_update_takes_the_fields_it_changed() {
        // Manager m applied spec.a and spec.b.
        let mut old = json!({"metadata": {}, "spec": {"a": 1, "b": 2}});
        let applied = Entry {
            manager: "m".into(),
            operation: "Apply".into(),
            api_version: "v1".into(),
            time: "t".into(),
            subresource: String::new(),
            fields: fields_of(&old, MAIN, None),
        };
        set_entries(&mut old, &[applied]);
        let mut new = old.clone();
        new["spec"]["a"] = json!(5);
        record_update(Some(&old), &mut new, MAIN, &w("kubectl-patch"));
        let e = entries(&new);
        let by = |m: &str| e.iter().find(|e| e.manager == m).map(|e| e.fields.clone()).unwrap_or_default();
        assert!(by("kubectl-patch").contains(&vec!["f:spec".to_string(), "f:a".to_string()]));
        assert!(!by("m").contains(&vec!["f:spec".to_string(), "f:a".to_string()]));
        assert!(by("m").contains(&vec!["f:spec".to_string(), "f:b".to_string()]), "untouched fields stay m's");
    }
}
