//! The user-facing `MpiJob` spec. Field names follow Kubeflow's mpi-operator
//! where it has the same concept (`slotsPerWorker`-style camelCase,
//! `runPolicy`, `cleanPolicy`, `backoffLimit`, ...). Constraints that a plain
//! OpenAPI schema can carry live here as schema attributes or CEL rules, so
//! the API server rejects bad objects with 422 before any controller runs.
//! Rules a schema cannot express are in `validate.rs`.

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::status::MpiJobStatus;

/// Kubernetes quantity syntax accepted for `resources.memory`: a decimal
/// number with an optional binary (Ki..Ei) or decimal (k..E) suffix.
pub const MEMORY_PATTERN: &str = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$";

/// Mesos role names (Mesos `roles::validate`, whose one home in mpiswarm is
/// `mpiswarm_mesos::validate_role`): `*`, or `/`-separated parts, each
/// non-empty, not `.`, `..` or `*`, not starting with `-`, and without ASCII
/// whitespace (`\x09`-`\x0D`, space) or DEL anywhere. A part is spelled out by
/// length because schema regexes have no look-ahead: one character that is
/// not `-`, `.` or `*`; two characters that are not `..` and do not start
/// with `-`; or three and more not starting with `-`. `crds/tests/roles.rs`
/// proves this accepts exactly what `validate_role` accepts.
pub const ROLE_PATTERN: &str = concat!(
    r"^(\*|",
    r"(?:[^-.*\x09-\x0D\x20\x2F\x7F]|[^-.\x09-\x0D\x20\x2F\x7F][^\x09-\x0D\x20\x2F\x7F]|\.[^.\x09-\x0D\x20\x2F\x7F]|[^-\x09-\x0D\x20\x2F\x7F][^\x09-\x0D\x20\x2F\x7F]{2,})",
    r"(?:/(?:[^-.*\x09-\x0D\x20\x2F\x7F]|[^-.\x09-\x0D\x20\x2F\x7F][^\x09-\x0D\x20\x2F\x7F]|\.[^.\x09-\x0D\x20\x2F\x7F]|[^-\x09-\x0D\x20\x2F\x7F][^\x09-\x0D\x20\x2F\x7F]{2,}))*",
    r")$"
);

/// An MPI job: `ranks` processes of `command`, run in containers of `image`
/// on Docker Swarm nodes chosen by the placement policy.
// The printer columns repeat `type_ = ...`, which clippy mistakes for a
// duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "mpiswarm.io",
    version = "v1alpha1",
    kind = "MpiJob",
    plural = "mpijobs",
    singular = "mpijob",
    shortname = "mpij",
    category = "all",
    category = "mpiswarm",
    namespaced,
    status = "MpiJobStatus",
    derive = "PartialEq",
    doc = "An MPI job run as containers on Docker Swarm: ranks are placed by a pack/spread policy and launched as a gang.",
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Lifecycle phase of the job"
    ),
    printcolumn(
        name = "Ranks",
        type_ = "integer",
        json_path = ".spec.ranks",
        description = "Total number of MPI processes"
    ),
    printcolumn(
        name = "Policy",
        type_ = "string",
        json_path = ".status.placement.policy",
        description = "Placement policy applied"
    ),
    printcolumn(
        name = "Nodes",
        type_ = "integer",
        json_path = ".status.placement.nodeCount",
        description = "Number of nodes the ranks run on"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    selectable = ".status.phase"
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.args) == has(oldSelf.args)").message("spec.args is immutable once the MpiJob exists (only runPolicy may change): delete and re-create the job to change it"))]
pub struct MpiJobSpec {
    /// The rank image, e.g. `mpiswarm/openmpi:0.1.0`. Every node must hold it.
    #[schemars(length(min = 1))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.image is immutable once the MpiJob exists (only runPolicy may change): delete and re-create the job to change it"))]
    pub image: String,

