//! Kubernetes Events as the story of a job: derived from what changed
//! between the status before and after a reconcile, so they fire on
//! transitions only and a re-applied, unchanged job adds none. The diff is
//! pure; [`Publisher`] POSTs each one as an `events.k8s.io/v1` Event.

use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
pub use kube::runtime::events::{Event, EventType};

/// Publishes Events without kube's `Recorder`: the Recorder keeps every
/// Event it sent for minutes (to aggregate repeats into a series) and walks
/// that cache under a write lock on each publish. Ours fire on transitions
/// only, so they never repeat and need no series: one POST each.
pub struct Publisher {
    client: kube::Client,
    controller: String,
    instance: String,
    sent: AtomicU64,
}

impl Publisher {
    pub fn new(client: kube::Client, controller: &str, instance: &str) -> Self {
        Self { client, controller: controller.to_owned(), instance: instance.to_owned(), sent: AtomicU64::new(0) }
    }

    pub async fn publish(&self, event: &Event, regarding: &ObjectReference) -> Result<(), kube::Error> {
        let api: Api<K8sEvent> =
            Api::namespaced(self.client.clone(), regarding.namespace.as_deref().unwrap_or("default"));
        api.create(&PostParams::default(), &self.build(event, regarding, Timestamp::now())).await?;
        Ok(())
    }

    fn build(&self, event: &Event, regarding: &ObjectReference, now: Timestamp) -> K8sEvent {
        // Two Events of one job can share a nanosecond; the counter keeps their names apart.
        let n = self.sent.fetch_add(1, Ordering::Relaxed);
        K8sEvent {
            action: Some(event.action.clone()),
            reason: Some(event.reason.clone()),
            note: event.note.clone(),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            related: event.secondary.clone(),
            metadata: ObjectMeta {
                namespace: regarding.namespace.clone(),
                name: Some(format!(
                    "{}.{:x}.{n:x}",
                    regarding.name.as_deref().unwrap_or(&self.controller),
                    now.as_nanosecond()
                )),
                ..ObjectMeta::default()
            },
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(match event.type_ {
                EventType::Normal => "Normal".to_owned(),
                EventType::Warning => "Warning".to_owned(),
            }),
            ..K8sEvent::default()
        }
    }
}
use mpiswarm_crds::{ConditionType as C, MpiJobStatus, Phase};

