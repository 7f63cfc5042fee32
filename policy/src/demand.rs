//! What a job asks for: ranks, per-rank resources, workload profile, policy and
//! node constraints. Owns the input validation of a demand; never looks at
//! offers.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::unfit::{Unfit, UnfitKind};

/// A bundle of the scalar resources the engine accounts, in Mesos units:
/// cpus as (fractional) cores, memory in MiB, network bandwidth in Mbit/s.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    pub cpus: f64,
    pub memory_mib: f64,
    #[serde(default)]
    pub network_mbps: f64,
}

impl Resources {
    pub const fn new(cpus: f64, memory_mib: f64, network_mbps: f64) -> Self {
        Self { cpus, memory_mib, network_mbps }
    }

    /// `self` multiplied by a rank count, e.g. the resources of one worker.
    pub fn times(&self, ranks: u32) -> Self {
        let n = f64::from(ranks);
        Self::new(self.cpus * n, self.memory_mib * n, self.network_mbps * n)
    }
}

/// What the job's ranks mostly spend their time on (the MpiJob's
/// `spec.profile`, same spellings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    Cpu,
    Memory,
    Network,
    #[default]
    Balanced,
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Cpu => "cpu",
            Self::Memory => "memory",
            Self::Network => "network",
            Self::Balanced => "balanced",
        })
    }
}

/// The placement policy the user asked for (the MpiJob's
/// `spec.placement.policy`, same spellings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// Let the profile decide (see [`decide`](crate::decide)).
    #[default]
    Auto,
    /// Fewest nodes, fullest first.
    Pack,
    /// As many nodes as possible, ranks balanced.
    Spread,
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Pack => "pack",
            Self::Spread => "spread",
        })
    }
}

/// The share the launcher (the container running `mpirun`) needs on the first
/// node, besides the ranks placed there. `mpirun` mostly waits, so it is small.
pub const DEFAULT_LAUNCHER: Resources = Resources::new(0.1, 64.0, 0.0);

fn default_launcher() -> Resources {
    DEFAULT_LAUNCHER
}

/// One job's demand on the cluster. The controller builds it from the MpiJob
/// spec (`perRank` from `spec.resources`, `policy` from
/// `spec.placement.policy`, the rest from the fields of the same name); the
/// `launcher` share has no MpiJob field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobDemand {
    /// Number of MPI ranks; all or none of them are placed (gang semantics).
    pub ranks: u32,
    /// Resources of one rank. A worker hosting `n` ranks reserves `n` times this.
    pub per_rank: Resources,
    #[serde(default)]
    pub profile: Profile,
    #[serde(default)]
    pub policy: Policy,
    /// Upper bound on ranks (`slots`) of one worker, whatever the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ranks_per_node: Option<u32>,
    /// Every pair must equal one of the agent's attributes (`hostname` is an
    /// attribute too).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// The launcher's own share on the first node.
    #[serde(default = "default_launcher")]
    pub launcher: Resources,
}

impl JobDemand {
    /// A demand with the defaults of an MpiJob: profile `balanced`, policy
    /// `auto`, no selector, no per-node limit, the default launcher share.
    pub fn new(ranks: u32, per_rank: Resources) -> Self {
        Self {
            ranks,
            per_rank,
            profile: Profile::default(),
            policy: Policy::default(),
            max_ranks_per_node: None,
            node_selector: BTreeMap::new(),
            launcher: DEFAULT_LAUNCHER,
        }
    }

    pub fn with_profile(mut self, profile: Profile) -> Self {
        self.profile = profile;
        self
    }

    pub fn with_policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    pub fn with_max_ranks_per_node(mut self, max: u32) -> Self {
        self.max_ranks_per_node = Some(max);
        self
    }

    pub fn with_selector(mut self, key: &str, value: &str) -> Self {
        self.node_selector.insert(key.to_owned(), value.to_owned());
        self
    }

    pub fn with_launcher(mut self, launcher: Resources) -> Self {
        self.launcher = launcher;
        self
    }

    /// Rejects demands no cluster could ever satisfy or that make no sense,
    /// naming the offending field and value.
    pub fn validate(&self) -> Result<(), Unfit> {
        let invalid = |reason: String| Err(Unfit::new(UnfitKind::InvalidDemand, reason));
        if self.ranks == 0 {
            return invalid("ranks must be at least 1, got 0".into());
        }
        if self.max_ranks_per_node == Some(0) {
            return invalid("maxRanksPerNode must be at least 1, got 0".into());
        }
        let r = &self.per_rank;
        // A rank with no cpu would let any number of ranks share a core, which
        // no MPI workload wants and which makes "fewest nodes" degenerate.
        if !(r.cpus.is_finite() && r.cpus > 0.0) {
            return invalid(format!("cpus per rank must be a positive number, got {}", r.cpus));
        }
        for (name, value) in [
            ("memory per rank (MiB)", r.memory_mib),
            ("networkMbps per rank", r.network_mbps),
            ("launcher cpus", self.launcher.cpus),
            ("launcher memory (MiB)", self.launcher.memory_mib),
            ("launcher networkMbps", self.launcher.network_mbps),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return invalid(format!("{name} must be a finite number >= 0, got {value}"));
            }
        }
        Ok(())
    }
}
