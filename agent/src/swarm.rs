//! The narrow slice of the Docker Engine API the agent uses, as a trait so
//! the launch and cleanup logic can be unit-tested against a fake, and its
//! one real implementation over bollard. Every method is idempotent: "create"
//! of something that exists and "remove" of something gone both succeed,
//! because after a crash the agent replays its intentions.

use std::collections::HashMap;
use std::future::Future;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::models::{ConfigSpec, NetworkCreateRequest, NodeState, SecretSpec, Service, ServiceSpec, Task};
use bollard::query_parameters::{
    ListConfigsOptions, ListContainersOptions, ListNetworksOptions, ListSecretsOptions, ListServicesOptions,
    ListTasksOptions, LogsOptions, UpdateServiceOptionsBuilder,
};
use futures::StreamExt;
use futures::stream::BoxStream;

use crate::existing::{ExistingNetwork, ExistingVolume, VolumeLookup};
use crate::labels;
use crate::sandbox::Stream;

#[derive(Debug, thiserror::Error)]
pub enum SwarmError {
    #[error("docker {operation} failed: {source}")]
    Docker {
        operation: String,
        #[source]
        source: bollard::errors::Error,
    },
    #[error(
        "network '{name}' could not be created (Docker says one of that name exists) yet is not listed; launch again"
    )]
    NetworkVanished { name: String },
    #[error("service {service} is at version {version}, past what bollard's update call can name (32 bits)")]
    VersionOutOfRange { service: String, version: u64 },
}

impl SwarmError {
    /// Whether Swarm refused a service because a network it names does not
    /// exist (swarmkit: "network X not found").
    pub fn is_missing_network(&self) -> bool {
        match self {
            Self::Docker { source: bollard::errors::Error::DockerResponseServerError { message, .. }, .. } => {
                message.contains("network") && message.contains("not found")
            }
            _ => false,
        }
    }

    fn docker(operation: impl Into<String>) -> impl FnOnce(bollard::errors::Error) -> Self {
        let operation = operation.into();
        move |source| Self::Docker { operation, source }
    }
}

/// The kinds of swarm objects a service references and the agent owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    Network,
    Secret,
    Config,
}

/// An object the agent owns, by id and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owned {
    pub id: String,
    pub name: String,
}

pub trait Swarm: Send + Sync {
    /// The network named exactly `name`, as the manager lists it.
    fn network(&self, name: &str) -> impl Future<Output = Result<Option<ExistingNetwork>, SwarmError>> + Send;
    /// Creates the network; `false` if one of that name appeared meanwhile
    /// (made by a sibling launch or another node's agent).
    fn create_network(&self, request: NetworkCreateRequest) -> impl Future<Output = Result<bool, SwarmError>> + Send;
    /// The named volume `name` on the served node, as that node's engine
    /// reports it ([`VolumeLookup::Unseen`] without one).
    fn volume(&self, name: &str) -> impl Future<Output = Result<VolumeLookup, SwarmError>> + Send;
    /// Creates the secret unless one of that name exists; returns its id.
    fn ensure_secret(&self, spec: SecretSpec) -> impl Future<Output = Result<String, SwarmError>> + Send;
    /// Creates the config unless one of that name exists; returns its id.
    fn ensure_config(&self, spec: ConfigSpec) -> impl Future<Output = Result<String, SwarmError>> + Send;
    /// Creates the service unless one of that name exists; returns its id.
    fn create_service(&self, spec: ServiceSpec) -> impl Future<Output = Result<String, SwarmError>> + Send;
    fn remove_service(&self, name: &str) -> impl Future<Output = Result<(), SwarmError>> + Send;
    /// Starts the service's task anew: a forced update (`docker service
    /// update --force`), after which Swarm replaces its task with a new one.
    fn restart_service(&self, name: &str) -> impl Future<Output = Result<(), SwarmError>> + Send;
    /// The services labelled as this agent's.
    fn services(&self, agent_id: &str) -> impl Future<Output = Result<Vec<Service>, SwarmError>> + Send;
    /// The swarm status of node `node_id` as the manager sees it: its
    /// state and the manager's message (e.g. "heartbeat failure").
    fn node_status(
        &self,
        node_id: &str,
    ) -> impl Future<Output = Result<(Option<NodeState>, Option<String>), SwarmError>> + Send;
    /// Why the served node is gone, when its own engine refuses
    /// connections (its container or machine stopped: nothing listens on
    /// its socket or port any more); `None` when it answers, when it is
    /// only slow (no answer within [`ENGINE_PING_DEADLINE`]: a loaded
    /// engine is not a gone one), or when the agent has no engine of the
    /// node's own.
    fn node_engine_gone(&self) -> impl Future<Output = Option<String>> + Send;
    /// Swarm tasks on `node_id`, all services.
    fn tasks(&self, node_id: &str) -> impl Future<Output = Result<Vec<Task>, SwarmError>> + Send;
    /// Whether anything of the service `name` (with id `id`, when known) is
    /// left on `node_id`: a Swarm task (Swarm deletes a removed service's
    /// tasks once their containers stopped; listed by service id, so only
    /// with `id`) or, on the engine the agent talks to, a container in any
    /// state (Swarm removes those after it deleted their tasks; another
    /// node's engine lists none of them).
    fn service_left(
        &self,
        node_id: &str,
        name: &str,
        id: Option<&str>,
    ) -> impl Future<Output = Result<bool, SwarmError>> + Send;
    /// Objects of `kind` labelled as this agent's.
    fn owned(&self, kind: ObjectKind, agent_id: &str) -> impl Future<Output = Result<Vec<Owned>, SwarmError>> + Send;
    fn remove(&self, kind: ObjectKind, id: &str) -> impl Future<Output = Result<(), SwarmError>> + Send;
    /// The last `lines` lines of a service's output (stdout and stderr).
    fn logs_tail(&self, service: &str, lines: usize) -> impl Future<Output = Result<String, SwarmError>> + Send;
    /// A service's log lines with their timestamps, from second `since` of
    /// the epoch on; with `follow`, the stream stays open for new lines.
    fn logs(&self, service: &str, follow: bool, since: i32) -> BoxStream<'static, Result<LogLine, SwarmError>>;
}

