//! The one error type of the API server and its wire form, the Kubernetes
//! `Status` object. Every non-2xx answer goes through here so that kubectl,
//! kube-rs and the Python client all see the reason, code and causes they
//! branch on.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// One field-level reason inside a 422 (`details.causes[]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    pub reason: &'static str,
    pub field: String,
    pub message: String,
}

/// An API error: the HTTP code, the Kubernetes `reason`, a message for humans,
/// and the optional `details` (name, group, kind, causes).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{reason} ({code}): {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Details>,
}

#[derive(Debug, Clone, Default)]
pub struct Details {
    pub name: String,
    pub group: String,
    pub kind: String,
    pub causes: Vec<Cause>,
}

/// How Kubernetes shows a value inside "Invalid value: X".
pub fn shown(v: &Value) -> String {
    match v {
        Value::Object(_) => "\"object\"".into(),
        Value::Array(_) => "\"array\"".into(),
        other => other.to_string(),
    }
}

/// `<plural>.<group>` as Kubernetes prints it in messages (`events` for core).
pub fn qualified(plural: &str, group: &str) -> String {
    if group.is_empty() { plural.to_string() } else { format!("{plural}.{group}") }
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self { code, reason, message: message.into(), details: None }
    }

    fn with_details(mut self, name: &str, group: &str, kind: &str) -> Self {
        self.details = Some(Details { name: name.into(), group: group.into(), kind: kind.into(), causes: vec![] });
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    pub fn not_found(plural: &str, group: &str, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{} \"{name}\" not found", qualified(plural, group)))
            .with_details(name, group, plural)
    }

    /// An unknown path or resource: no details, exactly as kube-apiserver.
    pub fn no_route() -> Self {
        Self::new(404, "NotFound", "the server could not find the requested resource")
    }

    pub fn already_exists(plural: &str, group: &str, name: &str) -> Self {
        Self::new(409, "AlreadyExists", format!("{} \"{name}\" already exists", qualified(plural, group)))
            .with_details(name, group, plural)
    }

    pub fn conflict(plural: &str, group: &str, name: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                qualified(plural, group)
            ),
        )
        .with_details(name, group, plural)
    }

    /// 403 Forbidden on a resource: `<plural>.<group> ["<name>"] is forbidden: <why>`.
    pub fn forbidden(plural: &str, group: &str, name: &str, why: &str) -> Self {
        let what = qualified(plural, group);
        let message = if name.is_empty() {
            format!("{what} is forbidden: {why}")
        } else {
            format!("{what} \"{name}\" is forbidden: {why}")
        };
        Self::new(403, "Forbidden", message).with_details(name, group, plural)
    }

    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    /// 422 Invalid: `<Kind>.<group> "<name>" is invalid: <cause>, <cause>`.
    pub fn invalid(kind: &str, group: &str, name: &str, causes: Vec<Cause>) -> Self {
        let list = causes.iter().map(|c| format!("{}: {}", c.field, c.message)).collect::<Vec<_>>();
        let head = format!("{} \"{name}\" is invalid", qualified(kind, group));
        let message =
            if list.len() == 1 { format!("{head}: {}", list[0]) } else { format!("{head}: [{}]", list.join(", ")) };
        let mut e = Self::new(422, "Invalid", message).with_details(name, group, kind);
        if let Some(d) = e.details.as_mut() {
            d.causes = causes;
        }
        e
    }

    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code,
        });
        if let Some(d) = &self.details {
            let mut details = json!({});
            if !d.name.is_empty() {
                details["name"] = json!(d.name);
            }
            if !d.group.is_empty() {
                details["group"] = json!(d.group);
            }
            if !d.kind.is_empty() {
                details["kind"] = json!(d.kind);
            }
            if !d.causes.is_empty() {
                details["causes"] = d
                    .causes
                    .iter()
                    .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                    .collect();
            }
            status["details"] = details;
        }
        status
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = (code, self.to_status().to_string()).into_response();
        resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        resp
    }
}

impl From<rusqlite::Error> for ApiError {
    fn from(e: rusqlite::Error) -> Self {
        ApiError::internal(format!("storage error: {e}"))
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
