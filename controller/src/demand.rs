//! Translation between the MpiJob / Mesos vocabularies and the policy
//! engine's plain data: an MpiJob spec becomes a [`JobDemand`], a set of
//! Mesos offers becomes one [`AgentCapacity`] per agent. Pure: no I/O.

use std::collections::BTreeMap;

use mpiswarm_crds::{MpiJobSpec, PlacementPolicy, Profile, quantity};
use mpiswarm_mesos::{Offer, resources::scalar_sum};
use mpiswarm_policy::{AgentCapacity, FreeResources, JobDemand, Policy, Resources};

/// Per-rank memory in MiB, or the reason it cannot be read.
pub fn memory_mib(spec: &MpiJobSpec) -> Result<f64, String> {
    quantity::parse_bytes(&spec.resources.memory)
        .map(|b| quantity::bytes_to_mib(b) as f64)
        .map_err(|e| format!("spec.resources.memory {:?}: {e}", spec.resources.memory))
}

/// What the job asks of the cluster, in the policy engine's terms.
pub fn job_demand(spec: &MpiJobSpec) -> Result<JobDemand, String> {
    let ranks = u32::try_from(spec.ranks).map_err(|_| format!("spec.ranks {} is not a positive count", spec.ranks))?;
    let net = spec.resources.network_mbps.unwrap_or(0) as f64;
    let mut demand = JobDemand::new(ranks, Resources::new(spec.resources.cpus, memory_mib(spec)?, net))
        .with_profile(profile(spec.profile))
        .with_policy(policy(spec.placement.policy));
    if let Some(max) = spec.placement.max_ranks_per_node {
        let max = u32::try_from(max).map_err(|_| format!("spec.placement.maxRanksPerNode {max} is negative"))?;
        demand = demand.with_max_ranks_per_node(max);
    }
    demand.node_selector = spec.placement.node_selector.clone();
    Ok(demand)
}

/// The crds and policy enums spell the same words; this is the one mapping.
pub fn profile(p: Profile) -> mpiswarm_policy::Profile {
    match p {
        Profile::Cpu => mpiswarm_policy::Profile::Cpu,
        Profile::Memory => mpiswarm_policy::Profile::Memory,
        Profile::Network => mpiswarm_policy::Profile::Network,
        Profile::Balanced => mpiswarm_policy::Profile::Balanced,
    }
}

pub fn policy(p: PlacementPolicy) -> Policy {
    match p {
        PlacementPolicy::Auto => Policy::Auto,
        PlacementPolicy::Pack => Policy::Pack,
        PlacementPolicy::Spread => Policy::Spread,
    }
}

/// One capacity per agent from offers (an agent may have several offers,
/// one per role; the caller passes those of one role). Attributes become
/// selector keys; TEXT and SCALAR attributes are both matched as text.
pub fn capacities<'a>(offers: impl IntoIterator<Item = &'a Offer>) -> Vec<AgentCapacity> {
    let mut by_agent: BTreeMap<&str, AgentCapacity> = BTreeMap::new();
    for offer in offers {
        let entry = by_agent.entry(offer.agent_id.value.as_str()).or_insert_with(|| {
            let mut cap = AgentCapacity::new(&offer.agent_id.value, &offer.hostname, FreeResources::default());
            for a in &offer.attributes {
                if let Some(v) = attribute_text(a) {
                    cap.attributes.insert(a.name.clone(), v);
                }
            }
            cap
        });
        entry.free.cpus += scalar_sum(&offer.resources, "cpus");
        entry.free.memory_mib += scalar_sum(&offer.resources, "mem");
        let net = scalar_sum(&offer.resources, "network");
        if net > 0.0 {
            entry.free.network_mbps = Some(entry.free.network_mbps.unwrap_or(0.0) + net);
        }
    }
    by_agent.into_values().collect()
}

fn attribute_text(a: &mpiswarm_mesos::Attribute) -> Option<String> {
    if let Some(t) = a.text_value() {
        return Some(t.to_owned());
    }
    a.scalar.as_ref().map(|s| {
        if s.value.fract() == 0.0 && s.value.abs() < 1e15 { format!("{}", s.value as i64) } else { s.value.to_string() }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpiswarm_mesos::{AgentId, Attribute, FrameworkId, OfferId, Resource};

    fn offer(id: &str, agent: &str, cpus: f64, mem: f64) -> Offer {
        Offer {
            id: OfferId::new(id),
            framework_id: FrameworkId::new("f"),
            agent_id: AgentId::new(agent),
            hostname: format!("host-{agent}"),
            url: None,
            domain: None,
            resources: vec![Resource::scalar("cpus", cpus), Resource::scalar("mem", mem)],
            attributes: vec![Attribute::text("rack", "r1"), Attribute::scalar("gen", 3.0)],
            executor_ids: Vec::new(),
            unavailability: None,
            allocation_info: None,
        }
    }

    #[test]
    fn offers_of_one_agent_add_up_and_attributes_become_selector_text() {
        let caps =
            capacities(&[offer("o1", "a1", 1.5, 512.0), offer("o2", "a1", 0.5, 512.0), offer("o3", "a2", 2.0, 64.0)]);
        assert_eq!(caps.len(), 2);
        assert_eq!(caps[0].free.cpus, 2.0);
        assert_eq!(caps[0].free.memory_mib, 1024.0);
        assert_eq!(caps[0].attribute("rack"), Some("r1"));
        assert_eq!(caps[0].attribute("gen"), Some("3"));
        assert_eq!(caps[0].attribute("hostname"), Some("host-a1"));
        assert_eq!(caps[1].free.network_mbps, None);
    }

    #[test]
    fn an_mpijob_spec_becomes_the_engines_demand() {
        let job: mpiswarm_crds::MpiJob = serde_yaml::from_str(
            "apiVersion: mpiswarm.io/v1alpha1\nkind: MpiJob\nmetadata: {name: j}\nspec:\n  image: i\n  command: [x]\n  ranks: 6\n  resources: {cpus: 0.5, memory: 1Gi}\n  profile: network\n  placement: {policy: spread, maxRanksPerNode: 2, nodeSelector: {rack: r1}}\n",
        )
        .unwrap();
        let d = job_demand(&job.spec).unwrap();
        assert_eq!(d.ranks, 6);
        assert_eq!(d.per_rank, Resources::new(0.5, 1024.0, 0.0));
        assert_eq!(d.profile, mpiswarm_policy::Profile::Network);
        assert_eq!(d.policy, Policy::Spread);
        assert_eq!(d.max_ranks_per_node, Some(2));
        assert_eq!(d.node_selector.get("rack").map(String::as_str), Some("r1"));
    }
}
