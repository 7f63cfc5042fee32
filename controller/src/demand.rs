//! Translation between the MpiJob / Mesos vocabularies and the policy
//! engine's plain data: an MpiJob spec becomes a [`JobDemand`], a set of
//! Mesos offers becomes one [`AgentCapacity`] per agent, a [`Placement`]
//! becomes the status' account of it and back. The one mapping between the
//! crds and policy enums (the two crates depend on neither other) and the
//! one place where the CRD's int32 counts meet the engine's u32, checked.
//! Pure: no I/O, and it decides nothing (the engine and `plan.rs` do).

use std::collections::BTreeMap;

use mpiswarm_crds::quantity::{self, QuantityError};
use mpiswarm_crds::{MpiJobSpec, NodePlacement, PlacementPolicy, PlacementStatus, Profile};
use mpiswarm_mesos::{Offer, resources::scalar_sum};
use mpiswarm_policy::{
    AgentCapacity, FreeResources, JobDemand, LauncherAssignment, NodeAssignment, Placement, Policy, Resources, decide,
};

use crate::names::TaskRole;

/// Why an MpiJob's spec or status does not translate into the engine's
/// terms; each message names the field, its value and what to change.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum DemandError {
    #[error("spec.resources.memory: {0}")]
    Memory(#[source] QuantityError),
    #[error("spec.ranks {0} is negative; set it between 1 and 65536")]
    Ranks(i32),
    #[error("spec.placement.maxRanksPerNode {0} is negative; set it to at least 1, or leave it out for no limit")]
    MaxRanksPerNode(i32),
    #[error(
        "status.placement.nodes[{index}] (node {node}) has {ranks} ranks; a placement never has a negative count, so the status was not written by the controller: delete and re-create the job"
    )]
    PlacedRanks { index: usize, node: String, ranks: i32 },
}

/// Per-rank memory in MiB.
fn memory_mib(spec: &MpiJobSpec) -> Result<f64, DemandError> {
    quantity::parse_bytes(&spec.resources.memory).map(|b| quantity::bytes_to_mib(b) as f64).map_err(DemandError::Memory)
}

/// What the job asks of the cluster, in the policy engine's terms. The
/// spec's int32 counts become the engine's u32 here, checked, and stay u32
/// inside the controller until [`placement_status`] writes them back.
pub fn job_demand(spec: &MpiJobSpec) -> Result<JobDemand, DemandError> {
    let ranks = u32::try_from(spec.ranks).map_err(|_| DemandError::Ranks(spec.ranks))?;
    let net = spec.resources.network_mbps.unwrap_or(0) as f64;
    let mut demand = JobDemand::new(ranks, Resources::new(spec.resources.cpus, memory_mib(spec)?, net))
        .with_profile(profile(spec.profile))
        .with_policy(policy(spec.placement.policy));
    if let Some(max) = spec.placement.max_ranks_per_node {
        let max = u32::try_from(max).map_err(|_| DemandError::MaxRanksPerNode(max))?;
        demand = demand.with_max_ranks_per_node(max);
    }
    demand.node_selector = spec.placement.node_selector.clone();
    Ok(demand)
}

/// The crds and policy enums spell the same words; this is the one mapping
/// (crds and policy depend on neither other, so it lives here).
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

/// The policy the engine applied, as the status records it.
pub fn applied_policy(p: mpiswarm_policy::AppliedPolicy) -> mpiswarm_crds::AppliedPolicy {
    match p {
        mpiswarm_policy::AppliedPolicy::Pack => mpiswarm_crds::AppliedPolicy::Pack,
        mpiswarm_policy::AppliedPolicy::Spread => mpiswarm_crds::AppliedPolicy::Spread,
    }
}

/// A count for one of the status' int32 fields. Every count the controller
/// writes is at most `spec.ranks`, itself an int32, so the bound is never
/// reached; it saturates rather than wrap if it were.
pub fn status_count(n: impl TryInto<i32>) -> i32 {
    n.try_into().unwrap_or(i32::MAX)
}

/// The status' account of a placement: the applied policy, the engine's
/// reason, and each node with its ranks and worker.
pub fn placement_status(p: &Placement) -> PlacementStatus {
    PlacementStatus {
        policy: applied_policy(p.policy_applied),
        reason: p.reason.clone(),
        node_count: status_count(p.nodes.len()),
        nodes: p
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| NodePlacement {
                node: n.hostname.clone(),
                agent_id: n.agent_id.clone(),
                ranks: status_count(n.ranks),
                worker: TaskRole::Worker(i as u32).hostname(),
            })
            .collect(),
    }
}

