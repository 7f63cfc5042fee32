//! The controller's README documents every condition reason: its
//! "Condition reasons" table must list exactly [`ConditionReason::ALL`], so
//! a reason cannot be added, renamed or dropped without the table following.
//! Reads the README only; tests nothing else.

use std::collections::BTreeSet;

use mpiswarm_crds::ConditionReason;

const README: &str = include_str!("../README.md");

/// The first-column names of the table under `### Condition reasons`.
fn documented_reasons() -> Vec<&'static str> {
    let section = README
        .split("### Condition reasons")
        .nth(1)
        .unwrap_or_else(|| panic!("controller/README.md has a '### Condition reasons' section"));
    let section = section.split("\n#").next().unwrap_or(section);
    section
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split_once('`').map(|(name, _)| name))
        .collect()
}

#[test]
fn the_readme_lists_exactly_the_condition_reasons_the_controller_can_write() {
    let documented = documented_reasons();
    let listed: BTreeSet<&str> = documented.iter().copied().collect();
    assert_eq!(listed.len(), documented.len(), "a reason is listed twice: {documented:?}");
    let declared: BTreeSet<&str> = ConditionReason::ALL.iter().map(|r| r.as_str()).collect();
    let missing: Vec<_> = declared.difference(&listed).collect();
    let unknown: Vec<_> = listed.difference(&declared).collect();
    assert!(missing.is_empty(), "controller/README.md does not list {missing:?}");
    assert!(unknown.is_empty(), "controller/README.md lists {unknown:?}, which the controller never writes");
}