    /// What each rank runs (the program and its fixed arguments), e.g. `["/opt/mpiswarm/bin/pi"]`.
    #[x_kube(validation = Rule::new("size(self) > 0 && size(self[0]) > 0").message("command must name a program: it is empty or its first element is empty"))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.command is immutable once the MpiJob exists (only runPolicy may change): delete and re-create the job to change it"))]
    pub command: Vec<String>,

    /// Extra arguments appended to `command`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.args is immutable once the MpiJob exists (only runPolicy may change): delete and re-create the job to change it"))]
    pub args: Vec<String>,

    /// Total number of MPI processes (ranks), 1 to 65536.
    #[schemars(range(min = 1, max = 65536))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.ranks is immutable once the MpiJob exists (only runPolicy may change): delete and re-create the job to change it"))]
    pub ranks: i32,

    /// Resources each rank needs.
    #[serde(default)]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.resources is immutable once the MpiJob exists (only runPolicy may change): delete and re-create the job to change it"))]
    pub resources: RankResources,

    /// The workload class (Scylla): drives the `auto` placement policy.
    #[serde(default)]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.profile is immutable once the MpiJob exists (only runPolicy may change): delete and re-create the job to change it"))]
    pub profile: Profile,

    /// Where ranks go.
    #[serde(default)]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.placement is immutable once the MpiJob exists (only runPolicy may change): delete and re-create the job to change it"))]
    pub placement: PlacementSpec,

    /// How ranks are started.
    #[serde(default)]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.mpi is immutable once the MpiJob exists (only runPolicy may change): delete and re-create the job to change it"))]
    pub mpi: MpiSpec,

    /// The Mesos role used for fair sharing between jobs.
    #[serde(default = "default_role")]
    #[schemars(regex(pattern = ROLE_PATTERN))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.role is immutable once the MpiJob exists (only runPolicy may change): delete and re-create the job to change it"))]
    pub role: String,

    /// Storage mounted into every rank (launcher and workers): named Docker
    /// volumes for input and results, host paths the agents allow, tmpfs scratch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.volumes is immutable once the MpiJob exists (only runPolicy may change): delete and re-create the job to change it"))]
    pub volumes: Vec<Volume>,

    /// Restarts, deadlines, clean-up and suspension.
    #[serde(default)]
    pub run_policy: RunPolicy,
}

/// One volume mounted into every rank. Exactly one source is set.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("(has(self.dockerVolume) ? 1 : 0) + (has(self.hostPath) ? 1 : 0) + (has(self.tmpfs) ? 1 : 0) == 1").message("a volume needs exactly one of dockerVolume, hostPath or tmpfs"))]
pub struct Volume {
    /// Unique within the job.
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// Absolute path inside the containers, e.g. `/data`.
    pub mount_path: String,
    /// Mount read-only (not for tmpfs).
    #[serde(default)]
    pub read_only: bool,
    /// A named Docker volume on each node (created at first use, never removed by mpiswarm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker_volume: Option<DockerVolumeSource>,
    /// A directory of the node; the node's agent must allow its prefix (`--allow-host-path-prefix`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_path: Option<HostPathSource>,
    /// Scratch space in memory, per container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmpfs: Option<TmpfsSource>,
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DockerVolumeSource {
    /// The volume's name on the node.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Volume driver (default `local`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct HostPathSource {
    /// Absolute path on the node.
    pub path: String,
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct TmpfsSource {
    /// Size limit as a Kubernetes quantity, e.g. `64Mi` (default: Docker's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = MEMORY_PATTERN))]
    pub size: Option<String>,
}

fn default_role() -> String {
    "*".to_string()
}

/// Per-rank resource request.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RankResources {
    /// CPUs per rank, greater than 0 (fractions allowed, e.g. 0.5).
    #[serde(default = "default_cpus")]
    #[x_kube(validation = Rule::new("self > 0.0").message("cpus must be greater than 0"))]
    pub cpus: f64,

    /// Memory per rank as a Kubernetes quantity, e.g. `256Mi` or `1Gi`.
    #[serde(default = "default_memory")]
    #[schemars(regex(pattern = MEMORY_PATTERN))]
    pub memory: String,

    /// Network bandwidth per rank in Mbit/s, if the job needs a guarantee.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub network_mbps: Option<i64>,
}

fn default_cpus() -> f64 {
    1.0
}

fn default_memory() -> String {
    "256Mi".to_string()
}

impl Default for RankResources {
    fn default() -> Self {
        Self { cpus: default_cpus(), memory: default_memory(), network_mbps: None }
    }
}

/// Workload class, after the Scylla paper.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// CPU-bound: spread to avoid contention for cores.
    Cpu,
    /// Memory-bandwidth-bound: spread to avoid contention for memory.
    Memory,
    /// Communication-bound: pack so ranks use shared memory.
    Network,
    /// No dominant bottleneck.
    #[default]
    Balanced,
}

