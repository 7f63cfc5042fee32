//! `meta.k8s.io/v1` Table output for `kubectl get`: the CRD's
//! additionalPrinterColumns (JSONPath cells, `date` columns rendered as ages
//! the way kube-apiserver does), or fixed columns for built-in kinds.

use std::borrow::Borrow;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use serde_json_path::JsonPath;

use crate::resource::{Builtin, PrinterColumn, ResourceType};

/// What a reader asked for in its Accept header: the objects themselves, a
/// Table (kubectl get), or PartialObjectMetadata (kube-rs metadata_watcher).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Object,
    Table,
    Metadata,
}

impl Format {
    pub fn from_accept(accept: &str) -> Self {
        let first = accept.split(',').next().unwrap_or("");
        if first.contains("as=Table") {
            Format::Table
        } else if first.contains("as=PartialObjectMetadata") {
            Format::Metadata
        } else {
            Format::Object
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Object => "application/json",
            Format::Table => "application/json;as=Table;v=v1;g=meta.k8s.io",
            Format::Metadata => "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
        }
    }
}

/// `PartialObjectMetadata` of an object.
pub fn partial(v: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": v["metadata"].clone()})
}

/// `PartialObjectMetadataList` of objects.
pub fn partial_list<T: Borrow<Value>>(objects: &[T], rv: u64, continue_token: Option<&str>) -> Value {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if let Some(c) = continue_token {
        meta["continue"] = json!(c);
    }
    let items: Vec<Value> = objects.iter().map(|o| partial(o.borrow())).collect();
    json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "items": items})
}

/// Go's `duration.HumanDuration`, which kubectl users know as the AGE column.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let s = secs.max(0);
    if s < 120 {
        return format!("{s}s");
    }
    let m = s / 60;
    if m < 10 {
        return if s % 60 == 0 { format!("{m}m") } else { format!("{m}m{}s", s % 60) };
    }
    if m < 180 {
        return format!("{m}m");
    }
    let h = m / 60;
    if h < 8 {
        return if m % 60 == 0 { format!("{h}h") } else { format!("{h}h{}m", m % 60) };
    }
    if h < 48 {
        return format!("{h}h");
    }
    let d = h / 24;
    if h < 24 * 8 {
        return if h % 24 == 0 { format!("{d}d") } else { format!("{d}d{}h", h % 24) };
    }
    if h < 24 * 365 * 2 {
        return format!("{d}d");
    }
    let y = d / 365;
    if h < 24 * 365 * 8 {
        return if d % 365 == 0 { format!("{y}y") } else { format!("{y}y{}d", d % 365) };
    }
    format!("{y}y")
}

fn age(ts: Option<&str>, now: DateTime<Utc>) -> Value {
    match ts.and_then(|t| DateTime::parse_from_rfc3339(t).ok()) {
        Some(t) => json!(human_duration((now - t.with_timezone(&Utc)).num_seconds())),
        None => json!("<unknown>"),
    }
}

fn col(name: &str, type_: &str, format: &str, json_path: &str) -> PrinterColumn {
    PrinterColumn {
        name: name.into(),
        type_: type_.into(),
        format: format.into(),
        description: String::new(),
        priority: 0,
        json_path: json_path.into(),
    }
}

/// What the STATUS column of a stored-only kind says for every object.
pub const STORED_STATUS: &str = "Stored (no controller)";

fn columns(rt: &ResourceType) -> Vec<PrinterColumn> {
    let name = col("Name", "string", "name", ".metadata.name");
    let age_col = col("Age", "date", "", ".metadata.creationTimestamp");
    let mut cols = vec![name];
    match rt.builtin {
        Some(Builtin::Stored) => {
            let mut status = col("Status", "string", "", "");
            status.description =
                "mpiswarm stores this object; no controller acts on it, so it never runs or becomes ready.".into();
            cols.extend([status, age_col]);
        }
        None if !rt.printer_columns.is_empty() => cols.extend(rt.printer_columns.iter().cloned()),
        Some(Builtin::Namespace) => cols.extend([col("Status", "string", "", ".status.phase"), age_col]),
        Some(Builtin::Lease) => cols.extend([col("Holder", "string", "", ".spec.holderIdentity"), age_col]),
        Some(Builtin::Secret) => cols.extend([col("Type", "string", "", ".type"), age_col]),
        Some(Builtin::Crd) => cols.push(col("Created At", "date", "", ".metadata.creationTimestamp")),
        Some(Builtin::CoreEvent) => {
            cols = vec![
                col("Last Seen", "date", "", ".lastTimestamp"),
                col("Type", "string", "", ".type"),
                col("Reason", "string", "", ".reason"),
                col("Object", "string", "", ".involvedObject.name"),
                col("Message", "string", "", ".message"),
            ]
        }
        _ => cols.push(age_col),
    }
    cols
}

