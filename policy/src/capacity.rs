//! What the cluster offers: one capacity view per agent, and the exact
//! fixed-point resource vectors the engine does its arithmetic on. Owns unit
//! conversion and "how many ranks fit in this much"; never decides where
//! ranks go.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::demand::Resources;

/// Free resources of one agent. `network_mbps: None` means the agent does not
/// account network bandwidth (most Mesos agents do not offer it), so network
/// demand is not limited there.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FreeResources {
    pub cpus: f64,
    pub memory_mib: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_mbps: Option<f64>,
}

impl FreeResources {
    pub const fn new(cpus: f64, memory_mib: f64) -> Self {
        Self { cpus, memory_mib, network_mbps: None }
    }

    pub const fn with_network(mut self, mbps: f64) -> Self {
        self.network_mbps = Some(mbps);
        self
    }
}

/// The capacity one agent offers right now, as the controller sees it after
/// merging that agent's offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapacity {
    pub agent_id: String,
    pub hostname: String,
    pub free: FreeResources,
    /// Agent attributes such as `rack` and `zone`, matched by `nodeSelector`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
    /// Measured or configured link bandwidth; only scorers read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_mbps: Option<f64>,
}

impl AgentCapacity {
    pub fn new(agent_id: &str, hostname: &str, free: FreeResources) -> Self {
        Self {
            agent_id: agent_id.to_owned(),
            hostname: hostname.to_owned(),
            free,
            attributes: BTreeMap::new(),
            bandwidth_mbps: None,
        }
    }

    pub fn with_attribute(mut self, key: &str, value: &str) -> Self {
        self.attributes.insert(key.to_owned(), value.to_owned());
        self
    }

    pub fn with_bandwidth(mut self, mbps: f64) -> Self {
        self.bandwidth_mbps = Some(mbps);
        self
    }

    /// An attribute value; `hostname` resolves to the agent's hostname unless
    /// the agent carries an explicit `hostname` attribute.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        match self.attributes.get(key) {
            Some(v) => Some(v),
            None if key == "hostname" => Some(&self.hostname),
            None => None,
        }
    }

    /// True when every selector pair equals the agent's attribute.
    pub fn matches(&self, selector: &BTreeMap<String, String>) -> bool {
        selector.iter().all(|(k, v)| self.attribute(k) == Some(v.as_str()))
    }
}

/// Thousandths of a unit. Mesos rounds scalar resources to three decimals for
/// the same reason: float sums like 0.1 + 0.2 must not over-commit an agent.
pub(crate) type Milli = u64;

/// Stand-in for "not accounted": large enough never to bind, small enough
/// that sums over many agents cannot overflow.
pub(crate) const UNLIMITED: Milli = 1 << 52;

/// Converts a unit value to thousandths, rounding to the nearest; `None` when
/// the value is negative, NaN or infinite.
pub(crate) fn to_milli(value: f64) -> Option<Milli> {
    // `+ 0.5` then truncation rounds half up, as `f64::round` does for
    // non-negative values, without the libm call (this runs per agent per job).
    (value.is_finite() && value >= 0.0).then(|| ((value * 1000.0 + 0.5) as Milli).min(UNLIMITED))
}

pub(crate) fn from_milli(value: Milli) -> f64 {
    value as f64 / 1000.0
}

/// A resource vector in thousandths: cpus, memory MiB, network Mbit/s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Vector {
    pub cpus: Milli,
    pub mem: Milli,
    pub net: Milli,
}

impl Vector {
    /// Converts a demand-side bundle. Callers validated it, so invalid parts
    /// cannot occur; they would read as zero.
    pub fn of(r: &Resources) -> Self {
        Self {
            cpus: to_milli(r.cpus).unwrap_or(0),
            mem: to_milli(r.memory_mib).unwrap_or(0),
            net: to_milli(r.network_mbps).unwrap_or(0),
        }
    }

    pub fn fits_in(&self, free: &Self) -> bool {
        self.cpus <= free.cpus && self.mem <= free.mem && self.net <= free.net
    }

    pub fn saturating_sub(&self, other: &Self) -> Self {
        Self {
            cpus: self.cpus.saturating_sub(other.cpus),
            mem: self.mem.saturating_sub(other.mem),
            net: self.net.saturating_sub(other.net),
        }
    }

    pub fn times(&self, n: u32) -> Self {
        let n = Milli::from(n);
        Self { cpus: self.cpus.saturating_mul(n), mem: self.mem.saturating_mul(n), net: self.net.saturating_mul(n) }
    }
}

/// How many ranks of `per_rank` fit in `free`, capped at `limit`.
pub(crate) fn ranks_fitting(free: &Vector, per_rank: &Vector, limit: u32) -> u32 {
    let mut n = Milli::from(limit);
    for (have, need) in [(free.cpus, per_rank.cpus), (free.mem, per_rank.mem), (free.net, per_rank.net)] {
        // A zero need never binds.
        if let Some(fit) = have.checked_div(need) {
            n = n.min(fit);
        }
    }
    // `n <= limit`, which is a u32.
    n as u32
}
