//! The free capacity of one round, per agent, in exact thousandths: offers
//! merged by agent id, bad offers left out with a reason, locality groups
//! numbered. A queue round books placements against it; nothing else
//! mutates it.

use std::collections::hash_map::Entry;

use rustc_hash::FxHashMap;

use crate::capacity::{AgentCapacity, UNLIMITED, Vector, to_milli};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::FreeResources;

    fn agent(id: &str, rack: Option<&str>) -> AgentCapacity {
        let a = AgentCapacity::new(id, id, FreeResources::new(2.0, 1024.0));
        match rack {
            Some(r) => a.with_attribute("rack", r),
            None => a,
        }
    }

    #[test]
    fn agents_of_one_rack_share_a_group_and_unknown_racks_share_nothing() {
        let offers = [
            agent("a", Some("r1")),
            agent("b", None),
            agent("c", Some("r2")),
            agent("d", Some("r1")),
            agent("e", None),
        ];
        let ledger = Ledger::new(&offers, Some("rack"));
        assert_eq!(ledger.group, vec![0, 1, 2, 0, 3]);
        assert_eq!(ledger.groups, 4);
    }

    #[test]
    fn offers_of_one_agent_add_up_and_bad_ones_are_named() {
        let mut bad = agent("x", None);
        bad.free.memory_mib = -1.0;
        let offers = [agent("a", None), bad, agent("a", None)];
        let ledger = Ledger::new(&offers, None);
        assert_eq!(ledger.len(), 1);
        assert_eq!(ledger.free[0], Vector { cpus: 4000, mem: 2_048_000, net: UNLIMITED });
        assert_eq!(ledger.ignored, vec!["agent x offers memory MiB = -1".to_owned()]);
    }
}
