//! The agent's own HTTP endpoints, for operators and orchestrators:
//! `/healthz` (the process serves), `/readyz` (subscribed to the offer layer
//! right now), `/metrics` (Prometheus text), `/state` (the tasks it knows,
//! as JSON) and `/files/read`, `/files/browse` (tasks' kept output,
//! [`crate::files`]). Read-only: nothing here changes what the agent does.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::agent::Agent;
use crate::files;
use crate::swarm::Swarm;

/// Whether the agent's event stream is up; set by the subscription loop.
#[derive(Default)]
pub struct Connection {
    pub subscribed: AtomicBool,
}

struct Endpoints<S: Swarm> {
    agent: Arc<Agent<S>>,
    connection: Arc<Connection>,
}

pub fn router<S: Swarm + 'static>(agent: Arc<Agent<S>>, connection: Arc<Connection>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz::<S>))
        .route("/metrics", get(metrics::<S>))
        .route("/state", get(state::<S>))
        .route("/files/read", get(files_read::<S>))
        .route("/files/browse", get(files_browse::<S>))
        .with_state(Arc::new(Endpoints { agent, connection }))
}

async fn files_read<S: Swarm + 'static>(State(e): State<Arc<Endpoints<S>>>, q: files::Read) -> Response {
    files::read(e.agent.sandbox().clone(), q.0).await
}

async fn files_browse<S: Swarm + 'static>(State(e): State<Arc<Endpoints<S>>>, q: files::Browse) -> Response {
    files::browse(e.agent.sandbox().clone(), q.0).await
}

async fn readyz<S: Swarm + 'static>(State(e): State<Arc<Endpoints<S>>>) -> Response {
    if e.connection.subscribed.load(Ordering::Relaxed) {
        (StatusCode::OK, "ready").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not subscribed to the offer layer").into_response()
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: String,
}

async fn metrics<S: Swarm + 'static>(State(e): State<Arc<Endpoints<S>>>) -> Response {
    let mut registry = Registry::with_prefix("mpiswarm_agent");
    let tasks = Family::<StateLabel, Gauge>::default();
    for (_, _, state) in e.agent.snapshot() {
        tasks.get_or_create(&StateLabel { state: state.as_str().to_owned() }).inc();
    }
    registry.register("tasks", "Tasks this agent knows, by the state last reported", tasks);
    let subscribed = Gauge::<i64>::default();
    subscribed.set(i64::from(e.connection.subscribed.load(Ordering::Relaxed)));
    registry.register("subscribed", "1 while the event stream from the offer layer is up", subscribed);
    let serving = Gauge::<i64>::default();
    serving.set(i64::from(e.agent.serving()));
    registry.register("serving", "0 while the served swarm node is down (the agent is withdrawn)", serving);
    registry.register(
        "node_losses",
        "Times the served swarm node went down (its tasks were reported TASK_LOST)",
        e.agent.counters.node_losses.clone(),
    );
    let c = &e.agent.counters;
    registry.register("launched", "Tasks started as services", c.launched.clone());
    registry.register(
        "launch_failures",
        "Launches rolled back because Swarm refused an object",
        c.launch_failures.clone(),
    );
    registry.register("refused", "LAUNCH and LAUNCH_GROUP refused as invalid", c.refused.clone());
    registry.register("status_updates", "Status updates the offer layer accepted", c.status_updates.clone());
    registry.register("resyncs", "Full comparisons with Swarm", c.resyncs.clone());
    registry.register("objects_removed", "Networks, secrets and configs garbage-collected", c.objects_removed.clone());
    registry.register(
        "store_errors",
        "Writes to the data directory that failed (task records, agent id)",
        c.store_errors.clone(),
    );
    registry.register(
        "orphans_removed",
        "Services no task owned, removed after the grace period",
        c.orphans_removed.clone(),
    );
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &registry) {
        Ok(()) => ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], body)
            .into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "metrics encoding failed").into_response(),
    }
}

async fn state<S: Swarm + 'static>(State(e): State<Arc<Endpoints<S>>>) -> Response {
    let tasks: Vec<serde_json::Value> = e
        .agent
        .snapshot()
        .into_iter()
        .map(|(service, task, state)| serde_json::json!({"service": service, "task_id": task.value, "state": state.as_str()}))
        .collect();
    axum::Json(serde_json::json!({
        "agent_id": e.agent.agent_id().map(|a| a.value),
        "node_id": e.agent.node_id(),
        "node": e.agent.node_name(),
        "serving": e.agent.serving(),
        "subscribed": e.connection.subscribed.load(Ordering::Relaxed),
        "tasks": tasks,
    }))
    .into_response()
}
