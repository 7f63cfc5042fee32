//! The controller's Prometheus metrics: jobs by phase, time from creation to
//! Running, reconcile duration and errors by type, and the offer traffic.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabel {
    pub phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabel {
    pub error: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: String,
}

pub struct Metrics {
    /// Registered once, here; `/metrics` encodes it ([`crate::http`]).
    registry: Registry,
    pub jobs: Family<PhaseLabel, Gauge>,
    pub creation_to_running: Histogram,
    pub reconcile_seconds: Histogram,
    pub reconcile_errors: Family<ErrorLabel, Counter>,
    pub offers_received: Counter,
    pub offers_accepted: Counter,
    pub offers_declined: Counter,
    pub gangs_launched: Counter,
    pub subscriptions: Counter,
    /// Reads of the log endpoint by outcome (`ok`, `unauthenticated`, `forbidden`, ...).
    pub log_reads: Family<OutcomeLabel, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut m = Self {
            registry: Registry::with_prefix("mpiswarm_controller"),
            jobs: Family::default(),
            creation_to_running: Histogram::new(exponential_buckets(0.25, 2.0, 14)),
            reconcile_seconds: Histogram::new(exponential_buckets(0.0005, 2.0, 16)),
            reconcile_errors: Family::default(),
            offers_received: Counter::default(),
            offers_accepted: Counter::default(),
            offers_declined: Counter::default(),
            gangs_launched: Counter::default(),
            subscriptions: Counter::default(),
            log_reads: Family::default(),
        };
        let r = &mut m.registry;
        r.register("jobs", "MpiJobs by phase", m.jobs.clone());
        r.register(
            "creation_to_running_seconds",
            "Seconds from an MpiJob's creation to its gang running",
            m.creation_to_running.clone(),
        );
        r.register("reconcile_duration_seconds", "Duration of one reconcile", m.reconcile_seconds.clone());
        r.register("reconcile_errors", "Reconcile errors by type", m.reconcile_errors.clone());
        r.register("offers_received", "Mesos offers received", m.offers_received.clone());
        r.register("offers_accepted", "Mesos offers accepted", m.offers_accepted.clone());
        r.register("offers_declined", "Mesos offers declined", m.offers_declined.clone());
        r.register("gangs_launched", "Gangs launched (all their ACCEPTs sent)", m.gangs_launched.clone());
        r.register("subscriptions", "Successful SUBSCRIBEs to the master", m.subscriptions.clone());
        r.register("log_reads", "Reads of the tenants' log endpoint by outcome", m.log_reads.clone());
        m
    }
}

impl Metrics {
    /// What `/metrics` encodes.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    pub fn reconcile_error(&self, label: &str) {
        self.reconcile_errors.get_or_create(&ErrorLabel { error: label.to_owned() }).inc();
    }
}
