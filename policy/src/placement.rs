//! The engine's answer when a job fits: which agents host how many ranks, and
//! where the launcher goes. Plain data for the controller to turn into
//! LAUNCH_GROUP operations and status.

use serde::{Deserialize, Serialize};

use crate::auto::{AppliedPolicy, Rule};
use crate::demand::Resources;

/// One worker: all the job's ranks on one agent (`slots = ranks`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeAssignment {
    pub agent_id: String,
    pub hostname: String,
    pub ranks: u32,
    /// What the worker reserves: `ranks` times the per-rank resources.
    pub resources: Resources,
}

/// Where `mpirun` runs: always the first node of the placement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LauncherAssignment {
    pub agent_id: String,
    pub hostname: String,
    pub resources: Resources,
}

/// A whole gang: every rank of the job, and the launcher.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    pub policy_applied: AppliedPolicy,
    pub rule: Rule,
    /// A sentence for the job's status: the rule that fired, why, and the shape.
    pub reason: String,
    /// One entry per agent, launcher node first, each with at least one rank.
    pub nodes: Vec<NodeAssignment>,
    pub launcher: LauncherAssignment,
}

impl Placement {
    pub fn total_ranks(&self) -> u32 {
        self.nodes.iter().map(|n| n.ranks).sum()
    }

    /// Ranks per node in placement order, e.g. `[3, 3, 2]`.
    pub fn shape(&self) -> Vec<u32> {
        self.nodes.iter().map(|n| n.ranks).collect()
    }
}
