//! Prometheus metrics at `/metrics`, named like kube-apiserver's so existing
//! dashboards read them: requests by verb, resource and code, open watches,
//! and the current resourceVersion.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub code: u16,
}

pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    pub watches: Gauge,
    pub resource_version: Gauge<u64, AtomicU64>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let watches = Gauge::default();
        let resource_version = Gauge::<u64, AtomicU64>::default();
        registry.register("apiserver_request", "Requests by verb, group, resource and HTTP code", requests.clone());
        registry.register("apiserver_longrunning_requests", "Open watch streams", watches.clone());
        registry.register(
            "apiserver_storage_resource_version",
            "The current global resourceVersion",
            resource_version.clone(),
        );
        Self { registry, requests, watches, resource_version }
    }
}

impl Metrics {
    pub fn request(&self, verb: &str, group: &str, resource: &str, code: u16) {
        self.requests
            .get_or_create(&RequestLabels { verb: verb.into(), group: group.into(), resource: resource.into(), code })
            .inc();
    }

    /// What `/metrics` encodes (`mpiswarm_health::encode`).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}

/// Decrements the open-watch gauge when a watch ends, however it ends.
pub struct WatchGuard<'a>(&'a Gauge);

impl<'a> WatchGuard<'a> {
    pub fn new(g: &'a Gauge) -> Self {
        g.inc();
        Self(g)
    }
}

impl Drop for WatchGuard<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}
