//! `POST /api/v1/scheduler`: the Mesos v1 scheduler API, with Mesos' HTTP
//! status codes in Mesos' order of checks.

use super::{Shared, accepted, accepts_json, check_content_type, stream, stream_id, text};
use crate::master::CallError;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mpiswarm_mesos::scheduler::{Call, CallType};
use std::sync::Arc;

pub async fn handle(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    match handle_call(&shared, &headers, &body) {
        Ok(resp) => resp,
        Err(e) => {
            shared.master().counters.invalid_calls += 1;
            tracing::debug!(status = e.status, message = %e.message, "scheduler call refused");
            e.into_response()
        }
    }
}

fn handle_call(shared: &Arc<Shared>, headers: &HeaderMap, body: &[u8]) -> Result<Response, CallError> {
    if let Some(leader) = &shared.config.redirect_to {
        let mut resp =
            text(StatusCode::TEMPORARY_REDIRECT, format!("This offer layer is not the leader; the leader is {leader}"));
        if let Ok(v) = HeaderValue::from_str(&format!("//{leader}/api/v1/scheduler")) {
            resp.headers_mut().insert(header::LOCATION, v);
        }
        return Ok(resp);
    }
    if shared.master().is_recovering() {
        return Err(CallError { status: 503, message: "Master has not finished recovery".into() });
    }
    check_content_type(headers)?;
    let json: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| CallError::bad_request(format!("Failed to parse body into JSON: {e}")))?;
    let call: Call = serde_json::from_value(json)
        .map_err(|e| CallError::bad_request(format!("Failed to convert JSON into Call protobuf: {e}")))?;
    crate::validation::validate_call(&call)
        .map_err(|e| CallError::bad_request(format!("Failed to validate scheduler::Call: {e}")))?;
    let kind = call.kind.expect("validated");
    match kind {
        CallType::Subscribe => subscribe(shared, headers, call),
        _ => {
            let now = shared.now();
            shared.master().framework_call(call, stream_id(headers).as_deref(), now)?;
            Ok(if kind == CallType::UpdateFramework { StatusCode::OK.into_response() } else { accepted() })
        }
    }
}

fn subscribe(shared: &Arc<Shared>, headers: &HeaderMap, call: Call) -> Result<Response, CallError> {
    if !accepts_json(headers) {
        return Err(CallError {
            status: 406,
            message: "Expecting 'Accept' to allow 'application/x-protobuf' or 'application/json'".into(),
        });
    }
    if stream_id(headers).is_some() {
        return Err(CallError::bad_request("Subscribe calls should not include the 'Mesos-Stream-Id' header"));
    }
    let now = shared.now();
    let opened = shared.master().subscribe_framework(call, now);
    let (id, sid) = (opened.id.clone(), opened.stream_id.clone());
    let on_close = {
        let shared = shared.clone();
        move || {
            let now = shared.now();
            shared.master().framework_stream_closed(&id, &sid, now);
        }
    };
    Ok(stream::response(&opened.stream_id, opened.events, on_close))
}
