//! Events are stored once, in the `events.k8s.io/v1` shape, and served in two
//! views: `events.k8s.io/v1` (the kube-rs Recorder writes here) and core `v1`
//! (what `kubectl describe` and the Python client read). This module owns the
//! field mapping between the two and nothing else.

use serde_json::{Map, Value, json};

/// (events.k8s.io/v1 name, core/v1 name)
const RENAMES: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("deprecatedSource", "source"),
];

fn rename(map: &mut Map<String, Value>, from: &str, to: &str) {
    if let Some(v) = map.remove(from) {
        map.insert(to.to_string(), v);
    }
}

/// A core/v1 Event as written by a client, into the stored (events.k8s.io/v1) shape.
pub fn core_to_stored(mut v: Value) -> Value {
    if let Some(m) = v.as_object_mut() {
        for (new, old) in RENAMES {
            rename(m, old, new);
        }
        if let Some(rc) = m.remove("reportingComponent") {
            m.insert("reportingController".into(), rc);
        }
        if !m.contains_key("reportingController")
            && let Some(c) = m.get("deprecatedSource").and_then(|s| s.get("component")).cloned()
        {
            m.insert("reportingController".into(), c);
        }
        m.insert("apiVersion".into(), json!("events.k8s.io/v1"));
    }
    v
}

/// The stored shape, served as events.k8s.io/v1.
pub fn stored_to_v1(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.as_object_mut() {
        m.insert("apiVersion".into(), json!("events.k8s.io/v1"));
        m.insert("kind".into(), json!("Event"));
    }
    v
}

/// The stored shape, served as core/v1 (`involvedObject` and `metadata` are
/// always present: the Python client requires them).
pub fn stored_to_core(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.as_object_mut() {
        for (new, old) in RENAMES {
            rename(m, new, old);
        }
        if let Some(rc) = m.remove("reportingController") {
            if !m.contains_key("source") {
                m.insert("source".into(), json!({"component": rc.clone()}));
            }
            m.insert("reportingComponent".into(), rc);
        }
        m.entry("involvedObject").or_insert_with(|| json!({}));
        m.entry("metadata").or_insert_with(|| json!({}));
        if !m.contains_key("lastTimestamp")
            && let Some(t) = m.get("eventTime").and_then(Value::as_str)
        {
            // kubectl describe shows lastTimestamp; derive it like the real
            // conversion does, at seconds precision.
            let secs = t.split('.').next().unwrap_or(t).trim_end_matches('Z');
            m.insert("lastTimestamp".into(), json!(format!("{secs}Z")));
        }
        if !m.contains_key("count") {
            let n = m.get("series").and_then(|s| s.get("count")).cloned().unwrap_or(json!(1));
            m.insert("count".into(), n);
        }
        m.insert("apiVersion".into(), json!("v1"));
        m.insert("kind".into(), json!("Event"));
    }
    v
}

/// Field selectors each view supports besides metadata.name/namespace.
pub const CORE_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];
pub const V1_FIELDS: &[&str] = &[
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "regarding.resourceVersion",
    "regarding.fieldPath",
    "reason",
    "reportingController",
    "type",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_written_in_one_view_reads_back_in_the_other() {
        let recorder = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "regarding": {"kind": "MpiJob", "name": "j"}, "note": "hello", "reason": "Created",
            "reportingController": "ctl", "eventTime": "2025-01-01T00:00:00.123456Z", "type": "Normal"});
        let core = stored_to_core(&recorder);
        assert_eq!(core["involvedObject"]["name"], "j");
        assert_eq!(core["message"], "hello");
        assert_eq!(core["source"]["component"], "ctl");
        assert_eq!(core["lastTimestamp"], "2025-01-01T00:00:00Z");
        assert_eq!(core["apiVersion"], "v1");
        let back = core_to_stored(core.clone());
        assert_eq!(back["regarding"], recorder["regarding"]);
        assert_eq!(back["note"], "hello");
        assert_eq!(back["reportingController"], "ctl");
    }
}