/// The events one status change tells, in story order.
pub fn transitions(old: &MpiJobStatus, new: &MpiJobStatus) -> Vec<Event> {
    let mut out = Vec::new();
    let mut push = |type_: EventType, reason: &str, note: String| {
        out.push(Event {
            type_,
            reason: reason.to_owned(),
            note: Some(note),
            action: "Reconcile".to_owned(),
            secondary: None,
        });
    };
    let became_true = |t: C| new.is_true(t) && !old.is_true(t);
    let cond_msg = |t: C| new.condition(t).map(|c| c.message.clone()).unwrap_or_default();
    let cond_reason = |t: C| new.condition(t).map(|c| c.reason.clone()).unwrap_or_default();

    if new.condition(C::Created).is_some() && old.condition(C::Created).is_none() {
        push(EventType::Normal, "Created", "MpiJob created; waiting for resources".to_owned());
    }
    if became_true(C::Invalid) {
        push(EventType::Warning, "Invalid", cond_msg(C::Invalid));
    }
    if became_true(C::Suspended) {
        push(EventType::Normal, "Suspended", "runPolicy.suspend is true: tasks killed, resources released".to_owned());
    }
    if old.is_true(C::Suspended) && new.condition(C::Suspended).is_some_and(|c| c.status == "False") {
        push(EventType::Normal, "Resumed", "runPolicy.suspend is false: the job waits for resources again".to_owned());
    }
    // A new Restarting message means another restart, even if it was already True.
    let restart_changed = new.is_true(C::Restarting)
        && (became_true(C::Restarting) || old.restarts != new.restarts || old.gang_generation != new.gang_generation);
    if restart_changed {
        push(EventType::Warning, "Restarting", format!("{}: {}", cond_reason(C::Restarting), cond_msg(C::Restarting)));
    }
    if became_true(C::Unschedulable) {
        push(EventType::Warning, "Unschedulable", cond_msg(C::Unschedulable));
    }
    let phase_changed = new.phase != old.phase;
    let relaunched = old.gang_generation != new.gang_generation;
    match new.phase {
        Some(Phase::Scheduling) if phase_changed || relaunched => {
            let reason = new.placement.as_ref().map(|p| p.reason.clone()).unwrap_or_default();
            push(EventType::Normal, "Scheduled", reason);
        }
        Some(Phase::Launching) if phase_changed => {
            push(EventType::Normal, "Launching", new.message.clone().unwrap_or_default());
        }
        Some(Phase::Running) if phase_changed => {
            push(EventType::Normal, "Running", new.message.clone().unwrap_or_default());
        }
        Some(Phase::Succeeded) if phase_changed => {
            push(EventType::Normal, "Succeeded", cond_msg(C::Succeeded));
        }
        Some(Phase::Failed) if phase_changed => {
            push(EventType::Warning, "Failed", format!("{}: {}", cond_reason(C::Failed), cond_msg(C::Failed)));
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;
    use mpiswarm_crds::ConditionReason;

    fn st(phase: Phase) -> MpiJobStatus {
        let mut s = MpiJobStatus { phase: Some(phase), ..MpiJobStatus::default() };
        s.set_condition(C::Created, true, ConditionReason::Created, "", None, Time(Timestamp::UNIX_EPOCH));
        s
    }

    fn reasons(old: &MpiJobStatus, new: &MpiJobStatus) -> Vec<String> {
        transitions(old, new).into_iter().map(|e| e.reason).collect()
    }

    #[test]
    fn the_happy_path_tells_created_scheduled_launching_running_succeeded_once_each() {
        let steps = [Phase::Pending, Phase::Scheduling, Phase::Launching, Phase::Running, Phase::Succeeded];
        let mut told = reasons(&MpiJobStatus::default(), &st(Phase::Pending));
        for w in steps.windows(2) {
            told.extend(reasons(&st(w[0]), &st(w[1])));
        }
        assert_eq!(told, ["Created", "Scheduled", "Launching", "Running", "Succeeded"]);
        for p in steps {
            assert!(reasons(&st(p), &st(p)).is_empty(), "no transition, no event ({p:?})");
        }
    }

    #[test]
    fn failures_are_warnings_with_their_reason() {
        let mut failed = st(Phase::Failed);
        failed.set_condition(
            C::Failed,
            true,
            ConditionReason::DeadlineExceeded,
            "ran too long",
            None,
            Time(Timestamp::UNIX_EPOCH),
        );
        let evs = transitions(&st(Phase::Running), &failed);
        assert_eq!(evs.len(), 1);
        assert_eq!(evs[0].type_, EventType::Warning);
        assert_eq!(evs[0].note.as_deref(), Some("DeadlineExceeded: ran too long"));
    }
}

#[cfg(test)]
mod publisher_tests {
    use super::*;

    #[tokio::test]
    async fn an_event_object_names_the_job_the_reporter_and_is_unique_per_publish() {
        // A client that is never called: build() only shapes the object.
        let (service, _handle) =
            tower_test::mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
        let publisher = Publisher::new(kube::Client::new(service, "default"), "mpiswarm-controller", "replica-1");
        let regarding = ObjectReference {
            kind: Some("MpiJob".into()),
            name: Some("pi".into()),
            namespace: Some("team".into()),
            ..ObjectReference::default()
        };
        let event = Event {
            type_: EventType::Warning,
            reason: "Invalid".into(),
            note: Some("mpirunArgs names -np".into()),
            action: "Reconcile".into(),
            secondary: None,
        };
        let at = Timestamp::UNIX_EPOCH;
        let (a, b) = (publisher.build(&event, &regarding, at), publisher.build(&event, &regarding, at));
        assert_eq!(a.metadata.namespace.as_deref(), Some("team"));
        assert_eq!(a.type_.as_deref(), Some("Warning"));
        assert_eq!(a.reason.as_deref(), Some("Invalid"));
        assert_eq!(a.note.as_deref(), Some("mpirunArgs names -np"));
        assert_eq!(a.reporting_controller.as_deref(), Some("mpiswarm-controller"));
        assert_eq!(a.reporting_instance.as_deref(), Some("replica-1"));
        assert_eq!(a.regarding.as_ref(), Some(&regarding));
        assert!(a.series.is_none());
        assert!(a.metadata.name.as_deref().is_some_and(|n| n.starts_with("pi.")), "{:?}", a.metadata.name);
        assert_ne!(a.metadata.name, b.metadata.name, "two Events in one nanosecond got one name");
    }
}
