//! TaskInfo -> [`TaskPlan`]: everything the agent will ask Swarm for, checked
//! and resolved, with no Docker types in sight. Every refusal of a TaskInfo
//! happens here, before any Swarm object exists, with a message that names
//! the offending value; [`crate::spec`] then renders a plan into API objects.
//! Planning reads the filesystem only to resolve host paths of bind mounts
//! ([`crate::mounts`]); callers plan off the async workers. A refusal is an
//! [`InvalidTask`]: the task and a [`Refusal`] saying which value is wrong
//! and what to give instead; its text is the TASK_ERROR's message.

use std::collections::BTreeMap;

use base64::Engine as _;
use mpiswarm_mesos::task::{ContainerType, DockerNetwork, VolumeMode};
use mpiswarm_mesos::{ExecutorId, FrameworkId, TaskId, TaskInfo};

use crate::existing::{NetworkOwner, OVERLAY};
use crate::labels;
use crate::mounts::{HostPaths, MountError, MountPlan, VolumeOptions, mounts};

/// Who is asking and where: the parts of a service that do not come from the
/// TaskInfo itself.
#[derive(Debug, Clone)]
pub struct LaunchContext<'a> {
    pub agent_id: &'a str,
    pub framework_id: &'a FrameworkId,
    pub framework_role: Option<&'a str>,
    pub executor_id: Option<&'a ExecutorId>,
    /// Where bind mounts may come from.
    pub host_paths: &'a HostPaths,
    /// Which volume driver options may be passed.
    pub volume_options: &'a VolumeOptions,
}

/// A TaskInfo the agent refuses; becomes TASK_ERROR / REASON_TASK_INVALID.
#[derive(Debug, thiserror::Error)]
#[error("task '{task_id}' is invalid: {refusal}")]
pub struct InvalidTask {
    pub task_id: String,
    pub refusal: Refusal,
}

/// What is wrong with a TaskInfo, naming the value and what to give instead.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("task_id is empty: give the task an id unique within its framework")]
    EmptyTaskId,
    #[error(
        "custom executor '{executor_id}' is not supported: the agent runs the task's own container (drop TaskInfo.executor)"
    )]
    CustomExecutor { executor_id: ExecutorId },
    #[error("it has no container: set container.type=DOCKER and container.docker.image")]
    NoContainer,
    #[error("container.type {kind:?} is not supported: only DOCKER containers run on Swarm")]
    ContainerType { kind: ContainerType },
    #[error("container.docker is missing: it must name the image")]
    NoDocker,
    #[error("container.docker.image '{image}' is not an image reference (e.g. repository/name:tag, no spaces)")]
    Image { image: String },
    #[error("container.docker.privileged=true is not supported by Swarm services; drop it")]
    Privileged,
    #[error(
        "container.docker.parameters are not supported (got '{key}={value}'): Swarm services take no docker run flags"
    )]
    Parameters { key: String, value: String },
    #[error("container.docker.port_mappings are not supported: tasks talk over their overlay network")]
    PortMappings,
    #[error("container.docker.network {network:?} conflicts with network_infos: use USER networks")]
    DockerNetwork { network: DockerNetwork },
    #[error("resource {name} has value {value}: it must be a finite number >= 0")]
    Resource { name: String, value: f64 },
    #[error("environment variable name '{name}' is invalid: it must be non-empty, without '=' or NUL")]
    EnvName { name: String },
    #[error("network_infos name '{name}' is not a valid network name (letters, digits, '_', '.', '-', at most 64)")]
    NetworkName { name: String },
    #[error(
        "network '{network}' asks for unknown network driver '{driver}' (label {label}): only '{OVERLAY}' is supported",
        label = labels::NETWORK_DRIVER
    )]
    NetworkDriver { network: String, driver: String },
    #[error("container.hostname '{hostname}' is not a DNS label (lowercase letters, digits and '-', at most 63)")]
    Hostname { hostname: String },
    #[error("kill_policy.grace_period {nanos} ns is negative; give 0 or more")]
    GracePeriod { nanos: i64 },
    #[error("volume {target}: a SECRET volume cannot also have a host_path; drop the host_path")]
    SecretWithHostPath { target: String },
    #[error("volume {target}: secret type '{secret_type}' is not supported (only VALUE, with the data inline)")]
    SecretType { target: String, secret_type: String },
    #[error("volume {target}: secret.value.data is missing; give the secret's bytes in base64")]
    SecretData { target: String },
    #[error("volume {target}: secret.value.data is not base64: {source}")]
    SecretBase64 {
        target: String,
        #[source]
        source: base64::DecodeError,
    },
    #[error("command.uris '{uri}' cannot be fetched: only inline data: URIs are supported (nothing is downloaded)")]
    UriScheme { uri: String },
    #[error("command.uris data: URI needs output_file (an absolute path), got none")]
    UriOutputFile,
    #[error("command.uris for {target}: {source}")]
    DataUri {
        target: String,
        #[source]
        source: DataUriError,
    },
    #[error("file target '{target}' must be an absolute file path without '..'")]
    FileTarget { target: String },
    #[error("two files target {target}; give each file its own path")]
    SameTarget { target: String },
    #[error(transparent)]
    Mount(#[from] MountError),
}

