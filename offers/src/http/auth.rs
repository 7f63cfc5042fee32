//! Optional HTTP basic authentication of frameworks, agents and operators
//! (`--credentials FILE`, Mesos' credentials JSON format), checked by
//! `mpiswarm_mesos::basic_auth` (secrets in constant time). The
//! request then carries its [`Caller`], which the master authorizes
//! (`master/authz.rs`); operator endpoints are authorized here, by the ACL
//! list `get_endpoints`.

use super::Shared;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use mpiswarm_mesos::basic_auth::CHALLENGE;
use std::sync::Arc;

/// Who made a request: the principal that authenticated, `None` when the
/// offer layer has no `--credentials` (then no one is authenticated).
#[derive(Debug, Clone, Default)]
pub struct Caller(pub Option<String>);

impl Caller {
    pub fn principal(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

pub async fn basic_auth(State(shared): State<Arc<Shared>>, mut req: Request<Body>, next: Next) -> Response {
    let Some(credentials) = &shared.config.credentials else {
        req.extensions_mut().insert(Caller(None));
        return next.run(req).await;
    };
    let authorization = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    match credentials.authenticate(authorization) {
        Ok(principal) => {
            req.extensions_mut().insert(Caller(Some(principal)));
            next.run(req).await
        }
        Err(why) => {
            let mut resp = (StatusCode::UNAUTHORIZED, why.to_string()).into_response();
            resp.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(CHALLENGE));
            resp
        }
    }
}

/// Operator endpoints: the caller may `GET` this path (ACL list `get_endpoints`).
pub async fn operator_endpoint(State(shared): State<Arc<Shared>>, req: Request<Body>, next: Next) -> Response {
    let caller = req.extensions().get::<Caller>().cloned().unwrap_or_default();
    let allowed = shared.master().authorize_endpoint(caller.principal(), req.uri().path());
    match allowed {
        Ok(()) => next.run(req).await,
        Err(refusal) => refusal.into_response(),
    }
}
