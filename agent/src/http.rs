//! The agent's own HTTP endpoints, for operators and orchestrators:
//! `/healthz` (the process serves), `/readyz` (subscribed to the offer layer
//! right now), `/metrics` (OpenMetrics text; the three served by
//! [`mpiswarm_health`]), `/state` (the tasks it knows,
//! as JSON) and `/files/read`, `/files/browse` (tasks' kept output,
//! [`crate::files`]). Read-only: nothing here changes what the agent does.
//!
//! With `--http-credentials` (Mesos' agent flag of that name), `/state` and
//! `/files` answer only the principals that file lists (the controller's and
//! operators', never the tenants' or a rank container's), by HTTP basic
//! authentication ([`mpiswarm_mesos::basic_auth`]); the probes and
//! `/metrics` stay open, as a kubelet's or Prometheus' are.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use mpiswarm_health::{Component, Probe};
use mpiswarm_mesos::basic_auth::{CHALLENGE, Principals};
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

/// `/healthz`, `/readyz`, `/metrics` ([`mpiswarm_health`]) and the agent's
/// own routes, those for `readers` only when given.
pub fn router<S: Swarm + 'static>(
    agent: Arc<Agent<S>>,
    connection: Arc<Connection>,
    readers: Option<Principals>,
) -> Router {
    let health = Arc::new(Health::new(Arc::clone(&agent), Arc::clone(&connection)));
    let own = Router::new()
        .route("/state", get(state::<S>))
        .route("/files/read", get(files_read::<S>))
        .route("/files/browse", get(files_browse::<S>))
        .with_state(Arc::new(Endpoints { agent, connection }));
    let own = match readers {
        Some(readers) => own.layer(axum::middleware::from_fn_with_state(Arc::new(readers), only_readers)),
        None => own,
    };
    own.merge(mpiswarm_health::router(health))
}

/// 401 unless the request authenticates as one of `readers`.
async fn only_readers(State(readers): State<Arc<Principals>>, req: Request, next: Next) -> Response {
    let authorization = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    match readers.authenticate(authorization) {
        Ok(_) => next.run(req).await,
        Err(why) => {
            let mut resp = (StatusCode::UNAUTHORIZED, why.to_string()).into_response();
            resp.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(CHALLENGE));
            resp
        }
    }
}

async fn files_read<S: Swarm + 'static>(State(e): State<Arc<Endpoints<S>>>, q: files::Read) -> Response {
    files::read(e.agent.sandbox().clone(), q.0).await
}

async fn files_browse<S: Swarm + 'static>(State(e): State<Arc<Endpoints<S>>>, q: files::Browse) -> Response {
    files::browse(e.agent.sandbox().clone(), q.0).await
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: String,
}

/// The agent's metrics, registered once: its counters as they count, and
/// the gauges read from the agent at each scrape.
struct Health<S: Swarm> {
    agent: Arc<Agent<S>>,
    connection: Arc<Connection>,
    registry: Registry,
    tasks: Family<StateLabel, Gauge>,
    subscribed: Gauge,
    serving: Gauge,
    launch_queue: Gauge,
}

impl<S: Swarm + 'static> Health<S> {
    fn new(agent: Arc<Agent<S>>, connection: Arc<Connection>) -> Self {
        let mut registry = Registry::with_prefix("mpiswarm_agent");
        let (tasks, subscribed, serving, launch_queue) =
            (Family::default(), Gauge::default(), Gauge::default(), Gauge::default());
        registry.register("tasks", "Tasks this agent knows, by the state last reported", tasks.clone());
        registry.register("subscribed", "1 while the event stream from the offer layer is up", subscribed.clone());
        registry.register("serving", "0 while the served swarm node is down (the agent is withdrawn)", serving.clone());
        registry.register(
            "launch_queue_depth",
            "Task groups waiting for their launch or being created now (the node's launch queue, bounded by the offer layer's --agent-launch-backlog)",
            launch_queue.clone(),
        );
        let c = &agent.counters;
        for (name, help, counter) in [
            (
                "node_losses",
                "Times the served swarm node went down (its tasks were reported TASK_LOST)",
                &c.node_losses,
            ),
            (
                "node_flaps",
                "Times the served swarm node was called down and was ready again within --node-down-seconds (its tasks stayed)",
                &c.node_flaps,
            ),
            ("launched", "Tasks started as services", &c.launched),
            ("launch_failures", "Launches rolled back because Swarm refused an object", &c.launch_failures),
            (
                "start_retries",
                "Tasks the engine could not start, started again before any failure was reported",
                &c.start_retries,
            ),
            ("refused", "LAUNCH and LAUNCH_GROUP refused as invalid", &c.refused),
            ("status_updates", "Status updates the offer layer accepted", &c.status_updates),
            ("resyncs", "Full comparisons with Swarm", &c.resyncs),
            ("objects_removed", "Networks, secrets and configs garbage-collected", &c.objects_removed),
            ("store_errors", "Writes to the data directory that failed (task records, agent id)", &c.store_errors),
            ("orphans_removed", "Services no task owned, removed after the grace period", &c.orphans_removed),
        ] {
            registry.register(name, help, counter.clone());
        }
        Self { agent, connection, registry, tasks, subscribed, serving, launch_queue }
    }
}

