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
    let mut cli = vec![
        "offers".to_owned(),
        "--listen".into(),
        listen.to_string(),
        "--data-dir".into(),
        text(&offers_dir)?,
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

pub async fn install_crd(client: &kube::Client) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = serde_json::to_value(mpiswarm_crds::crd())
        .map_err(|source| StackError::Encode { what: "the MpiJob CRD", source })?;
    crd["apiVersion"] = "apiextensions.k8s.io/v1".into();
    crd["kind"] = "CustomResourceDefinition".into();
    crds.patch("mpijobs.mpiswarm.io", &PatchParams::apply("mpiswarm-up").force(), &Patch::Apply(&crd))
        .await
        .map_err(StackError::InstallCrd)?;
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
/// as `operator`); returns their HTTP addresses, sorted by hostname.
/// `alive` fails when an agent stopped meanwhile.
pub async fn wait_for_agents(
    offers: &str,
    operator: &mpiswarm_mesos::credential::Credential,
    count: usize,
    alive: &mut dyn FnMut() -> Result<()>,
) -> Result<Vec<std::net::SocketAddr>> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let http = reqwest::Client::new();
    loop {
        alive()?;
        let asked = http.get(format!("{offers}/master/state")).basic_auth(&operator.principal, Some(&operator.secret));
        if let Ok(resp) = asked.send().await
            && let Ok(state) = resp.json::<serde_json::Value>().await
        {
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