/// Why the payload of an RFC 2397 `data:` URI cannot be decoded.
#[derive(Debug, thiserror::Error)]
pub enum DataUriError {
    #[error("data: URI has no ',' before its payload (data:[<mediatype>][;base64],<data>)")]
    NoComma,
    #[error("invalid base64 payload: {0}")]
    Base64(#[source] base64::DecodeError),
    #[error("truncated %-escape at the end; write '%' as %25")]
    TruncatedEscape,
    #[error("invalid %-escape '%{hex}'; write '%' as %25")]
    BadEscape { hex: String },
}

/// One Swarm service to create, resolved from a TaskInfo.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskPlan {
    pub task_id: TaskId,
    pub service_name: String,
    pub image: String,
    /// Replaces the image's entrypoint (shell commands: `/bin/sh -c`).
    pub command: Option<Vec<String>>,
    /// Replaces the image's CMD.
    pub args: Option<Vec<String>>,
    pub env: Vec<String>,
    pub cpus: f64,
    pub mem_mib: f64,
    pub labels: BTreeMap<String, String>,
    pub networks: Vec<NetworkPlan>,
    pub hostname: String,
    /// Names peers resolve this task by on each of its networks.
    pub aliases: Vec<String>,
    pub files: Vec<FilePlan>,
    /// Named volumes, host paths and tmpfs ([`crate::mounts`]).
    pub mounts: Vec<MountPlan>,
    /// From `kill_policy.grace_period`: how long a KILL waits after SIGTERM.
    pub stop_grace_nanos: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkPlan {
    pub name: String,
    pub driver: String,
    /// The job it is for: the only one whose tasks may join it.
    pub owner: NetworkOwner,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// Private material (keys): a Swarm secret, kept encrypted in the raft log.
    Secret,
    /// Plain files (hostfiles): a Swarm config.
    Config,
}

/// A file mounted into the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePlan {
    pub kind: FileKind,
    /// Absolute path in the container.
    pub target: String,
    pub data: Vec<u8>,
    pub mode: u32,
    /// Swarm object name, derived from kind, target and content: tasks of one
    /// job on one node share their SSH key secret instead of duplicating it.
    pub object_name: String,
}

