//! The tenants' log endpoint: `GET /logs/{namespace}/{job}` answers a
//! chunk of a task's output as Mesos' `/files/read` does (`{"data",
//! "offset"}`), to anyone whose Kubernetes token may `get mpijobs/log` on
//! that job, and to nobody else. It delegates both questions to the API
//! server, as the kubelet does: a TokenReview of the bearer token, then a
//! SubjectAccessReview of the user it names ([`access`]), each answer kept
//! a short while ([`cache`]). Only then is the job looked up (so a refusal
//! says nothing of whether the job exists), its task chosen ([`task`]),
//! the agent found in the master's `/master/state`, and the output read
//! from the agent's `/files/read` with the controller's own credential
//! (the agents serve `/files` only to the controller and operators).
//!
//! It has a listener of its own (`--logs-listen`), apart from `/healthz`
//! and `/metrics`: those are anonymous plain HTTP for probes and scrapers,
//! while this one carries tenants' bearer tokens, so off loopback it serves
//! only over TLS (`--logs-tls-cert`, `--logs-tls-key`), and an operator can
//! expose it without exposing the metrics (the kubelet keeps its
//! authenticated API and its healthz port apart the same way). Every call
//! it makes has a deadline; no lock is held across one.
//!
//! This module never writes anything, and never reads output without both
//! reviews having allowed it.

pub mod access;
pub mod cache;
pub mod error;
pub mod request;
pub mod task;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::TokenReview;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use kube::api::{Api, PostParams};
use mpiswarm_crds::MpiJob;
use mpiswarm_mesos::client::{ClientError, Endpoint};
use mpiswarm_mesos::tls::CaFile;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::framework_id::FrameworkIdStore;
use crate::metrics::OutcomeLabel;
use access::Caller;
use cache::TtlCache;
use error::LogError;
use request::{Offset, RawQuery};

/// The route of the endpoint.
pub const ROUTE: &str = "/logs/{namespace}/{job}";
/// A TokenReview or SubjectAccessReview, and each read of the job or the ConfigMap.
const API_TIMEOUT: Duration = Duration::from_secs(10);
/// The master's `/master/state`.
const MASTER_TIMEOUT: Duration = Duration::from_secs(10);
/// One read from an agent (at most [`request::MAX_LENGTH`] bytes).
const AGENT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an agent's address from the master's state is used.
const AGENT_TTL: Duration = Duration::from_secs(30);
/// The most answers each cache keeps.
const CACHE_CAPACITY: usize = 10_000;

/// Where and how the endpoint listens.
#[derive(Debug, Clone)]
pub struct LogsOptions {
    pub listen: SocketAddr,
    /// The URL tenants reach it at, recorded in the framework ConfigMap
    /// (default: the scheme and the bound address).
    pub url: Option<String>,
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

impl LogsOptions {
    /// The URL recorded for `mpiswarm logs` once the listener is bound to `bound`.
    pub fn advertised(&self, bound: SocketAddr) -> String {
        match &self.url {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None => format!("{}://{bound}", if self.tls.is_some() { "https" } else { "http" }),
        }
    }
}

/// A chunk of output, as the agent's `/files/read` answers it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Chunk {
    pub data: String,
    pub offset: u64,
}

/// Everything a read needs; shared by the endpoint's handlers.
pub struct LogReader {
    client: kube::Client,
    master: String,
    credentials: Option<(String, String)>,
    ca: Option<CaFile>,
    framework_ids: FrameworkIdStore,
    tokens: Mutex<TtlCache<String, Result<Caller, Option<String>>>>,
    access: Mutex<TtlCache<(Caller, String, String), bool>>,
    agents: Mutex<TtlCache<String, String>>,
    reads: Family<OutcomeLabel, Counter>,
}

impl LogReader {
    pub fn new(
        client: kube::Client,
        master: &str,
        credentials: Option<(String, String)>,
        ca: Option<CaFile>,
        framework_ids: FrameworkIdStore,
        reads: Family<OutcomeLabel, Counter>,
    ) -> Self {
        Self {
            client,
            master: master.trim_end_matches('/').to_owned(),
            credentials,
            ca,
            framework_ids,
            tokens: Mutex::new(TtlCache::new(CACHE_CAPACITY)),
            access: Mutex::new(TtlCache::new(CACHE_CAPACITY)),
            agents: Mutex::new(TtlCache::new(CACHE_CAPACITY)),
            reads,
        }
    }

