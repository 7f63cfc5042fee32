//! `mpiswarm up`: the whole one-machine stack in this process, the way k3s
//! runs Kubernetes in one binary: the embedded API server (with the MpiJob
//! CRD installed), the offer layer, a node agent on the local Docker engine
//! (which makes it a single-node swarm if it is none), and the controller.
//! It builds the rank image first if it is missing, prints where the
//! kubeconfig is and what to run next, and stops everything on Ctrl-C or
//! SIGTERM. Running tasks survive a restart: the agent adopts its services,
//! the offer layer and the controller recover their ids from the data dir.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Parser;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};

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
    /// Do not build the rank image if it is missing.
    #[arg(long)]
    pub no_build: bool,
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

fn say(line: &str) {
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
    let text = |p: &std::path::Path| p.to_str().map(str::to_owned).context("the data dir path is not UTF-8");

    if !args.no_build {
        ensure_rank_image().await?;
    }

    let mut api_args = mpiswarm_apiserver::ApiserverArgs::for_dir(&dir);
    api_args.listen = stack::reuse_or_any(before.as_ref().and_then(|b| port_of(&b.apiserver)));
    let api = mpiswarm_apiserver::start(api_args).await.context("starting the API server")?;
    say(&format!("API server on {}", api.url));
    let client = mpiswarm_controller::client(Some(&api.kubeconfig)).await?;
    install_crd(&client).await?;

    let offers_dir = dir.join("offers");
    std::fs::create_dir_all(&offers_dir)?;
    let offers_listen = stack::reuse_or_any(before.as_ref().and_then(|b| port_of(&b.offers)));
    let mut offers_cli = vec![
        "offers".to_owned(),
        "--listen".into(),
        offers_listen.to_string(),
        "--data-dir".into(),
        text(&offers_dir)?,
    ];
    if let Some(w) = &args.weights {
        offers_cli.extend(["--weights".to_owned(), w.clone()]);
    }
    let offers =
        mpiswarm_offers::start(Offers::try_parse_from(offers_cli)?.args).await.context("starting the offer layer")?;
    say(&format!("offer layer on {}", offers.url()));

    let agent_listen = stack::reuse_or_any(before.as_ref().map(|b| b.agent.port()));
    let mut agent_cli = vec![
        "agent".to_owned(),
        "--master".into(),
        offers.url(),
        "--data-dir".into(),
        text(&dir.join("agent"))?,
        "--listen".into(),
        agent_listen.to_string(),
    ];
    if let Some(r) = &args.resources {
        agent_cli.extend(["--resources".to_owned(), r.clone()]);
    }
    let agent_args = Agent::try_parse_from(agent_cli)?.args;
    let mut agent = tokio::spawn(mpiswarm_agent::run(agent_args));
    let agent_addr = wait_for_agent(&offers.url(), &mut agent).await?;
    say(&format!("node agent on {agent_addr} (this Docker engine, a single-node swarm)"));

    let controller_listen = stack::reuse_or_any(before.as_ref().map(|b| b.controller.port()));
    let options = mpiswarm_controller::Options {
        master: offers.url(),
        credentials: None,
        namespace: None,
        lease_namespace: "default".to_owned(),
        identity: format!("up-{}", std::process::id()),
        lease_seconds: 15,
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
        agent: agent_addr,
        controller: controller.addr,
    };
    stack::write(&dir, &file)?;
    say("ready");
    eprintln!(
        "\n  export KUBECONFIG={}\n  kubectl apply -f examples/pi.yaml && kubectl get mpij -w\n  # or: mpiswarm run examples/pi.yaml --data-dir {}\n",
        api.kubeconfig.display(),
        dir.display()
    );

    let outcome = tokio::select! {
        _ = shutdown_signal() => Ok(()),
        a = &mut agent => Err(anyhow::anyhow!("the node agent stopped: {}", match a {
            Ok(Ok(())) => "without an error".to_owned(),
            Ok(Err(e)) => e.to_string(),
            Err(e) => e.to_string(),
        })),
    };
    say("stopping (running tasks keep running; `mpiswarm up` again picks them up)");
    stack::remove(&dir);
    controller.stop();
    let _stopped = tokio::time::timeout(Duration::from_secs(10), controller.wait()).await;
    agent.abort();
    let _stopped = tokio::time::timeout(Duration::from_secs(10), offers.stop()).await;
    api.stop();
    outcome
}

fn port_of(url: &str) -> Option<u16> {
    url.rsplit(':').next()?.trim_end_matches('/').parse().ok()
}

async fn install_crd(client: &kube::Client) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = serde_json::to_value(mpiswarm_crds::crd())?;
    crd["apiVersion"] = "apiextensions.k8s.io/v1".into();
    crd["kind"] = "CustomResourceDefinition".into();
    crds.patch("mpijobs.mpiswarm.io", &PatchParams::apply("mpiswarm-up").force(), &Patch::Apply(&crd))
        .await
        .context("installing the MpiJob CRD")?;
    Ok(())
}

async fn ensure_rank_image() -> Result<()> {
    let image = mpiswarm_agent::images::RANK_IMAGE;
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
            "building the rank image {image} (debootstrap + docker import, about 2-3 minutes the first time; progress follows)"
        ));
        let version = image.rsplit(':').next().unwrap_or_default();
        mpiswarm_agent::images::build(version, false, false).await?;
    }
    Ok(())
}

/// Waits until the agent has registered with the offer layer; returns its HTTP address.
async fn wait_for_agent(
    offers: &str,
    agent: &mut tokio::task::JoinHandle<Result<(), mpiswarm_agent::AgentError>>,
) -> Result<std::net::SocketAddr> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if agent.is_finished() {
            let ended = agent.await;
            bail!("the node agent stopped at start: {ended:?}");
        }
        if let Ok(resp) = reqwest::get(format!("{offers}/master/state")).await
            && let Ok(state) = resp.json::<serde_json::Value>().await
            && let Some(port) = state["slaves"][0]["port"].as_u64().or_else(|| state["agents"][0]["port"].as_u64())
        {
            return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port as u16)));
        }
        if tokio::time::Instant::now() > deadline {
            bail!("the node agent did not register with the offer layer within 60 s");
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