impl TaskPlan {
    pub fn from_task_info(task: &TaskInfo, ctx: &LaunchContext<'_>) -> Result<Self, InvalidTask> {
        let invalid = |refusal: Refusal| InvalidTask { task_id: task.task_id.value.clone(), refusal };
        if task.task_id.value.is_empty() {
            return Err(invalid(Refusal::EmptyTaskId));
        }
        if let Some(executor) = &task.executor
            && (executor.command.is_some() || executor.container.is_some())
        {
            return Err(invalid(Refusal::CustomExecutor { executor_id: executor.executor_id.clone() }));
        }
        let container = task.container.as_ref().ok_or_else(|| invalid(Refusal::NoContainer))?;
        if container.kind != ContainerType::Docker {
            return Err(invalid(Refusal::ContainerType { kind: container.kind }));
        }
        let docker = container.docker.as_ref().ok_or_else(|| invalid(Refusal::NoDocker))?;
        let image = docker.image.trim();
        if image.is_empty() || image.chars().any(char::is_whitespace) {
            return Err(invalid(Refusal::Image { image: docker.image.clone() }));
        }
        if docker.privileged == Some(true) {
            return Err(invalid(Refusal::Privileged));
        }
        if let Some(p) = docker.parameters.first() {
            return Err(invalid(Refusal::Parameters { key: p.key.clone(), value: p.value.clone() }));
        }
        if !docker.port_mappings.is_empty() {
            return Err(invalid(Refusal::PortMappings));
        }
        if let Some(network @ (DockerNetwork::Host | DockerNetwork::Bridge | DockerNetwork::None)) = docker.network
            && !container.network_infos.is_empty()
        {
            return Err(invalid(Refusal::DockerNetwork { network }));
        }

        let (cpus, mem_mib) = resources(task).map_err(invalid)?;
        let (command, args) = command_line(task);
        let env = environment(task).map_err(invalid)?;
        let networks = networks(task, ctx.framework_id).map_err(invalid)?;
        let hostname = match &container.hostname {
            Some(h) => {
                if !is_dns_label(h) {
                    return Err(invalid(Refusal::Hostname { hostname: h.clone() }));
                }
                h.clone()
            }
            None => dns_label(&task.name, &task.task_id.value),
        };
        let mut aliases = vec![hostname.clone()];
        let by_name = dns_label(&task.name, &task.task_id.value);
        if !aliases.contains(&by_name) {
            aliases.push(by_name);
        }
        let files = files(task).map_err(invalid)?;
        let mounts = mounts(&container.volumes, ctx.host_paths, ctx.volume_options).map_err(|e| invalid(e.into()))?;
        let stop_grace_nanos = match task.kill_policy.as_ref().and_then(|k| k.grace_period) {
            Some(d) if d.nanoseconds < 0 => {
                return Err(invalid(Refusal::GracePeriod { nanos: d.nanoseconds }));
            }
            other => other.map(|d| d.nanoseconds),
        };

        let mut labels = BTreeMap::new();
        for label in task.labels.iter().flat_map(|l| l.labels.iter()) {
            labels.insert(labels::for_task_label(&label.key), label.value.clone().unwrap_or_default());
        }
        // The agent's own labels last: a framework must not be able to claim
        // or disown objects by naming these keys.
        labels.insert(labels::MANAGED_BY.into(), labels::MANAGED_BY_VALUE.into());
        labels.insert(labels::AGENT_ID.into(), ctx.agent_id.into());
        labels.insert(labels::FRAMEWORK_ID.into(), ctx.framework_id.value.clone());
        labels.insert(labels::TASK_ID.into(), task.task_id.value.clone());
        labels.insert(labels::TASK_NAME.into(), task.name.clone());
        if let Some(role) = ctx.framework_role {
            labels.insert(labels::FRAMEWORK_ROLE.into(), role.into());
        }
        if let Some(executor) = ctx.executor_id {
            labels.insert(labels::EXECUTOR_ID.into(), executor.value.clone());
        }

        Ok(Self {
            task_id: task.task_id.clone(),
            service_name: service_name(ctx.framework_id, &task.task_id),
            image: image.to_owned(),
            command,
            args,
            env,
            cpus,
            mem_mib,
            labels,
            networks,
            hostname,
            aliases,
            files,
            mounts,
            stop_grace_nanos,
        })
    }
}