/// The placement policy a user asks for.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum PlacementPolicy {
    /// Choose from the profile.
    #[default]
    Auto,
    /// Fewest nodes.
    Pack,
    /// Most nodes, ranks balanced.
    Spread,
}

/// Where ranks may go.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.maxRanksPerNode) || self.maxRanksPerNode >= 1").message("maxRanksPerNode must be at least 1 when set"))]
pub struct PlacementSpec {
    /// `auto` (from the profile), `pack` or `spread`.
    #[serde(default)]
    pub policy: PlacementPolicy,

    /// Upper bound on ranks on any one node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ranks_per_node: Option<i32>,

    /// Agent attributes that must match, e.g. `{rack: r1}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
}

/// The MPI implementation inside the image; it decides the hostfile syntax.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Implementation {
    #[default]
    OpenMPI,
    #[serde(rename = "MPICH")]
    Mpich,
}

/// How `mpirun` starts the ranks.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MpiSpec {
    /// `OpenMPI` or `MPICH`.
    #[serde(default)]
    pub implementation: Implementation,

    /// Extra arguments for `mpirun` (mpiswarm sets `-np` and the hostfile
    /// itself, and for Open MPI ranks of less than one cpu `--mca
    /// mpi_yield_when_idle 1`, unless these arguments name that parameter).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mpirun_args: Vec<String>,

    /// Environment variables for every rank.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub env: Vec<EnvVar>,
}

/// One environment variable.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct EnvVar {
    #[schemars(length(min = 1))]
    pub name: String,
    #[serde(default)]
    pub value: String,
}

/// What happens to worker services when the launcher ends.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CleanPolicy {
    /// Remove every worker.
    All,
    /// Remove the workers that are still running.
    #[default]
    Running,
    /// Leave workers for inspection.
    None,
}

/// Restarts, deadlines, clean-up and suspension (mpi-operator's `runPolicy`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunPolicy {
    /// Gang restarts allowed after a failure or a lost node.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub backoff_limit: i32,

    /// Wall-clock limit for the whole job, counted from its start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub active_deadline_seconds: Option<i64>,

    /// Delete the whole MpiJob this long after it finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i64>,

    /// What happens to worker services when the launcher ends.
    #[serde(default)]
    pub clean_policy: CleanPolicy,

    /// Stop (or do not start) the job; resume by setting it back to false.
    #[serde(default)]
    pub suspend: bool,

    /// After this long without a fit the job is reported `Unschedulable` (it keeps waiting).
    #[serde(default = "default_scheduling_timeout")]
    #[schemars(range(min = 1))]
    pub scheduling_timeout_seconds: i64,
}

fn default_scheduling_timeout() -> i64 {
    300
}

impl Default for RunPolicy {
    fn default() -> Self {
        Self {
            backoff_limit: 0,
            active_deadline_seconds: None,
            ttl_seconds_after_finished: None,
            clean_policy: CleanPolicy::default(),
            suspend: false,
            scheduling_timeout_seconds: default_scheduling_timeout(),
        }
    }
}
