//! `mpiswarm up --nodes N`: a multi-node Docker Swarm on one machine, the way
//! kind makes a Kubernetes cluster of containers. Each node is a container of
//! `mpiswarm/node` running its own Docker engine (overlay2 on a volume of its
//! own, its cgroup as the inner engine's parent so `--node-cpus` holds), all
//! on one bridge network, joined into one swarm with node1 as the manager.
//! The agents run on the host and reach the manager through a socket in the
//! data dir, each serving one node (`--node`).
//!
//! Everything made here carries `mpiswarm.io/managed-by=mpiswarm-up` and the
//! data dir's label, so `mpiswarm down` finds and removes all of it even
//! after a crash. This module owns the node containers only; what runs in
//! the swarm belongs to the agents.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{FileAction, Result, StackError, file, text};
use serde::{Deserialize, Serialize};

use crate::docker::{docker, docker_ok, failed};

/// The label every node container, volume and network carries.
pub const MANAGED_BY: &str = "mpiswarm.io/managed-by=mpiswarm-up";
/// The label naming the data dir a cluster belongs to.
pub const DATA_DIR_LABEL: &str = "mpiswarm.io/data-dir";

#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
pub struct NodesArgs {
    /// Run N swarm nodes as containers on this machine (each its own Docker
    /// engine) instead of using the local engine as a single-node swarm.
    #[arg(long, env = "MPISWARM_NODES")]
    pub nodes: Option<u32>,
    /// Cap each node at C cpus (its container's CPU quota, which holds the
    /// ranks inside it) and make its agent advertise C.
    #[arg(long, env = "MPISWARM_NODE_CPUS", requires = "nodes")]
    pub node_cpus: Option<f64>,
    /// Memory each node's agent advertises, in MiB (default: what its engine reports).
    #[arg(long, env = "MPISWARM_NODE_MEM", requires = "nodes")]
    pub node_mem: Option<u64>,
    /// Shape every node's link to the others to M Mbit/s (tc token bucket on
    /// the node's interface; outgoing traffic, so each direction of a link).
    #[arg(long, env = "MPISWARM_LINK_MBIT", requires = "nodes")]
    pub link_mbit: Option<u32>,
    /// Spread the nodes over K racks: node i gets the agent attribute
    /// `rack=rack-((i-1) mod K + 1)`.
    #[arg(long, env = "MPISWARM_RACKS", requires = "nodes")]
    pub racks: Option<u32>,
    /// Which images are copied into the nodes (there is no registry to pull
    /// from): `all`, the rank image and every optional one that is built
    /// (the stock Open MPI and MPICH images, mpiswarm's own for the stack
    /// deployment), or `rank`, the rank image alone (the copy is most of a
    /// cluster's start: 29 of 36 s for all four, on 3 nodes).
    #[arg(long, value_enum, default_value_t = NodeImages::All, env = "MPISWARM_NODE_IMAGES", requires = "nodes")]
    pub node_images: NodeImages,
}

/// Which images `up --nodes` copies into every node.
#[derive(clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum NodeImages {
    /// The rank image and every optional image that is built.
    #[default]
    All,
    /// The rank image alone.
    Rank,
}

/// What a data dir's cluster is, kept in DATA/cluster.json: written before
/// the first container is made, so a crash never loses track of one.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterFile {
    /// Short random id in every object's name, so two data dirs' clusters
    /// run side by side.
    pub id: String,
    pub nodes: u32,
    pub node_cpus: Option<f64>,
    pub node_mem: Option<u64>,
    pub link_mbit: Option<u32>,
    pub racks: Option<u32>,
}

/// One node as the agents need it.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Container name on the host engine.
    pub container: String,
    /// The swarm node's hostname (`node1`...).
    pub hostname: String,
    pub rack: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Cluster {
    pub file: ClusterFile,
    pub nodes: Vec<Node>,
    /// The manager's engine, for every agent.
    pub manager_socket: PathBuf,
}

impl ClusterFile {
    fn network(&self) -> String {
        format!("mpiswarm-{}-nodes", self.id)
    }

