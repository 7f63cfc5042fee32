//! `POST /api/v1/agent`: the mpiswarm agent API (see offers/README.md).
//! Agents may subscribe while the master recovers: that is how it recovers.

use super::{Shared, accepted, accepts_json, check_content_type, stream, stream_id};
use crate::master::CallError;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use mpiswarm_mesos::agent_api::{Call, CallType};
use std::sync::Arc;

pub async fn handle(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    handle_call(&shared, &headers, &body).unwrap_or_else(|e| {
        tracing::debug!(status = e.status, message = %e.message, "agent call refused");
        e.into_response()
    })
}

fn handle_call(shared: &Arc<Shared>, headers: &HeaderMap, body: &[u8]) -> Result<Response, CallError> {
    check_content_type(headers)?;
    let call: Call = serde_json::from_slice(body)
        .map_err(|e| CallError::bad_request(format!("Failed to parse body into agent Call: {e}")))?;
    let now = shared.now();
    match call.kind {
        CallType::Subscribe => {
            if !accepts_json(headers) {
                return Err(CallError {
                    status: 406,
                    message: "Expecting 'Accept' to allow 'application/json'".into(),
                });
            }
            if stream_id(headers).is_some() {
                return Err(CallError::bad_request("Subscribe calls should not include the 'Mesos-Stream-Id' header"));
            }
            let subscribe =
                call.subscribe.ok_or_else(|| CallError::bad_request("Expecting 'subscribe' to be present"))?;
            let opened = shared.master().subscribe_agent(subscribe, now)?;
            let (id, sid) = (opened.id.clone(), opened.stream_id.clone());
            let on_close = {
                let shared = shared.clone();
                move || {
                    let now = shared.now();
                    shared.master().agent_stream_closed(&id, &sid, now);
                }
            };
            Ok(stream::response(&opened.stream_id, opened.events, on_close))
        }
        CallType::Update => {
            let update = call.update.ok_or_else(|| CallError::bad_request("Expecting 'update' to be present"))?;
            shared.master().agent_update(call.agent_id.as_ref(), stream_id(headers).as_deref(), update, now)?;
            Ok(accepted())
        }
    }
}
