//! The generated OpenAPI schema accepts every shipped example and rejects
//! bad objects naming the field, as the API server will with a 422. The
//! Rust `validate()` and the CEL rules are checked against the same cases.

use std::path::PathBuf;

use kube::core::cel;
use mpiswarm_crds::{MpiJob, Profile, parse_manifest};
use serde_json::{Value, json};

fn schema() -> Value {
    let crd = mpiswarm_crds::crd();
    let schema = crd.spec.versions[0].schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()).expect("schema");
    serde_json::to_value(schema).expect("schema is JSON")
}

/// Structural-schema errors as `field: message`, the way the API server words its causes.
fn schema_errors(object: &Value) -> Vec<String> {
    let validator = jsonschema::draft4::new(&schema()).expect("schema compiles");
    validator
        .iter_errors(object)
        .map(|e| format!("{}: {}", e.instance_path().as_str().trim_start_matches('/').replace('/', "."), e))
        .collect()
}

/// CEL failures from the engine and entry point the API server runs
/// (`apiserver/src/cel_rules.rs`: the schema's rules compiled once, then
/// `validate_compiled`).
fn cel_errors(object: &Value) -> Vec<String> {
    let rules = cel::compile_schema(&schema());
    match cel::validate_compiled(&rules, object, None) {
        Ok(()) => Vec::new(),
        Err(errors) => errors.to_string().lines().map(str::to_string).collect(),
    }
}

fn examples() -> Vec<(PathBuf, String)> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples"));
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .expect("examples/ exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("example readable");
            (p, text)
        })
        .collect();
    out.sort();
    out
}

fn good() -> Value {
    json!({
        "apiVersion": "mpiswarm.io/v1alpha1",
        "kind": "MpiJob",
        "metadata": {"name": "t", "namespace": "default"},
        "spec": {"image": "mpiswarm/openmpi:0.1.0", "command": ["/usr/local/bin/pi"], "ranks": 4,
                 "resources": {"cpus": 1, "memory": "64Mi"}}
    })
}

fn with(path: &[&str], value: Value) -> Value {
    let mut v = good();
    let mut cursor = &mut v;
    for key in &path[..path.len() - 1] {
        cursor = cursor.get_mut(*key).expect("path exists");
    }
    cursor[path[path.len() - 1]] = value;
    v
}

