//! `POST /api/v1/scheduler`: the Mesos v1 scheduler API, with Mesos' HTTP
//! status codes in Mesos' order of checks. A call that changed the registry
//! is answered only once the change is on disk (503 if the write failed).

use super::{Caller, Shared, accepted, accepts_json, check_content_type, durable, stream, stream_id};
use crate::master::CallError;
use crate::validation::{CheckedCall, validate_call};
use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use mpiswarm_mesos::scheduler::{Call, Subscribe};
use std::sync::Arc;

const PATH: &str = "/api/v1/scheduler";

pub async fn handle(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match handle_call(&shared, caller.principal(), &headers, &body).await {
        Ok(resp) => resp,
        Err(e) => {
            if e.status < 500 {
                shared.master().counters.invalid_calls += 1;
            }
            tracing::debug!(status = e.status, message = %e.message, "scheduler call refused");
            e.into_response()
        }
    }
}

async fn handle_call(
    shared: &Arc<Shared>,
    principal: Option<&str>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, CallError> {
    if let Some(resp) = shared.not_leading(PATH) {
        return Ok(resp);
    }
    check_content_type(headers)?;
    let json: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| CallError::bad_request(format!("Failed to parse body into JSON: {e}")))?;
    let call: Call = serde_json::from_value(json)
        .map_err(|e| CallError::bad_request(format!("Failed to convert JSON into Call protobuf: {e}")))?;
    let checked =
        validate_call(call).map_err(|e| CallError::bad_request(format!("Failed to validate scheduler::Call: {e}")))?;
    match checked {
        CheckedCall::Subscribe(subscribe) => self::subscribe(shared, principal, headers, subscribe).await,
        CheckedCall::Framework { framework_id, call } => {
            let ok = call.answers_ok();
            let stream = stream_id(headers);
            let (result, ticket) =
                shared.call(|m, now| m.framework_call(&framework_id, call, stream.as_deref(), principal, now));
            result?;
            durable(ticket, &format!("this call of framework {framework_id}")).await?;
            Ok(if ok { StatusCode::OK.into_response() } else { accepted() })
        }
    }
}

async fn subscribe(
    shared: &Arc<Shared>,
    principal: Option<&str>,
    headers: &HeaderMap,
    subscribe: Subscribe,
) -> Result<Response, CallError> {
    if !accepts_json(headers) {
        return Err(CallError {
            status: 406,
            message: "Expecting 'Accept' to allow 'application/x-protobuf' or 'application/json'".into(),
        });
    }
    if stream_id(headers).is_some() {
        return Err(CallError::bad_request("Subscribe calls should not include the 'Mesos-Stream-Id' header"));
    }
    let (opened, ticket) = shared.call(|m, now| m.subscribe_framework(subscribe, principal, now));
    let opened = opened?;
    let (id, sid) = (opened.id.clone(), opened.stream_id.clone());
    let on_close = {
        let shared = shared.clone();
        move || {
            let now = shared.now();
            shared.master().framework_stream_closed(&id, &sid, now);
        }
    };
    let what = format!("the subscription of framework {}", opened.id);
    // Dropping the stream on failure closes it in the master too.
    let response = stream::response(&opened.stream_id, opened.events, on_close, &shared.fatal);
    durable(ticket, &what).await?;
    Ok(response)
}