/// The placement a status recorded, rebuilt for a job demanding `d` (after
/// a controller restart); `None` if it recorded no node. The inverse of
/// [`placement_status`].
pub fn placement_from_status(placed: &PlacementStatus, d: &JobDemand) -> Result<Option<Placement>, DemandError> {
    let Some(first) = placed.nodes.first() else { return Ok(None) };
    let rule = decide(d.policy, d.profile);
    let nodes = placed
        .nodes
        .iter()
        .enumerate()
        .map(|(index, n)| {
            let ranks = u32::try_from(n.ranks).map_err(|_| DemandError::PlacedRanks {
                index,
                node: n.node.clone(),
                ranks: n.ranks,
            })?;
            Ok(NodeAssignment {
                agent_id: n.agent_id.clone(),
                hostname: n.node.clone(),
                ranks,
                resources: d.per_rank.times(ranks),
            })
        })
        .collect::<Result<_, DemandError>>()?;
    Ok(Some(Placement {
        policy_applied: rule.policy(),
        rule,
        reason: placed.reason.clone(),
        nodes,
        launcher: LauncherAssignment {
            agent_id: first.agent_id.clone(),
            hostname: first.node.clone(),
            resources: d.launcher,
        },
    }))
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
    use mpiswarm_policy::{AppliedPolicy as EngineApplied, Policy as EnginePolicy, Profile as EngineProfile};
    use serde_json::Value;

    // The engine mirrors the MpiJob's `Profile`, `PlacementPolicy` and the
    // status' `AppliedPolicy` on purpose (it depends on no other mpiswarm
    // crate) and `profile`, `policy` and `applied_policy` above translate.
    // These tests prove the two sides agree in spelling (every variant
    // survives a serde round trip from one crate's type to the other's and
    // back, and the CRD schema offers exactly those spellings), in defaults,
    // and in meaning (what each MpiJob variant's doc promises is what the
    // engine decides). The exhaustive matches below stop the build when
    // either side gains a variant the other lacks.
    const PROFILES: [Profile; 4] = [Profile::Cpu, Profile::Memory, Profile::Network, Profile::Balanced];
    const POLICIES: [PlacementPolicy; 3] = [PlacementPolicy::Auto, PlacementPolicy::Pack, PlacementPolicy::Spread];
    const APPLIED: [EngineApplied; 2] = [EngineApplied::Pack, EngineApplied::Spread];

    /// The MpiJob variant each engine variant comes from (the inverse of
    /// the mapping under test, exhaustive over the engine's variants).
    fn mpijob_profile(p: EngineProfile) -> Profile {
        match p {
            EngineProfile::Cpu => Profile::Cpu,
            EngineProfile::Memory => Profile::Memory,
            EngineProfile::Network => Profile::Network,
            EngineProfile::Balanced => Profile::Balanced,
        }
    }

    fn mpijob_policy(p: EnginePolicy) -> PlacementPolicy {
        match p {
            EnginePolicy::Auto => PlacementPolicy::Auto,
            EnginePolicy::Pack => PlacementPolicy::Pack,
            EnginePolicy::Spread => PlacementPolicy::Spread,
        }
    }

    /// Serializes `from` and reads it back as `To`, then back again.
    fn round_trip<From, To>(from: &From) -> (To, From)
    where
        From: serde::Serialize + serde::de::DeserializeOwned,
        To: serde::Serialize + serde::de::DeserializeOwned,
    {
        let there: To = serde_json::from_value(serde_json::to_value(from).expect("serializes"))
            .unwrap_or_else(|e| panic!("{} is not a spelling the other crate reads: {e}", serde_json::json!(from)));
        let back: From = serde_json::from_value(serde_json::to_value(&there).expect("serializes")).expect("reads back");
        (there, back)
    }

    /// The `enum` of one field (a path from the schema's root) in the generated CRD.
    fn schema_enum(path: &[&str]) -> Vec<String> {
        let crd = serde_json::to_value(mpiswarm_crds::crd()).expect("CRD is JSON");
        let mut node = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        for f in path {
            node = &node["properties"][*f];
        }
        node["enum"]
            .as_array()
            .unwrap_or_else(|| panic!("{path:?} has an enum: {node}"))
            .iter()
            .map(|v| v.as_str().expect("text").to_owned())
            .collect()
    }

    fn spelling(v: &impl serde::Serialize) -> String {
        match serde_json::to_value(v).expect("serializes") {
            Value::String(s) => s,
            other => panic!("not a string: {other}"),
        }
    }

    #[test]
    fn every_profile_is_spelled_alike_in_the_mpijob_and_the_engine() {
        for p in PROFILES {
            let (there, back): (EngineProfile, Profile) = round_trip(&p);
            assert_eq!((there, back), (profile(p), p), "profile {}", spelling(&p));
            assert_eq!(there.to_string(), spelling(&p), "the engine's Display matches the spelling");
            assert_eq!(mpijob_profile(profile(p)), p);
        }
        for e in [EngineProfile::Cpu, EngineProfile::Memory, EngineProfile::Network, EngineProfile::Balanced] {
            let (there, back): (Profile, EngineProfile) = round_trip(&e);
            assert_eq!((profile(there), back), (e, e));
            assert_eq!(profile(mpijob_profile(e)), e);
        }
        let spellings: Vec<String> = PROFILES.iter().map(spelling).collect();
        assert_eq!(schema_enum(&["spec", "profile"]), spellings, "the CRD offers exactly these profiles");
        assert_eq!(profile(Profile::default()), EngineProfile::default(), "same default profile");
    }

    #[test]
    fn every_placement_policy_is_spelled_alike_in_the_mpijob_and_the_engine() {
        for p in POLICIES {
            let (there, back): (EnginePolicy, PlacementPolicy) = round_trip(&p);
            assert_eq!((there, back), (policy(p), p), "policy {}", spelling(&p));
            assert_eq!(there.to_string(), spelling(&p), "the engine's Display matches the spelling");
            assert_eq!(mpijob_policy(policy(p)), p);
        }
        for e in [EnginePolicy::Auto, EnginePolicy::Pack, EnginePolicy::Spread] {
            let (there, back): (PlacementPolicy, EnginePolicy) = round_trip(&e);
            assert_eq!((policy(there), back), (e, e));
            assert_eq!(policy(mpijob_policy(e)), e);
        }
        let spellings: Vec<String> = POLICIES.iter().map(spelling).collect();
        assert_eq!(schema_enum(&["spec", "placement", "policy"]), spellings, "the CRD offers exactly these policies");
        assert_eq!(policy(PlacementPolicy::default()), EnginePolicy::default(), "same default policy");
    }

    #[test]
    fn every_applied_policy_is_written_to_the_status_as_the_engine_spells_it() {
        for e in APPLIED {
            let (there, back): (mpiswarm_crds::AppliedPolicy, EngineApplied) = round_trip(&e);
            assert_eq!((there, back), (applied_policy(e), e), "applied policy {e}");
            assert_eq!(there.to_string(), e.to_string(), "kubectl's Policy column reads what the engine says");
        }
        let spellings: Vec<String> = APPLIED.iter().map(spelling).collect();
        assert_eq!(
            schema_enum(&["status", "placement", "policy"]),
            spellings,
            "the CRD's status offers exactly the engine's policies"
        );
    }

    #[test]
    fn each_variant_means_what_the_mpijob_documents() {
        // crds/src/spec.rs: cpu and memory spread, network packs, balanced has no
        // dominant bottleneck (the engine packs within whole cores); pack is
        // fewest nodes, spread most nodes, auto chooses from the profile.
        let expected = |p: Profile| match p {
            Profile::Cpu | Profile::Memory => EngineApplied::Spread,
            Profile::Network | Profile::Balanced => EngineApplied::Pack,
        };
        for pr in PROFILES {
            for po in POLICIES {
                let applied = decide(policy(po), profile(pr)).policy();
                let want = match po {
                    PlacementPolicy::Auto => expected(pr),
                    PlacementPolicy::Pack => EngineApplied::Pack,
                    PlacementPolicy::Spread => EngineApplied::Spread,
                };
                assert_eq!(applied, want, "policy {} with profile {}", spelling(&po), spelling(&pr));
            }
        }
    }

    #[test]
    fn a_placement_survives_the_status_and_a_negative_count_there_is_named() {
        let job: mpiswarm_crds::MpiJob = serde_yaml::from_str(
            "apiVersion: mpiswarm.io/v1alpha1\nkind: MpiJob\nmetadata: {name: j}\nspec: {image: i, command: [x], ranks: 5, resources: {cpus: 0.5, memory: 64Mi}, placement: {policy: spread}}\n",
        )
        .unwrap();
        let d = job_demand(&job.spec).unwrap();
        let offers = [
            AgentCapacity::new("a1", "n1", FreeResources::new(2.0, 4096.0)),
            AgentCapacity::new("a2", "n2", FreeResources::new(2.0, 4096.0)),
        ];
        let placed = mpiswarm_policy::place(&d, &offers).unwrap();
        let status = placement_status(&placed);
        assert_eq!(status.policy, mpiswarm_crds::AppliedPolicy::Spread);
        assert_eq!((status.node_count, status.nodes[1].worker.as_str()), (2, "worker-1"));
        assert_eq!(status.nodes.iter().map(|n| n.ranks).sum::<i32>(), 5);
        assert_eq!(placement_from_status(&status, &d), Ok(Some(placed)));

        let mut bad = status.clone();
        bad.nodes[1].ranks = -2;
        let err = placement_from_status(&bad, &d).unwrap_err();
        assert_eq!(err, DemandError::PlacedRanks { index: 1, node: "n2".into(), ranks: -2 });
        assert!(err.to_string().contains("status.placement.nodes[1] (node n2) has -2 ranks"), "{err}");
        bad.nodes.clear();
        assert_eq!(placement_from_status(&bad, &d), Ok(None));
    }

    #[test]
    fn a_spec_that_does_not_translate_says_which_field_and_what_to_do() {
        let mut spec: MpiJobSpec = serde_yaml::from_str("{image: i, command: [x], ranks: -1}").unwrap();
        assert_eq!(job_demand(&spec).unwrap_err().to_string(), "spec.ranks -1 is negative; set it between 1 and 65536");
        spec.ranks = 2;
        spec.resources.memory = "lots".into();
        let err = job_demand(&spec).unwrap_err().to_string();
        assert!(err.starts_with("spec.resources.memory: \"lots\" is not a quantity: use"), "{err}");
    }

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
