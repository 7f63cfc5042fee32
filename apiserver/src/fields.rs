//! Field ownership (`metadata.managedFields`) and server-side apply.
//!
//! A field set is the set of leaf paths a manager owns: map keys are walked,
//! lists and scalars are leaves (lists are atomic, the default for custom
//! resources without list-type annotations). Apply takes ownership of what the
//! applied configuration names, conflicts with other managers that own a field
//! it would change (409 unless forced), and removes fields this manager owned
//! before but no longer names and nobody else owns. Updates by other verbs take
//! ownership of the fields they changed, as Kubernetes does.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::error::{ApiError, Cause};

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

const SYSTEM_METADATA: &[&str] = &[
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

fn leaves(v: &Value, prefix: &mut Path, out: &mut FieldSet) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, sub) in m {
                prefix.push(k.clone());
                leaves(sub, prefix, out);
                prefix.pop();
            }
        }
        _ => {
            if !prefix.is_empty() {
                out.insert(prefix.clone());
            }
        }
    }
}

/// The fields an object (or an applied configuration) sets within `scope`.
pub fn fields_of(object: &Value, scope: Scope) -> FieldSet {
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
                let mut p = vec!["metadata".to_string(), mk.clone()];
                leaves(mv, &mut p, &mut out);
            }
        } else {
            let mut p = vec![k.clone()];
            leaves(v, &mut p, &mut out);
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
            let entry = cur.entry(format!("f:{seg}")).or_insert_with(|| json!({}));
            let Value::Object(next) = entry else { break };
            if i + 1 == path.len() && !next.is_empty() {
                next.insert(".".into(), json!({}));
            }
            cur = next;
        }
    }
    Value::Object(root)
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
        } else if let Some(name) = k.strip_prefix("f:") {
            prefix.push(name.to_string());
            parse_into(sub, prefix, out);
            prefix.pop();
        } else if !prefix.is_empty() {
            // k:/v:/i: entries address list items; we own lists atomically.
            out.insert(prefix.clone());
        }
    }
}

pub fn from_fields_v1(v: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    parse_into(v, &mut vec![], &mut out);
    out
}

fn overlaps(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

pub fn get_path<'a>(v: &'a Value, path: &Path) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, seg| cur.get(seg))
}

fn remove_path(v: &mut Value, path: &Path) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut cur = v;
    for seg in parents {
        match cur.get_mut(seg) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let Some(m) = cur.as_object_mut() {
        m.remove(last);
    }
}

/// RFC 7386-style deep merge used by apply: maps merge, everything else replaces.
pub fn deep_merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, pv) in p {
                if pv.is_null() {
                    t.remove(k);
                } else if let Some(tv) = t.get_mut(k).filter(|tv| tv.is_object() && pv.is_object()) {
                    deep_merge(tv, pv);
                } else {
                    t.insert(k.clone(), pv.clone());
                }
            }
        }
        (t, p) => *t = p.clone(),
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
}

/// Record that `writer` (a non-apply verb) changed `old` into `new`: it takes
/// the changed fields from everybody else. With no old object, every field.
pub fn record_update(old: Option<&Value>, new: &mut Value, scope: Scope, w: &Writer<'_>) {
    let new_fields = fields_of(new, scope);
    let changed: FieldSet = match old {
        None => new_fields.clone(),
        Some(old) => {
            let old_fields = fields_of(old, scope);
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

fn set_entries(object: &mut Value, list: &[Entry]) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        let encoded = encode(list);
        if encoded.as_array().is_some_and(|a| a.is_empty()) {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), encoded);
        }
    }
}

