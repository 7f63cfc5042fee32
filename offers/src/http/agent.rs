//! `POST /api/v1/agent`: the mpiswarm agent API (see offers/README.md).
//! Agents may subscribe while the master awaits them after a restart: that
//! is how it recovers. The peer address of a SUBSCRIBE is where the agent's
//! own endpoint is (`Offer.url`, `/master/state`'s `pid`).

use super::{Caller, Shared, accepted, accepts_json, check_content_type, durable, stream, stream_id};
use crate::master::CallError;
use axum::Extension;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use mpiswarm_mesos::agent_api::{Call, CallType};
use std::net::SocketAddr;
use std::sync::Arc;

pub async fn handle(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    handle_call(&shared, peer, caller.principal(), &headers, &body).await.unwrap_or_else(|e| {
        tracing::debug!(status = e.status, message = %e.message, "agent call refused");
        e.into_response()
    })
}

async fn handle_call(
    shared: &Arc<Shared>,
    peer: SocketAddr,
    principal: Option<&str>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, CallError> {
    if let Some(resp) = shared.not_leading(mpiswarm_mesos::agent_api::PATH) {
        return Ok(resp);
    }
    check_content_type(headers)?;
    let call: Call = serde_json::from_slice(body)
        .map_err(|e| CallError::bad_request(format!("Failed to parse body into agent Call: {e}")))?;
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
            let (opened, ticket) = shared.call(|m, now| m.subscribe_agent(subscribe, Some(peer.ip()), principal, now));
            let opened = opened?;
            let (id, sid) = (opened.id.clone(), opened.stream_id.clone());
            let on_close = {
                let shared = shared.clone();
                move || {
                    let now = shared.now();
                    shared.master().agent_stream_closed(&id, &sid, now);
                }
            };
            let what = format!("the registration of agent {}", opened.id);
            let response = stream::response(&opened.stream_id, opened.events, on_close, &shared.fatal);
            durable(ticket, &what).await?;
            Ok(response)
        }
        CallType::Update => {
            let update = call.update.ok_or_else(|| CallError::bad_request("Expecting 'update' to be present"))?;
            let stream = stream_id(headers);
            let (result, ticket) =
                shared.call(|m, now| m.agent_update(call.agent_id.as_ref(), stream.as_deref(), update, principal, now));
            result?;
            durable(ticket, "this update").await?;
            Ok(accepted())
        }
        CallType::Withdraw => {
            let withdraw = call.withdraw.ok_or_else(|| CallError::bad_request("Expecting 'withdraw' to be present"))?;
            let stream = stream_id(headers);
            let (result, ticket) = shared
                .call(|m, now| m.agent_withdraw(call.agent_id.as_ref(), stream.as_deref(), withdraw, principal, now));
            result?;
            durable(ticket, "this withdrawal").await?;
            Ok(accepted())
        }
    }
}
