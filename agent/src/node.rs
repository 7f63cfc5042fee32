//! This node as the agent advertises it: the Docker connection, making the
//! engine a (single-node) swarm manager if it is not in a swarm yet, and the
//! resources and attributes the offer layer offers, from Docker unless the
//! operator says otherwise.

use std::collections::BTreeMap;

use bollard::Docker;
use bollard::models::{LocalNodeState, SwarmInitRequest};
use mpiswarm_mesos::{Attribute, Resource};

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("cannot connect to Docker at {url}: {source}")]
    Connect {
        url: String,
        #[source]
        source: bollard::errors::Error,
    },
    #[error("docker {operation} failed: {source}")]
    Docker {
        operation: &'static str,
        #[source]
        source: bollard::errors::Error,
    },
    #[error(
        "this engine is a swarm worker (node {node_id}); the agent needs a swarm manager endpoint to create services (use --docker)"
    )]
    NotAManager { node_id: String },
    #[error("swarm is in state {state:?} on this engine; fix it (docker swarm leave/init) and restart the agent")]
    SwarmState { state: String },
    #[error("--node {node}: no such swarm node (see `docker node ls` on the manager)")]
    UnknownNode { node: String },
    #[error("invalid --resources '{input}': {reason}")]
    Resources { input: String, reason: ResourceSyntax },
    #[error("invalid --attributes '{input}': {reason}")]
    Attributes { input: String, reason: AttributeSyntax },
}

/// What is wrong with an item of `--resources` (Mesos' syntax, `cpus:4;mem:8192;ports:[31000-32000]`).
#[derive(Debug, thiserror::Error)]
pub enum ResourceSyntax {
    #[error("'{item}' is not name:value (e.g. cpus:4)")]
    NotNameValue { item: String },
    #[error("'{item}' has no resource name (e.g. cpus:4)")]
    NoName { item: String },
    #[error("range '{range}' is not begin-end (e.g. ports:[31000-32000])")]
    Range { range: String },
    #[error("range start '{value}' is not a number")]
    RangeStart { value: String },
    #[error("range end '{value}' is not a number")]
    RangeEnd { value: String },
    #[error("range {begin}-{end} is empty: the begin must not exceed the end")]
    EmptyRange { begin: u64, end: u64 },
    #[error("{name}: '{value}' is not a number")]
    NotANumber { name: String, value: String },
    #[error("{name}: {value} must be a finite number >= 0")]
    OutOfRange { name: String, value: f64 },
}

/// What is wrong with an item of `--attributes` (`rack=r1,zone=a`).
#[derive(Debug, thiserror::Error)]
pub enum AttributeSyntax {
    #[error("'{item}' is not name=value (e.g. rack=r1)")]
    NotNameValue { item: String },
    #[error("'{item}' has no name (e.g. rack=r1)")]
    NoName { item: String },
}

/// Connects to `url` (`unix:///path`, `tcp://host:port`, `http://...`), or
/// to `DOCKER_HOST` / the local socket when `None`, at the engine's API version.
pub async fn connect(url: Option<&str>) -> Result<Docker, NodeError> {
    let shown = url.unwrap_or("the local engine").to_owned();
    let connect_err = |source| NodeError::Connect { url: shown.clone(), source };
    let docker = match url {
        None => Docker::connect_with_local_defaults(),
        Some(u) if u.starts_with("unix://") || u.starts_with('/') => {
            Docker::connect_with_socket(u, 120, bollard::API_DEFAULT_VERSION)
        }
        Some(u) => Docker::connect_with_http(u, 120, bollard::API_DEFAULT_VERSION),
    }
    .map_err(connect_err)?;
    // bollard speaks a newer API than Debian's 20.10 engine; use the engine's.
    docker.negotiate_version().await.map_err(connect_err)
}

/// The swarm node id of an engine, a worker's too (empty in no swarm);
/// nothing is initialised or joined.
pub async fn swarm_node_id(docker: &Docker) -> Result<String, NodeError> {
    let info = docker.info().await.map_err(|source| NodeError::Docker { operation: "info", source })?;
    Ok(info.swarm.and_then(|s| s.node_id).unwrap_or_default())
}

