//! `/healthz` (the process serves), `/readyz` (this replica leads and is
//! subscribed to the master) and `/metrics` (Prometheus text).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::context::Context;
use crate::metrics::PhaseLabel;

pub async fn serve(
    listener: TcpListener,
    ctx: Arc<Context>,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(ctx);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _closed = shutdown.wait_for(|stop| *stop).await;
        })
        .await
}

async fn readyz(State(ctx): State<Arc<Context>>) -> impl IntoResponse {
    if ctx.subscribed.load(Ordering::SeqCst) {
        (StatusCode::OK, "ready: leading and subscribed to the master\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready: not leading, or not subscribed to the master\n")
    }
}

async fn metrics(State(ctx): State<Arc<Context>>) -> impl IntoResponse {
    if let Some(store) = ctx.store.get() {
        ctx.metrics.jobs.clear();
        for job in store.state() {
            let phase = job.status.as_ref().and_then(|s| s.phase).unwrap_or_default();
            ctx.metrics.jobs.get_or_create(&PhaseLabel { phase: format!("{phase:?}") }).inc();
        }
    }
    ([("content-type", "text/plain; version=0.0.4")], ctx.metrics.encode())
}
