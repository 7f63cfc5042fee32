//! Between what clients send and see and what is stored: the served view of
//! a stored object (per version, and the two event views), a written view
//! back into the stored shape, and request bodies parsed and checked against
//! the endpoint's apiVersion and kind. Pure functions: no storage, no I/O.

use std::borrow::Cow;

use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::events;
use crate::resource::{Builtin, ResourceType};

/// The served view of a stored object, borrowed when nothing changes.
pub fn view_cow<'a>(rt: &ResourceType, stored: &'a Value) -> Cow<'a, Value> {
    match rt.builtin {
        Some(Builtin::CoreEvent) => Cow::Owned(events::stored_to_core(stored)),
        Some(Builtin::EventsV1) => Cow::Owned(events::stored_to_v1(stored)),
        None if stored["apiVersion"].as_str() != Some(rt.api_version().as_str()) => {
            let mut v = stored.clone();
            v["apiVersion"] = json!(rt.api_version());
            Cow::Owned(v)
        }
        _ => Cow::Borrowed(stored),
    }
}

/// The served view of a stored object.
pub fn view(rt: &ResourceType, stored: &Value) -> Value {
    view_cow(rt, stored).into_owned()
}

/// A written view back into the stored shape.
pub fn to_storage(rt: &ResourceType, mut v: Value) -> Value {
    if rt.builtin == Some(Builtin::CoreEvent) {
        return events::core_to_stored(v);
    }
    if let Some(m) = v.as_object_mut() {
        m.insert("apiVersion".into(), json!(rt.api_version()));
        m.insert("kind".into(), json!(rt.kind));
    }
    v
}

/// Parse a request body as JSON (or YAML for apply), naming what is wrong.
pub fn parse_body(rt: &ResourceType, body: &[u8], yaml: bool) -> ApiResult<Value> {
    // JSON is YAML, and clients (kube-rs, kubectl --server-side) send apply
    // patches as JSON: the JSON parser reads them several times faster; the
    // YAML one reads the rest and words the errors.
    let json = || serde_json::from_slice::<Value>(body).map_err(|e| e.to_string());
    let yaml_doc = || serde_yaml::from_slice::<Value>(body).map_err(|e| e.to_string());
    let looks_json = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    let parsed = match (yaml, looks_json) {
        (false, _) => json(),
        (true, true) => json().or_else(|_| yaml_doc()),
        (true, false) => yaml_doc(),
    };
    parsed.map_err(|e| {
        ApiError::bad_request(format!(
            "the body of the request could not be decoded as {} ({}): {e}",
            if yaml { "YAML" } else { "JSON" },
            rt.kind
        ))
    })
}

/// The apiVersion and kind in a body must be the endpoint's.
pub fn check_type(rt: &ResourceType, body: &mut Value, required: bool) -> ApiResult<()> {
    let Some(m) = body.as_object_mut() else {
        return Err(ApiError::bad_request(format!("the body of the request must be a JSON object ({})", rt.kind)));
    };
    let want = rt.api_version();
    match m.get("apiVersion").and_then(Value::as_str) {
        Some(av) if av != want => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({want})"
            )));
        }
        None if required => {
            return Err(ApiError::bad_request(format!(
                "invalid object type: apiVersion is required (expected {want})"
            )));
        }
        _ => {}
    }
    match m.get("kind").and_then(Value::as_str) {
        Some(k) if k != rt.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                rt.kind
            )));
        }
        None if required => {
            return Err(ApiError::bad_request(format!("invalid object type: kind is required (expected {})", rt.kind)));
        }
        _ => {}
    }
    m.insert("apiVersion".into(), json!(want));
    m.insert("kind".into(), json!(rt.kind));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(group: &str, plural: &str) -> std::sync::Arc<ResourceType> {
        crate::registry::Registry::default()
            .all()
            .iter()
            .find(|t| t.group == group && t.plural == plural)
            .cloned()
            .unwrap_or_else(|| panic!("{group}/{plural} is served"))
    }

    #[test]
    fn a_body_must_name_the_endpoints_kind_and_gets_it_when_it_does_not() {
        let cms = rt("", "configmaps");
        let mut body = json!({"metadata": {"name": "c"}});
        check_type(&cms, &mut body, false).expect("kind and apiVersion may be left out");
        assert_eq!((body["apiVersion"].as_str(), body["kind"].as_str()), (Some("v1"), Some("ConfigMap")));
        let mut wrong = json!({"apiVersion": "v1", "kind": "Secret"});
        let e = check_type(&cms, &mut wrong, false).expect_err("another kind");
        assert_eq!(e.message, "the kind in the data (Secret) does not match the expected kind (ConfigMap)");
        let e = check_type(&cms, &mut json!({}), true).expect_err("apply needs them");
        assert!(e.message.contains("apiVersion is required"), "{}", e.message);
        let e = parse_body(&cms, b"{", false).expect_err("not JSON");
        assert_eq!(e.code, 400);
        assert_eq!(parse_body(&cms, b"a: 1", true).expect("YAML for apply"), json!({"a": 1}));
    }

    #[test]
    fn an_apply_body_reads_the_same_as_json_and_as_yaml_and_a_broken_one_is_worded_as_yaml() {
        let cms = rt("", "configmaps");
        let json_body = br#" {"data": {"a": "1", "b": "x: y"}, "n": [1, 2.5, null]}"#;
        let yaml_body = b"data:\n  a: '1'\n  b: 'x: y'\nn: [1, 2.5, null]\n";
        let from_json = parse_body(&cms, json_body, true).expect("JSON is YAML");
        assert_eq!(from_json, parse_body(&cms, yaml_body, true).expect("YAML"));
        assert_eq!(from_json, parse_body(&cms, json_body, false).expect("JSON"));
        // A flow mapping that is YAML but not JSON still reads.
        assert_eq!(parse_body(&cms, b"{a: 1}", true).expect("YAML flow mapping"), json!({"a": 1}));
        let e = parse_body(&cms, b"{\"a\": ", true).expect_err("cut short");
        assert!(e.message.contains("could not be decoded as YAML"), "{}", e.message);
    }

    #[test]
    fn events_are_stored_in_one_shape_and_served_in_two() {
        let core = rt("", "events");
        let v1 = rt("events.k8s.io", "events");
        let stored = to_storage(&core, json!({"apiVersion": "v1", "kind": "Event", "message": "hi"}));
        assert_eq!(stored["note"], "hi");
        assert_eq!(view(&core, &stored)["message"], "hi");
        assert_eq!(view(&v1, &stored)["note"], "hi");
        assert!(matches!(view_cow(&rt("", "configmaps"), &json!({"apiVersion": "v1"})), Cow::Borrowed(_)));
    }
}
