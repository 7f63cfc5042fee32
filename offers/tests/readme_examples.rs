//! Keeps the agent API examples in offers/README.md honest: every JSON line
//! in a ```json block must parse as an agent API `Call` or `Event` and
//! serialise back to exactly the same text.

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
        let is_call = value.get("subscribe").is_some() || value.get("update").is_some();
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
