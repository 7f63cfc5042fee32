//! Optional HTTP basic authentication of frameworks, agents and operators
//! (`--credentials FILE`, Mesos' credentials JSON format). A secret is
//! compared only by `mpiswarm_guard::secret_eq`, in constant time. The
//! request then carries its [`Caller`], which the master authorizes
//! (`master/authz.rs`); operator endpoints are authorized here, by the ACL
//! list `get_endpoints`.

use super::Shared;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use std::sync::Arc;

fn principal_and_secret(req: &Request<Body>) -> Option<(String, String)> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let encoded = value.strip_prefix("Basic ").or_else(|| value.strip_prefix("basic "))?;
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, pass) = text.split_once(':')?;
    Some((user.to_owned(), pass.to_owned()))
}

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
    match principal_and_secret(&req) {
        Some((p, s)) if credentials.get(&p).is_some_and(|secret| mpiswarm_guard::secret_eq(&s, secret)) => {
            req.extensions_mut().insert(Caller(Some(p)));
            next.run(req).await
        }
        given => {
            let why = match given {
                Some((p, _)) => format!("Authentication failed for principal '{p}'"),
                None => "Authentication required: send HTTP basic credentials".to_owned(),
            };
            let mut resp = (StatusCode::UNAUTHORIZED, why).into_response();
            resp.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"mesos\""));
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
