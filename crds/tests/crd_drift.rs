//! The committed `crds/mpijob.yaml` is what `mpiswarm crd` prints. Anyone who
//! changes the types must regenerate it (`make crds`), or this test fails.

#[test]
fn committed_crd_yaml_matches_the_types() {
    let committed = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/mpijob.yaml"))
        .expect("crds/mpijob.yaml is committed");
    let generated = mpiswarm_crds::crd_yaml().expect("CRD serializes");
    assert!(
        committed == generated,
        "crds/mpijob.yaml is stale: run `make crds` and commit the result.\n--- generated ---\n{generated}"
    );
}

#[test]
fn crd_has_what_kubectl_users_rely_on() {
    let crd = mpiswarm_crds::crd();
    let names = &crd.spec.names;
    assert_eq!(crd.spec.group, "mpiswarm.io");
    assert_eq!(crd.spec.scope, "Namespaced");
    assert_eq!(names.kind, "MpiJob");
    assert_eq!(names.short_names.as_deref(), Some(&["mpij".to_string()][..]));
    let version = &crd.spec.versions[0];
    assert_eq!(version.name, "v1alpha1");
    assert!(version.subresources.as_ref().and_then(|s| s.status.as_ref()).is_some(), "status subresource");
    let columns: Vec<&str> = version.additional_printer_columns.iter().flatten().map(|c| c.name.as_str()).collect();
    assert_eq!(columns, ["Phase", "Ranks", "Policy", "Nodes", "Age"]);
    let yaml = mpiswarm_crds::crd_yaml().expect("CRD serializes");
    assert!(yaml.contains("x-kubernetes-validations"), "CEL rules are in the schema");
}