/// The swarm node id of this engine, initialising a single-node swarm
/// (advertised and listening on loopback only) if the engine is in none.
pub async fn ensure_swarm(docker: &Docker) -> Result<String, NodeError> {
    let info = docker.info().await.map_err(|source| NodeError::Docker { operation: "info", source })?;
    let swarm = info.swarm.unwrap_or_default();
    match swarm.local_node_state {
        Some(LocalNodeState::ACTIVE) => {
            let node_id = swarm.node_id.unwrap_or_default();
            if swarm.control_available != Some(true) {
                return Err(NodeError::NotAManager { node_id });
            }
            Ok(node_id)
        }
        Some(LocalNodeState::INACTIVE) | None => {
            tracing::info!("the engine is in no swarm: initialising a single-node swarm on 127.0.0.1");
            let request = SwarmInitRequest {
                listen_addr: Some("127.0.0.1:2377".into()),
                advertise_addr: Some("127.0.0.1".into()),
                ..Default::default()
            };
            match docker.init_swarm(request).await {
                Ok(node_id) => Ok(node_id),
                // Someone else (a sibling agent or test) initialised it meanwhile.
                Err(bollard::errors::Error::DockerResponseServerError { status_code: 503, .. }) => {
                    Box::pin(ensure_swarm(docker)).await
                }
                Err(source) => Err(NodeError::Docker { operation: "swarm init", source }),
            }
        }
        Some(other) => Err(NodeError::SwarmState { state: format!("{other:?}") }),
    }
}

/// What Docker says about this node.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeFacts {
    pub hostname: String,
    pub cpus: f64,
    pub mem_mib: f64,
    pub labels: BTreeMap<String, String>,
}

/// The node id and facts of `node` (an id or a hostname).
pub async fn facts(docker: &Docker, node: &str) -> Result<(String, NodeFacts), NodeError> {
    let found = docker.inspect_node(node).await.map_err(|source| match source {
        bollard::errors::Error::DockerResponseServerError { status_code: 404, .. } => {
            NodeError::UnknownNode { node: node.to_owned() }
        }
        source => NodeError::Docker { operation: "node inspect", source },
    })?;
    let node_id = found.id.clone().unwrap_or_else(|| node.to_owned());
    let description = found.description.unwrap_or_default();
    let resources = description.resources.unwrap_or_default();
    let facts = NodeFacts {
        hostname: description.hostname.unwrap_or_default(),
        cpus: resources.nano_cpus.unwrap_or(0) as f64 / 1e9,
        mem_mib: (resources.memory_bytes.unwrap_or(0) / (1024 * 1024)) as f64,
        labels: found.spec.and_then(|s| s.labels).unwrap_or_default().into_iter().collect(),
    };
    Ok((node_id, facts))
}

/// Resources: Docker's cpus and mem, replaced or extended by `--resources`
/// in Mesos' syntax (`cpus:4;mem:8192;ports:[31000-32000]`).
pub fn resources(facts: &NodeFacts, flag: Option<&str>) -> Result<Vec<Resource>, NodeError> {
    let mut by_name: BTreeMap<String, Resource> = BTreeMap::new();
    by_name.insert("cpus".into(), Resource::scalar("cpus", facts.cpus));
    by_name.insert("mem".into(), Resource::scalar("mem", facts.mem_mib));
    for item in flag.unwrap_or("").split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let bad = |reason: ResourceSyntax| NodeError::Resources { input: flag.unwrap_or("").to_owned(), reason };
        let (name, value) =
            item.split_once(':').ok_or_else(|| bad(ResourceSyntax::NotNameValue { item: item.to_owned() }))?;
        let name = name.trim();
        if name.is_empty() {
            return Err(bad(ResourceSyntax::NoName { item: item.to_owned() }));
        }
        let value = value.trim();
        let resource = if let Some(inner) = value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
            let mut ranges = Vec::new();
            for r in inner.split(',') {
                let (b, e) =
                    r.trim().split_once('-').ok_or_else(|| bad(ResourceSyntax::Range { range: r.to_owned() }))?;
                let (b, e): (u64, u64) = (
                    b.trim().parse().map_err(|_| bad(ResourceSyntax::RangeStart { value: b.to_owned() }))?,
                    e.trim().parse().map_err(|_| bad(ResourceSyntax::RangeEnd { value: e.to_owned() }))?,
                );
                if b > e {
                    return Err(bad(ResourceSyntax::EmptyRange { begin: b, end: e }));
                }
                ranges.push((b, e));
            }
            Resource::ranges(name, ranges)
        } else {
            let v: f64 = value
                .parse()
                .map_err(|_| bad(ResourceSyntax::NotANumber { name: name.to_owned(), value: value.to_owned() }))?;
            if !v.is_finite() || v < 0.0 {
                return Err(bad(ResourceSyntax::OutOfRange { name: name.to_owned(), value: v }));
            }
            Resource::scalar(name, v)
        };
        by_name.insert(name.to_owned(), resource);
    }
    Ok(by_name.into_values().collect())
}

