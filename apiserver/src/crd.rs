//! CustomResourceDefinition objects: the checks kube-apiserver makes before
//! a CRD is accepted (names, scope, exactly one storage version, schemas,
//! CEL rules that compile) and the status it reports (`Established`,
//! `NamesAccepted`, `acceptedNames`, `storedVersions`).

use serde_json::{Value, json};

use crate::cel_rules;
use crate::error::Cause;

fn cause(field: &str, message: String) -> Cause {
    Cause { reason: "FieldValueInvalid", field: field.into(), message }
}

fn required(field: &str) -> Cause {
    Cause { reason: "FieldValueRequired", field: field.into(), message: "Required value".into() }
}

pub fn validate(crd: &Value) -> Vec<Cause> {
    let mut causes = vec![];
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or_default();
    let plural = spec["names"]["plural"].as_str().unwrap_or_default();
    if group.is_empty() {
        causes.push(required("spec.group"));
    } else if !group.contains('.') {
        causes.push(cause("spec.group", format!("Invalid value: {group:?}: should be a domain with at least one dot")));
    }
    if plural.is_empty() {
        causes.push(required("spec.names.plural"));
    }
    if spec["names"]["kind"].as_str().unwrap_or_default().is_empty() {
        causes.push(required("spec.names.kind"));
    }
    let name = crd["metadata"]["name"].as_str().unwrap_or_default();
    if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
        causes.push(cause(
            "metadata.name",
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    match spec["scope"].as_str() {
        Some("Namespaced" | "Cluster") => {}
        other => causes.push(Cause {
            reason: "FieldValueNotSupported",
            field: "spec.scope".into(),
            message: format!("Unsupported value: {}: supported values: \"Cluster\", \"Namespaced\"", json!(other)),
        }),
    }
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    if versions.is_empty() {
        causes.push(required("spec.versions"));
    }
    let storage = versions.iter().filter(|v| v["storage"].as_bool() == Some(true)).count();
    if !versions.is_empty() && storage != 1 {
        causes.push(cause(
            "spec.versions",
            format!("Invalid value: {storage}: must have exactly one version marked as storage version"),
        ));
    }
    for (i, v) in versions.iter().enumerate() {
        let path = format!("spec.versions[{i}]");
        if v["name"].as_str().unwrap_or_default().is_empty() {
            causes.push(required(&format!("{path}.name")));
        }
        match v["schema"].get("openAPIV3Schema") {
            None => causes.push(required(&format!("{path}.schema.openAPIV3Schema"))),
            Some(s) => causes.extend(cel_rules::compile_errors(s, &format!("{path}.schema.openAPIV3Schema"))),
        }
    }
    causes
}

/// The status a real apiserver reports once a CRD is served.
pub fn set_status(crd: &mut Value) {
    let storage: Vec<Value> = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .map(|v| v["name"].clone())
        .collect();
    let now = crd["metadata"]["creationTimestamp"].clone();
    let cond = |t: &str, reason: &str, msg: &str| json!({"type": t, "status": "True", "lastTransitionTime": now, "reason": reason, "message": msg});
    crd["status"] = json!({
        "acceptedNames": crd["spec"]["names"].clone(),
        "conditions": [
            cond("NamesAccepted", "NoConflicts", "no conflicts found"),
            cond("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "storedVersions": storage,
    });
}