    fn node(&self, i: u32) -> Node {
        Node {
            container: format!("mpiswarm-{}-node{i}", self.id),
            hostname: format!("node{i}"),
            rack: self.racks.filter(|k| *k > 0).map(|k| format!("rack-{}", (i - 1) % k + 1)),
        }
    }

    fn volume(&self, node: &Node) -> String {
        format!("{}-docker", node.container)
    }

    pub fn all_nodes(&self) -> Vec<Node> {
        (1..=self.nodes).map(|i| self.node(i)).collect()
    }
}

fn say(line: &str) {
    eprintln!("mpiswarm up: {line}");
}

fn cluster_path(dir: &Path) -> PathBuf {
    dir.join("cluster.json")
}

fn socket_dir(dir: &Path, node: &Node) -> PathBuf {
    dir.join("nodes").join(&node.hostname)
}

impl Node {
    /// The node's own engine socket on the host (for its agent's
    /// `--node-docker`: named volumes are the node's alone).
    pub fn socket(&self, dir: &Path) -> PathBuf {
        socket_dir(dir, self).join("docker.sock")
    }
}

/// Checks the flags before anything is made: a cap above the machine's
/// cores would let Swarm refuse every reservation later, so it is refused
/// now, naming the limit.
pub fn check(args: &NodesArgs) -> Result<()> {
    let Some(n) = args.nodes else { return Ok(()) };
    if n == 0 {
        return Err(StackError::NoNodes);
    }
    if let Some(c) = args.node_cpus {
        let cores = std::thread::available_parallelism().map(|c| c.get()).unwrap_or(1) as f64;
        if !c.is_finite() || c <= 0.0 {
            return Err(StackError::NodeCpus(c));
        }
        if c > cores {
            return Err(StackError::NodeCpusOverMachine { cpus: c, cores });
        }
    }
    if args.link_mbit == Some(0) {
        return Err(StackError::LinkMbitZero);
    }
    Ok(())
}

/// Makes (or finds, on a second `up` of the same data dir) the cluster.
pub async fn ensure(dir: &Path, args: &NodesArgs, image: &str) -> Result<Cluster> {
    check(args)?;
    let wanted = args.nodes.ok_or(StackError::NodesNotGiven)?;
    let file = match read(dir)? {
        Some(f) if f.nodes == wanted && f.node_cpus == args.node_cpus && f.link_mbit == args.link_mbit => {
            ClusterFile { racks: args.racks, node_mem: args.node_mem, ..f }
        }
        Some(f) => {
            return Err(StackError::OtherCluster { dir: dir.to_owned(), nodes: f.nodes, node_cpus: f.node_cpus });
        }
        None => ClusterFile {
            id: uuid::Uuid::new_v4().simple().to_string()[..8].to_owned(),
            nodes: wanted,
            node_cpus: args.node_cpus,
            node_mem: args.node_mem,
            link_mbit: args.link_mbit,
            racks: args.racks,
        },
    };
    write(dir, &file)?;
    let labels = labels(dir)?;
    let network = file.network();
    if docker(&["network", "inspect", &network]).await.is_err() {
        docker_ok(&with_labels(&["network", "create", "--driver", "bridge"], &labels, &[&network])).await?;
    }
    let nodes = file.all_nodes();
    for node in &nodes {
        start_node(dir, &file, node, &labels, image).await?;
    }
    for node in &nodes {
        wait_for_engine(node).await?;
    }
    form_swarm(&file, &nodes).await?;
    if let Some(mbit) = file.link_mbit {
        for node in &nodes {
            shape(node, mbit).await?;
        }
    }
    load_images(&nodes, args.node_images).await?;
    let manager = nodes.first().ok_or(StackError::NoNodes)?;
    Ok(Cluster { manager_socket: manager.socket(dir), nodes, file })
}

fn labels(dir: &Path) -> Result<Vec<String>> {
    let dir = text(dir)?;
    Ok(vec![MANAGED_BY.to_owned(), format!("{DATA_DIR_LABEL}={dir}")])
}