#[test]
fn every_example_is_valid_against_the_schema_the_cel_rules_and_validate() {
    let examples = examples();
    assert!(examples.len() >= 5, "pi.yaml and one example per profile");
    let mut profiles = std::collections::BTreeSet::new();
    for (path, text) in examples {
        let job = parse_manifest(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let value: Value = serde_yaml::from_str(&text).expect("yaml");
        assert_eq!(schema_errors(&value), Vec::<String>::new(), "{}", path.display());
        assert_eq!(cel_errors(&value), Vec::<String>::new(), "{}", path.display());
        job.spec.validate().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        profiles.insert(format!("{:?}", job.spec.profile));
    }
    for p in [Profile::Cpu, Profile::Memory, Profile::Network, Profile::Balanced] {
        assert!(profiles.contains(&format!("{p:?}")), "an example with profile {p:?}");
    }
}

#[test]
fn the_good_fixture_passes_everything() {
    assert!(schema_errors(&good()).is_empty());
    assert!(cel_errors(&good()).is_empty());
    let job: MpiJob = serde_json::from_value(good()).expect("deserializes");
    job.spec.validate().expect("valid");
}

#[test]
fn zero_ranks_is_rejected_naming_spec_ranks() {
    let bad = with(&["spec", "ranks"], json!(0));
    let errors = schema_errors(&bad);
    assert!(errors.iter().any(|e| e.starts_with("spec.ranks:")), "{errors:?}");
    let job: MpiJob = serde_json::from_value(bad).expect("deserializes");
    let err = job.spec.validate().expect_err("invalid");
    assert!(err.names("spec.ranks"), "{err}");
    assert!(err.to_string().contains("spec.ranks: Invalid value: 0"), "{err}");
}

#[test]
fn too_many_ranks_is_rejected() {
    let errors = schema_errors(&with(&["spec", "ranks"], json!(65537)));
    assert!(errors.iter().any(|e| e.starts_with("spec.ranks:")), "{errors:?}");
}

#[test]
fn negative_cpus_are_rejected_naming_spec_resources_cpus() {
    let bad = with(&["spec", "resources", "cpus"], json!(-1));
    let cel = cel_errors(&bad);
    assert!(cel.iter().any(|e| e.contains("cpus must be greater than 0")), "{cel:?}");
    let job: MpiJob = serde_json::from_value(bad).expect("deserializes");
    let err = job.spec.validate().expect_err("invalid");
    assert!(err.names("spec.resources.cpus"), "{err}");
}

#[test]
fn memory_that_is_not_a_quantity_is_rejected_naming_the_field_and_value() {
    let bad = with(&["spec", "resources", "memory"], json!("lots"));
    let errors = schema_errors(&bad);
    assert!(errors.iter().any(|e| e.starts_with("spec.resources.memory:") && e.contains("lots")), "{errors:?}");
    let job: MpiJob = serde_json::from_value(bad).expect("deserializes");
    let err = job.spec.validate().expect_err("invalid");
    assert!(err.names("spec.resources.memory"), "{err}");
    assert!(err.to_string().contains("\"lots\""), "{err}");
}

#[test]
fn an_unknown_profile_is_rejected_naming_spec_profile() {
    let bad = with(&["spec", "profile"], json!("gpu"));
    let errors = schema_errors(&bad);
    assert!(errors.iter().any(|e| e.starts_with("spec.profile:")), "{errors:?}");
    let text = serde_yaml::to_string(&bad).expect("yaml");
    let err = parse_manifest(&text).expect_err("unknown variant");
    assert!(err.to_string().starts_with("spec.profile: unknown variant `gpu`"), "{err}");
}

#[test]
fn an_empty_command_is_rejected_by_the_cel_rule_and_validate() {
    for command in [json!([]), json!([""])] {
        let bad = with(&["spec", "command"], command.clone());
        let cel = cel_errors(&bad);
        assert!(cel.iter().any(|e| e.contains("command must name a program")), "{command}: {cel:?}");
        let job: MpiJob = serde_json::from_value(bad).expect("deserializes");
        let err = job.spec.validate().expect_err("invalid");
        assert!(err.names("spec.command") || err.names("spec.command[0]"), "{err}");
    }
}

#[test]
fn max_ranks_per_node_below_one_is_rejected_by_cel() {
    let bad = with(&["spec", "placement"], json!({"maxRanksPerNode": 0}));
    let cel = cel_errors(&bad);
    assert!(cel.iter().any(|e| e.contains("maxRanksPerNode must be at least 1")), "{cel:?}");
}

#[test]
fn mpirun_flags_that_mpiswarm_owns_are_rejected() {
    let bad = with(&["spec", "mpi"], json!({"mpirunArgs": ["--bind-to", "core", "-np", "8"]}));
    let job: MpiJob = serde_json::from_value(bad).expect("deserializes");
    let err = job.spec.validate().expect_err("invalid");
    assert!(err.names("spec.mpi.mpirunArgs[2]"), "{err}");
}

#[test]
fn defaults_are_applied_when_fields_are_omitted() {
    let minimal = json!({
        "apiVersion": "mpiswarm.io/v1alpha1", "kind": "MpiJob", "metadata": {"name": "m"},
        "spec": {"image": "busybox", "command": ["true"], "ranks": 1}
    });
    let job: MpiJob = serde_json::from_value(minimal).expect("deserializes");
    let s = &job.spec;
    assert_eq!(s.profile, Profile::Balanced);
    assert_eq!(s.placement.policy, mpiswarm_crds::PlacementPolicy::Auto);
    assert_eq!(s.mpi.implementation, mpiswarm_crds::Implementation::OpenMPI);
    assert_eq!(s.role, "*");
    assert_eq!(s.run_policy.backoff_limit, 0);
    assert_eq!(s.run_policy.clean_policy, mpiswarm_crds::CleanPolicy::Running);
    assert!(!s.run_policy.suspend);
    assert_eq!(s.run_policy.scheduling_timeout_seconds, 300);
    assert_eq!(s.resources.cpus, 1.0);
    assert_eq!(s.resources.memory, "256Mi");
    s.validate().expect("defaults are valid");
}

#[test]
fn the_schema_carries_the_same_defaults_for_the_api_server() {
    let schema = schema();
    let spec = &schema["properties"]["spec"]["properties"];
    assert_eq!(spec["profile"]["default"], json!("balanced"));
    assert_eq!(spec["role"]["default"], json!("*"));
    assert_eq!(spec["runPolicy"]["properties"]["schedulingTimeoutSeconds"]["default"], json!(300));
    assert_eq!(spec["runPolicy"]["properties"]["cleanPolicy"]["default"], json!("Running"));
}

#[test]
fn a_manifest_of_another_kind_is_refused() {
    let err = parse_manifest("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n").expect_err("wrong kind");
    assert!(err.to_string().contains("expected mpiswarm.io/v1alpha1/MpiJob"), "{err}");
}

#[test]
fn a_volume_needs_exactly_one_source_an_absolute_path_and_not_a_reserved_one() {
    let two =
        with(&["spec", "volumes"], json!([{"name": "v", "mountPath": "/d", "tmpfs": {}, "hostPath": {"path": "/x"}}]));
    let cel = cel_errors(&two);
    assert!(cel.iter().any(|e| e.contains("exactly one of dockerVolume, hostPath or tmpfs")), "{cel:?}");
    for (volumes, field) in [
        (json!([{"name": "v", "mountPath": "data", "tmpfs": {}}]), "spec.volumes[0].mountPath"),
        (json!([{"name": "v", "mountPath": "/etc/mpi", "tmpfs": {}}]), "spec.volumes[0].mountPath"),
        (json!([{"name": "v", "mountPath": "/in", "hostPath": {"path": "srv"}}]), "spec.volumes[0].hostPath.path"),
        (json!([{"name": "v", "mountPath": "/s", "readOnly": true, "tmpfs": {}}]), "spec.volumes[0].readOnly"),
        (
            json!([{"name": "a", "mountPath": "/d", "tmpfs": {}}, {"name": "b", "mountPath": "/d/", "tmpfs": {}}]),
            "spec.volumes[1].mountPath",
        ),
    ] {
        let job: MpiJob = serde_json::from_value(with(&["spec", "volumes"], volumes.clone())).expect("deserializes");
        let err = job.spec.validate().expect_err("invalid");
        assert!(err.names(field), "{volumes}: {err}");
    }
    let fine =
        with(&["spec", "volumes"], json!([{"name": "r", "mountPath": "/data", "dockerVolume": {"name": "results"}}]));
    assert!(schema_errors(&fine).is_empty() && cel_errors(&fine).is_empty());
    let job: MpiJob = serde_json::from_value(fine).expect("deserializes");
    job.spec.validate().expect("valid");
}
