//! API discovery: aggregated (`apidiscovery.k8s.io/v2`, what kubectl 1.32
//! asks for first) and legacy (`APIVersions`, `APIGroupList`,
//! `APIResourceList`), all derived from the registry.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::resource::ResourceType;

pub const AGGREGATED_CONTENT_TYPE: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

pub fn wants_aggregated(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| first.contains("as=APIGroupDiscoveryList"))
}

/// The versions of one group, in registration order, with their resources.
type Versions = Vec<(String, Vec<Arc<ResourceType>>)>;

/// group -> versions.
fn grouped(types: &[Arc<ResourceType>], core: bool) -> BTreeMap<String, Versions> {
    let mut out: BTreeMap<String, Versions> = BTreeMap::new();
    for t in types.iter().filter(|t| t.group.is_empty() == core) {
        let versions = out.entry(t.group.clone()).or_default();
        match versions.iter_mut().find(|(v, _)| *v == t.version) {
            Some((_, list)) => list.push(t.clone()),
            None => versions.push((t.version.clone(), vec![t.clone()])),
        }
    }
    out
}

fn gvk(t: &ResourceType) -> Value {
    json!({"group": t.group, "version": t.version, "kind": t.kind})
}

fn aggregated_resource(t: &ResourceType) -> Value {
    let mut r = json!({
        "resource": t.plural, "singularResource": t.singular,
        "scope": if t.namespaced { "Namespaced" } else { "Cluster" },
        "responseKind": gvk(t), "verbs": t.verbs(),
    });
    if !t.short_names.is_empty() {
        r["shortNames"] = json!(t.short_names);
    }
    if !t.categories.is_empty() {
        r["categories"] = json!(t.categories);
    }
    if t.status_subresource {
        r["subresources"] =
            json!([{"subresource": "status", "responseKind": gvk(t), "verbs": ["get", "patch", "update"]}]);
    }
    r
}

/// `/api` (core) or `/apis` (everything else) in the aggregated form.
pub fn aggregated(types: &[Arc<ResourceType>], core: bool) -> Value {
    let items: Vec<Value> = grouped(types, core)
        .into_iter()
        .map(|(group, versions)| {
            json!({
                "metadata": {"name": group, "creationTimestamp": null},
                "versions": versions.iter().map(|(v, rs)| json!({
                    "version": v, "freshness": "Current",
                    "resources": rs.iter().map(|r| aggregated_resource(r)).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}

pub fn api_versions(server_address: &str) -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]})
}

fn group_entry(group: &str, versions: &[(String, Vec<Arc<ResourceType>>)]) -> Value {
    let gv = |v: &str| json!({"groupVersion": format!("{group}/{v}"), "version": v});
    json!({"name": group, "versions": versions.iter().map(|(v, _)| gv(v)).collect::<Vec<_>>(),
        "preferredVersion": gv(&versions[0].0)})
}

pub fn api_group_list(types: &[Arc<ResourceType>]) -> Value {
    let groups: Vec<Value> = grouped(types, false).iter().map(|(g, vs)| group_entry(g, vs)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`, if the group is served.
pub fn api_group(types: &[Arc<ResourceType>], group: &str) -> Option<Value> {
    let all = grouped(types, false);
    let versions = all.get(group)?;
    let mut v = group_entry(group, versions);
    v["kind"] = json!("APIGroup");
    v["apiVersion"] = json!("v1");
    Some(v)
}

/// `/api/v1` or `/apis/{group}/{version}`, if served.
pub fn resource_list(types: &[Arc<ResourceType>], group: &str, version: &str) -> Option<Value> {
    let rs: Vec<&Arc<ResourceType>> = types.iter().filter(|t| t.group == group && t.version == version).collect();
    if rs.is_empty() {
        return None;
    }
    let mut resources = vec![];
    for t in rs {
        let mut r = json!({"name": t.plural, "singularName": t.singular, "namespaced": t.namespaced,
            "kind": t.kind, "verbs": t.verbs()});
        if !t.short_names.is_empty() {
            r["shortNames"] = json!(t.short_names);
        }
        if !t.categories.is_empty() {
            r["categories"] = json!(t.categories);
        }
        resources.push(r);
        if t.status_subresource {
            resources
                .push(json!({"name": format!("{}/status", t.plural), "singularName": "", "namespaced": t.namespaced,
                "kind": t.kind, "verbs": ["get", "patch", "update"]}));
        }
    }
    let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}))
}
