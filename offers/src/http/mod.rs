//! The HTTP surface of the offer layer (axum): the scheduler API, the agent
//! API, and the operator endpoints. Handlers only parse, check what Mesos
//! checks at the HTTP level, and hand over to the [`Master`]; event streams
//! are channels the master writes RecordIO records into. Registry writes a
//! call causes are awaited here, after the master's lock is released.

mod agent;
mod auth;

pub use auth::Caller;
mod endpoints;
mod scheduler;
mod stream;

use crate::fatal::Fatal;
use crate::leadership::{Leadership, LeadershipCell, NotLeading};
use crate::master::{CallError, Master};
use crate::registrar::Ticket;
use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Settings of the HTTP layer.
#[derive(Debug, Clone, Default)]
pub struct HttpConfig {
    /// When set, API calls and operator reads need HTTP basic auth.
    pub credentials: Option<mpiswarm_mesos::basic_auth::Principals>,
    /// When set, this offer layer is not the leader: calls answer 307 to it
    /// (the initial [`Leadership`]).
    pub redirect_to: Option<String>,
    pub max_body_bytes: usize,
}

/// What every handler shares.
#[derive(Debug)]
pub struct Shared {
    master: Mutex<Master>,
    started: Instant,
    config: HttpConfig,
    /// Which replica leads; API calls are answered only while this one does.
    pub leadership: LeadershipCell,
    /// Where a panic in any server task is reported; the server then stops.
    pub fatal: Fatal,
}

impl Shared {
    /// `started` is the moment the master's `now` counts from.
    pub fn new(master: Master, config: HttpConfig, started: Instant) -> Arc<Self> {
        let leadership = LeadershipCell::new(Leadership::from_flag(config.redirect_to.as_deref()));
        Arc::new(Self { master: Mutex::new(master), started, config, leadership, fatal: Fatal::default() })
    }

    /// The master. A poisoned lock is taken as it is (the panic policy in
    /// README.md): the panic that poisoned it was reported to [`Fatal`] and
    /// the server is stopping, and closing streams and the last registry
    /// write still need the books.
    pub fn master(&self) -> MutexGuard<'_, Master> {
        self.master.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `call` on the master at the current time and returns, besides its
    /// result, the ticket of the registry write it caused, if any. Await the
    /// ticket after this returns (the lock is released by then).
    pub fn call<R>(&self, call: impl FnOnce(&mut Master, Duration) -> R) -> (R, Option<Ticket>) {
        let now = self.now();
        let mut master = self.master();
        let before = master.registry_seq();
        let result = call(&mut master, now);
        let ticket = master.registry_ticket_since(before);
        (result, ticket)
    }

    /// This replica's `HOST:PORT`, as its MasterInfo advertises it.
    pub fn own_address(&self) -> String {
        self.master().config.address()
    }

    /// `HOST:PORT` of the leading replica as this one knows it: itself while
    /// it leads and its fence has not passed, else the Lease's holder it read
    /// last; `None` while none is known.
    pub fn known_leader(&self) -> Option<String> {
        let (own, fenced) = {
            let master = self.master();
            (master.config.address(), master.is_fenced(self.now()))
        };
        match self.leadership.get() {
            Leadership::Leading if fenced => None,
            other => other.leader(&own).map(str::to_owned),
        }
    }

    /// What a standby answers to a call for `path` instead of handling it
    /// ([`Leadership::refuse`]); `None` while this replica leads.
    /// A replica that believes it leads but whose fence has passed (it could
    /// not renew its Lease) answers 503 too.
    fn not_leading(&self, path: &str) -> Option<Response> {
        Some(match self.leadership.get().refuse(path) {
            Some(NotLeading::Redirect { location, message }) => redirect(&location, message),
            Some(NotLeading::NoLeader { message }) => text(StatusCode::SERVICE_UNAVAILABLE, message),
            None => return self.master().fence_refusal(self.now()).map(IntoResponse::into_response),
        })
    }

    /// Time since start: the master's clock.
    pub fn now(&self) -> Duration {
        self.started.elapsed()
    }
}

