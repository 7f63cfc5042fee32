//! What every write goes through before it is stored: server-owned metadata
//! (uid, timestamps, generation), the status-subresource split, finalizer
//! rules during deletion, field ownership, validation (metadata, the CRD
//! schema with defaults and CEL, CRD objects themselves), and no-op detection.

use std::sync::Mutex;

use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult, Cause};
use crate::fields::{self, Scope, Writer};
use crate::resource::{Builtin, ResourceType};
use crate::store::Mutation;
use crate::{crd, schema};

/// `fieldValidation`: what to do with fields the schema does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    /// 400 naming them (kubectl's default).
    Strict,
    /// Drop them and tell the client in `Warning` headers (the API default).
    Warn,
    /// Drop them silently.
    Ignore,
}

/// One write request's context.
pub struct WriteCtx<'a> {
    pub rt: &'a ResourceType,
    pub namespace: Option<&'a str>,
    pub name: Option<&'a str>,
    pub status: bool,
    pub manager: &'a str,
    pub api_version: &'a str,
    pub now: &'a str,
    pub validation: FieldValidation,
    pub warnings: &'a Mutex<Vec<String>>,
    /// managedFields were already computed (server-side apply).
    pub applied: bool,
}

impl WriteCtx<'_> {
    pub fn scope(&self) -> Scope {
        if self.status { Scope::Status } else { Scope::Main { skip_status: self.rt.status_subresource } }
    }

    pub fn writer(&self) -> Writer<'_> {
        Writer {
            manager: self.manager,
            subresource: if self.status { "status" } else { "" },
            api_version: self.api_version,
            now: self.now,
            schema: self.rt.schema.as_ref(),
        }
    }

    fn invalid(&self, name: &str, causes: Vec<Cause>) -> ApiError {
        ApiError::invalid(&self.rt.kind, &self.rt.group, name, causes)
    }
}

const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn random_suffix() -> String {
    let bytes = uuid::Uuid::new_v4().into_bytes();
    bytes.iter().take(5).map(|b| NAME_ALPHABET[*b as usize % NAME_ALPHABET.len()] as char).collect()
}

fn dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

fn dns_label(s: &str) -> bool {
    s.len() <= 63 && !s.contains('.') && dns_subdomain(s)
}

