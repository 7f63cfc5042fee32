//! An in-memory [`Swarm`] for unit tests of the agent's logic (launch,
//! rollback, collection, lifecycle): it records objects by kind and name and
//! can be told to refuse one service. Test-only; never a stand-in for Docker
//! in anything but pure-logic tests.

use bollard::models::{ConfigSpec, NetworkCreateRequest, SecretSpec, Service, ServiceSpec, Task};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::existing::{ExistingNetwork, VolumeLookup};
use crate::swarm::{LogLine, ObjectKind, Swarm, SwarmError};
use futures::StreamExt;
use futures::stream::BoxStream;

/// An in-memory swarm that records objects and can be told to refuse a
/// service by name.
#[derive(Default)]
pub(crate) struct FakeSwarm {
    pub(crate) objects: Mutex<BTreeMap<(String, String), ServiceSpec>>,
    pub(crate) refuse_service: Option<String>,
    /// What `logs` answers for every service (followed or not).
    pub(crate) log_lines: Vec<LogLine>,
    /// Holds every service creation until released.
    pub(crate) hold: Option<Arc<Hold>>,
    /// Networks as listed, by name: those made here and those someone
    /// else made (put there by a test).
    pub(crate) networks: Mutex<BTreeMap<String, ExistingNetwork>>,
    /// Named volumes on the node, by name (absent unless listed).
    pub(crate) volumes: BTreeMap<String, VolumeLookup>,
    /// The Swarm tasks `tasks` lists (put there by a test; a restart adds one).
    pub(crate) swarm_tasks: Mutex<Vec<Task>>,
    /// The services restarted, in order.
    pub(crate) restarted: Mutex<Vec<String>>,
    /// Refuses every restart.
    pub(crate) refuse_restart: bool,
    /// How many more times `service_left` says a removed service's
    /// containers are still there (Swarm stopping them).
    pub(crate) lingering: Mutex<u32>,
    /// Makes `node_status` call the node down with this message (ready otherwise).
    pub(crate) node_down: Mutex<Option<String>>,
    /// What `node_engine_gone` answers (the node's engine refusing connections).
    pub(crate) engine_gone: Mutex<Option<String>>,
}

/// A service creation held at its start: `entered` is notified when one
/// begins, and it goes on once `release` is notified.
#[derive(Default)]
pub(crate) struct Hold {
    pub(crate) entered: tokio::sync::Notify,
    pub(crate) release: tokio::sync::Notify,
}

impl FakeSwarm {
    fn put(&self, kind: &str, name: &str, spec: ServiceSpec) -> String {
        self.objects.lock().unwrap().insert((kind.into(), name.into()), spec);
        format!("{kind}-{name}")
    }
    pub(crate) fn names(&self) -> Vec<(String, String)> {
        self.objects.lock().unwrap().keys().cloned().collect()
    }
}

