//! The one home of the operator endpoints every long-running mpiswarm
//! component serves: `/healthz` (the process serves), `/readyz` (the
//! component can do its work now) and `/metrics` (its prometheus-client
//! registry as OpenMetrics text, under the one content type [`CONTENT_TYPE`]).
//!
//! A component implements [`Component`]: its readiness, the registry it
//! built once when it started (a scrape only encodes it), and, for values
//! that are read rather than counted (tasks by state), a [`Component::refresh`]
//! that sets them just before each scrape.
//!
//! This crate must never decide readiness, authenticate a caller or build a
//! registry: readiness and metrics are the component's, and so is
//! authentication. A component that checks who scrapes serves [`probes`] and
//! [`metrics`] separately and puts its check in front of the second. It knows
//! nothing of MpiJobs, Mesos or Docker.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicBool, Ordering};
//! use mpiswarm_health::{Component, Probe};
//! use prometheus_client::metrics::counter::Counter;
//! use prometheus_client::registry::Registry;
//!
//! struct Worker { subscribed: AtomicBool, registry: Registry }
//!
//! impl Component for Worker {
//!     fn ready(&self) -> Probe {
//!         if self.subscribed.load(Ordering::Relaxed) { Probe::pass("ready") } else { Probe::fail("not subscribed") }
//!     }
//!     fn registry(&self) -> &Registry {
//!         &self.registry
//!     }
//! }
//!
//! let jobs = Counter::<u64>::default();
//! let mut registry = Registry::with_prefix("worker");
//! registry.register("jobs", "Jobs done", jobs.clone());
//! let worker = Arc::new(Worker { subscribed: AtomicBool::new(false), registry });
//! let app: axum::Router = mpiswarm_health::router(worker);
//! jobs.inc(); // the next scrape shows worker_jobs_total 1
//! ```

use std::borrow::Cow;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::registry::Registry;

/// The content type of `/metrics`: the OpenMetrics text that
/// `prometheus_client::encoding::text` writes (Prometheus reads it).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A probe's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// 200 with this text.
    Pass(Cow<'static, str>),
    /// 503 with this text, which says what is not ready or not well, so that
    /// whoever reads the probe knows what to look at.
    Fail(Cow<'static, str>),
}

impl Probe {
    pub fn pass(text: impl Into<Cow<'static, str>>) -> Self {
        Self::Pass(text.into())
    }

    pub fn fail(text: impl Into<Cow<'static, str>>) -> Self {
        Self::Fail(text.into())
    }
}

impl IntoResponse for Probe {
    fn into_response(self) -> Response {
        match self {
            Self::Pass(text) => (StatusCode::OK, text).into_response(),
            Self::Fail(text) => (StatusCode::SERVICE_UNAVAILABLE, text).into_response(),
        }
    }
}

/// What a component tells its endpoints.
pub trait Component: Send + Sync + 'static {
    /// `/healthz`: by default the process serves, so it is live.
    fn live(&self) -> Probe {
        Probe::pass("ok")
    }

    /// `/readyz`: whether the component can do its work right now.
    fn ready(&self) -> Probe;

    /// What `/metrics` encodes: registered once, when the component started.
    fn registry(&self) -> &Registry;

    /// Sets the values that are read rather than counted, just before a
    /// scrape encodes the registry. Never called by two scrapes at once.
    fn refresh(&self) {}
}

/// `/healthz`, `/readyz` and `/metrics`, none of them checking the caller.
pub fn router<S, C>(component: Arc<C>) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    C: Component,
{
    probes(Arc::clone(&component)).merge(metrics(component))
}

/// `/healthz` and `/readyz` alone.
pub fn probes<S, C>(component: Arc<C>) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    C: Component,
{
    Router::new()
        .route("/healthz", get(|State(c): State<Arc<C>>| async move { c.live() }))
        .route("/readyz", get(|State(c): State<Arc<C>>| async move { c.ready() }))
        .with_state(component)
}

/// `/metrics` alone, for a component that checks who scrapes it.
pub fn metrics<S, C>(component: Arc<C>) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    C: Component,
{
    let scrapes = Arc::new(Scrapes { component, one_at_a_time: Mutex::new(()) });
    Router::new()
        .route("/metrics", get(|State(s): State<Arc<Scrapes<C>>>| async move { s.scrape() }))
        .with_state(scrapes)
}

struct Scrapes<C> {
    component: Arc<C>,
    /// Held over one refresh and its encoding (no await inside): a second
    /// scrape's refresh would otherwise clear a gauge family while the first
    /// one encodes it.
    one_at_a_time: Mutex<()>,
}

impl<C: Component> Scrapes<C> {
    fn scrape(&self) -> Response {
        // The guard protects no data, so a panic in another scrape's refresh
        // leaves nothing inconsistent behind it.
        let _one = self.one_at_a_time.lock().unwrap_or_else(PoisonError::into_inner);
        self.component.refresh();
        encode(self.component.registry())
    }
}