fn qualified_name(k: &str) -> bool {
    let part = |p: &str| {
        !p.is_empty()
            && p.len() <= 63
            && p.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && p.starts_with(|c: char| c.is_ascii_alphanumeric())
            && p.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    match k.split_once('/') {
        Some((prefix, name)) => dns_subdomain(prefix) && part(name),
        None => part(k),
    }
}

fn label_value(v: &str) -> bool {
    v.is_empty() || qualified_name(v) && !v.contains('/')
}

/// What a DNS name must be, in kube-apiserver's words.
const DNS_RULE: &str = "must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

fn metadata_causes(rt: &ResourceType, obj: &Value) -> Vec<Cause> {
    let mut causes = vec![];
    let meta = &obj["metadata"];
    let name = meta["name"].as_str().unwrap_or_default();
    // RBAC names are path segments, as kube-apiserver validates them
    // (`system:discovery` is a valid ClusterRole name).
    let rule = match rt.builtin {
        Some(Builtin::Rbac) => (!name.is_empty() && !matches!(name, "." | "..") && !name.contains(['/', '%']))
            .then_some(())
            .ok_or("may not be '.' or '..' and may not contain '/' or '%'".to_owned()),
        Some(Builtin::Namespace) => dns_label(name).then_some(()).ok_or(format!("a RFC 1123 label {DNS_RULE}")),
        _ => dns_subdomain(name).then_some(()).ok_or(format!("a lowercase RFC 1123 subdomain {DNS_RULE}")),
    };
    if let Err(why) = rule {
        causes.push(Cause {
            reason: "FieldValueInvalid",
            field: "metadata.name".into(),
            message: format!("Invalid value: {name:?}: {why}"),
        });
    }
    for (k, v) in meta["labels"].as_object().into_iter().flatten() {
        if !qualified_name(k) {
            causes.push(Cause {
                reason: "FieldValueInvalid",
                field: "metadata.labels".into(),
                message: format!(
                    "Invalid value: {k:?}: name part must consist of alphanumeric characters, '-', '_' or '.'"
                ),
            });
        }
        match v.as_str() {
            Some(s) if label_value(s) => {}
            _ => causes.push(Cause {
                reason: "FieldValueInvalid",
                field: "metadata.labels".into(),
                message: format!("Invalid value: {v}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.'"),
            }),
        }
    }
    for (k, v) in meta["annotations"].as_object().into_iter().flatten() {
        if !qualified_name(k) || !v.is_string() {
            causes.push(Cause {
                reason: "FieldValueInvalid",
                field: format!("metadata.annotations.{k}"),
                message: format!("Invalid value: {k:?}: annotation keys must be qualified names with string values"),
            });
        }
    }
    if let Some(f) = meta.get("finalizers")
        && !f.as_array().is_some_and(|a| a.iter().all(Value::is_string))
    {
        causes.push(Cause {
            reason: "FieldValueInvalid",
            field: "metadata.finalizers".into(),
            message: "Invalid value: must be a list of strings".into(),
        });
    }
    causes
}

fn strict_error(rt: &ResourceType, unknown: &[String]) -> ApiError {
    let list = unknown.iter().map(|u| format!("unknown field \"{u}\"")).collect::<Vec<_>>().join(", ");
    ApiError::bad_request(format!(
        "{kind} in version \"{v}\" cannot be handled as a {kind}: strict decoding error: {list}",
        kind = rt.kind,
        v = rt.version
    ))
}

/// Schema, CEL and metadata validation; prunes and defaults in place.
fn validate(cx: &WriteCtx<'_>, obj: &mut Value, old: Option<&Value>) -> ApiResult<()> {
    let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let mut causes = metadata_causes(cx.rt, obj);
    if let (Some(s), Some(compiled)) = (&cx.rt.schema, &cx.rt.compiled) {
        let checked = schema::check(s, compiled, obj, old);
        if !checked.unknown.is_empty() {
            match cx.validation {
                FieldValidation::Strict => return Err(strict_error(cx.rt, &checked.unknown)),
                FieldValidation::Warn => {
                    // A write decided again (its object changed meanwhile) warns once.
                    let mut warnings = crate::locks::lock(cx.warnings);
                    for u in &checked.unknown {
                        let w = format!("unknown field \"{u}\"");
                        if !warnings.contains(&w) {
                            warnings.push(w);
                        }
                    }
                }
                FieldValidation::Ignore => {}
            }
        }
        causes.extend(checked.causes);
    }
    if cx.rt.builtin == Some(Builtin::Crd) {
        causes.extend(crd::validate(obj));
    }
    if causes.is_empty() { Ok(()) } else { Err(cx.invalid(&name, causes)) }
}

fn meta_mut(obj: &mut Value) -> ApiResult<&mut serde_json::Map<String, Value>> {
    let m = obj.as_object_mut().ok_or_else(|| ApiError::bad_request("the request body must be a JSON object"))?;
    let meta = m.entry("metadata").or_insert_with(|| json!({}));
    if meta.is_null() {
        *meta = json!({});
    }
    meta.as_object_mut().ok_or_else(|| ApiError::bad_request("metadata must be a JSON object"))
}

fn set_server_status(rt: &ResourceType, obj: &mut Value) {
    match rt.builtin {
        Some(Builtin::Secret) if obj["type"].as_str().is_none_or(str::is_empty) => obj["type"] = json!("Opaque"),
        Some(Builtin::Namespace) => {
            obj["status"] = json!({"phase": if obj["metadata"]["deletionTimestamp"].is_string() { "Terminating" } else { "Active" }});
            if obj["spec"]["finalizers"].is_null() {
                obj["spec"] = json!({"finalizers": ["kubernetes"]});
            }
        }
        Some(Builtin::Crd) => crd::set_status(obj),
        _ => {}
    }
}

/// A new object: fill in what the server owns and validate it.
pub fn admit_create(cx: &WriteCtx<'_>, mut obj: Value) -> ApiResult<Value> {
    let rt = cx.rt;
    let meta = meta_mut(&mut obj)?;
    match (cx.namespace, rt.namespaced) {
        (Some(ns), true) => match meta.get("namespace").and_then(Value::as_str) {
            Some(body) if body != ns => {
                return Err(ApiError::bad_request(format!(
                    "the namespace of the provided object ({body}) does not match the namespace sent on the request ({ns})"
                )));
            }
            _ => {
                meta.insert("namespace".into(), json!(ns));
            }
        },
        _ => {
            meta.remove("namespace");
        }
    }
    if meta.get("name").and_then(Value::as_str).is_none_or(str::is_empty) {
        match meta.get("generateName").and_then(Value::as_str) {
            Some(prefix) if !prefix.is_empty() => {
                let name = format!("{prefix}{}", random_suffix());
                meta.insert("name".into(), json!(name));
            }
            _ => {
                return Err(ApiError::invalid(
                    &rt.kind,
                    &rt.group,
                    "",
                    vec![Cause {
                        reason: "FieldValueRequired",
                        field: "metadata.name".into(),
                        message: "Required value: name or generateName is required".into(),
                    }],
                ));
            }
        }
    }
    if let (Some(url_name), Some(body)) = (cx.name, meta.get("name").and_then(Value::as_str))
        && url_name != body
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body}) does not match the name on the URL ({url_name})"
        )));
    }
    meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    meta.insert("creationTimestamp".into(), json!(cx.now));
    for k in ["resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"] {
        meta.remove(k);
    }
    if rt.generation {
        meta.insert("generation".into(), json!(1));
    } else {
        meta.remove("generation");
    }
    if rt.status_subresource
        && let Some(m) = obj.as_object_mut()
    {
        m.remove("status");
    }
    set_server_status(rt, &mut obj);
    validate(cx, &mut obj, None)?;
    if !cx.applied {
        fields::record_update(None, &mut obj, cx.scope(), &cx.writer());
    }
    Ok(obj)
}

