//! Every way a read of the log endpoint ends short of output, with the HTTP
//! status it is answered with. The answer is a Kubernetes `Status` object
//! (`reason`, `code`, `message`), as the API server and the kubelet answer,
//! so that kubectl-minded clients and `mpiswarm logs` print its `message`.
//! A refusal names what was refused and why; a failure names the part that
//! failed and where.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::names::TaskRole;

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("no bearer token: send `Authorization: Bearer TOKEN` with your kubeconfig's token")]
    NoToken,
    #[error("the API server did not accept the bearer token{}", why.as_ref().map(|w| format!(": {w}")).unwrap_or_default())]
    Unauthenticated { why: Option<String> },
    #[error(
        "mpijobs.mpiswarm.io {job:?} is forbidden: User {user:?} cannot get resource \"mpijobs/log\" in API group \"mpiswarm.io\" in the namespace {namespace:?}{}",
        why.as_ref().map(|w| format!(": {w}")).unwrap_or_default()
    )]
    Forbidden { user: String, namespace: String, job: String, why: Option<String> },
    #[error("{what} {value:?} is not a valid Kubernetes name")]
    InvalidName { what: &'static str, value: String },
    #[error("query parameter {param}={value:?} is not valid: expected {expected}")]
    InvalidParameter { param: &'static str, value: String, expected: &'static str },
    #[error("mpijobs.mpiswarm.io {job:?} not found in namespace {namespace:?}")]
    JobNotFound { namespace: String, job: String },
    #[error("MpiJob {job} has not been placed yet{}: it has no output", message.as_ref().map(|m| format!(" ({m})")).unwrap_or_default())]
    NotPlaced { job: String, message: Option<String> },
    #[error("MpiJob {job} has {workers} workers (0 to {}): there is no worker {worker}", workers.saturating_sub(1))]
    NoSuchWorker { job: String, worker: u32, workers: usize },
    #[error("MpiJob {job} has no uid: it was not read from the API server")]
    NoUid { job: String },
    #[error(
        "the {task} of MpiJob {job} has no output on agent {agent} yet, or it was removed after its retention period"
    )]
    NotOnAgent { job: String, task: TaskRole, agent: String },
    #[error("the master at {master} does not know agent {agent} (node {node}): its output cannot be reached")]
    UnknownAgent { master: String, agent: String, node: String },
    #[error("the master's state names agent {agent} without an address ({pid:?})")]
    AgentAddress { agent: String, pid: String },
    #[error("the controller has not subscribed to the master yet: no framework id to read output under")]
    NoFramework,
    #[error("reading the framework id from its ConfigMap: {0}")]
    FrameworkId(Box<crate::Error>),
    #[error("{what} failed: {source}")]
    Kube { what: &'static str, source: kube::Error },
    #[error("{what} did not answer within {seconds} s")]
    Timeout { what: &'static str, seconds: u64 },
    #[error("{what}: {source}")]
    Mesos { what: &'static str, source: mpiswarm_mesos::client::ClientError },
}

impl LogError {
    pub fn status(&self) -> StatusCode {
        match self {
            LogError::NoToken | LogError::Unauthenticated { .. } => StatusCode::UNAUTHORIZED,
            LogError::Forbidden { .. } => StatusCode::FORBIDDEN,
            LogError::InvalidName { .. } | LogError::InvalidParameter { .. } => StatusCode::BAD_REQUEST,
            LogError::JobNotFound { .. }
            | LogError::NotPlaced { .. }
            | LogError::NoSuchWorker { .. }
            | LogError::NotOnAgent { .. }
            | LogError::UnknownAgent { .. } => StatusCode::NOT_FOUND,
            LogError::NoUid { .. } | LogError::AgentAddress { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            LogError::NoFramework | LogError::FrameworkId(_) | LogError::Kube { .. } => StatusCode::SERVICE_UNAVAILABLE,
            LogError::Timeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            LogError::Mesos { .. } => StatusCode::BAD_GATEWAY,
        }
    }

    /// The `reason` of the `Status`, in Kubernetes' vocabulary.
    pub fn reason(&self) -> &'static str {
        match self.status() {
            StatusCode::UNAUTHORIZED => "Unauthorized",
            StatusCode::FORBIDDEN => "Forbidden",
            StatusCode::BAD_REQUEST => "BadRequest",
            StatusCode::NOT_FOUND => "NotFound",
            StatusCode::SERVICE_UNAVAILABLE => "ServiceUnavailable",
            StatusCode::GATEWAY_TIMEOUT => "Timeout",
            _ => "InternalError",
        }
    }

    /// The metric label of this outcome.
    pub fn label(&self) -> &'static str {
        match self.status() {
            StatusCode::UNAUTHORIZED => "unauthenticated",
            StatusCode::FORBIDDEN => "forbidden",
            StatusCode::BAD_REQUEST => "bad_request",
            StatusCode::NOT_FOUND => "not_found",
            _ => "failed",
        }
    }

    /// The Kubernetes `Status` object this error is answered with.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.status().as_u16(),
        })
    }
}

impl IntoResponse for LogError {
    fn into_response(self) -> Response {
        (self.status(), Json(self.body())).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_a_kubernetes_status_that_names_user_verb_resource_and_namespace() {
        let e = LogError::Forbidden { user: "team-b".into(), namespace: "team-a".into(), job: "pi".into(), why: None };
        let body = e.body();
        assert_eq!((body["code"].as_u64(), body["reason"].as_str()), (Some(403), Some("Forbidden")));
        assert_eq!(
            body["message"],
            "mpijobs.mpiswarm.io \"pi\" is forbidden: User \"team-b\" cannot get resource \"mpijobs/log\" in API group \"mpiswarm.io\" in the namespace \"team-a\""
        );
        let unauthenticated = LogError::Unauthenticated { why: Some("token expired".into()) };
        assert_eq!((unauthenticated.status(), unauthenticated.reason()), (StatusCode::UNAUTHORIZED, "Unauthorized"));
        assert!(unauthenticated.to_string().ends_with(": token expired"));
        assert_eq!(LogError::NoToken.status(), StatusCode::UNAUTHORIZED);
    }

    #[test]
    fn each_outcome_has_the_status_a_client_can_act_on() {
        let gone = LogError::JobNotFound { namespace: "a".into(), job: "pi".into() };
        assert_eq!((gone.status(), gone.reason(), gone.label()), (StatusCode::NOT_FOUND, "NotFound", "not_found"));
        let slow = LogError::Timeout { what: "the TokenReview", seconds: 10 };
        assert_eq!((slow.status(), slow.reason()), (StatusCode::GATEWAY_TIMEOUT, "Timeout"));
        assert_eq!(LogError::NoFramework.status(), StatusCode::SERVICE_UNAVAILABLE);
        let worker = LogError::NoSuchWorker { job: "pi".into(), worker: 5, workers: 2 };
        assert_eq!(worker.to_string(), "MpiJob pi has 2 workers (0 to 1): there is no worker 5");
    }
}