/// The service of a task: readable, unique per (framework, task), and a valid
/// Swarm service name (which is also a DNS name on the task's networks).
pub fn service_name(framework_id: &FrameworkId, task_id: &TaskId) -> String {
    let mut readable: String =
        task_id.value.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    readable.truncate(36);
    let readable = readable.trim_matches('-');
    let hash = fnv1a(&[framework_id.value.as_bytes(), b"\0", task_id.value.as_bytes()]);
    format!("mpiswarm-{readable}-{:08x}", hash as u32).replace("--", "-")
}

fn resources(task: &TaskInfo) -> Result<(f64, f64), Refusal> {
    let (mut cpus, mut mem) = (0.0, 0.0);
    for r in &task.resources {
        if let Some(v) = r.scalar_value() {
            if !v.is_finite() || v < 0.0 {
                return Err(Refusal::Resource { name: r.name.clone(), value: v });
            }
            match r.name.as_str() {
                "cpus" => cpus += v,
                "mem" => mem += v,
                _ => {}
            }
        }
    }
    Ok((cpus, mem))
}

/// Mesos' Docker containerizer semantics: a shell command replaces the
/// entrypoint with `/bin/sh -c`; otherwise value and arguments are appended
/// after the image, i.e. they replace CMD and keep the entrypoint.
fn command_line(task: &TaskInfo) -> (Option<Vec<String>>, Option<Vec<String>>) {
    let Some(cmd) = &task.command else { return (None, None) };
    if cmd.is_shell() {
        match &cmd.value {
            Some(v) => (Some(vec!["/bin/sh".into(), "-c".into(), v.clone()]), None),
            None => (None, None),
        }
    } else {
        let args: Vec<String> = cmd.value.iter().cloned().chain(cmd.arguments.iter().cloned()).collect();
        (None, (!args.is_empty()).then_some(args))
    }
}

fn environment(task: &TaskInfo) -> Result<Vec<String>, Refusal> {
    let vars = task.command.iter().flat_map(|c| c.environment.iter()).flat_map(|e| e.variables.iter());
    vars.map(|v| {
        if v.name.is_empty() || v.name.contains('=') || v.name.contains('\0') {
            return Err(Refusal::EnvName { name: v.name.clone() });
        }
        Ok(format!("{}={}", v.name, v.value.as_deref().unwrap_or("")))
    })
    .collect()
}

fn networks(task: &TaskInfo, framework_id: &FrameworkId) -> Result<Vec<NetworkPlan>, Refusal> {
    let infos = task.container.iter().flat_map(|c| c.network_infos.iter());
    let owner = NetworkOwner {
        framework_id: framework_id.value.clone(),
        job_uid: task.labels.as_ref().and_then(|l| l.get(labels::JOB_UID)).map(str::to_owned),
    };
    let mut out: Vec<NetworkPlan> = Vec::new();
    for info in infos {
        let name = info.name.as_deref().unwrap_or("");
        if !is_network_name(name) {
            return Err(Refusal::NetworkName { name: name.to_owned() });
        }
        let driver = info.labels.as_ref().and_then(|l| l.get(labels::NETWORK_DRIVER)).unwrap_or(OVERLAY);
        if driver != OVERLAY {
            return Err(Refusal::NetworkDriver { network: name.to_owned(), driver: driver.to_owned() });
        }
        if !out.iter().any(|n| n.name == name) {
            out.push(NetworkPlan { name: name.to_owned(), driver: driver.to_owned(), owner: owner.clone() });
        }
    }
    Ok(out)
}