/// One line (or chunk, for lines Docker splits) of a service's output.
#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    pub stream: Stream,
    /// Docker's timestamp of the line, in nanoseconds since the epoch.
    pub nanos: i64,
    pub text: bytes::Bytes,
}

/// Splits Docker's `timestamps=true` framing (`2024-01-02T03:04:05.123456789Z text`).
pub fn parse_log_line(stream: Stream, raw: &[u8]) -> Option<LogLine> {
    let space = raw.iter().position(|&b| b == b' ')?;
    let stamp = std::str::from_utf8(&raw[..space]).ok()?;
    let nanos = chrono::DateTime::parse_from_rfc3339(stamp).ok()?.timestamp_nanos_opt()?;
    Some(LogLine { stream, nanos, text: bytes::Bytes::copy_from_slice(&raw[space + 1..]) })
}

/// How long [`Swarm::node_engine_gone`] waits for the node's engine to
/// answer before it calls it slow rather than gone.
pub const ENGINE_PING_DEADLINE: std::time::Duration = std::time::Duration::from_secs(2);

/// The OS's words when `e` (or what caused it) is a connection refused
/// outright: no process listens at the address (`ECONNREFUSED`) or the
/// socket file is gone (`ENOENT`). `None` for anything else: after a
/// timeout or a reset the peer may be alive and busy.
fn refusal(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<std::io::Error>()
            && matches!(io.kind(), std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::NotFound)
        {
            return Some(io.to_string());
        }
        cause = c.source();
    }
    None
}

/// The Docker engine over bollard.
#[derive(Clone)]
pub struct DockerSwarm {
    /// A swarm manager's engine: services, networks, secrets, configs, tasks.
    pub docker: Docker,
    /// The served node's own engine, for what lives on the node alone (named
    /// volumes): `docker` itself when it is that node's, else the
    /// `--node-docker` engine, if any.
    pub node_engine: Option<Docker>,
}

fn is_status(e: &bollard::errors::Error, code: u16) -> bool {
    matches!(e, bollard::errors::Error::DockerResponseServerError { status_code, .. } if *status_code == code)
}

/// Another agent of the same manager created the object first: 409 from the
/// engine's own objects, but a 500 carrying swarmkit's "name conflicts with
/// an existing object" for networks, secrets and configs on Docker 20.10.
fn is_conflict(e: &bollard::errors::Error) -> bool {
    match e {
        bollard::errors::Error::DockerResponseServerError { status_code: 409, .. } => true,
        bollard::errors::Error::DockerResponseServerError { status_code: 500, message } => {
            message.contains("name conflicts with an existing object") || message.contains("already exists")
        }
        _ => false,
    }
}