    /// One read: authenticate, authorize, then find and read the output.
    pub async fn read(
        &self,
        authorization: Option<&str>,
        namespace: &str,
        job: &str,
        query: &RawQuery,
    ) -> Result<Chunk, LogError> {
        let token = request::bearer_token(authorization)?;
        let caller = self.authenticate(token).await?;
        let asked = request::parse(namespace, job, query)?;
        self.authorize(&caller, &asked.namespace, &asked.job).await?;

        let jobs: Api<MpiJob> = Api::namespaced(self.client.clone(), &asked.namespace);
        let found = within("reading the MpiJob", API_TIMEOUT, jobs.get_opt(&asked.job)).await?;
        let found = found.map_err(|source| LogError::Kube { what: "reading the MpiJob", source })?;
        let found = found
            .ok_or_else(|| LogError::JobNotFound { namespace: asked.namespace.clone(), job: asked.job.clone() })?;
        let placed = task::placed_task(&found, asked.task)?;
        let framework = within("reading the framework id", API_TIMEOUT, self.framework_ids.load()).await?;
        let framework = framework.map_err(|e| LogError::FrameworkId(Box::new(e)))?.ok_or(LogError::NoFramework)?;
        let agent = self.agent_url(&placed).await?;
        let offset = match asked.offset {
            Offset::At(o) => o.to_string(),
            Offset::Size => "-1".to_owned(),
        };
        let path = placed.path(&framework, asked.stream);
        let length = asked.length.to_string();
        let url = reqwest::Url::parse_with_params(
            &format!("{agent}/files/read"),
            [("path", path.as_str()), ("offset", &offset), ("length", &length)],
        )
        .map_err(|_| LogError::AgentAddress { agent: placed.agent_id.clone(), pid: agent.clone() })?;
        let endpoint = Endpoint::new(url.as_str(), "", self.credentials.clone()).trusting(self.ca.as_ref());
        match within("the agent's /files/read", AGENT_TIMEOUT, endpoint.get_json::<Chunk>(AGENT_TIMEOUT)).await? {
            Ok(chunk) => Ok(chunk),
            Err(e) if e.status() == Some(404) => {
                Err(LogError::NotOnAgent { job: asked.job, task: asked.task, agent: placed.agent_id })
            }
            Err(source) => {
                if matches!(source, ClientError::Http { .. }) {
                    // The agent may have moved (restarted on another port): ask the master again next time.
                    self.lock_agents().remove(&placed.agent_id);
                }
                Err(LogError::Mesos { what: "reading the task's output from its agent", source })
            }
        }
    }

    /// The caller the token belongs to: a cached answer, or a TokenReview.
    async fn authenticate(&self, token: &str) -> Result<Caller, LogError> {
        let key = token.to_owned();
        if let Some(known) = self.lock_tokens().get(&key, Instant::now()) {
            return known.map_err(|why| LogError::Unauthenticated { why });
        }
        let reviews: Api<TokenReview> = Api::all(self.client.clone());
        let sent = within(
            "the TokenReview",
            API_TIMEOUT,
            reviews.create(&PostParams::default(), &access::token_review(token)),
        )
        .await?;
        let answer = sent.map_err(|source| LogError::Kube { what: "the TokenReview", source })?;
        let caller = access::caller(answer.status.as_ref());
        let (kept, ttl) = match &caller {
            Ok(c) => (Ok(c.clone()), access::AUTHENTICATED_TTL),
            Err(LogError::Unauthenticated { why }) => (Err(why.clone()), access::UNAUTHENTICATED_TTL),
            Err(_) => return caller,
        };
        self.lock_tokens().insert(key, kept, ttl, Instant::now());
        caller
    }

