//! PATCH bodies other than server-side apply: the patch types by media
//! type, RFC 6902 JSON patch with Kubernetes' quirks, and strategic merge
//! patch for built-in kinds (lists merge by the key their schema names,
//! `x-kubernetes-patch-merge-key`, with the `$patch`, `$retainKeys`,
//! `$setElementOrder` and `$deleteFromPrimitiveList` directives kubectl
//! sends). JSON merge patch itself is `json_patch::merge`.

use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult, Cause};
use crate::resource::ResourceType;

/// Strategic-merge directives make no sense to a JSON merge; drop them.
pub fn strip_directives(v: &mut Value) {
    if let Some(m) = v.as_object_mut() {
        m.retain(|k, _| !k.starts_with('$'));
        for sub in m.values_mut() {
            strip_directives(sub);
        }
    }
}

/// kube-apiserver's `maxJSONPatchOperations`: a JSON patch with more
/// operations is refused with 413 before any is applied.
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// kube-apiserver's default `JSONPatchMaxCopyBytes` (evanphx/json-patch's
/// `AccumulatedCopySizeLimit`): how many bytes, as JSON, the `copy`
/// operations of one patch may add to the document. Without it a few
/// hundred bytes of self-copies double the document per operation.
pub const MAX_JSON_PATCH_COPY_BYTES: usize = 3 * 1024 * 1024;

fn json_patch_error(rt: &ResourceType, name: &str, e: impl std::fmt::Display) -> ApiError {
    ApiError::invalid(
        &rt.kind,
        &rt.group,
        name,
        vec![Cause {
            reason: "FieldValueInvalid",
            field: "patch".into(),
            message: format!("Invalid value: the JSON patch could not be applied: {e}"),
        }],
    )
}

/// Counts the bytes of a value's JSON without keeping them.
#[derive(Default)]
struct JsonSize(usize);

impl std::io::Write for JsonSize {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 = self.0.saturating_add(buf.len());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn json_size(v: &Value) -> usize {
    let mut size = JsonSize::default();
    // Writing a `Value` into a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut size, v);
    size.0
}

/// RFC 6902 with the evanphx quirk Kubernetes has: `test` of a missing path
/// against `null` passes (the kube-rs finalizer helper relies on it), and
/// with kube-apiserver's limits: at most [`MAX_JSON_PATCH_OPERATIONS`]
/// operations (413), and `copy` operations that add at most
/// [`MAX_JSON_PATCH_COPY_BYTES`] (422, before the copy that would pass it).
/// On an error `doc` is half patched: the caller drops it.
pub fn apply_json_patch(rt: &ResourceType, name: &str, doc: &mut Value, patch: &Value) -> ApiResult<()> {
    let ops =
        patch.as_array().ok_or_else(|| ApiError::bad_request("a JSON patch must be a JSON array of operations"))?;
    if ops.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!("The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}", ops.len()),
        ));
    }
    let kept: Vec<Value> = ops
        .iter()
        .filter(|op| {
            let missing_null_test = op["op"] == "test"
                && op["value"].is_null()
                && op["path"].as_str().is_some_and(|p| doc.pointer(p).is_none());
            !missing_null_test
        })
        .cloned()
        .collect();
    let parsed: json_patch::Patch = serde_json::from_value(Value::Array(kept))
        .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
    let mut copied = 0usize;
    for (i, op) in parsed.0.iter().enumerate() {
        if let json_patch::PatchOperation::Copy(copy) = op {
            // A missing `from` adds nothing; the patch itself says so below.
            copied = copied.saturating_add(doc.pointer(copy.from.as_str()).map_or(0, json_size));
            if copied > MAX_JSON_PATCH_COPY_BYTES {
                return Err(json_patch_error(
                    rt,
                    name,
                    format!(
                        "operation '/{i}': Unable to complete the copy, the accumulated size increase of copy is {copied}, exceeding the limit {MAX_JSON_PATCH_COPY_BYTES}"
                    ),
                ));
            }
        }
        json_patch::patch(doc, std::slice::from_ref(op)).map_err(|mut e| {
            e.operation = i;
            json_patch_error(rt, name, e)
        })?;
    }
    Ok(())
}

fn without_directives(v: &Value) -> Value {
    let mut v = v.clone();
    strip_directives(&mut v);
    if let Value::Array(items) = &mut v {
        items.iter_mut().for_each(strip_directives);
    }
    v
}

fn is_directive(v: &Value, what: &str) -> bool {
    v.get("$patch").and_then(Value::as_str) == Some(what)
}