fn with_labels(head: &[&str], labels: &[String], tail: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = head.iter().map(|s| s.to_string()).collect();
    for l in labels {
        args.extend(["--label".to_owned(), l.clone()]);
    }
    args.extend(tail.iter().map(|s| s.to_string()));
    args
}

async fn start_node(dir: &Path, file: &ClusterFile, node: &Node, labels: &[String], image: &str) -> Result<()> {
    match docker(&["inspect", "-f", "{{.State.Running}}", &node.container]).await {
        Ok(running) if running.trim() == "true" => return Ok(()),
        Ok(_) => {
            say(&format!("starting node {} again", node.hostname));
            docker_ok(&["start", &node.container]).await?;
            return Ok(());
        }
        Err(_) => {}
    }
    let sockets = socket_dir(dir, node);
    crate::error::file(FileAction::Creating, &sockets, std::fs::create_dir_all(&sockets))?;
    let sockets = text(&sockets)?;
    let volume = file.volume(node);
    docker_ok(&with_labels(&["volume", "create"], labels, &[&volume])).await?;
    let mut run: Vec<String> = with_labels(&["run", "-d", "--name", &node.container], labels, &[]);
    // The flags that let a Docker engine run in a container on this machine
    // kind. Not --privileged: it fails here ("unable to apply caps"), because
    // the machine's capability bounding set lacks CAP_SYS_RESOURCE; all the
    // other capabilities, unconfined seccomp, apparmor and system paths, tmpfs
    // /run and /var/run and the cgroup mount are what an inner dockerd needs.
    for flag in [
        "--cap-add=ALL",
        "--cap-drop=SYS_RESOURCE",
        "--security-opt=seccomp=unconfined",
        "--security-opt=apparmor=unconfined",
        "--security-opt=systempaths=unconfined",
        "--tmpfs=/run",
        "--tmpfs=/var/run",
        "--volume=/sys/fs/cgroup:/sys/fs/cgroup:rw",
    ] {
        run.push(flag.to_owned());
    }
    run.push(format!("--volume={volume}:/var/lib/docker"));
    run.push(format!("--volume={sockets}:/mpiswarm"));
    run.push(format!("--network={}", file.network()));
    run.push(format!("--hostname={}", node.hostname));
    if let Some(c) = file.node_cpus {
        run.push(format!("--cpus={c}"));
    }
    run.push(image.to_owned());
    say(&format!("starting node {} ({})", node.hostname, node.container));
    docker_ok(&run).await?;
    Ok(())
}

