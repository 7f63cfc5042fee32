//! What a framework asks an agent to run: `TaskInfo`, `CommandInfo`,
//! `ContainerInfo` (DOCKER image), `NetworkInfo`, `ExecutorInfo`,
//! `TaskGroupInfo` and `KillPolicy` (mesos.proto).

use crate::base64_bytes::Bytes;
use crate::ids::{AgentId, ExecutorId, FrameworkId, TaskId};
use crate::resources::{Labels, Resource};
use serde::{Deserialize, Serialize};

/// `Environment.Variable` (plain values only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvironmentVariable {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// `Environment`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Environment {
    #[serde(default)]
    pub variables: Vec<EnvironmentVariable>,
}

/// `CommandInfo.URI`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandUri {
    pub value: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executable: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extract: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_file: Option<String>,
}

/// `CommandInfo`: with `shell` (default true) `value` runs under `/bin/sh -c`;
/// otherwise `value` is the executable and `arguments` its argv.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CommandInfo {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uris: Vec<CommandUri>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<Environment>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

impl CommandInfo {
    /// A shell command (`/bin/sh -c value`).
    pub fn shell(value: &str) -> Self {
        Self { shell: Some(true), value: Some(value.to_owned()), ..Self::default() }
    }

    /// Whether `value` runs through a shell (the proto default is true).
    pub fn is_shell(&self) -> bool {
        self.shell.unwrap_or(true)
    }
}

/// `ContainerInfo.Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ContainerType {
    Docker,
    Mesos,
}

/// `ContainerInfo.DockerInfo.Network`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DockerNetwork {
    Host,
    Bridge,
    None,
    User,
}

/// A port mapping (`DockerInfo.PortMapping` and `NetworkInfo.PortMapping`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortMapping {
    pub host_port: u32,
    pub container_port: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
}

/// `Parameter`: a free-form key/value, e.g. extra `docker run` flags.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Parameter {
    pub key: String,
    pub value: String,
}

/// `ContainerInfo.DockerInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DockerInfo {
    pub image: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<DockerNetwork>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub port_mappings: Vec<PortMapping>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub privileged: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<Parameter>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_pull_image: Option<bool>,
}

/// `Volume.Mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum VolumeMode {
    Rw,
    Ro,
}

/// `Volume` (host path form; other sources pass through as JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Volume {
    pub mode: VolumeMode,
    pub container_path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<serde_json::Value>,
}

/// `NetworkInfo.IPAddress`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct IpAddress {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_address: Option<String>,
}

/// `NetworkInfo`: which network a container joins; mpiswarm names the job's
/// Swarm overlay here.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NetworkInfo {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_addresses: Vec<IpAddress>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Labels>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub port_mappings: Vec<PortMapping>,
}

/// `ContainerInfo`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContainerInfo {
    #[serde(rename = "type")]
    pub kind: ContainerType,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker: Option<DockerInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mesos: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_infos: Vec<NetworkInfo>,
}

impl ContainerInfo {
    /// A DOCKER container running `image`.
    pub fn docker(image: &str) -> Self {
        Self {
            kind: ContainerType::Docker,
            volumes: Vec::new(),
            hostname: None,
            docker: Some(DockerInfo {
                image: image.to_owned(),
                network: None,
                port_mappings: Vec::new(),
                privileged: None,
                parameters: Vec::new(),
                force_pull_image: None,
            }),
            mesos: None,
            network_infos: Vec::new(),
        }
    }
}

/// `DurationInfo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DurationInfo {
    pub nanoseconds: i64,
}

/// `KillPolicy`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct KillPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period: Option<DurationInfo>,
}

/// `ExecutorInfo.Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ExecutorType {
    Unknown,
    Default,
    Custom,
}

/// `ExecutorInfo`: for LAUNCH_GROUP the DEFAULT executor that hosts a task group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutorInfo {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ExecutorType>,
    pub executor_id: ExecutorId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framework_id: Option<FrameworkId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerInfo>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<Resource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Bytes>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown_grace_period: Option<DurationInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Labels>,
}

impl ExecutorInfo {
    /// A DEFAULT executor with no resources of its own.
    pub fn default_executor(executor_id: &str) -> Self {
        Self {
            kind: Some(ExecutorType::Default),
            executor_id: ExecutorId::new(executor_id),
            framework_id: None,
            command: None,
            container: None,
            resources: Vec::new(),
            name: None,
            data: None,
            shutdown_grace_period: None,
            labels: None,
        }
    }
}

/// `TaskInfo`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskInfo {
    pub name: String,
    pub task_id: TaskId,
    pub agent_id: AgentId,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<Resource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<ExecutorInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill_policy: Option<KillPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Bytes>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Labels>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_completion_time: Option<DurationInfo>,
}

impl TaskInfo {
    /// A task `name` with id `task_id` for `agent_id`, with no resources or command yet.
    pub fn new(name: &str, task_id: &str, agent_id: &AgentId) -> Self {
        Self {
            name: name.to_owned(),
            task_id: TaskId::new(task_id),
            agent_id: agent_id.clone(),
            resources: Vec::new(),
            executor: None,
            command: None,
            container: None,
            health_check: None,
            check: None,
            kill_policy: None,
            data: None,
            labels: None,
            discovery: None,
            max_completion_time: None,
        }
    }
}

/// `TaskGroupInfo`: tasks launched together, all or none.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TaskGroupInfo {
    #[serde(default)]
    pub tasks: Vec<TaskInfo>,
}