fn label_filter(agent_id: &str) -> Option<HashMap<String, Vec<String>>> {
    Some(HashMap::from([("label".to_owned(), vec![labels::owned_by(agent_id)])]))
}

fn name_filter(name: &str) -> Option<HashMap<String, Vec<String>>> {
    Some(HashMap::from([("name".to_owned(), vec![name.to_owned()])]))
}

impl DockerSwarm {
    async fn list(
        &self,
        kind: ObjectKind,
        filters: Option<HashMap<String, Vec<String>>>,
    ) -> Result<Vec<Owned>, SwarmError> {
        let operation = format!("list {kind:?}s");
        Ok(match kind {
            ObjectKind::Network => self
                .docker
                .list_networks(Some(ListNetworksOptions { filters }))
                .await
                .map_err(SwarmError::docker(operation))?
                .into_iter()
                .map(|n| Owned { id: n.id.unwrap_or_default(), name: n.name.unwrap_or_default() })
                .collect(),
            ObjectKind::Secret => self
                .docker
                .list_secrets(Some(ListSecretsOptions { filters }))
                .await
                .map_err(SwarmError::docker(operation))?
                .into_iter()
                .map(|s| Owned { id: s.id.unwrap_or_default(), name: s.spec.and_then(|s| s.name).unwrap_or_default() })
                .collect(),
            ObjectKind::Config => self
                .docker
                .list_configs(Some(ListConfigsOptions { filters }))
                .await
                .map_err(SwarmError::docker(operation))?
                .into_iter()
                .map(|c| Owned { id: c.id.unwrap_or_default(), name: c.spec.and_then(|s| s.name).unwrap_or_default() })
                .collect(),
        })
    }

    /// The id of the object of `kind` named exactly `name` (the API's name
    /// filter matches substrings).
    async fn find(&self, kind: ObjectKind, name: &str) -> Result<Option<String>, SwarmError> {
        Ok(self.list(kind, name_filter(name)).await?.into_iter().find(|o| o.name == name).map(|o| o.id))
    }

    /// Returns the id of `name`, running `create` only if it does not exist;
    /// a concurrent creation (409) counts as success.
    async fn ensure_object(
        &self,
        kind: ObjectKind,
        name: &str,
        create: impl Future<Output = Result<bollard::models::IdResponse, bollard::errors::Error>>,
    ) -> Result<String, SwarmError> {
        if let Some(id) = self.find(kind, name).await? {
            return Ok(id);
        }
        match create.await {
            Ok(r) => Ok(r.id),
            Err(e) if is_conflict(&e) => {
                self.find(kind, name).await?.ok_or_else(|| SwarmError::docker(format!("create {kind:?} {name}"))(e))
            }
            Err(e) => Err(SwarmError::docker(format!("create {kind:?} {name}"))(e)),
        }
    }
}

impl Swarm for DockerSwarm {
    async fn network(&self, name: &str) -> Result<Option<ExistingNetwork>, SwarmError> {
        let listed = self
            .docker
            .list_networks(Some(ListNetworksOptions { filters: name_filter(name) }))
            .await
            .map_err(SwarmError::docker(format!("list networks named {name}")))?;
        // The name filter matches substrings; only an exact match counts.
        Ok(listed.into_iter().find(|n| n.name.as_deref() == Some(name)).map(|n| ExistingNetwork {
            name: name.to_owned(),
            driver: n.driver.unwrap_or_default(),
            scope: n.scope.unwrap_or_default(),
            labels: n.labels.unwrap_or_default(),
        }))
    }

    async fn create_network(&self, request: NetworkCreateRequest) -> Result<bool, SwarmError> {
        let name = request.name.clone();
        match self.docker.create_network(request).await {
            Ok(_) => Ok(true),
            Err(e) if is_conflict(&e) => Ok(false),
            Err(e) => Err(SwarmError::docker(format!("create network {name}"))(e)),
        }
    }

    async fn volume(&self, name: &str) -> Result<VolumeLookup, SwarmError> {
        let Some(engine) = &self.node_engine else { return Ok(VolumeLookup::Unseen) };
        match engine.inspect_volume(name).await {
            Ok(v) => {
                Ok(VolumeLookup::Found(ExistingVolume { driver: v.driver, options: v.options.into_iter().collect() }))
            }
            Err(e) if is_status(&e, 404) => Ok(VolumeLookup::Absent),
            Err(e) => Err(SwarmError::docker(format!("inspect volume {name}"))(e)),
        }
    }

