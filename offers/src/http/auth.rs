//! Optional HTTP basic authentication of frameworks and agents
//! (`--credentials FILE`, Mesos' credentials JSON format). A secret is
//! compared only by `mpiswarm_guard::secret_eq`, in constant time.

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

pub async fn basic_auth(State(shared): State<Arc<Shared>>, req: Request<Body>, next: Next) -> Response {
    let Some(credentials) = &shared.config.credentials else {
        return next.run(req).await;
    };
    match principal_and_secret(&req) {
        Some((p, s)) if credentials.get(&p).is_some_and(|secret| mpiswarm_guard::secret_eq(&s, secret)) => {
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