/// Server-side apply of `applied` onto `live` (an empty skeleton on create).
/// Returns the merged object with its managedFields, or a 409 listing conflicts.
pub fn apply(live: &Value, applied: &Value, scope: Scope, force: bool, w: &Writer<'_>) -> Result<Value, ApiError> {
    let mine = fields_of(applied, scope);
    let mut list = entries(live);
    let is_me = |e: &Entry| e.manager == w.manager && e.operation == "Apply" && e.subresource == w.subresource;
    let mut conflicts: Vec<(String, String)> = vec![];
    for e in list.iter().filter(|e| !is_me(e)) {
        for p in &mine {
            if e.fields.iter().any(|q| overlaps(p, q)) && get_path(applied, p) != get_path(live, p) {
                conflicts.push((e.manager.clone(), format!(".{}", p.join("."))));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        let n = conflicts.len();
        let details: Vec<String> = conflicts.iter().map(|(m, f)| format!("conflict with \"{m}\": {f}")).collect();
        let message = if n == 1 {
            format!("Apply failed with 1 conflict: {}", details[0])
        } else {
            format!("Apply failed with {n} conflicts: {}", details.join("\n"))
        };
        let mut err = ApiError::new(409, "Conflict", message);
        err.details = Some(crate::error::Details {
            causes: conflicts
                .iter()
                .map(|(m, f)| Cause {
                    reason: "FieldManagerConflict",
                    field: f.clone(),
                    message: format!("conflict with \"{m}\""),
                })
                .collect(),
            ..Default::default()
        });
        return Err(err);
    }
    let previous: FieldSet = list.iter().find(|e| is_me(e)).map(|e| e.fields.clone()).unwrap_or_default();
    if force {
        for e in list.iter_mut().filter(|e| !is_me(e)) {
            e.fields.retain(|q| !mine.iter().any(|p| overlaps(p, q) && get_path(applied, p) != get_path(live, p)));
        }
    }
    let mut merged = live.clone();
    for p in previous.difference(&mine) {
        let still_named = mine.iter().any(|q| overlaps(p, q));
        let owned_elsewhere = list.iter().filter(|e| !is_me(e)).any(|e| e.fields.iter().any(|q| overlaps(p, q)));
        if !still_named && !owned_elsewhere {
            remove_path(&mut merged, p);
        }
    }
    let mut scoped = applied.clone();
    if let Some(m) = scoped.as_object_mut() {
        m.remove("apiVersion");
        m.remove("kind");
        match scope {
            Scope::Status => m.retain(|k, _| k == "status"),
            Scope::Main { skip_status: true } => {
                m.remove("status");
            }
            Scope::Main { skip_status: false } => {}
        }
        if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.retain(|k, _| !SYSTEM_METADATA.contains(&k.as_str()));
        }
    }
    deep_merge(&mut merged, &scoped);
    let entry = Entry {
        manager: w.manager.into(),
        operation: "Apply".into(),
        api_version: w.api_version.into(),
        time: w.now.into(),
        subresource: w.subresource.into(),
        fields: mine,
    };
    // Keep the entry in place: a reordered list would make a no-op apply look like a change.
    match list.iter().position(is_me) {
        Some(i) => list[i] = entry,
        None => list.push(entry),
    }
    for e in &mut list {
        e.fields.retain(|p| get_path(&merged, p).is_some());
    }
    set_entries(&mut merged, &list);
    Ok(merged)
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
        Writer { manager, subresource: "", api_version: "v1", now: "2025-01-01T00:00:00Z" }
    }

    const MAIN: Scope = Scope::Main { skip_status: true };

    #[test]
    fn fields_v1_round_trips() {
        let o = json!({"metadata": {"name": "x", "labels": {"a": "b"}}, "spec": {"r": 1, "l": [1, 2], "m": {}}});
        let set = fields_of(&o, MAIN);
        assert_eq!(
            to_fields_v1(&set),
            json!({"f:metadata": {"f:labels": {"f:a": {}}}, "f:spec": {"f:r": {}, "f:l": {}, "f:m": {}}})
        );
        assert_eq!(from_fields_v1(&to_fields_v1(&set)), set);
    }

    #[test]
    fn a_non_forced_apply_that_changes_another_managers_field_conflicts() {
        let live = apply(&json!({"metadata": {}}), &json!({"spec": {"holder": "a"}}), MAIN, false, &w("a")).unwrap();
        let err = apply(&live, &json!({"spec": {"holder": "b"}}), MAIN, false, &w("b")).unwrap_err();
        assert_eq!((err.code, err.reason), (409, "Conflict"));
        assert_eq!(err.message, "Apply failed with 1 conflict: conflict with \"a\": .spec.holder");
        // Same value: shared ownership, no conflict.
        assert!(apply(&live, &json!({"spec": {"holder": "a"}}), MAIN, false, &w("b")).is_ok());
        // Forced: ownership moves to b.
        let forced = apply(&live, &json!({"spec": {"holder": "b"}}), MAIN, true, &w("b")).unwrap();
        let owners: Vec<_> = entries(&forced).into_iter().map(|e| e.manager).collect();
        assert_eq!(owners, vec!["b"]);
        assert_eq!(forced["spec"]["holder"], "b");
    }

    #[test]
    fn omitting_an_owned_field_removes_it_unless_someone_else_owns_it() {
        let live = apply(&json!({"metadata": {}}), &json!({"spec": {"a": 1, "b": 2}}), MAIN, false, &w("m")).unwrap();
        let next = apply(&live, &json!({"spec": {"a": 1}}), MAIN, false, &w("m")).unwrap();
        assert_eq!(next["spec"], json!({"a": 1}));
        let shared = apply(&live, &json!({"spec": {"b": 2}}), MAIN, false, &w("other")).unwrap();
        let next = apply(&shared, &json!({"spec": {"a": 1}}), MAIN, false, &w("m")).unwrap();
        assert_eq!(next["spec"], json!({"a": 1, "b": 2}));
    }

    #[test]
    fn an_update_takes_the_fields_it_changed() {
        let old = apply(&json!({"metadata": {}}), &json!({"spec": {"a": 1, "b": 2}}), MAIN, false, &w("m")).unwrap();
        let mut new = old.clone();
        new["spec"]["a"] = json!(5);
        record_update(Some(&old), &mut new, MAIN, &w("kubectl-patch"));
        let e = entries(&new);
        let by = |m: &str| e.iter().find(|e| e.manager == m).unwrap().fields.clone();
        assert!(by("kubectl-patch").contains(&vec!["spec".to_string(), "a".to_string()]));
        assert!(!by("m").contains(&vec!["spec".to_string(), "a".to_string()]));
    }
}