impl<S: Swarm + 'static> Component for Health<S> {
    fn ready(&self) -> Probe {
        if self.connection.subscribed.load(Ordering::Relaxed) {
            Probe::pass("ready")
        } else {
            Probe::fail("not subscribed to the offer layer")
        }
    }

    fn registry(&self) -> &Registry {
        &self.registry
    }

    fn refresh(&self) {
        self.tasks.clear();
        for (_, _, state) in self.agent.snapshot() {
            self.tasks.get_or_create(&StateLabel { state: state.as_str().to_owned() }).inc();
        }
        self.subscribed.set(i64::from(self.connection.subscribed.load(Ordering::Relaxed)));
        self.serving.set(i64::from(self.agent.serving()));
        self.launch_queue.set(i64::try_from(self.agent.objects.queued()).unwrap_or(i64::MAX));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_swarm::FakeSwarm;
    use crate::lifecycle::tests::{agent, fw, task};

    #[tokio::test]
    async fn a_scrape_shows_what_was_counted_since_start_and_reads_tasks_and_subscription_anew() {
        let f = agent(FakeSwarm::default());
        let connection = Arc::new(Connection::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let app = router(Arc::clone(&f.agent), Arc::clone(&connection), None);
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let get = |path: &str| reqwest::get(format!("{base}{path}"));

        assert_eq!(get("/readyz").await.unwrap().status(), 503, "not subscribed yet");
        let metrics = get("/metrics").await.unwrap();
        assert_eq!(metrics.headers()["content-type"], mpiswarm_health::CONTENT_TYPE);
        let before = metrics.text().await.unwrap();
        assert!(before.contains("mpiswarm_agent_subscribed 0\n"), "{before}");
        assert!(before.contains("mpiswarm_agent_launched_total 0\n"), "{before}");
        assert!(!before.contains("mpiswarm_agent_tasks{"), "no task yet: {before}");

        let (id, info) = fw();
        f.agent.launch(id, &info, None, vec![task("t1")]).await;
        connection.subscribed.store(true, Ordering::Relaxed);
        assert_eq!(get("/readyz").await.unwrap().status(), 200, "subscribed, so ready");
        let after = get("/metrics").await.unwrap().text().await.unwrap();
        assert!(after.contains("mpiswarm_agent_subscribed 1\n"), "{after}");
        assert!(after.contains("mpiswarm_agent_launched_total 1\n"), "{after}");
        assert!(after.contains("mpiswarm_agent_tasks{state=\"TASK_STARTING\"} 1\n"), "{after}");
        server.abort();
    }

    #[tokio::test]
    async fn with_http_credentials_state_and_files_answer_only_the_listed_principals() {
        let f = agent(FakeSwarm::default());
        let readers = Principals::new([("ops".to_owned(), "o-secret".to_owned())].into());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let app = router(Arc::clone(&f.agent), Arc::default(), Some(readers));
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let http = reqwest::Client::new();
        for path in ["/state", "/files/browse?path=/", "/files/read?path=/x&offset=0"] {
            let anonymous = http.get(format!("{base}{path}")).send().await.unwrap();
            assert_eq!(anonymous.status(), 401, "{path}");
            assert_eq!(anonymous.headers()["www-authenticate"], CHALLENGE);
            assert_eq!(anonymous.text().await.unwrap(), "Authentication required: send HTTP basic credentials");
            let wrong = http.get(format!("{base}{path}")).basic_auth("ops", Some("guess")).send().await.unwrap();
            assert_eq!(wrong.status(), 401, "{path}");
            assert_eq!(wrong.text().await.unwrap(), "Authentication failed for principal 'ops'");
            let ops = http.get(format!("{base}{path}")).basic_auth("ops", Some("o-secret")).send().await.unwrap();
            assert_ne!(ops.status(), 401, "{path} for a listed principal");
        }
        for open in ["/healthz", "/metrics"] {
            assert_eq!(http.get(format!("{base}{open}")).send().await.unwrap().status(), 200, "{open} stays open");
        }
        server.abort();
    }
}