    async fn ensure_secret(&self, spec: SecretSpec) -> Result<String, SwarmError> {
        let name = spec.name.clone().unwrap_or_default();
        self.ensure_object(ObjectKind::Secret, &name, self.docker.create_secret(spec)).await
    }

    async fn ensure_config(&self, spec: ConfigSpec) -> Result<String, SwarmError> {
        let name = spec.name.clone().unwrap_or_default();
        self.ensure_object(ObjectKind::Config, &name, self.docker.create_config(spec)).await
    }

    async fn create_service(&self, spec: ServiceSpec) -> Result<String, SwarmError> {
        let name = spec.name.clone().unwrap_or_default();
        match self.docker.create_service(spec, None).await {
            Ok(r) => Ok(r.id.unwrap_or_default()),
            Err(e) if is_conflict(&e) => {
                let s = self
                    .docker
                    .inspect_service(&name, None)
                    .await
                    .map_err(SwarmError::docker(format!("inspect service {name}")))?;
                Ok(s.id.unwrap_or_default())
            }
            Err(e) => Err(SwarmError::docker(format!("create service {name}"))(e)),
        }
    }

    async fn remove_service(&self, name: &str) -> Result<(), SwarmError> {
        match self.docker.delete_service(name).await {
            Ok(()) => Ok(()),
            Err(e) if is_status(&e, 404) => Ok(()),
            Err(e) => Err(SwarmError::docker(format!("remove service {name}"))(e)),
        }
    }

    async fn restart_service(&self, name: &str) -> Result<(), SwarmError> {
        let service = self
            .docker
            .inspect_service(name, None)
            .await
            .map_err(SwarmError::docker(format!("inspect service {name}")))?;
        let version = service.version.and_then(|v| v.index).unwrap_or_default();
        let mut spec = service.spec.unwrap_or_default();
        let template = spec.task_template.get_or_insert_with(Default::default);
        template.force_update = Some(template.force_update.unwrap_or(0).wrapping_add(1));
        let version =
            i32::try_from(version).map_err(|_| SwarmError::VersionOutOfRange { service: name.to_owned(), version })?;
        let options = UpdateServiceOptionsBuilder::new().version(version).build();
        self.docker
            .update_service(name, spec, options, None)
            .await
            .map_err(SwarmError::docker(format!("update service {name}")))?;
        Ok(())
    }

    async fn services(&self, agent_id: &str) -> Result<Vec<Service>, SwarmError> {
        self.docker
            .list_services(Some(ListServicesOptions { filters: label_filter(agent_id), status: None }))
            .await
            .map_err(SwarmError::docker("list services"))
    }

    async fn node_status(&self, node_id: &str) -> Result<(Option<NodeState>, Option<String>), SwarmError> {
        let node =
            self.docker.inspect_node(node_id).await.map_err(SwarmError::docker(format!("inspect node {node_id}")))?;
        let status = node.status.unwrap_or_default();
        Ok((status.state, status.message))
    }

    async fn node_engine_gone(&self) -> Option<String> {
        let engine = self.node_engine.as_ref()?;
        match tokio::time::timeout(ENGINE_PING_DEADLINE, engine.ping()).await {
            Ok(Err(e)) => refusal(&e).map(|why| format!("its engine refuses connections ({why})")),
            Ok(Ok(_)) | Err(_) => None,
        }
    }

    async fn tasks(&self, node_id: &str) -> Result<Vec<Task>, SwarmError> {
        let filters = HashMap::from([("node".to_owned(), vec![node_id.to_owned()])]);
        self.docker
            .list_tasks(Some(ListTasksOptions { filters: Some(filters) }))
            .await
            .map_err(SwarmError::docker("list tasks"))
    }

    async fn service_left(&self, node_id: &str, name: &str, id: Option<&str>) -> Result<bool, SwarmError> {
        if let Some(id) = id
            && self.tasks(node_id).await?.iter().any(|t| t.service_id.as_deref() == Some(id))
        {
            return Ok(true);
        }
        let filters = HashMap::from([("label".to_owned(), vec![format!("com.docker.swarm.service.name={name}")])]);
        let containers = self
            .docker
            .list_containers(Some(ListContainersOptions { all: true, filters: Some(filters), ..Default::default() }))
            .await
            .map_err(SwarmError::docker(format!("list containers of service {name}")))?;
        Ok(!containers.is_empty())
    }