/// Strategic merge of `patch` into `target`, guided by the kind's schema
/// (None: every list is replaced, as by a JSON merge patch).
pub fn strategic_merge(target: &mut Value, patch: &Value, schema: Option<&Value>) {
    let Some(p) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if is_directive(patch, "replace") {
        *target = without_directives(patch);
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Some(t) = target.as_object_mut() else { return };
    for (k, pv) in p.iter().filter(|(k, _)| !k.starts_with('$')) {
        let sub = crate::fields::prop(schema, k);
        if pv.is_null() || is_directive(pv, "delete") {
            t.remove(k);
            continue;
        }
        match (t.get_mut(k), pv) {
            (Some(tv @ Value::Object(_)), Value::Object(_)) => strategic_merge(tv, pv, sub),
            (Some(Value::Array(items)), Value::Array(patch_items)) => merge_list(items, patch_items, sub),
            _ if pv.is_object() => {
                let mut fresh = Value::Object(Map::new());
                strategic_merge(&mut fresh, pv, sub);
                t.insert(k.clone(), fresh);
            }
            _ => {
                let mut fresh = Value::Array(vec![]);
                if let (Value::Array(items), Value::Array(patch_items)) = (&mut fresh, pv) {
                    merge_list(items, patch_items, sub);
                    t.insert(k.clone(), fresh);
                } else {
                    t.insert(k.clone(), pv.clone());
                }
            }
        }
    }
    for (k, gone) in p.iter().filter_map(|(k, v)| Some((k.strip_prefix("$deleteFromPrimitiveList/")?, v))) {
        if let (Some(Value::Array(items)), Some(gone)) = (t.get_mut(k), gone.as_array()) {
            items.retain(|i| !gone.contains(i));
        }
    }
    for (k, order) in p.iter().filter_map(|(k, v)| Some((k.strip_prefix("$setElementOrder/")?, v))) {
        let key = crate::fields::prop(schema, k).and_then(|s| s["x-kubernetes-patch-merge-key"].as_str());
        if let (Some(Value::Array(items)), Some(order)) = (t.get_mut(k), order.as_array()) {
            reorder(items, order, key);
        }
    }
    if let Some(keep) = p.get("$retainKeys").and_then(Value::as_array) {
        t.retain(|k, _| keep.iter().any(|r| r == k));
    }
}

/// Merge a list: by the schema's merge key where it names one (items with
/// `$patch: delete` are removed, others merged into the item with the same
/// key or appended), else the patch's list replaces the old one.
fn merge_list(items: &mut Vec<Value>, patch_items: &[Value], schema: Option<&Value>) {
    let key = schema.and_then(|s| s["x-kubernetes-patch-merge-key"].as_str());
    let item_schema = schema.and_then(|s| s.get("items"));
    let Some(key) = key.filter(|_| !patch_items.iter().any(|i| is_directive(i, "replace"))) else {
        *items = patch_items.iter().filter(|i| !is_directive(i, "replace")).map(without_directives).collect();
        return;
    };
    for pi in patch_items {
        let id = &pi[key];
        let existing = items.iter().position(|i| !id.is_null() && &i[key] == id);
        match existing {
            _ if is_directive(pi, "delete") => items.retain(|i| &i[key] != id),
            Some(at) => strategic_merge(&mut items[at], pi, item_schema),
            None => {
                let mut fresh = Value::Object(Map::new());
                strategic_merge(&mut fresh, pi, item_schema);
                items.push(fresh);
            }
        }
    }
}

/// `$setElementOrder`: items named in `order` come first, in that order.
fn reorder(items: &mut [Value], order: &[Value], key: Option<&str>) {
    let id = |v: &Value| -> Value { key.map(|k| v[k].clone()).unwrap_or_else(|| v.clone()) };
    let rank = |v: &Value| order.iter().position(|o| id(o) == id(v)).unwrap_or(order.len());
    items.sort_by_key(|v| rank(v));
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Json,
    Strategic,
    Apply,
}

impl PatchType {
    pub fn from_content_type(ct: &str) -> ApiResult<Self> {
        let base = ct.split(';').next().unwrap_or("").trim();
        match base {
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchType::Apply),
            other => Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {other:?})"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn widget_type() -> ResourceType {
        let crd = json!({"spec": {"group": "g.io", "names": {"plural": "ws", "kind": "W"}, "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
        crate::resource::from_crd(&crd).remove(0)
    }

    #[test]
    fn self_copies_that_double_the_document_are_refused_at_the_copy_limit() {
        // The review's request: 22 copies of a value into itself (918 bytes).
        let mut doc = json!({"spec": {"data": "x".repeat(600)}});
        let ops: Vec<Value> =
            (0..22).map(|i| json!({"op": "copy", "from": "/spec", "path": format!("/spec/c{i}")})).collect();
        let e = apply_json_patch(&widget_type(), "w", &mut doc, &Value::Array(ops)).expect_err("refused");
        assert_eq!((e.code, e.reason), (422, "Invalid"));
        assert!(e.message.contains("exceeding the limit 3145728"), "{}", e.message);
        assert!(json_size(&doc) <= MAX_JSON_PATCH_COPY_BYTES + 1000, "the document never grew past the limit");
        let status = e.to_status();
        assert_eq!(status["details"]["causes"][0]["field"], "patch");
    }

    #[test]
    fn copies_within_the_limit_are_applied() {
        let mut doc = json!({"spec": {"a": [1, 2]}});
        let ops = json!([{"op": "copy", "from": "/spec/a", "path": "/spec/b"}, {"op": "copy", "from": "/spec", "path": "/spec/c"}]);
        apply_json_patch(&widget_type(), "w", &mut doc, &ops).expect("applied");
        assert_eq!(doc, json!({"spec": {"a": [1, 2], "b": [1, 2], "c": {"a": [1, 2], "b": [1, 2]}}}));
    }

    #[test]
    fn more_operations_than_kube_apiserver_allows_is_413_naming_the_limit() {
        let op = json!({"op": "test", "path": "/spec", "value": {}});
        let mut doc = json!({"spec": {}});
        let at_limit = Value::Array(vec![op.clone(); MAX_JSON_PATCH_OPERATIONS]);
        apply_json_patch(&widget_type(), "w", &mut doc, &at_limit).expect("10000 operations are allowed");
        let over = Value::Array(vec![op; MAX_JSON_PATCH_OPERATIONS + 1]);
        let e = apply_json_patch(&widget_type(), "w", &mut doc, &over).expect_err("refused");
        assert_eq!((e.code, e.reason), (413, "RequestEntityTooLarge"));
        assert_eq!(e.message, "The allowed maximum operations in a JSON patch is 10000, got 10001");
    }

    #[test]
    fn a_failing_operation_is_named_by_its_index_in_the_patch() {
        let mut doc = json!({"spec": {}});
        let ops = json!([{"op": "add", "path": "/spec/a", "value": 1}, {"op": "remove", "path": "/spec/missing"}]);
        let e = apply_json_patch(&widget_type(), "w", &mut doc, &ops).expect_err("fails");
        assert_eq!(e.code, 422);
        assert!(e.message.contains("operation '/1'"), "{}", e.message);
    }

    fn containers_schema() -> Value {
        json!({"properties": {"containers": {"type": "array", "x-kubernetes-patch-merge-key": "name",
            "items": {"properties": {"ports": {"type": "array", "x-kubernetes-patch-merge-key": "containerPort"}}}}}})
    }

    #[test]
    fn kubectl_apply_patch_changes_one_container_and_keeps_the_rest() {
        let mut live = json!({"containers": [
            {"name": "app", "image": "a:1", "ports": [{"containerPort": 80}]},
            {"name": "side", "image": "s:1"}]});
        // What kubectl apply sends when only app's image changed.
        let patch = json!({"$setElementOrder/containers": [{"name": "app"}, {"name": "side"}],
            "containers": [{"image": "a:2", "name": "app"}]});
        strategic_merge(&mut live, &patch, Some(&containers_schema()));
        assert_eq!(
            live,
            json!({"containers": [
                {"name": "app", "image": "a:2", "ports": [{"containerPort": 80}]},
                {"name": "side", "image": "s:1"}]})
        );
    }

    #[test]
    fn directives_delete_replace_retain_and_reorder() {
        let schema = containers_schema();
        let mut live = json!({"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}], "x": {"k": 1, "j": 2}});
        let patch = json!({"containers": [{"name": "b", "$patch": "delete"}],
            "$setElementOrder/containers": [{"name": "c"}, {"name": "a"}],
            "x": {"$patch": "replace", "n": 3}});
        strategic_merge(&mut live, &patch, Some(&schema));
        assert_eq!(live, json!({"containers": [{"name": "c"}, {"name": "a"}], "x": {"n": 3}}));

        let mut obj = json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}, "other": 1});
        strategic_merge(&mut obj, &json!({"$retainKeys": ["type"], "type": "Recreate"}), None);
        assert_eq!(obj, json!({"type": "Recreate"}));

        let mut fin = json!({"finalizers": ["a", "b"], "tags": ["x"]});
        strategic_merge(&mut fin, &json!({"$deleteFromPrimitiveList/finalizers": ["a"], "tags": ["y"]}), None);
        assert_eq!(fin, json!({"finalizers": ["b"], "tags": ["y"]}), "unkeyed lists are replaced");
    }
}