fn outside_meta_and_status(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.as_object_mut() {
        for k in ["metadata", "status", "apiVersion", "kind"] {
            m.remove(k);
        }
    }
    v
}

/// An update of `old` into `new` (PUT, any PATCH, apply).
pub fn admit_update(cx: &WriteCtx<'_>, old: &Value, mut new: Value) -> ApiResult<Mutation> {
    let rt = cx.rt;
    let name = old["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let conflict = || ApiError::conflict(&rt.plural, &rt.group, &name);
    {
        let meta = meta_mut(&mut new)?;
        if let Some(rv) = meta.get("resourceVersion").and_then(Value::as_str)
            && !rv.is_empty()
            && Some(rv) != old["metadata"]["resourceVersion"].as_str()
        {
            return Err(conflict());
        }
        if let Some(uid) = meta.get("uid").and_then(Value::as_str)
            && !uid.is_empty()
            && Some(uid) != old["metadata"]["uid"].as_str()
        {
            let mut e = conflict();
            e.message = format!(
                "Operation cannot be fulfilled on {} \"{name}\": Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                crate::error::qualified(&rt.plural, &rt.group),
                old["metadata"]["uid"].as_str().unwrap_or_default()
            );
            return Err(e);
        }
        if let Some(body) = meta.get("name").and_then(Value::as_str)
            && body != name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body}) does not match the name on the URL ({name})"
            )));
        }
    }
    if cx.status {
        // The status endpoint takes .status (and field ownership) only.
        let mut merged = old.clone();
        match new.get("status") {
            Some(s) => merged["status"] = s.clone(),
            None => {
                if let Some(m) = merged.as_object_mut() {
                    m.remove("status");
                }
            }
        }
        if cx.applied {
            merged["metadata"]["managedFields"] = new["metadata"]["managedFields"].clone();
        }
        new = merged;
    } else if rt.status_subresource
        && let Some(m) = new.as_object_mut()
    {
        match old.get("status") {
            Some(s) => {
                m.insert("status".into(), s.clone());
            }
            None => {
                m.remove("status");
            }
        }
    }
    {
        let old_meta = &old["metadata"];
        let meta = meta_mut(&mut new)?;
        for k in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            match old_meta.get(k) {
                Some(v) => {
                    meta.insert(k.into(), v.clone());
                }
                None => {
                    meta.remove(k);
                }
            }
        }
        meta.remove("resourceVersion");
        if !cx.applied {
            match old_meta.get("managedFields") {
                Some(v) => meta.insert("managedFields".into(), v.clone()),
                None => meta.remove("managedFields"),
            };
        }
    }
    if let Some(m) = new.as_object_mut() {
        m.insert("apiVersion".into(), old["apiVersion"].clone());
        m.insert("kind".into(), old["kind"].clone());
    }
    if old["metadata"]["deletionTimestamp"].is_string() {
        let before: Vec<&str> =
            old["metadata"]["finalizers"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        let added: Vec<String> = new["metadata"]["finalizers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|f| !before.contains(f))
            .map(|f| format!("{f:?}"))
            .collect();
        if !added.is_empty() {
            return Err(cx.invalid(
                &name,
                vec![Cause {
                    reason: "FieldValueForbidden",
                    field: "metadata.finalizers".into(),
                    message: format!("Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}", added.join(", ")),
                }],
            ));
        }
    }
    set_server_status(rt, &mut new);
    validate(cx, &mut new, Some(old))?;
    if rt.generation && outside_meta_and_status(old) != outside_meta_and_status(&new) {
        let g = old["metadata"]["generation"].as_i64().unwrap_or(1);
        new["metadata"]["generation"] = json!(g + 1);
    }
    if !cx.applied {
        fields::record_update(Some(old), &mut new, cx.scope(), &cx.writer());
    }
    let mut stamped = new.clone();
    stamped["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
    if fields::same_content(old, &stamped) {
        return Ok(Mutation::Unchanged(std::sync::Arc::new(old.clone())));
    }
    let finalizers_left = new["metadata"]["finalizers"].as_array().is_some_and(|a| !a.is_empty());
    if new["metadata"]["deletionTimestamp"].is_string() && !finalizers_left {
        return Ok(Mutation::Delete(new));
    }
    Ok(Mutation::Put(new))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widget_type() -> ResourceType {
        let crd = json!({"spec": {"group": "g.io", "names": {"plural": "ws", "kind": "W"}, "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}});
        crate::resource::from_crd(&crd).remove(0)
    }

    #[test]
    fn a_write_decided_twice_warns_once_about_an_unknown_field() {
        let rt = widget_type();
        let warnings = Mutex::default();
        let cx = WriteCtx {
            rt: &rt,
            namespace: Some("default"),
            name: None,
            status: false,
            manager: "m",
            api_version: "g.io/v1",
            now: "2025-01-01T00:00:00Z",
            validation: FieldValidation::Warn,
            warnings: &warnings,
            applied: false,
        };
        let body =
            json!({"apiVersion": "g.io/v1", "kind": "W", "metadata": {"name": "a"}, "spec": {"size": 1, "bogus": 2}});
        for _ in 0..2 {
            let admitted = admit_create(&cx, body.clone()).expect("admitted");
            assert!(admitted["spec"].get("bogus").is_none(), "pruned");
        }
        assert_eq!(*crate::locks::lock(&warnings), ["unknown field \"spec.bogus\""]);
        let strict = WriteCtx { validation: FieldValidation::Strict, ..cx };
        let e = admit_create(&strict, body).expect_err("strict");
        assert_eq!(
            e.message,
            "W in version \"v1\" cannot be handled as a W: strict decoding error: unknown field \"spec.bogus\""
        );
    }
}
