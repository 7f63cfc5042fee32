//! Scoring hooks: how data beyond free resources (topology, measured
//! bandwidth, later inter-node latency) refines a choice the policies leave
//! open. Scorers only order equally good options; they can never make a
//! placement over-commit, break the gang, or use more nodes than the policy
//! allows.

use std::collections::BTreeSet;

use crate::capacity::AgentCapacity;
use crate::demand::{JobDemand, Profile};

/// Refines placement choices without changing the engine's API. Implement it
/// to bring in new data (e.g. a latency matrix) and pass it to
/// [`crate::place_with`] or [`crate::queue_round`].
pub trait Scorer {
    /// Preference for one agent among agents that can host the same number of
    /// ranks; higher comes first. Called once per candidate agent per job.
    fn agent_score(&self, _job: &JobDemand, _agent: &AgentCapacity) -> f64 {
        0.0
    }

    /// The attribute `pack` tries to keep a job within (ties are broken
    /// toward one value of it). `None` turns that tie-break off.
    fn locality_key(&self) -> Option<&str> {
        Some("rack")
    }

    /// Preference between alternative node sets that use the same number of
    /// nodes; higher wins. `nodes[0]` is the launcher node. Called a handful
    /// of times per job, so it may look at every pair of nodes.
    fn placement_score(&self, _job: &JobDemand, _nodes: &[&AgentCapacity]) -> f64 {
        0.0
    }
}

/// The default scorer: keeps a job within as few racks, then zones, as the
/// node count allows, and for network-heavy jobs prefers agents with more
/// measured bandwidth for the traffic that must leave a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyScorer {
    pub rack_key: String,
    pub zone_key: String,
}

impl Default for TopologyScorer {
    fn default() -> Self {
        Self { rack_key: "rack".into(), zone_key: "zone".into() }
    }
}

impl TopologyScorer {
    fn distinct(nodes: &[&AgentCapacity], key: &str) -> usize {
        nodes.iter().map(|a| a.attribute(key)).collect::<BTreeSet<_>>().len()
    }
}

impl Scorer for TopologyScorer {
    fn agent_score(&self, job: &JobDemand, agent: &AgentCapacity) -> f64 {
        match job.profile {
            Profile::Network => agent.bandwidth_mbps.unwrap_or(0.0),
            _ => 0.0,
        }
    }

    fn locality_key(&self) -> Option<&str> {
        Some(&self.rack_key)
    }

    fn placement_score(&self, _job: &JobDemand, nodes: &[&AgentCapacity]) -> f64 {
        // Racks dominate zones: one rack across two zones cannot happen in
        // practice, and crossing a rack costs a switch hop.
        let racks = Self::distinct(nodes, &self.rack_key) as f64;
        let zones = Self::distinct(nodes, &self.zone_key) as f64;
        -(racks * 1e6 + zones)
    }
}

/// A scorer with no preferences: the policies' own order decides alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoScorer;

impl Scorer for NoScorer {
    fn locality_key(&self) -> Option<&str> {
        None
    }
}
