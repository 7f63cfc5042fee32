//! What the cluster offers: one capacity view per agent, and the exact
//! fixed-point ledger the engine does its arithmetic on. Owns unit conversion
//! and "how many ranks fit on this agent"; never decides where ranks go.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry;

use serde::{Deserialize, Serialize};

use crate::demand::{JobDemand, Resources};

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

/// The free capacity of every usable agent, in thousandths. A queue round
/// subtracts each placement from it, so capacity is never booked twice.
#[derive(Debug, Clone)]
pub(crate) struct Ledger<'a> {
    pub agents: Vec<&'a AgentCapacity>,
    pub free: Vec<Vector>,
    /// Each agent's locality group (e.g. rack) as a number below `groups`.
    pub group: Vec<u32>,
    pub groups: u32,
    /// Agents left out because a value was unusable, with why.
    pub ignored: Vec<String>,
}

impl<'a> Ledger<'a> {
    /// Builds the ledger. Several entries for one agent id (one per Mesos
    /// offer) are summed; attributes come from the first. An agent with a
    /// negative, NaN or infinite value is left out and named in `ignored`, so
    /// one bad offer never blocks the others. Agents that share a value of
    /// `locality_key` share a group; agents without it are each a group of
    /// their own, because unknown locality is not shared locality.
    pub fn new(offers: &'a [AgentCapacity], locality_key: Option<&str>) -> Self {
        let mut ledger = Ledger {
            agents: Vec::with_capacity(offers.len()),
            free: Vec::with_capacity(offers.len()),
            group: Vec::with_capacity(offers.len()),
            groups: 0,
            ignored: Vec::new(),
        };
        let mut index: FxHashMap<&str, usize> = FxHashMap::default();
        index.reserve(offers.len());
        let mut groups: FxHashMap<&str, u32> = FxHashMap::default();
        // Offers usually arrive rack by rack; skip the lookup for a repeat.
        let mut last: Option<(&str, u32)> = None;
        for offer in offers {
            let Some(free) = Self::convert(offer, &mut ledger.ignored) else {
                continue;
            };
            let i = match index.entry(&offer.agent_id) {
                Entry::Occupied(e) => {
                    let sum = &mut ledger.free[*e.get()];
                    sum.cpus = (sum.cpus + free.cpus).min(UNLIMITED);
                    sum.mem = (sum.mem + free.mem).min(UNLIMITED);
                    sum.net = (sum.net + free.net).min(UNLIMITED);
                    continue;
                }
                Entry::Vacant(e) => *e.insert(ledger.agents.len()),
            };
            debug_assert_eq!(i, ledger.agents.len());
            let group = match locality_key.and_then(|k| offer.attribute(k)) {
                Some(value) if last.is_some_and(|(v, _)| v == value) => last.map_or(0, |(_, g)| g),
                Some(value) => {
                    let g = *groups.entry(value).or_insert(ledger.groups);
                    last = Some((value, g));
                    g
                }
                None => ledger.groups,
            };
            if group == ledger.groups {
                ledger.groups += 1;
            }
            ledger.agents.push(offer);
            ledger.free.push(free);
            ledger.group.push(group);
        }
        ledger
    }

    fn convert(offer: &AgentCapacity, ignored: &mut Vec<String>) -> Option<Vector> {
        let f = &offer.free;
        let bad = |what: &str, v: f64| format!("agent {} offers {what} = {v}", offer.agent_id);
        let Some(cpus) = to_milli(f.cpus) else {
            ignored.push(bad("cpus", f.cpus));
            return None;
        };
        let Some(mem) = to_milli(f.memory_mib) else {
            ignored.push(bad("memory MiB", f.memory_mib));
            return None;
        };
        let net = match f.network_mbps {
            None => UNLIMITED,
            Some(v) => match to_milli(v) {
                Some(n) => n,
                None => {
                    ignored.push(bad("networkMbps", v));
                    return None;
                }
            },
        };
        Some(Vector { cpus, mem, net })
    }

    pub fn len(&self) -> usize {
        self.agents.len()
    }
}

/// The preference order of candidates, smallest first: most room, then the
/// biggest locality group (so ties cluster in one rack), then the scorer's
/// preference, then one group before the next, then offer order.
pub(crate) type OrderKey = (Reverse<u32>, Reverse<u64>, Reverse<u64>, u32, usize);

/// How many ranks of one job an agent can host, as a worker alone (`cap`) and
/// as the first node that also runs the launcher (`cap_with_launcher`), plus
/// what orders it among the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub agent: usize,
    pub cap: u32,
    pub cap_with_launcher: u32,
    /// Whether the launcher fits here at all (even with no rank).
    pub launcher_fits: bool,
    /// Locality group (e.g. rack).
    pub group: u32,
    /// Total rank capacity of the group; set by the engine.
    pub group_weight: u64,
    /// The scorer's preference, as order-preserving bits; set by the engine.
    pub score: u64,
}

impl Candidate {
    /// Ranks of capacity lost by putting the launcher here.
    pub fn launcher_loss(&self) -> u32 {
        self.cap - self.cap_with_launcher
    }

    /// Whether this agent can be the first node: launcher plus at least one rank.
    pub fn can_lead(&self) -> bool {
        self.launcher_fits && self.cap_with_launcher >= 1
    }

    pub fn key(&self) -> OrderKey {
        (Reverse(self.cap), Reverse(self.group_weight), Reverse(self.score), self.group, self.agent)
    }
}

/// Maps a score to bits that sort like the number (higher score, higher bits).
pub(crate) fn score_bits(score: f64) -> u64 {
    let bits = score.to_bits();
    if bits >> 63 == 1 { !bits } else { bits | 1 << 63 }
}

/// Sorts the `m` most preferred candidates to the front in order, leaving the
/// rest unordered behind them: O(n + m log m) instead of a full sort.
pub(crate) fn sort_head(cands: &mut [Candidate], m: usize) {
    if m < cands.len() {
        cands.select_nth_unstable_by_key(m, Candidate::key);
    }
    let m = m.min(cands.len());
    cands[..m].sort_unstable_by_key(Candidate::key);
}

/// The agents that match the job's selector and fit at least one rank, with
/// their rank capacities. `cores_cap` additionally limits ranks to the whole
/// free cores of the agent (the `auto` rule for balanced jobs).
pub(crate) fn candidates(job: &JobDemand, ledger: &Ledger<'_>, cores_cap: bool) -> Vec<Candidate> {
    let per_rank = Vector::of(&job.per_rank);
    let launcher = Vector::of(&job.launcher);
    // Not capped at the job's ranks: best fit needs to see how much room is left.
    let limit = job.max_ranks_per_node.unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(ledger.len());
    for (i, free) in ledger.free.iter().enumerate() {
        if !job.node_selector.is_empty() && !ledger.agents[i].matches(&job.node_selector) {
            continue;
        }
        let limit = if cores_cap { limit.min(u32::try_from(free.cpus / 1000).unwrap_or(u32::MAX)) } else { limit };
        let cap = ranks_fitting(free, &per_rank, limit);
        if cap == 0 {
            continue;
        }
        let launcher_fits = launcher.fits_in(free);
        let cap_with_launcher =
            if launcher_fits { ranks_fitting(&free.saturating_sub(&launcher), &per_rank, limit) } else { 0 };
        out.push(Candidate {
            agent: i,
            cap,
            cap_with_launcher,
            launcher_fits,
            group: ledger.group[i],
            group_weight: 0,
            score: 0,
        });
    }
    out
}