fn files(task: &TaskInfo) -> Result<Vec<FilePlan>, Refusal> {
    let mut out = Vec::new();
    for volume in task.container.iter().flat_map(|c| c.volumes.iter()) {
        let target = &volume.container_path;
        // Other volumes are mounts ([`crate::mounts`]), checked there.
        let Some(source) = volume.source.as_ref().filter(|s| s.get("type").and_then(|t| t.as_str()) == Some("SECRET"))
        else {
            continue;
        };
        if volume.host_path.is_some() {
            return Err(Refusal::SecretWithHostPath { target: target.clone() });
        }
        let secret = source.get("secret");
        let secret_type = secret.and_then(|s| s.get("type")).and_then(|t| t.as_str()).unwrap_or("");
        if secret_type != "VALUE" {
            return Err(Refusal::SecretType { target: target.clone(), secret_type: secret_type.to_owned() });
        }
        let data = secret
            .and_then(|s| s.get("value"))
            .and_then(|v| v.get("data"))
            .and_then(|d| d.as_str())
            .ok_or_else(|| Refusal::SecretData { target: target.clone() })?;
        let data = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|source| Refusal::SecretBase64 { target: target.clone(), source })?;
        check_target(target)?;
        let mode = if volume.mode == VolumeMode::Rw { 0o600 } else { 0o400 };
        out.push(FilePlan::new(FileKind::Secret, target, data, mode));
    }
    for uri in task.command.iter().flat_map(|c| c.uris.iter()) {
        let Some(payload) = uri.value.strip_prefix("data:") else {
            return Err(Refusal::UriScheme { uri: uri.value.clone() });
        };
        let target = uri.output_file.as_deref().ok_or(Refusal::UriOutputFile)?;
        check_target(target)?;
        let data = decode_data_uri(payload).map_err(|source| Refusal::DataUri { target: target.to_owned(), source })?;
        let mode = if uri.executable == Some(true) { 0o555 } else { 0o444 };
        out.push(FilePlan::new(FileKind::Config, target, data, mode));
    }
    for (i, a) in out.iter().enumerate() {
        if out[..i].iter().any(|b| b.target == a.target) {
            return Err(Refusal::SameTarget { target: a.target.clone() });
        }
    }
    Ok(out)
}

impl FilePlan {
    fn new(kind: FileKind, target: &str, data: Vec<u8>, mode: u32) -> Self {
        let tag = match kind {
            FileKind::Secret => "s",
            FileKind::Config => "c",
        };
        let hash = fnv1a(&[tag.as_bytes(), target.as_bytes(), b"\0", &data, &mode.to_le_bytes()]);
        Self { kind, target: target.to_owned(), data, mode, object_name: format!("mpiswarm-{tag}-{hash:016x}") }
    }
}

fn check_target(target: &str) -> Result<(), Refusal> {
    if !target.starts_with('/') || target.ends_with('/') || target.split('/').any(|p| p == "..") {
        return Err(Refusal::FileTarget { target: target.to_owned() });
    }
    Ok(())
}

/// RFC 2397 body after `data:`: `[mediatype][;base64],payload`.
fn decode_data_uri(payload: &str) -> Result<Vec<u8>, DataUriError> {
    let (meta, body) = payload.split_once(',').ok_or(DataUriError::NoComma)?;
    if meta.ends_with(";base64") {
        base64::engine::general_purpose::STANDARD.decode(body).map_err(DataUriError::Base64)
    } else {
        percent_decode(body)
    }
}

fn percent_decode(s: &str) -> Result<Vec<u8>, DataUriError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3).ok_or(DataUriError::TruncatedEscape)?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| DataUriError::BadEscape { hex: hex.to_owned() })?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(out)
}

fn is_network_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
}

fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && !name.starts_with('-')
        && !name.ends_with('-')
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// A DNS label from a task name (falling back to the task id).
fn dns_label(name: &str, fallback: &str) -> String {
    let source = if name.trim().is_empty() { fallback } else { name };
    let mut label: String =
        source.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    label.truncate(63);
    let label = label.trim_matches('-').to_owned();
    if label.is_empty() { "task".to_owned() } else { label }
}

/// FNV-1a: a stable, dependency-free hash for object names (not security).
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in *part {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}
