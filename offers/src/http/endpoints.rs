//! Operator endpoints: `/version`, `/health` (`/healthz`, `/readyz`),
//! `/master/state`, `/metrics/snapshot` and Prometheus `/metrics`. They only
//! read the master.

use super::Shared;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

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

/// 200 while the server works; 503 while registry writes fail, with the
/// error, so an operator or supervisor sees what a log line alone would hide.
pub async fn health(State(shared): State<Arc<Shared>>) -> Response {
    match shared.master().registry_progress().failing() {
        None => StatusCode::OK.into_response(),
        Some(error) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "registry write failed: {error}; ids registered since the last good write would not survive a restart"
            ),
        )
            .into_response(),
    }
}

/// Ready to serve frameworks: right after the registry was read (as in
/// Mesos, agents still expected back do not hold frameworks out), unless
/// registry writes fail.
pub async fn ready(State(shared): State<Arc<Shared>>) -> Response {
    match shared.master().registry_progress().failing() {
        None => (StatusCode::OK, "ready").into_response(),
        Some(error) => (StatusCode::SERVICE_UNAVAILABLE, format!("registry write failed: {error}")).into_response(),
    }
}

pub async fn state(State(shared): State<Arc<Shared>>) -> Json<serde_json::Value> {
    let uptime = shared.now().as_secs_f64();
    Json(shared.master().state_json(uptime))
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
        || key.starts_with("registrar/registry_write")
}

/// The snapshot in Prometheus text format (`mpiswarm_offers_master_tasks_running` ...).
pub async fn prometheus(State(shared): State<Arc<Shared>>) -> Response {
    let uptime = shared.now().as_secs_f64();
    let snapshot = shared.master().metrics_snapshot(uptime);
    let mut registry = Registry::with_prefix("mpiswarm_offers");
    for (key, value) in snapshot {
        let name = key.replace('/', "_");
        let help = format!("Mesos metric {key}");
        if is_counter(&key) {
            let c: Counter<f64, AtomicU64> = Counter::default();
            c.inc_by(value);
            registry.register(name.trim_end_matches("_total"), help, c);
        } else {
            let g: Gauge<f64, AtomicU64> = Gauge::default();
            g.set(value);
            registry.register(name, help, g);
        }
    }
    let mut out = String::new();
    if let Err(e) = encode(&mut out, &registry) {
        return (StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode metrics: {e}")).into_response();
    }
    let mut resp = out.into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    resp
}
