//! The placement engine (`mpiswarm-policy`) mirrors the MpiJob's `Profile`
//! and `PlacementPolicy` on purpose: it depends on no other mpiswarm crate,
//! and the controller hands a job's spellings straight to it. This test
//! proves the two agree in spelling (every variant survives a serde round
//! trip from one crate's type to the other's and back, and the CRD schema
//! offers exactly those spellings), in defaults, and in meaning (what each
//! MpiJob variant's doc promises is what the engine decides).

use mpiswarm_crds::{PlacementPolicy, Profile};
use mpiswarm_policy::{AppliedPolicy, Policy as EnginePolicy, Profile as EngineProfile, decide};
use serde_json::Value;

const PROFILES: [Profile; 4] = [Profile::Cpu, Profile::Memory, Profile::Network, Profile::Balanced];
const POLICIES: [PlacementPolicy; 3] = [PlacementPolicy::Auto, PlacementPolicy::Pack, PlacementPolicy::Spread];

/// The engine variant each MpiJob variant must become. The exhaustive match
/// stops the build when either side gains a variant the other lacks.
fn engine_profile(p: Profile) -> EngineProfile {
    match p {
        Profile::Cpu => EngineProfile::Cpu,
        Profile::Memory => EngineProfile::Memory,
        Profile::Network => EngineProfile::Network,
        Profile::Balanced => EngineProfile::Balanced,
    }
}

fn engine_policy(p: PlacementPolicy) -> EnginePolicy {
    match p {
        PlacementPolicy::Auto => EnginePolicy::Auto,
        PlacementPolicy::Pack => EnginePolicy::Pack,
        PlacementPolicy::Spread => EnginePolicy::Spread,
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

/// The `enum` of one spec field in the generated CRD schema.
fn schema_enum(field: &[&str]) -> Vec<String> {
    let crd = serde_json::to_value(mpiswarm_crds::crd()).expect("CRD is JSON");
    let mut node = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    for f in field {
        node = &node["properties"][*f];
    }
    node["enum"]
        .as_array()
        .unwrap_or_else(|| panic!("{field:?} has an enum: {node}"))
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
        assert_eq!((there, back), (engine_profile(p), p), "profile {}", spelling(&p));
        assert_eq!(there.to_string(), spelling(&p), "the engine's Display matches the spelling");
    }
    for e in [EngineProfile::Cpu, EngineProfile::Memory, EngineProfile::Network, EngineProfile::Balanced] {
        let (there, back): (Profile, EngineProfile) = round_trip(&e);
        assert_eq!((engine_profile(there), back), (e, e));
    }
    let spellings: Vec<String> = PROFILES.iter().map(spelling).collect();
    assert_eq!(schema_enum(&["profile"]), spellings, "the CRD offers exactly these profiles");
    assert_eq!(engine_profile(Profile::default()), EngineProfile::default(), "same default profile");
}

#[test]
fn every_placement_policy_is_spelled_alike_in_the_mpijob_and_the_engine() {
    for p in POLICIES {
        let (there, back): (EnginePolicy, PlacementPolicy) = round_trip(&p);
        assert_eq!((there, back), (engine_policy(p), p), "policy {}", spelling(&p));
        assert_eq!(there.to_string(), spelling(&p), "the engine's Display matches the spelling");
    }
    for e in [EnginePolicy::Auto, EnginePolicy::Pack, EnginePolicy::Spread] {
        let (there, back): (PlacementPolicy, EnginePolicy) = round_trip(&e);
        assert_eq!((engine_policy(there), back), (e, e));
    }
    let spellings: Vec<String> = POLICIES.iter().map(spelling).collect();
    assert_eq!(schema_enum(&["placement", "policy"]), spellings, "the CRD offers exactly these policies");
    assert_eq!(engine_policy(PlacementPolicy::default()), EnginePolicy::default(), "same default policy");
}

#[test]
fn each_variant_means_what_the_mpijob_documents() {
    // crds/src/spec.rs: cpu and memory spread, network packs, balanced has no
    // dominant bottleneck (the engine packs within whole cores); pack is
    // fewest nodes, spread most nodes, auto chooses from the profile.
    let expected = |profile: Profile| match profile {
        Profile::Cpu | Profile::Memory => AppliedPolicy::Spread,
        Profile::Network | Profile::Balanced => AppliedPolicy::Pack,
    };
    for profile in PROFILES {
        for policy in POLICIES {
            let applied = decide(engine_policy(policy), engine_profile(profile)).policy();
            let want = match policy {
                PlacementPolicy::Auto => expected(profile),
                PlacementPolicy::Pack => AppliedPolicy::Pack,
                PlacementPolicy::Spread => AppliedPolicy::Spread,
            };
            assert_eq!(applied, want, "policy {} with profile {}", spelling(&policy), spelling(&profile));
        }
    }
}
