//! The components of the one-machine stack as `up` starts them, in this
//! process or as child processes (`--split`): the flags of `up`, the command
//! line of the offer layer and of every node agent, the MpiJob CRD install,
//! the wait for the agents to register, and what `up` tells the user. Both
//! ways of running use these, so a component gets the same flags either way.
//! It starts nothing itself (except the node containers of `--nodes`,
//! through [`crate::nodes`]) and never supervises a process.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};

use crate::credentials;
use crate::error::{FileAction, Result, StackError, file, text};
use crate::nodes::{self, NodesArgs};
use crate::stack_file::{self, StackFile};

#[derive(clap::Args, Debug, Clone)]
pub struct UpArgs {
    /// Where every component keeps its state (the kubeconfig is DATA/kubeconfig).
    #[arg(long, env = "MPISWARM_DATA_DIR", default_value = stack_file::DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
    /// Role weights for the offer layer's fair sharing, e.g. `mpi=2,batch=1`.
    #[arg(long)]
    pub weights: Option<String>,
    /// Quota limits for the offer layer, e.g. `team-a=cpus:4;mem:8192`: the
    /// most a role holds over the whole cluster.
    #[arg(long)]
    pub quota: Option<String>,
    /// Resources the agent offers, Mesos syntax (default: what Docker reports).
    #[arg(long)]
    pub resources: Option<String>,
    /// Do not build the rank image (or the node image) if it is missing.
    #[arg(long)]
    pub no_build: bool,
    /// Run each component (API server, offer layer, every agent, controller)
    /// as its own child process, started again with the same command line
    /// (same ports, same data) when it exits; DATA/stack.json lists their
    /// pids and DATA/logs/ their output. For fault tests: one can be killed alone.
    #[arg(long)]
    pub split: bool,
    /// With --split: run this many offer-layer replicas, which elect their
    /// leader with the Lease `mpiswarm-offers` and keep their registry in the
    /// API server (the OfferRegistry of that name); agents and the
    /// controller are given every replica and follow the leader.
    #[arg(long, default_value_t = 1, requires = "split", value_parser = clap::value_parser!(u16).range(1..=9))]
    pub offers_replicas: u16,
    #[command(flatten)]
    pub nodes: NodesArgs,
}

/// Seconds the controller's Lease is held without renewal; a controller
/// started again under the same identity holds it again within this time.
pub const LEASE_SECONDS: u64 = 15;

pub fn say(line: &str) {
    eprintln!("mpiswarm up: {line}");
}

pub fn say_ready(file: &StackFile, dir: &std::path::Path) {
    say("ready");
    eprintln!(
        "\n  export KUBECONFIG={}\n  kubectl apply -f examples/pi.yaml && kubectl get mpij -w\n  # or: mpiswarm run examples/pi.yaml --data-dir {}\n",
        file.kubeconfig.display(),
        dir.display()
    );
}

pub fn say_agents(args: &UpArgs, addrs: &[std::net::SocketAddr]) {
    match &args.nodes.nodes {
        Some(n) => say(&format!("{n} node agents on {}", list(addrs))),
        None => say(&format!("node agent on {} (this Docker engine, a single-node swarm)", list(addrs))),
    }
}

/// `mpiswarm offers ...` for this stack: its registry in DATA/offers, the
/// port of the last `up` if it is free.
pub fn offers_command(args: &UpArgs, dir: &std::path::Path, before: Option<&StackFile>) -> Result<Vec<String>> {
    let offers_dir = dir.join("offers");
    file(FileAction::Creating, &offers_dir, std::fs::create_dir_all(&offers_dir))?;
    let listen = stack_file::reuse_or_any(before.and_then(|b| stack_file::port_of(&b.offers)));
    let mut cli = offers_listening(args, dir, listen)?;
    cli.extend(["--data-dir".to_owned(), text(&offers_dir)?]);
    Ok(cli)
}

pub use crate::offers_identity::OFFERS_LEASE;