/// A column with its JSONPath parsed once per table.
struct Column {
    def: PrinterColumn,
    path: Option<JsonPath>,
    /// Show a `date` cell as the timestamp itself (the CRD list's CREATED AT)
    /// rather than as an age.
    raw_date: bool,
    /// The same text in every row (a stored-only kind's status).
    constant: Option<&'static str>,
}

fn cell(c: &Column, obj: &Value, now: DateTime<Utc>) -> Value {
    if let Some(text) = c.constant {
        return json!(text);
    }
    let found = c.path.as_ref().and_then(|p| p.query(obj).first().cloned());
    let found = found.as_ref();
    if c.def.type_ == "date" && !c.raw_date {
        return age(found.and_then(|v| v.as_str()), now);
    }
    if c.def.name == "Object"
        && let Some(kind) = obj["involvedObject"]["kind"].as_str()
    {
        return json!(format!("{}/{}", kind.to_lowercase(), found.and_then(|v| v.as_str()).unwrap_or_default()));
    }
    match (c.def.type_.as_str(), found) {
        (_, None) => Value::Null,
        ("string", Some(Value::String(s))) => json!(s),
        ("string", Some(v)) => json!(v.to_string()),
        (_, Some(v)) => v.clone(),
    }
}

/// A Table of `objects` (already in their served view).
pub fn table<T: Borrow<Value>>(rt: &ResourceType, objects: &[T], rv: u64, continue_token: Option<&str>) -> Value {
    let now = Utc::now();
    let cols: Vec<Column> = columns(rt)
        .into_iter()
        .map(|def| {
            let path = JsonPath::parse(&format!("${}", def.json_path)).ok();
            let constant = (rt.builtin == Some(Builtin::Stored) && def.json_path.is_empty()).then_some(STORED_STATUS);
            Column { def, path, raw_date: rt.builtin == Some(Builtin::Crd), constant }
        })
        .collect();
    let defs: Vec<Value> = cols
        .iter()
        .map(|Column { def: c, .. }| json!({"name": c.name, "type": c.type_, "format": c.format, "description": c.description, "priority": c.priority}))
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let o: &Value = o.borrow();
            json!({
                "cells": cols.iter().map(|c| cell(c, o, now)).collect::<Vec<_>>(),
                "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"].clone()},
            })
        })
        .collect();
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if let Some(c) = continue_token {
        meta["continue"] = json!(c);
    }
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "columnDefinitions": defs, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_kubectl() {
        for (s, want) in [
            (5, "5s"),
            (119, "119s"),
            (150, "2m30s"),
            (600, "10m"),
            (3 * 3600 + 60, "3h1m"),
            (9 * 3600, "9h"),
            (50 * 3600, "2d2h"),
            (10 * 86400, "10d"),
        ] {
            assert_eq!(human_duration(s), want);
        }
    }

    #[test]
    fn printer_columns_follow_json_paths_including_filters() {
        let mut rt = crate::resource::from_crd(
            &json!({"spec": {"group": "g.io", "names": {"plural": "ks", "kind": "K"}, "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true, "additionalPrinterColumns": [
                {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                {"name": "Workers", "type": "integer", "jsonPath": ".spec.workers"}]}]}}),
        );
        let rt = rt.remove(0);
        let o = json!({"metadata": {"name": "a"}, "spec": {"workers": 3}, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
        let t = table(&rt, &[o], 7, None);
        assert_eq!(t["rows"][0]["cells"], json!(["a", "Running", "True", 3]));
        assert_eq!(t["columnDefinitions"][1]["name"], "Phase");
    }
}