    /// Whether the caller may read the job's output: a cached answer, or a SubjectAccessReview.
    async fn authorize(&self, caller: &Caller, namespace: &str, job: &str) -> Result<(), LogError> {
        let key = (caller.clone(), namespace.to_owned(), job.to_owned());
        let denied = || LogError::Forbidden {
            user: caller.username.clone(),
            namespace: namespace.to_owned(),
            job: job.to_owned(),
            why: None,
        };
        if let Some(allowed) = self.lock_access().get(&key, Instant::now()) {
            return if allowed { Ok(()) } else { Err(denied()) };
        }
        let reviews: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let review = access::access_review(caller, namespace, job);
        let sent =
            within("the SubjectAccessReview", API_TIMEOUT, reviews.create(&PostParams::default(), &review)).await?;
        let answer = sent.map_err(|source| LogError::Kube { what: "the SubjectAccessReview", source })?;
        let decided = access::decide(caller, namespace, job, answer.status.as_ref());
        let ttl = if decided.is_ok() { access::ALLOWED_TTL } else { access::DENIED_TTL };
        self.lock_access().insert(key, decided.is_ok(), ttl, Instant::now());
        decided
    }

    /// The agent's base URL: a cached one, or from the master's state.
    async fn agent_url(&self, placed: &task::PlacedTask) -> Result<String, LogError> {
        if let Some(url) = self.lock_agents().get(&placed.agent_id, Instant::now()) {
            return Ok(url);
        }
        let endpoint =
            Endpoint::new(&self.master, "/master/state", self.credentials.clone()).trusting(self.ca.as_ref());
        let state = within(
            "the master's /master/state",
            MASTER_TIMEOUT,
            endpoint.get_json::<serde_json::Value>(MASTER_TIMEOUT),
        )
        .await?
        .map_err(|source| LogError::Mesos { what: "asking the master where the agent is", source })?;
        let url = task::agent_url(&state, &self.master, placed)?;
        self.lock_agents().insert(placed.agent_id.clone(), url.clone(), AGENT_TTL, Instant::now());
        Ok(url)
    }

    // The caches are locked only for a get or an insert, never across an
    // await; a poisoned lock (a panic mid-insert) still holds a usable map.
    fn lock_tokens(&self) -> std::sync::MutexGuard<'_, TtlCache<String, Result<Caller, Option<String>>>> {
        self.tokens.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn lock_access(&self) -> std::sync::MutexGuard<'_, TtlCache<(Caller, String, String), bool>> {
        self.access.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn lock_agents(&self) -> std::sync::MutexGuard<'_, TtlCache<String, String>> {
        self.agents.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// `fut` within `limit`, or [`LogError::Timeout`] naming `what`.
async fn within<T>(what: &'static str, limit: Duration, fut: impl Future<Output = T>) -> Result<T, LogError> {
    tokio::time::timeout(limit, fut).await.map_err(|_| LogError::Timeout { what, seconds: limit.as_secs() })
}

async fn handle(
    State(reader): State<Arc<LogReader>>,
    Path((namespace, job)): Path<(String, String)>,
    Query(query): Query<RawQuery>,
    headers: HeaderMap,
) -> Response {
    let authorization = headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let outcome = reader.read(authorization, &namespace, &job, &query).await;
    let label = match &outcome {
        Ok(_) => "ok",
        Err(e) => e.label(),
    };
    reader.reads.get_or_create(&OutcomeLabel { outcome: label.to_owned() }).inc();
    match outcome {
        Ok(chunk) => Json(chunk).into_response(),
        Err(e) => {
            tracing::debug!(%namespace, %job, error = %e, "log read refused or failed");
            e.into_response()
        }
    }
}

/// The endpoint's routes.
pub fn router(reader: Arc<LogReader>) -> axum::Router {
    axum::Router::new().route(ROUTE, axum::routing::get(handle)).with_state(reader)
}

/// Serves `app` on `listener` (over TLS when `tls` is given, through
/// `mpiswarm_guard::serve_tls`: a handshake deadline and a connection cap)
/// until `shutdown` turns true.
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let stop = async move {
        let _closed = shutdown.wait_for(|stop| *stop).await;
    };
    match tls {
        None => axum::serve(listener, app).with_graceful_shutdown(stop).await,
        Some(config) => {
            mpiswarm_guard::serve_tls(listener, config, app, mpiswarm_guard::Limits::default(), stop).await;
            Ok(())
        }
    }
}