/// `mpiswarm offers ...` of every replica of `--offers-replicas N` (N > 1),
/// named `offers-1` .. `offers-N`: elected with the Lease [`OFFERS_LEASE`]
/// through their own kubeconfig ([`crate::offers_identity`]: their Role,
/// not the admin's), their registry in the API server, each on the port of
/// the same replica in the last `up` if it is free.
pub fn offers_replica_commands(
    args: &UpArgs,
    dir: &std::path::Path,
    before: Option<&StackFile>,
) -> Result<Vec<(String, Vec<String>)>> {
    let kubeconfig = text(&crate::offers_identity::kubeconfig_file(dir))?;
    let mut out = Vec::new();
    for i in 0..usize::from(args.offers_replicas) {
        let port = before.and_then(|b| b.offers_replicas.get(i)).and_then(|u| stack_file::port_of(u));
        let mut cli = offers_listening(args, dir, stack_file::reuse_or_any(port))?;
        cli.extend(["--lease-name".to_owned(), OFFERS_LEASE.into(), "--kubeconfig".into(), kubeconfig.clone()]);
        out.push((format!("offers-{}", i + 1), cli));
    }
    Ok(out)
}

/// What every offer layer of this stack runs with, one replica or several:
/// its address, the stack's credentials and ACLs, the weights and quotas of `up`.
fn offers_listening(args: &UpArgs, dir: &std::path::Path, listen: std::net::SocketAddr) -> Result<Vec<String>> {
    let mut cli = vec![
        "offers".to_owned(),
        "--listen".into(),
        listen.to_string(),
        "--credentials".into(),
        text(&credentials::offers_credentials(dir))?,
        "--acls".into(),
        text(&credentials::offers_acls(dir))?,
    ];
    if let Some(w) = &args.weights {
        cli.extend(["--weights".to_owned(), w.clone()]);
    }
    if let Some(q) = &args.quota {
        cli.extend(["--quota".to_owned(), q.clone()]);
    }
    Ok(cli)
}

/// Installs (or updates) the CRDs of the stack: MpiJob, and the offer
/// layer's shared registry (used by `--offers-replicas`).
pub async fn install_crd(client: &kube::Client) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let shipped = [
        ("the MpiJob CRD", serde_json::to_value(mpiswarm_crds::crd())),
        ("the OfferRegistry CRD", serde_json::to_value(mpiswarm_offers::registry_api::crd())),
    ];
    for (what, crd) in shipped {
        let mut crd = crd.map_err(|source| StackError::Encode { what, source })?;
        crd["apiVersion"] = "apiextensions.k8s.io/v1".into();
        crd["kind"] = "CustomResourceDefinition".into();
        let name = crd["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        crds.patch(&name, &PatchParams::apply("mpiswarm-up").force(), &Patch::Apply(&crd))
            .await
            .map_err(StackError::InstallCrd)?;
    }
    Ok(())
}

/// The `mpiswarm agent ...` command line of every agent, with a name for
/// each: one agent on the local engine, or with `--nodes` (whose node
/// containers this makes, or finds) one per node container, each reaching
/// the manager's engine and serving its own node.
pub async fn agent_commands(
    args: &UpArgs,
    dir: &std::path::Path,
    master: &str,
    before: Option<&StackFile>,
) -> Result<Vec<(String, Vec<String>)>> {
    let port = |i: usize| stack_file::reuse_or_any(before.and_then(|b| b.agents.get(i)).map(|a| a.port()));
    let mut commands = Vec::new();
    let Some(_) = args.nodes.nodes else {
        let mut cli = vec![
            "agent".to_owned(),
            "--master".into(),
            master.to_owned(),
            "--data-dir".into(),
            text(&dir.join("agent"))?,
            "--listen".into(),
            port(0).to_string(),
            "--credential".into(),
            text(&credentials::credential_file(dir, &credentials::agent_principal(0)))?,
            "--http-credentials".into(),
            text(&credentials::agent_readers(dir))?,
        ];
        if let Some(r) = &args.resources {
            cli.extend(["--resources".to_owned(), r.clone()]);
        }
        return Ok(vec![("agent".to_owned(), cli)]);
    };
    let cluster = nodes::ensure(dir, &args.nodes, crate::images::NODE_IMAGE).await?;
    let docker = format!("unix://{}", text(&cluster.manager_socket)?);
    for (i, node) in cluster.nodes.iter().enumerate() {
        let mut cli = vec![
            "agent".to_owned(),
            "--master".into(),
            master.to_owned(),
            "--docker".into(),
            docker.clone(),
            "--node".into(),
            node.hostname.clone(),
            // The node's own engine, where its named volumes are inspected.
            "--node-docker".into(),
            format!("unix://{}", text(&node.socket(dir))?),
            "--data-dir".into(),
            text(&dir.join("agents").join(&node.hostname))?,
            "--listen".into(),
            port(i).to_string(),
            "--credential".into(),
            text(&credentials::credential_file(dir, &credentials::agent_principal(i)))?,
            "--http-credentials".into(),
            text(&credentials::agent_readers(dir))?,
        ];
        let mut resources = Vec::new();
        if let Some(c) = cluster.file.node_cpus {
            resources.push(format!("cpus:{c}"));
        }
        if let Some(m) = cluster.file.node_mem {
            resources.push(format!("mem:{m}"));
        }
        if let Some(r) = &args.resources {
            resources.push(r.clone());
        }
        if !resources.is_empty() {
            cli.extend(["--resources".to_owned(), resources.join(";")]);
        }
        if let Some(rack) = &node.rack {
            cli.extend(["--attributes".to_owned(), format!("rack={rack}")]);
        }
        commands.push((format!("agent-{}", node.hostname), cli));
    }
    Ok(commands)
}