async fn wait_for_engine(node: &Node) -> Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if docker(&["exec", &node.container, "docker", "info", "-f", "{{.ServerVersion}}"]).await.is_ok() {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            let logs = docker(&["logs", "--tail", "20", &node.container]).await.unwrap_or_default();
            return Err(StackError::EngineSilent { node: node.hostname.clone(), logs });
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

async fn swarm_state(node: &Node) -> Result<String> {
    Ok(docker(&["exec", &node.container, "docker", "info", "-f", "{{.Swarm.LocalNodeState}}"]).await?.trim().to_owned())
}

async fn address(file: &ClusterFile, node: &Node) -> Result<String> {
    let format = format!("{{{{(index .NetworkSettings.Networks \"{}\").IPAddress}}}}", file.network());
    let ip = docker(&["inspect", "-f", &format, &node.container]).await?.trim().to_owned();
    if ip.is_empty() {
        return Err(StackError::NoAddress { node: node.hostname.clone(), network: file.network() });
    }
    Ok(ip)
}

/// node1 initialises the swarm; the others join it as workers. A heartbeat
/// of 3 s lets the manager mark a stopped node `Down` in about 9 s (Swarm's
/// 5 s default makes it about 15 s); agents find a stopped node container
/// sooner by its engine refusing connections. 1 s was too short: under a
/// load average of 20 on 2 cores the manager called two live nodes down for
/// a second, and Swarm shut their tasks down (12 jobs of the e2e load case
/// failed, "service shut down").
async fn form_swarm(file: &ClusterFile, nodes: &[Node]) -> Result<()> {
    let (manager, workers) = nodes.split_first().ok_or(StackError::NoNodes)?;
    let manager_ip = address(file, manager).await?;
    if swarm_state(manager).await? != "active" {
        say(&format!("making {} the swarm manager", manager.hostname));
        docker_ok(&[
            "exec",
            &manager.container,
            "docker",
            "swarm",
            "init",
            "--advertise-addr",
            &manager_ip,
            "--dispatcher-heartbeat",
            "3s",
        ])
        .await?;
    }
    let token =
        docker(&["exec", &manager.container, "docker", "swarm", "join-token", "-q", "worker"]).await?.trim().to_owned();
    for node in workers {
        if swarm_state(node).await? == "active" {
            continue;
        }
        let ip = address(file, node).await?;
        say(&format!("joining {} to the swarm", node.hostname));
        docker_ok(&[
            "exec",
            &node.container,
            "docker",
            "swarm",
            "join",
            "--token",
            &token,
            "--advertise-addr",
            &ip,
            &format!("{manager_ip}:2377"),
        ])
        .await?;
    }
    Ok(())
}

/// A token bucket on the node's only interface: HTB and TBF are the shapers
/// this kernel has (no netem, so no added delay).
async fn shape(node: &Node, mbit: u32) -> Result<()> {
    let rate = format!("{mbit}mbit");
    // A burst of at least one jiffy's worth of bytes at that rate.
    let burst = format!("{}kb", (mbit as u64 * 1000 / 8 / 100).max(32));
    docker_ok(&[
        "exec",
        &node.container,
        "tc",
        "qdisc",
        "replace",
        "dev",
        "eth0",
        "root",
        "tbf",
        "rate",
        &rate,
        "burst",
        &burst,
        "latency",
        "100ms",
    ])
    .await?;
    Ok(())
}

/// The images jobs use, copied into every node that lacks them (no registry
/// to pull from): the rank image, and if built the stock Debian images (Open
/// MPI and MPICH) and the mpiswarm image (for agents deployed as a stack,
/// manifests/), unless `which` is the rank image alone.
async fn load_images(nodes: &[Node], which: NodeImages) -> Result<()> {
    let mut images = vec![crate::images::RANK_IMAGE.to_owned()];
    let optional = match which {
        NodeImages::All => &[crate::images::STOCK_IMAGE, crate::images::MPICH_IMAGE, crate::images::MPISWARM_IMAGE][..],
        NodeImages::Rank => &[],
    };
    for optional in optional {
        if docker(&["image", "inspect", optional]).await.is_ok() {
            images.push((*optional).to_owned());
        }
    }
    let mut ids = Vec::new();
    for image in &images {
        ids.push(docker(&["image", "inspect", "-f", "{{.Id}}", image]).await?.trim().to_owned());
    }
    // Each node gets what it lacks in one stream (shared layers once), all
    // nodes at the same time.
    let mut missing: Vec<(&Node, Vec<&str>)> = Vec::new();
    for node in nodes {
        let mut lacks = Vec::new();
        for (image, id) in images.iter().zip(&ids) {
            let there = docker(&["exec", &node.container, "docker", "image", "inspect", "-f", "{{.Id}}", image])
                .await
                .map(|s| s.trim().to_owned())
                .unwrap_or_default();
            if &there != id {
                lacks.push(image.as_str());
            }
        }
        if !lacks.is_empty() {
            say(&format!("loading {} into {}", lacks.join(", "), node.hostname));
            missing.push((node, lacks));
        }
    }
    let loads = missing.iter().map(|(node, lacks)| crate::images::load_into(lacks, &node.container));
    for loaded in futures::future::join_all(loads).await {
        loaded?;
    }
    Ok(())
}

pub fn read(dir: &Path) -> Result<Option<ClusterFile>> {
    let p = cluster_path(dir);
    match std::fs::read_to_string(&p) {
        Ok(text) => Ok(Some(serde_json::from_str(&text).map_err(|source| StackError::NotAFile {
            path: p,
            kind: "cluster",
            source,
        })?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(StackError::File { action: FileAction::Reading, path: p, source }),
    }
}

fn write(dir: &Path, cluster: &ClusterFile) -> Result<()> {
    let p = cluster_path(dir);
    let json =
        serde_json::to_vec_pretty(cluster).map_err(|source| StackError::Encode { what: "the cluster file", source })?;
    file(FileAction::Writing, &p, mpiswarm_guard::private::write(&p, &json))
}

/// Removes every node container, volume and network of the data dir's
/// cluster (found by label, so a lost cluster file loses nothing), and the
/// cluster file. Returns how many objects went.
pub fn remove(dir: &Path) -> Result<usize> {
    let dir_text = text(dir)?;
    let filter = format!("label={DATA_DIR_LABEL}={dir_text}");
    let mut removed = 0;
    for (kind, ls, rm) in [
        ("container", vec!["ps", "-aq"], vec!["rm", "-f", "-v"]),
        ("volume", vec!["volume", "ls", "-q"], vec!["volume", "rm", "-f"]),
        ("network", vec!["network", "ls", "-q"], vec!["network", "rm"]),
    ] {
        let mut list = ls.clone();
        list.extend(["--filter", &filter]);
        let out = std::process::Command::new("docker").args(&list).output().map_err(StackError::DockerMissing)?;
        let ids: Vec<String> = String::from_utf8_lossy(&out.stdout).split_whitespace().map(str::to_owned).collect();
        if ids.is_empty() {
            continue;
        }
        eprintln!("mpiswarm down: removing {} node {kind}(s)", ids.len());
        let done =
            std::process::Command::new("docker").args(&rm).args(&ids).output().map_err(StackError::DockerMissing)?;
        if !done.status.success() {
            return Err(failed(&rm, &done.stderr));
        }
        removed += ids.len();
    }
    let _gone = std::fs::remove_file(cluster_path(dir));
    let _gone = std::fs::remove_dir_all(dir.join("nodes"));
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(racks: Option<u32>) -> ClusterFile {
        ClusterFile { id: "abcd1234".into(), nodes: 4, node_cpus: None, node_mem: None, link_mbit: None, racks }
    }

    #[test]
    fn nodes_are_named_per_cluster_and_go_round_the_racks() {
        let nodes = file(Some(2)).all_nodes();
        let names: Vec<_> = nodes.iter().map(|n| (n.container.as_str(), n.hostname.as_str())).collect();
        assert_eq!(names[0], ("mpiswarm-abcd1234-node1", "node1"));
        assert_eq!(names[3], ("mpiswarm-abcd1234-node4", "node4"));
        let racks: Vec<_> = nodes.iter().map(|n| n.rack.clone().unwrap()).collect();
        assert_eq!(racks, ["rack-1", "rack-2", "rack-1", "rack-2"]);
        assert!(file(None).all_nodes().iter().all(|n| n.rack.is_none()));
    }

    #[test]
    fn impossible_node_flags_are_refused_naming_the_value() {
        let args = |nodes, node_cpus, link_mbit| NodesArgs { nodes, node_cpus, link_mbit, ..Default::default() };
        assert!(check(&args(Some(3), Some(1.0), Some(100))).is_ok());
        let e = check(&args(Some(0), None, None)).unwrap_err().to_string();
        assert!(e.contains("--nodes 0"), "{e}");
        let e = check(&args(Some(2), Some(4096.0), None)).unwrap_err().to_string();
        assert!(e.contains("--node-cpus 4096") && e.contains("at most"), "{e}");
        let e = check(&args(Some(2), Some(-1.0), None)).unwrap_err().to_string();
        assert!(e.contains("--node-cpus -1"), "{e}");
        let e = check(&args(Some(2), None, Some(0))).unwrap_err().to_string();
        assert!(e.contains("--link-mbit 0"), "{e}");
    }
}
