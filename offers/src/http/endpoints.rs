//! Operator endpoints: `/version`, `/health` (`/healthz`, `/readyz`),
//! `/master/state`, `/metrics/snapshot` and Prometheus `/metrics` (the
//! probes and `/metrics` served by [`mpiswarm_health`]), which only read the
//! master, `GET /master/redirect` (which replica leads, for any
//! authenticated caller), and `POST /master/teardown`, Mesos' operator
//! teardown.

use super::{Caller, Shared, durable};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Form, Json};
use mpiswarm_health::{Component, Probe};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use std::sync::Arc;

pub async fn version() -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "version": crate::master::MESOS_VERSION,
        "build_date": "",
        "build_time": 0,
        "build_user": "",
        "git_sha": "",
        "git_tag": crate::master::MESOS_VERSION,
        "mpiswarm_version": env!("CARGO_PKG_VERSION"),
    }))
}

/// What `/healthz`, `/readyz` and `/metrics` read ([`mpiswarm_health`]).
#[derive(Debug)]
pub struct Operator {
    shared: Arc<Shared>,
    /// Built once; its one collector reads the master at each scrape.
    registry: Registry,
}

impl Operator {
    pub fn new(shared: Arc<Shared>) -> Arc<Self> {
        let mut registry = Registry::with_prefix("mpiswarm_offers");
        registry.register_collector(Box::new(Snapshot(Arc::clone(&shared))));
        Arc::new(Self { shared, registry })
    }
}

impl Component for Operator {
    fn live(&self) -> Probe {
        health(&self.shared)
    }

    /// Ready to serve frameworks: right after the registry was read (as in
    /// Mesos, agents still expected back do not hold frameworks out), unless
    /// registry writes fail.
    fn ready(&self) -> Probe {
        match self.shared.master().registry_progress().failing() {
            None => Probe::pass("ready"),
            Some(error) => Probe::fail(format!("registry write failed: {error}")),
        }
    }

    fn registry(&self) -> &Registry {
        &self.registry
    }
}

/// 200 while the server works; 503 while registry writes fail, with the
/// error, so an operator or supervisor sees what a log line alone would hide.
fn health(shared: &Shared) -> Probe {
    match shared.master().registry_progress().failing() {
        None => Probe::pass(""),
        Some(error) => Probe::fail(format!(
            "registry write failed: {error}; ids registered since the last good write would not survive a restart"
        )),
    }
}

/// `/health`, Mesos' name for `/healthz`.
pub async fn mesos_health(State(shared): State<Arc<Shared>>) -> Probe {
    health(&shared)
}

pub async fn state(State(shared): State<Arc<Shared>>) -> Json<serde_json::Value> {
    let uptime = shared.now().as_secs_f64();
    let mut state = shared.master().state_json(uptime);
    // As Mesos: the leading master's pid (absent while none is known).
    if let Some(leader) = shared.known_leader() {
        state["leader"] = serde_json::Value::String(format!("master@{leader}"));
    }
    Json(state)
}

/// `GET /master/redirect` (and `/redirect`), as Mesos answers it: 307 to the
/// leading replica (`//HOST:PORT`), from the leader to itself; 503 while
/// no leader is known, and from a leader past its fence (clients that poll
/// this to find the leader must not be sent back to a silent one).
pub async fn redirect(State(shared): State<Arc<Shared>>) -> Response {
    match shared.known_leader() {
        Some(leader) => super::redirect(&format!("//{leader}"), format!("the leading offer layer is {leader}")),
        None => super::text(StatusCode::SERVICE_UNAVAILABLE, "no leading offer layer is known yet"),
    }
}

/// The form Mesos' `/master/teardown` takes: `frameworkId=ID`.
#[derive(Debug, serde::Deserialize)]
pub struct TeardownForm {
    #[serde(rename = "frameworkId")]
    framework_id: String,
}

/// `POST /master/teardown` (`frameworkId=ID`): removes the framework and
/// kills its tasks, if the ACL list `teardown_frameworks` allows the caller.
pub async fn teardown(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Form(form): Form<TeardownForm>,
) -> Response {
    let id = form.framework_id;
    let (result, ticket) = shared.call(|m, now| m.teardown_framework(&id, caller.principal(), now));
    match result {
        Ok(()) => match durable(ticket, &format!("the teardown of framework {id}")).await {
            Ok(()) => StatusCode::OK.into_response(),
            Err(e) => e.into_response(),
        },
        Err(e) => e.into_response(),
    }
}

/// `GET /quota`: the roles' quota limits and consumption.
pub async fn quota(State(shared): State<Arc<Shared>>) -> Json<serde_json::Value> {
    Json(shared.master().quota_json())
}

pub async fn metrics_snapshot(State(shared): State<Arc<Shared>>) -> Json<crate::master::MetricsSnapshot> {
    let uptime = shared.now().as_secs_f64();
    Json(shared.master().metrics_snapshot(uptime))
}

/// Snapshot keys that only ever grow; they are exported as counters.
fn is_counter(key: &str) -> bool {
    key.starts_with("allocator/allocation_run")
        || key.starts_with("master/offers_")
        || key.ends_with("_removed")
        || key.ends_with("_launched")
        || key.starts_with("master/status_updates_")
        || key == "master/invalid_calls"
        || key == "allocator/launch_backlog_holds"
        || key == "master/leader_changes"
        || key.starts_with("registrar/registry_write")
}

/// The snapshot as Prometheus metrics (`mpiswarm_offers_master_tasks_running`
/// ...), read from the master at each scrape.
#[derive(Debug)]
struct Snapshot(Arc<Shared>);

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let uptime = self.0.now().as_secs_f64();
        let snapshot = self.0.master().metrics_snapshot(uptime);
        for (key, value) in snapshot {
            let name = key.replace('/', "_");
            // As `Registry::register` writes help texts. A role may hold
            // characters no metric name may ('-', '.'): they become '_'.
            let help = format!("Mesos metric {key}.");
            let name: String =
                name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == ':' { c } else { '_' }).collect();
            if is_counter(&key) {
                let counter = ConstCounter::new(value);
                let name = name.trim_end_matches("_total");
                counter.encode(encoder.encode_descriptor(name, &help, None, counter.metric_type())?)?;
            } else {
                let gauge = ConstGauge::new(value);
                gauge.encode(encoder.encode_descriptor(&name, &help, None, gauge.metric_type())?)?;
            }
        }
        Ok(())
    }
}