/// Attributes: the swarm node's labels, `hostname` and `swarm_node_id`, then
/// `--attributes` (`rack=r1,zone=a`, or Mesos' `rack:r1;zone:a`) on top.
pub fn attributes(facts: &NodeFacts, node_id: &str, flag: Option<&str>) -> Result<Vec<Attribute>, NodeError> {
    let mut map = facts.labels.clone();
    map.insert("hostname".into(), facts.hostname.clone());
    map.insert("swarm_node_id".into(), node_id.to_owned());
    let input = flag.unwrap_or("");
    for item in input.split([',', ';']).map(str::trim).filter(|s| !s.is_empty()) {
        let bad = |reason: AttributeSyntax| NodeError::Attributes { input: input.to_owned(), reason };
        let (k, v) =
            item.split_once(['=', ':']).ok_or_else(|| bad(AttributeSyntax::NotNameValue { item: item.to_owned() }))?;
        if k.trim().is_empty() {
            return Err(bad(AttributeSyntax::NoName { item: item.to_owned() }));
        }
        map.insert(k.trim().to_owned(), v.trim().to_owned());
    }
    Ok(map
        .into_iter()
        .map(|(k, v)| match v.parse::<f64>() {
            Ok(n) if n.is_finite() => Attribute::scalar(&k, n),
            _ => Attribute::text(&k, &v),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> NodeFacts {
        NodeFacts {
            hostname: "vm".into(),
            cpus: 2.0,
            mem_mib: 24000.0,
            labels: BTreeMap::from([("rack".into(), "r0".into())]),
        }
    }

    #[test]
    fn resources_default_to_docker_and_the_flag_overrides_and_extends() {
        let r = resources(&facts(), None).unwrap();
        assert_eq!(mpiswarm_mesos::resources::scalar_sum(&r, "cpus"), 2.0);
        assert_eq!(mpiswarm_mesos::resources::scalar_sum(&r, "mem"), 24000.0);
        let r = resources(&facts(), Some("cpus:4;mem:8192;network:1000;ports:[31000-32000]")).unwrap();
        assert_eq!(mpiswarm_mesos::resources::scalar_sum(&r, "cpus"), 4.0);
        assert_eq!(mpiswarm_mesos::resources::scalar_sum(&r, "network"), 1000.0);
        assert!(r.iter().any(|r| r.name == "ports"));
    }

    #[test]
    fn bad_resources_name_the_offending_item() {
        let e = resources(&facts(), Some("cpus:-1")).unwrap_err().to_string();
        assert!(e.contains("cpus: -1"), "{e}");
        let e = resources(&facts(), Some("cpus=4")).unwrap_err().to_string();
        assert!(e.contains("'cpus=4' is not name:value"), "{e}");
    }

    #[test]
    fn attributes_are_node_labels_plus_hostname_with_flags_on_top() {
        let a = attributes(&facts(), "n1", Some("rack=r1,zone=a")).unwrap();
        let text = |n: &str| a.iter().find(|x| x.name == n).and_then(|x| x.text_value()).map(str::to_owned);
        assert_eq!(text("rack").as_deref(), Some("r1"));
        assert_eq!(text("zone").as_deref(), Some("a"));
        assert_eq!(text("hostname").as_deref(), Some("vm"));
        assert_eq!(text("swarm_node_id").as_deref(), Some("n1"));
        assert!(attributes(&facts(), "n1", Some("rack")).is_err());
    }
}
