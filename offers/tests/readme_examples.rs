//! Keeps the agent API examples in offers/README.md honest: every JSON line
//! in a ```json block must parse as an agent API `Call` or `Event` and
//! serialise back to exactly the same text; the ```json acls block must
//! parse as ACLs and allow what the README says.

use mpiswarm_mesos::agent_api::{Call, Event};

fn readme_json_lines() -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let mut in_json = false;
    let mut lines = Vec::new();
    for line in readme.lines() {
        match line.trim() {
            "```json" => in_json = true,
            "```" => in_json = false,
            l if in_json && !l.is_empty() => lines.push(l.to_owned()),
            _ => {}
        }
    }
    lines
}

#[test]
fn every_agent_api_example_in_the_readme_round_trips_exactly() {
    let lines = readme_json_lines();
    assert!(lines.len() >= 12, "expected the agent API examples, found {} lines", lines.len());
    for line in lines {
        let value: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let is_call = ["subscribe", "update", "withdraw"].iter().any(|k| value.get(k).is_some());
        let again = if is_call {
            let call: Call = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not a Call ({e}): {line}"));
            serde_json::to_string(&call).unwrap()
        } else {
            let event: Event = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not an Event ({e}): {line}"));
            serde_json::to_string(&event).unwrap()
        };
        assert_eq!(again, line, "the README example does not round-trip");
    }
}

#[test]
fn the_acls_example_in_the_readme_parses_and_means_what_it_says() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let start = readme.find("```json acls\n").expect("the README has an ACL example") + "```json acls\n".len();
    let end = start + readme[start..].find("```").expect("the example ends");
    let acls = mpiswarm_offers::acl::Acls::parse(&readme[start..end]).unwrap_or_else(|e| panic!("{e}"));
    use mpiswarm_offers::acl::Action;
    assert!(acls.authorize(Some("mpiswarm-controller"), &Action::RegisterFramework { role: "any" }).is_ok());
    assert!(acls.authorize(Some("mpiswarm-agent"), &Action::RegisterAgent).is_ok());
    assert!(acls.authorize(Some("mpiswarm-agent"), &Action::RegisterFramework { role: "any" }).is_err());
    assert!(acls.authorize(Some("ops"), &Action::TeardownFramework { framework_principal: Some("x") }).is_ok());
    assert!(acls.authorize(Some("team-a"), &Action::GetEndpoint { path: "/master/state" }).is_err());
}