fn list(addrs: &[std::net::SocketAddr]) -> String {
    addrs.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

/// Waits until `count` agents have registered with the offer layer (asked
/// as `operator`, of each of its replicas `offers` until the leader
/// answers); returns their HTTP addresses, sorted by hostname.
/// `alive` fails when an agent stopped meanwhile.
pub async fn wait_for_agents(
    offers: &[String],
    operator: &mpiswarm_mesos::credential::Credential,
    count: usize,
    alive: &mut dyn FnMut() -> Result<()>,
) -> Result<Vec<std::net::SocketAddr>> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    // A standby redirects to the leader; the leader is asked in turn, with
    // the credential (which a followed redirect would drop).
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(StackError::HttpClient)?;
    loop {
        alive()?;
        for url in offers {
            let asked = http.get(format!("{url}/master/state")).basic_auth(&operator.principal, Some(&operator.secret));
            let Ok(resp) = asked.send().await else { continue };
            if !resp.status().is_success() {
                continue;
            }
            let Ok(state) = resp.json::<serde_json::Value>().await else { continue };
            let registered = state["slaves"].as_array().or_else(|| state["agents"].as_array());
            let mut found: Vec<(String, u16)> = registered
                .into_iter()
                .flatten()
                .filter_map(|a| Some((a["hostname"].as_str()?.to_owned(), a["port"].as_u64()? as u16)))
                .collect();
            if found.len() >= count {
                found.sort();
                return Ok(found.into_iter().map(|(_, p)| std::net::SocketAddr::from(([127, 0, 0, 1], p))).collect());
            }
        }
        if tokio::time::Instant::now() > deadline {
            return Err(StackError::AgentsNotRegistered { count });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ignored = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        up: UpArgs,
    }

    fn flag<'a>(cli: &'a [String], name: &str) -> Option<&'a str> {
        cli.iter().position(|a| a == name).and_then(|i| cli.get(i + 1)).map(String::as_str)
    }

    #[test]
    fn replicas_are_elected_through_their_own_kubeconfig_each_on_a_port_of_its_own_without_a_disk_registry() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().to_str().unwrap();
        let args = Cli::try_parse_from(["up", "--split", "--offers-replicas", "3", "--data-dir", data]).unwrap().up;
        let replicas = offers_replica_commands(&args, dir.path(), None).unwrap();
        let names: Vec<&str> = replicas.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["offers-1", "offers-2", "offers-3"]);
        let mut ports = std::collections::BTreeSet::new();
        for (name, cli) in &replicas {
            assert_eq!(flag(cli, "--lease-name"), Some(OFFERS_LEASE), "{name}: {cli:?}");
            let theirs = crate::offers_identity::kubeconfig_file(dir.path());
            assert_eq!(flag(cli, "--kubeconfig"), theirs.to_str(), "{name}: not the admin's");
            assert_eq!(flag(cli, "--data-dir"), None, "{name}: the registry is in the API server: {cli:?}");
            assert!(flag(cli, "--credentials").is_some(), "{name}: the same credentials as one replica");
            ports.insert(flag(cli, "--listen").unwrap().to_owned());
        }
        assert_eq!(ports.len(), 3, "a port each: {ports:?}");
        let refused = Cli::try_parse_from(["up", "--offers-replicas", "3", "--data-dir", data]).err().unwrap();
        assert!(refused.to_string().contains("--split"), "{refused}");
        assert!(Cli::try_parse_from(["up", "--split", "--offers-replicas", "0", "--data-dir", data]).is_err());
    }
}