/// Waits until the registry change a call made is on disk; if it is not, the
/// call fails with 503 and says what was not saved and what to do.
async fn durable(ticket: Option<Ticket>, what: &str) -> Result<(), CallError> {
    let Some(ticket) = ticket else { return Ok(()) };
    ticket.durable().await.map_err(|e| {
        CallError::unavailable(format!(
            "Registry write failed, so {what} would not survive a restart of the offer layer: {e}. \
             Retry once /health answers 200."
        ))
    })
}

/// All routes.
pub fn router(shared: Arc<Shared>) -> Router {
    let operator = endpoints::Operator::new(Arc::clone(&shared));
    // Read by operators only, as the ACL list get_endpoints says.
    let operator_reads = Router::new()
        .route("/master/state", get(endpoints::state))
        .route("/state", get(endpoints::state))
        .route("/metrics/snapshot", get(endpoints::metrics_snapshot))
        .route("/quota", get(endpoints::quota))
        .merge(mpiswarm_health::metrics(Arc::clone(&operator)))
        .layer(axum::middleware::from_fn_with_state(shared.clone(), auth::operator_endpoint));
    let api = Router::new()
        .route("/api/v1/scheduler", post(scheduler::handle))
        .route(mpiswarm_mesos::agent_api::PATH, post(agent::handle))
        .route("/master/teardown", post(endpoints::teardown))
        .route("/master/redirect", get(endpoints::redirect))
        .route("/redirect", get(endpoints::redirect))
        .merge(operator_reads)
        .layer(axum::middleware::from_fn_with_state(shared.clone(), auth::basic_auth));
    Router::new()
        .route("/version", get(endpoints::version))
        .route("/health", get(endpoints::mesos_health))
        .merge(mpiswarm_health::probes(operator))
        .merge(api)
        .layer(axum::extract::DefaultBodyLimit::max(shared.config.max_body_bytes.max(1024)))
        .layer(shared.fatal.catch_panic_layer())
        .with_state(shared)
}

/// A 307 to `location`, `message` as its text.
fn redirect(location: &str, message: String) -> Response {
    let mut resp = text(StatusCode::TEMPORARY_REDIRECT, message);
    if let Ok(v) = HeaderValue::from_str(location) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    resp
}

/// A plain-text error, as Mesos answers.
fn text(status: StatusCode, message: impl Into<String>) -> Response {
    let mut resp = (status, message.into()).into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    resp
}

impl IntoResponse for CallError {
    fn into_response(self) -> Response {
        text(StatusCode::from_u16(self.status).unwrap_or(StatusCode::BAD_REQUEST), self.message)
    }
}

/// Mesos' content checks, in its order: Content-Type present (400), JSON
/// (415; protobuf is not spoken here).
fn check_content_type(headers: &HeaderMap) -> Result<(), CallError> {
    let Some(ct) = headers.get(header::CONTENT_TYPE) else {
        return Err(CallError::bad_request("Expecting 'Content-Type' to be present"));
    };
    let media = ct.to_str().unwrap_or_default().split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    match media.as_str() {
        "application/json" => Ok(()),
        "application/x-protobuf" => Err(CallError {
            status: 415,
            message:
                "Content-Type 'application/x-protobuf' is not supported by this offer layer; use 'application/json'"
                    .into(),
        }),
        other => Err(CallError {
            status: 415,
            message: format!("Expecting 'Content-Type' of application/json or application/x-protobuf, got '{other}'"),
        }),
    }
}

/// Whether `Accept` allows JSON (absent means anything).
fn accepts_json(headers: &HeaderMap) -> bool {
    let Some(accept) = headers.get(header::ACCEPT) else { return true };
    accept.to_str().unwrap_or_default().split(',').any(|part| {
        let media = part.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
        matches!(media.as_str(), "application/json" | "application/*" | "*/*")
    })
}

fn stream_id(headers: &HeaderMap) -> Option<String> {
    headers.get(mpiswarm_mesos::client::STREAM_ID_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

fn accepted() -> Response {
    StatusCode::ACCEPTED.into_response()
}
