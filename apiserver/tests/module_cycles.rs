//! No module of the API server imports one that imports it back, directly
//! or through others: every `crate::<module>` a file under `src/` names
//! (tests included) is an edge, and the graph must have no cycle. Run with
//! `cargo test -p mpiswarm-apiserver --test module_cycles`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// module -> the modules it names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut modules = BTreeMap::new();
    for entry in std::fs::read_dir(&src).expect("src/ is readable") {
        let path = entry.expect("dir entry").path();
        let Some(name) = path.file_stem().and_then(|s| s.to_str()).map(String::from) else { continue };
        if path.extension().is_some_and(|e| e == "rs") && name != "lib" {
            modules.insert(name, std::fs::read_to_string(&path).expect("module readable"));
        }
    }
    let names: BTreeSet<String> = modules.keys().cloned().collect();
    modules
        .iter()
        .map(|(name, text)| {
            let mut uses = BTreeSet::new();
            for (i, _) in text.match_indices("crate::") {
                let rest = &text[i + "crate::".len()..];
                let used: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if names.contains(&used) && used != *name {
                    uses.insert(used);
                }
                // `use crate::{a, b::X}`
                if rest.starts_with('{') {
                    let group = &rest[1..rest.find('}').unwrap_or(rest.len())];
                    for part in group.split(',') {
                        let first: String =
                            part.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                        if names.contains(&first) && first != *name {
                            uses.insert(first);
                        }
                    }
                }
            }
            (name.clone(), uses)
        })
        .collect()
}

/// The cycles as lists of modules (strongly connected components of two or more).
fn cycles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // A module is in a cycle with every module that both reaches it and is reached by it.
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&str> = vec![from];
        while let Some(m) = todo.pop() {
            for n in g.get(m).into_iter().flatten() {
                if seen.insert(n.clone()) {
                    todo.push(n);
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> = g.keys().map(|m| (m, reach(m))).collect();
    let mut out: Vec<Vec<String>> = vec![];
    for (m, r) in &reaches {
        if !r.contains(*m) {
            continue;
        }
        let component: Vec<String> =
            r.iter().filter(|n| reaches.get(n).is_some_and(|back| back.contains(*m))).cloned().collect();
        if !out.contains(&component) {
            out.push(component);
        }
    }
    out
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let g = graph();
    assert!(g.len() > 10, "the source files were found: {:?}", g.keys());
    assert!(g["api"].contains("store"), "edges are found: {g:?}");
    let found = cycles(&g);
    assert!(found.is_empty(), "module cycles: {found:?}");
}

#[test]
fn the_cycle_finder_finds_a_planted_cycle() {
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    g.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    g.insert("d".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(cycles(&g), vec![vec!["a".to_string(), "b".to_string(), "c".to_string()]]);
}
