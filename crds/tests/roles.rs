//! `spec.role` follows Mesos' role rule, whose one home is
//! `mpiswarm_mesos::validate_role`. crds may not depend on mesos at run time,
//! so it keeps its own schema pattern; this test proves the pattern (as the
//! schema validator and as `MpiJobSpec::validate` use it) accepts exactly the
//! names `validate_role` accepts, over every name of up to four characters
//! from an alphabet of the characters the rule treats specially.

use mpiswarm_crds::{MpiJob, ROLE_PATTERN};
use mpiswarm_mesos::validate_role;
use serde_json::json;

/// Letters, the separators and reserved parts of the rule, every character
/// class it refuses, and characters other checkers have wrongly refused.
const ALPHABET: [char; 16] =
    ['a', 'Z', '0', '_', '+', '\\', '-', '.', '*', '/', ' ', '\t', '\u{0b}', '\u{7f}', 'é', '\u{1}'];

fn names_up_to(len: usize) -> Vec<String> {
    let mut all = vec![String::new()];
    let mut last = vec![String::new()];
    for _ in 0..len {
        last = last.iter().flat_map(|prefix| ALPHABET.iter().map(move |c| format!("{prefix}{c}"))).collect();
        all.extend(last.iter().cloned());
    }
    all
}

fn job_with_role(role: &str) -> MpiJob {
    serde_json::from_value(json!({
        "apiVersion": "mpiswarm.io/v1alpha1",
        "kind": "MpiJob",
        "metadata": {"name": "t"},
        "spec": {"image": "mpiswarm/openmpi:0.1.0", "command": ["/bin/true"], "ranks": 1,
                 "resources": {"cpus": 1, "memory": "64Mi"}, "role": role}
    }))
    .expect("a well-formed MpiJob")
}

#[test]
fn the_crd_role_pattern_accepts_exactly_what_mesos_accepts() {
    let pattern = regex_lite::Regex::new(ROLE_PATTERN).expect("ROLE_PATTERN compiles");
    let schema = jsonschema::draft4::new(&json!({"type": "string", "pattern": ROLE_PATTERN}))
        .expect("ROLE_PATTERN compiles as a schema pattern");
    let mut names = names_up_to(4);
    names.extend(["a+b", "team/mpi", "a/b/c", "ab/..", "ab/.x", "-", "a/-", "**", "x/*/y"].map(String::from));
    let (mut accepted, mut refused) = (0, 0);
    for name in &names {
        let mesos = validate_role(name).is_ok();
        assert_eq!(pattern.is_match(name), mesos, "ROLE_PATTERN and Mesos disagree on {name:?}");
        assert_eq!(schema.is_valid(&json!(name)), mesos, "the schema pattern and Mesos disagree on {name:?}");
        if mesos { accepted += 1 } else { refused += 1 }
    }
    // Both sides of the rule were exercised in bulk.
    assert!(accepted > 10_000 && refused > 10_000, "accepted {accepted}, refused {refused}");
}

#[test]
fn validate_names_spec_role_exactly_when_mesos_refuses_it() {
    for name in names_up_to(3).iter().chain(&["a+b".to_owned(), "a\\b".to_owned(), "a/./b".to_owned()]) {
        let refused = job_with_role(name).spec.validate().err().is_some_and(|e| e.names("spec.role"));
        assert_eq!(refused, validate_role(name).is_err(), "validate() and Mesos disagree on {name:?}");
    }
}

#[test]
fn a_plus_b_is_a_role_as_in_mesos() {
    assert!(validate_role("a+b").is_ok());
    assert!(job_with_role("a+b").spec.validate().is_ok());
}
