//! `mpiswarm up`: the whole one-machine stack in this process, the way k3s
//! runs Kubernetes in one binary: the embedded API server (with the MpiJob
//! CRD installed), the offer layer, a node agent on the local Docker engine
//! (which makes it a single-node swarm if it is none), and the controller.
//! It builds the rank image first if it is missing, prints where the
//! kubeconfig is and what to run next, and stops everything on Ctrl-C or
//! SIGTERM. Running tasks survive a restart: the agent adopts its services,
//! the offer layer and the controller recover their ids from the data dir.
//! With `--split` the same components run as child processes instead
//! (`split.rs`); the command lines built here serve both ways.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Parser;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};

use crate::nodes::{self, NodesArgs};
use crate::stack::{self, StackFile};

#[derive(clap::Args, Debug, Clone)]
pub struct UpArgs {
    /// Where every component keeps its state (the kubeconfig is DATA/kubeconfig).
    #[arg(long, env = "MPISWARM_DATA_DIR", default_value = stack::DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
    /// Role weights for the offer layer's fair sharing, e.g. `mpi=2,batch=1`.
    #[arg(long)]
    pub weights: Option<String>,
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

#[derive(Parser)]
struct Offers {
    #[command(flatten)]
    args: mpiswarm_offers::OffersArgs,
}

#[derive(Parser)]
struct Agent {
    #[command(flatten)]
    args: mpiswarm_agent::AgentArgs,
}

/// Seconds the controller's Lease is held without renewal; a controller
/// started again under the same identity holds it again within this time.
pub const LEASE_SECONDS: u64 = 15;

pub fn say(line: &str) {
    eprintln!("mpiswarm up: {line}");
}

pub async fn run(args: UpArgs) -> Result<()> {
    let dir = args.data_dir.clone();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = dir.canonicalize().with_context(|| format!("resolving {}", dir.display()))?;
    if let Ok(other) = stack::running(&dir)
        && other.pid != std::process::id()
    {
        bail!(
            "a stack already runs with data dir {} (process {}): use it, or stop it with `mpiswarm down --data-dir {}`",
            dir.display(),
            other.pid,
            dir.display()
        );
    }
    let before = stack::previous(&dir);

    nodes::check(&args.nodes)?;
    if !args.no_build {
        ensure_image(mpiswarm_agent::images::RANK_IMAGE, false).await?;
        if args.nodes.nodes.is_some() {
            ensure_image(mpiswarm_agent::images::NODE_IMAGE, true).await?;
        }
    }

    if args.split {
        return crate::split::run(&args, &dir, before).await;
    }
    let mut api_args = mpiswarm_apiserver::ApiserverArgs::for_dir(&dir);
    api_args.listen = stack::reuse_or_any(before.as_ref().and_then(|b| stack::port_of(&b.apiserver)));
    let api = mpiswarm_apiserver::start(api_args).await.context("starting the API server")?;
    say(&format!("API server on {}", api.url));
    // The controller identifies itself (User-Agent) so the API server's request log can tell its requests apart.
    let client = mpiswarm_controller::controller_client(Some(&api.kubeconfig)).await?;
    install_crd(&client).await?;

    let offers_cli = offers_command(&args, &dir, before.as_ref())?;
    let offers =
        mpiswarm_offers::start(Offers::try_parse_from(offers_cli)?.args).await.context("starting the offer layer")?;
    say(&format!("offer layer on {}", offers.url()));

    let commands = agent_commands(&args, &dir, &offers.url(), before.as_ref()).await?;
    let mut running = Vec::new();
    for (_, cli) in commands {
        running.push(tokio::spawn(mpiswarm_agent::run(Agent::try_parse_from(cli)?.args)));
    }
    let agent_addrs = wait_for_agents(&offers.url(), running.len(), &mut || {
        let Some(i) = running.iter().position(|a| a.is_finished()) else { return Ok(()) };
        let ended = futures::FutureExt::now_or_never(&mut running[i]);
        bail!("node agent {} stopped at start: {ended:?}", i + 1)
    })
    .await?;
    say_agents(&args, &agent_addrs);

    let controller_listen = stack::reuse_or_any(before.as_ref().map(|b| b.controller.port()));
    let options = mpiswarm_controller::Options {
        master: offers.url(),
        credentials: None,
        namespace: None,
        lease_namespace: "default".to_owned(),
        identity: format!("up-{}", std::process::id()),
        lease_seconds: LEASE_SECONDS,
        listen: controller_listen,
        settings: mpiswarm_controller::Settings::default(),
    };
    let controller = mpiswarm_controller::start(client, options).await?;
    say(&format!("controller on {}", controller.addr));

    let file = StackFile {
        pid: std::process::id(),
        kubeconfig: api.kubeconfig.clone(),
        apiserver: api.url.clone(),
        offers: offers.url(),
        agents: agent_addrs,
        controller: controller.addr,
        components: Vec::new(),
    };
    stack::write(&dir, &file)?;
    say_ready(&file, &dir);

    let outcome = tokio::select! {
        _ = shutdown_signal() => Ok(()),
        (a, i, _) = futures::future::select_all(running.iter_mut()) => {
            Err(anyhow::anyhow!("node agent {} stopped: {}", i + 1, match a {
                Ok(Ok(())) => "without an error".to_owned(),
                Ok(Err(e)) => e.to_string(),
                Err(e) => e.to_string(),
            }))
        }
    };
    say("stopping (running tasks keep running; `mpiswarm up` again picks them up)");
    stack::remove(&dir);
    controller.stop();
    let _stopped = tokio::time::timeout(Duration::from_secs(10), controller.wait()).await;
    for agent in &running {
        agent.abort();
    }
    let _stopped = tokio::time::timeout(Duration::from_secs(10), offers.stop()).await;
    api.stop();
    outcome
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

fn text(p: &std::path::Path) -> Result<String> {
    p.to_str().map(str::to_owned).context("the data dir path is not UTF-8")
}

/// `mpiswarm offers ...` for this stack: its registry in DATA/offers, the
/// port of the last `up` if it is free.
pub fn offers_command(args: &UpArgs, dir: &std::path::Path, before: Option<&StackFile>) -> Result<Vec<String>> {
    let offers_dir = dir.join("offers");
    std::fs::create_dir_all(&offers_dir).with_context(|| format!("creating {}", offers_dir.display()))?;
    let listen = stack::reuse_or_any(before.and_then(|b| stack::port_of(&b.offers)));
    let mut cli =
        vec!["offers".to_owned(), "--listen".into(), listen.to_string(), "--data-dir".into(), text(&offers_dir)?];
    if let Some(w) = &args.weights {
        cli.extend(["--weights".to_owned(), w.clone()]);
    }
    Ok(cli)
}

pub async fn install_crd(client: &kube::Client) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = serde_json::to_value(mpiswarm_crds::crd())?;
    crd["apiVersion"] = "apiextensions.k8s.io/v1".into();
    crd["kind"] = "CustomResourceDefinition".into();
    crds.patch("mpijobs.mpiswarm.io", &PatchParams::apply("mpiswarm-up").force(), &Patch::Apply(&crd))
        .await
        .context("installing the MpiJob CRD")?;
    Ok(())
}

async fn ensure_image(image: &str, node: bool) -> Result<()> {
    let present = tokio::process::Command::new("docker")
        .args(["image", "inspect", image])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .await
        .context("running docker: is Docker installed and its daemon running?")?
        .success();
    if !present {
        say(&format!(
            "building {image} (debootstrap + docker import, about 2-3 minutes the first time; progress follows)"
        ));
        let version = image.rsplit(':').next().unwrap_or_default();
        mpiswarm_agent::images::build(version, false, node).await?;
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
    let port = |i: usize| stack::reuse_or_any(before.and_then(|b| b.agents.get(i)).map(|a| a.port()));
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
        ];
        if let Some(r) = &args.resources {
            cli.extend(["--resources".to_owned(), r.clone()]);
        }
        return Ok(vec![("agent".to_owned(), cli)]);
    };
    let cluster = nodes::ensure(dir, &args.nodes, mpiswarm_agent::images::NODE_IMAGE).await?;
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
            "--data-dir".into(),
            text(&dir.join("agents").join(&node.hostname))?,
            "--listen".into(),
            port(i).to_string(),
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

/// Waits until `count` agents have registered with the offer layer; returns
/// their HTTP addresses, sorted by hostname. `alive` fails when an agent
/// stopped meanwhile.
pub async fn wait_for_agents(
    offers: &str,
    count: usize,
    alive: &mut dyn FnMut() -> Result<()>,
) -> Result<Vec<std::net::SocketAddr>> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        alive()?;
        if let Ok(resp) = reqwest::get(format!("{offers}/master/state")).await
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
            bail!("not all {count} node agents registered with the offer layer within 60 s");
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