/// A Swarm task of the fake's service `service` (id `service-NAME`), with
/// id `NAME.INDEX`, at version `index`, in `state` with Docker's `err`.
pub(crate) fn swarm_task(service: &str, index: u64, state: bollard::models::TaskState, err: &str) -> Task {
    use bollard::models::{ObjectVersion, TaskStatus};
    Task {
        id: Some(format!("{service}.{index}")),
        service_id: Some(format!("service-{service}")),
        version: Some(ObjectVersion { index: Some(index) }),
        status: Some(TaskStatus {
            state: Some(state),
            err: (!err.is_empty()).then(|| err.to_owned()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

impl Swarm for FakeSwarm {
    async fn network(&self, name: &str) -> Result<Option<ExistingNetwork>, SwarmError> {
        Ok(self.networks.lock().unwrap().get(name).cloned())
    }
    async fn create_network(&self, r: NetworkCreateRequest) -> Result<bool, SwarmError> {
        let existing = ExistingNetwork {
            name: r.name.clone(),
            driver: r.driver.clone().unwrap_or_default(),
            scope: "swarm".into(),
            labels: r.labels.clone().unwrap_or_default(),
        };
        self.networks.lock().unwrap().insert(r.name.clone(), existing);
        self.put("network", &r.name, ServiceSpec::default());
        Ok(true)
    }
    async fn volume(&self, name: &str) -> Result<VolumeLookup, SwarmError> {
        Ok(self.volumes.get(name).cloned().unwrap_or(VolumeLookup::Absent))
    }
    async fn ensure_secret(&self, s: SecretSpec) -> Result<String, SwarmError> {
        Ok(self.put("secret", &s.name.unwrap(), ServiceSpec::default()))
    }
    async fn ensure_config(&self, s: ConfigSpec) -> Result<String, SwarmError> {
        Ok(self.put("config", &s.name.unwrap(), ServiceSpec::default()))
    }
    async fn create_service(&self, spec: ServiceSpec) -> Result<String, SwarmError> {
        let name = spec.name.clone().unwrap();
        if let Some(hold) = &self.hold {
            hold.entered.notify_one();
            hold.release.notified().await;
        }
        if self.refuse_service.as_deref() == Some(name.as_str()) {
            let source = bollard::errors::Error::DockerResponseServerError {
                status_code: 500,
                message: "refused by the test".into(),
            };
            return Err(SwarmError::Docker { operation: format!("create service {name}"), source });
        }
        Ok(self.put("service", &name, spec))
    }
    async fn remove_service(&self, name: &str) -> Result<(), SwarmError> {
        self.objects.lock().unwrap().remove(&("service".into(), name.into()));
        Ok(())
    }
    async fn restart_service(&self, name: &str) -> Result<(), SwarmError> {
        if self.refuse_restart {
            let source =
                bollard::errors::Error::DockerResponseServerError { status_code: 500, message: "refused".into() };
            return Err(SwarmError::Docker { operation: format!("update service {name}"), source });
        }
        self.restarted.lock().unwrap().push(name.to_owned());
        let mut tasks = self.swarm_tasks.lock().unwrap();
        let index = tasks.iter().filter_map(|t| t.version.as_ref()?.index).max().unwrap_or(0) + 1;
        tasks.push(swarm_task(name, index, bollard::models::TaskState::NEW, ""));
        Ok(())
    }
    async fn services(&self, _: &str) -> Result<Vec<Service>, SwarmError> {
        let objects = self.objects.lock().unwrap();
        Ok(objects
            .iter()
            .filter(|((k, _), _)| k == "service")
            .map(|((k, name), spec)| Service {
                id: Some(format!("{k}-{name}")),
                spec: Some(spec.clone()),
                ..Default::default()
            })
            .collect())
    }
    async fn node_status(&self, _: &str) -> Result<(Option<bollard::models::NodeState>, Option<String>), SwarmError> {
        Ok(match self.node_down.lock().unwrap().clone() {
            Some(message) => (Some(bollard::models::NodeState::DOWN), Some(message)),
            None => (Some(bollard::models::NodeState::READY), None),
        })
    }
    async fn node_engine_gone(&self) -> Option<String> {
        self.engine_gone.lock().unwrap().clone()
    }
    async fn tasks(&self, _: &str) -> Result<Vec<Task>, SwarmError> {
        Ok(self.swarm_tasks.lock().unwrap().clone())
    }
    async fn service_left(&self, _: &str, _: &str, _: Option<&str>) -> Result<bool, SwarmError> {
        let mut lingering = self.lingering.lock().unwrap();
        let left = *lingering > 0;
        *lingering = lingering.saturating_sub(1);
        Ok(left)
    }
    async fn owned(&self, kind: ObjectKind, _: &str) -> Result<Vec<crate::swarm::Owned>, SwarmError> {
        let k = match kind {
            ObjectKind::Network => "network",
            ObjectKind::Secret => "secret",
            ObjectKind::Config => "config",
        };
        Ok(self
            .names()
            .into_iter()
            .filter(|(kk, _)| kk == k)
            .map(|(kk, name)| crate::swarm::Owned { id: format!("{kk}-{name}"), name })
            .collect())
    }
    async fn remove(&self, _: ObjectKind, id: &str) -> Result<(), SwarmError> {
        self.objects.lock().unwrap().retain(|(k, n), _| format!("{k}-{n}") != id);
        if let Some(name) = id.strip_prefix("network-") {
            self.networks.lock().unwrap().remove(name);
        }
        Ok(())
    }
    async fn logs_tail(&self, _: &str, _: usize) -> Result<String, SwarmError> {
        Ok(String::new())
    }
    fn logs(&self, _: &str, _: bool, since: i32) -> BoxStream<'static, Result<LogLine, SwarmError>> {
        let since = i64::from(since) * 1_000_000_000;
        let lines: Vec<_> = self.log_lines.iter().filter(|l| l.nanos >= since).cloned().map(Ok).collect();
        futures::stream::iter(lines).boxed()
    }
}