    async fn owned(&self, kind: ObjectKind, agent_id: &str) -> Result<Vec<Owned>, SwarmError> {
        self.list(kind, label_filter(agent_id)).await
    }

    async fn remove(&self, kind: ObjectKind, id: &str) -> Result<(), SwarmError> {
        let result = match kind {
            ObjectKind::Network => self.docker.remove_network(id).await,
            ObjectKind::Secret => self.docker.delete_secret(id).await,
            ObjectKind::Config => self.docker.delete_config(id).await,
        };
        match result {
            Ok(()) => Ok(()),
            Err(e) if is_status(&e, 404) => Ok(()),
            Err(e) => Err(SwarmError::docker(format!("remove {kind:?} {id}"))(e)),
        }
    }

    async fn logs_tail(&self, service: &str, lines: usize) -> Result<String, SwarmError> {
        let options = LogsOptions { stdout: true, stderr: true, tail: lines.to_string(), ..Default::default() };
        let mut stream = self.docker.service_logs(service, Some(options));
        let mut out = String::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(SwarmError::docker(format!("logs of service {service}")))?;
            out.push_str(&String::from_utf8_lossy(&chunk.into_bytes()));
        }
        Ok(out)
    }

    fn logs(&self, service: &str, follow: bool, since: i32) -> BoxStream<'static, Result<LogLine, SwarmError>> {
        let options = LogsOptions { stdout: true, stderr: true, follow, since, timestamps: true, ..Default::default() };
        let operation = format!("logs of service {service}");
        self.docker
            .service_logs(service, Some(options))
            .filter_map(move |chunk| {
                let line = match chunk {
                    Err(e) => Some(Err(SwarmError::docker(operation.clone())(e))),
                    Ok(LogOutput::StdOut { message }) => parse_log_line(Stream::Stdout, &message).map(Ok),
                    Ok(LogOutput::StdErr { message }) => parse_log_line(Stream::Stderr, &message).map(Ok),
                    Ok(LogOutput::Console { message }) => parse_log_line(Stream::Stdout, &message).map(Ok),
                    Ok(LogOutput::StdIn { .. }) => None,
                };
                std::future::ready(line)
            })
            .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_refused_for_a_vanished_network_is_told_apart() {
        let refused = |message: &str| SwarmError::Docker {
            operation: "create service s".into(),
            source: bollard::errors::Error::DockerResponseServerError { status_code: 500, message: message.into() },
        };
        assert!(refused("network mpiswarm-773abbcd669c not found").is_missing_network());
        assert!(!refused("secret mpiswarm-s-1 not found").is_missing_network());
        assert!(!refused("name conflicts with an existing object").is_missing_network());
    }

    fn engine_at(path: &std::path::Path) -> DockerSwarm {
        let url = path.to_str().unwrap();
        let docker = Docker::connect_with_unix(url, 5, bollard::API_DEFAULT_VERSION).unwrap();
        DockerSwarm { docker: docker.clone(), node_engine: Some(docker) }
    }

    #[tokio::test]
    async fn an_engine_whose_socket_nobody_listens_on_is_gone_and_a_silent_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        // A socket file left behind by an engine that died: connection refused.
        let stale = dir.path().join("stale.sock");
        drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
        let engine = engine_at(&stale);
        let gone = engine.node_engine_gone().await;
        assert_eq!(gone.as_deref(), Some("its engine refuses connections (Connection refused (os error 111))"));
        // The socket file gone too (the node's directory was removed).
        std::fs::remove_file(&stale).unwrap();
        let gone = engine.node_engine_gone().await;
        assert_eq!(gone.as_deref(), Some("its engine refuses connections (No such file or directory (os error 2))"));
        // An engine that accepts but does not answer (busy): slow, not gone.
        let busy = dir.path().join("busy.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&busy).unwrap();
        assert_eq!(engine_at(&busy).node_engine_gone().await, None, "a silent engine is not gone");
        // No engine of the node's own: nothing to say.
        let none = DockerSwarm { node_engine: None, ..engine_at(&busy) };
        assert_eq!(none.node_engine_gone().await, None);
    }
}