/// `registry` as the `/metrics` answer: OpenMetrics text under
/// [`CONTENT_TYPE`]. For a server that routes `/metrics` itself (behind its
/// own authentication); [`metrics`] uses it too.
pub fn encode(registry: &Registry) -> Response {
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, registry) {
        Ok(()) => ([(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE))], text).into_response(),
        Err(std::fmt::Error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "cannot encode the metrics as OpenMetrics text: one of this component's metrics failed to write itself; \
             this is a bug, report it with the component's log",
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::gauge::Gauge;
    use tower::ServiceExt;

    /// A component with one counted value, one read value and a switch for readiness.
    struct Fixture {
        ready: AtomicBool,
        registry: Registry,
        requests: Counter,
        queue: Gauge,
        /// What `queue` is read from.
        queued: AtomicI64,
        refreshes: AtomicU64,
    }

    impl Fixture {
        fn new() -> Arc<Self> {
            let requests = Counter::default();
            let queue = Gauge::default();
            let mut registry = Registry::with_prefix("fixture");
            registry.register("requests", "Requests served", requests.clone());
            registry.register("queue", "Requests waiting", queue.clone());
            Arc::new(Self {
                ready: AtomicBool::new(false),
                registry,
                requests,
                queue,
                queued: AtomicI64::new(0),
                refreshes: AtomicU64::new(0),
            })
        }
    }

    impl Component for Fixture {
        fn ready(&self) -> Probe {
            if self.ready.load(Ordering::SeqCst) { Probe::pass("ready") } else { Probe::fail("not subscribed yet") }
        }

        fn registry(&self) -> &Registry {
            &self.registry
        }

        fn refresh(&self) {
            self.refreshes.fetch_add(1, Ordering::SeqCst);
            self.queue.set(self.queued.load(Ordering::SeqCst));
        }
    }

    async fn get(app: &Router, path: &str) -> (StatusCode, Option<String>, String) {
        let response = app.clone().oneshot(Request::get(path).body(Body::empty()).unwrap()).await.unwrap();
        let status = response.status();
        let content_type = response.headers().get(header::CONTENT_TYPE).map(|v| v.to_str().unwrap().to_owned());
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, content_type, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn healthz_is_ok_while_the_process_serves_and_readyz_follows_the_component() {
        let fixture = Fixture::new();
        let app: Router = router(Arc::clone(&fixture));
        assert_eq!(get(&app, "/healthz").await.0, StatusCode::OK);
        assert_eq!(get(&app, "/healthz").await.2, "ok");
        let (status, _, body) = get(&app, "/readyz").await;
        assert_eq!((status, body.as_str()), (StatusCode::SERVICE_UNAVAILABLE, "not subscribed yet"));
        fixture.ready.store(true, Ordering::SeqCst);
        let (status, _, body) = get(&app, "/readyz").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ready"));
    }

    #[tokio::test]
    async fn metrics_are_openmetrics_text_of_the_registry_built_at_start_with_read_values_refreshed_per_scrape() {
        let fixture = Fixture::new();
        let app: Router = router(Arc::clone(&fixture));
        fixture.requests.inc();
        fixture.queued.store(3, Ordering::SeqCst);
        let (status, content_type, body) = get(&app, "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(content_type.as_deref(), Some(CONTENT_TYPE));
        assert!(body.contains("# TYPE fixture_requests counter\nfixture_requests_total 1\n"), "{body}");
        assert!(body.contains("fixture_queue 3\n"), "{body}");
        assert!(body.ends_with("# EOF\n"), "{body}");

        fixture.requests.inc();
        fixture.queued.store(0, Ordering::SeqCst);
        let body = get(&app, "/metrics").await.2;
        assert!(body.contains("fixture_requests_total 2\n"), "{body}");
        assert!(body.contains("fixture_queue 0\n"), "{body}");
        assert_eq!(body.matches("# TYPE fixture_requests counter").count(), 1, "registered once: {body}");
        assert_eq!(fixture.refreshes.load(Ordering::SeqCst), 2, "one refresh per scrape");
    }

    #[tokio::test]
    async fn probes_and_metrics_can_be_served_apart_so_a_component_can_authenticate_metrics_alone() {
        let fixture = Fixture::new();
        let only_probes: Router = probes(Arc::clone(&fixture));
        assert_eq!(get(&only_probes, "/readyz").await.0, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(get(&only_probes, "/metrics").await.0, StatusCode::NOT_FOUND);
        let only_metrics: Router = metrics(fixture);
        assert_eq!(get(&only_metrics, "/metrics").await.0, StatusCode::OK);
        assert_eq!(get(&only_metrics, "/healthz").await.0, StatusCode::NOT_FOUND);
    }
}
