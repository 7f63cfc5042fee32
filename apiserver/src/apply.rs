//! Server-side apply: merge an applied configuration into the live object
//! (maps merge, list-maps merge by key, sets union, other lists replace),
//! detect conflicts with other managers' fields (409 unless forced, which
//! moves ownership), and remove fields this manager owned before but no
//! longer names and nobody else owns.

use serde_json::{Map, Value};

use crate::error::{ApiError, Cause};
use crate::fields::{
    Entry, FieldSet, ListKind, Path, SYSTEM_METADATA, Scope, Writer, entries, fields_of, get_path, item_key,
    item_matches, list_kind, overlaps, prop, remove_path, set_entries,
};

/// Kubernetes' way of printing a field path in conflict messages:
/// `.status.conditions[type="Ready"].status`.
fn display(path: &Path) -> String {
    let mut out = String::new();
    for seg in path {
        if let Some(k) = seg.strip_prefix("f:") {
            out.push('.');
            out.push_str(k);
        } else if let Some(k) = seg.strip_prefix("k:") {
            let keys: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
            let parts: Vec<String> = keys.iter().map(|(f, v)| format!("{f}={v}")).collect();
            out.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(v) = seg.strip_prefix("v:") {
            out.push_str(&format!("[{v}]"));
        }
    }
    out
}

/// The merge apply performs: maps merge, list-maps merge items by key, sets
/// union, everything else replaces; `null` removes.
pub fn deep_merge(target: &mut Value, patch: &Value, schema: Option<&Value>) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, pv) in p {
                let sub = prop(schema, k);
                if pv.is_null() {
                    t.remove(k);
                } else if let Some(tv) =
                    t.get_mut(k).filter(|tv| (tv.is_object() && pv.is_object()) || (tv.is_array() && pv.is_array()))
                {
                    deep_merge(tv, pv, sub);
                } else {
                    t.insert(k.clone(), pv.clone());
                }
            }
        }
        (Value::Array(t), Value::Array(p)) => match list_kind(schema) {
            ListKind::Map(keys) if !keys.is_empty() => {
                let item_schema = schema.and_then(|s| s.get("items"));
                for item in p {
                    let seg = item_key(item, &keys);
                    match t.iter_mut().find(|i| item_matches(i, &seg)) {
                        Some(existing) => deep_merge(existing, item, item_schema),
                        None => t.push(item.clone()),
                    }
                }
            }
            ListKind::Set => {
                for item in p {
                    if !t.contains(item) {
                        t.push(item.clone());
                    }
                }
            }
            _ => *t = p.clone(),
        },
        (t, p) => *t = p.clone(),
    }
}

/// Server-side apply of `applied` onto `live` (an empty skeleton on create).
/// Returns the merged object with its managedFields, or a 409 listing conflicts.
pub fn apply(live: &Value, applied: &Value, scope: Scope, force: bool, w: &Writer<'_>) -> Result<Value, ApiError> {
    let mine = fields_of(applied, scope, w.schema);
    let mut list = entries(live);
    let is_me = |e: &Entry| e.manager == w.manager && e.operation == "Apply" && e.subresource == w.subresource;
    let mut conflicts: Vec<(String, String)> = vec![];
    // Owning a list-map item's existence is shared; only its fields conflict.
    let is_item = |p: &Path| p.last().is_some_and(|s| s.starts_with("k:"));
    for e in list.iter().filter(|e| !is_me(e)) {
        for p in mine.iter().filter(|p| !is_item(p)) {
            if e.fields.iter().any(|q| overlaps(p, q)) && get_path(applied, p) != get_path(live, p) {
                conflicts.push((e.manager.clone(), display(p)));
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
            e.fields.retain(|q| {
                !mine.iter().any(|p| !is_item(p) && overlaps(p, q) && get_path(applied, p) != get_path(live, p))
            });
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
    deep_merge(&mut merged, &scoped, w.schema);
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn w(manager: &'static str) -> Writer<'static> {
        Writer { manager, subresource: "", api_version: "v1", now: "2025-01-01T00:00:00Z", schema: None }
    }

    const MAIN: Scope = Scope::Main { skip_status: true };

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
    fn list_map_items_merge_by_key_and_are_owned_per_item() {
        let schema = json!({"properties": {"status": {"properties": {"conditions": {
            "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
            "items": {"type": "object"}}}}}});
        let w = |manager: &'static str| Writer {
            manager,
            subresource: "status",
            api_version: "v1",
            now: "t",
            schema: Some(&schema),
        };
        let status = Scope::Status;
        let cond = |t: &str, s: &str| json!({"type": t, "status": s});
        let live = json!({"metadata": {}, "status": {"conditions": [cond("Ready", "True")]}});
        let live = apply(&live, &json!({"status": {"conditions": [cond("Ready", "True")]}}), status, false, &w("ctl"))
            .unwrap();
        // Another manager adds its own condition: merged, not replaced.
        let both =
            apply(&live, &json!({"status": {"conditions": [cond("Healthy", "True")]}}), status, false, &w("probe"))
                .unwrap();
        assert_eq!(both["status"]["conditions"], json!([cond("Ready", "True"), cond("Healthy", "True")]));
        assert_eq!(
            both["metadata"]["managedFields"][1]["fieldsV1"],
            json!({"f:status": {"f:conditions": {"k:{\"type\":\"Healthy\"}": {".": {}, "f:type": {}, "f:status": {}}}}})
        );
        // Changing the other manager's field conflicts and names it precisely.
        let err =
            apply(&both, &json!({"status": {"conditions": [cond("Ready", "False")]}}), status, false, &w("probe"))
                .unwrap_err();
        assert_eq!(
            err.message,
            "Apply failed with 1 conflict: conflict with \"ctl\": .status.conditions[type=\"Ready\"].status"
        );
        // Dropping your own item removes it; the other manager's item stays.
        let dropped = apply(&both, &json!({"status": {"conditions": []}}), status, false, &w("probe")).unwrap();
        assert_eq!(dropped["status"]["conditions"], json!([cond("Ready", "True")]));
    }
}
