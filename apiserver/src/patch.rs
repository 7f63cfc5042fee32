//! PATCH bodies other than server-side apply: the patch types by media
//! type, RFC 6902 JSON patch with Kubernetes' quirks, and JSON merge patch
//! (also used for strategic merge on built-in kinds, which have no
//! merge-keyed lists that matter here).

use serde_json::Value;

use crate::error::{ApiError, ApiResult, Cause};
use crate::registry::ResourceType;

/// Strategic-merge directives make no sense to a JSON merge; drop them.
pub fn strip_directives(v: &mut Value) {
    if let Some(m) = v.as_object_mut() {
        m.retain(|k, _| !k.starts_with('$'));
        for sub in m.values_mut() {
            strip_directives(sub);
        }
    }
}

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

/// RFC 6902 with the evanphx quirk Kubernetes has: `test` of a missing path
/// against `null` passes (the kube-rs finalizer helper relies on it).
pub fn apply_json_patch(rt: &ResourceType, name: &str, doc: &mut Value, patch: &Value) -> ApiResult<()> {
    let ops =
        patch.as_array().ok_or_else(|| ApiError::bad_request("a JSON patch must be a JSON array of operations"))?;
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
    json_patch::patch(doc, &parsed).map_err(|e| json_patch_error(rt, name, e))
}

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
