//! `mpiswarm up`: the whole one-machine stack in this process, the way k3s
//! runs Kubernetes in one binary: the embedded API server (with the MpiJob
//! CRD installed), the offer layer, a node agent on the local Docker engine
//! (which makes it a single-node swarm if it is none), and the controller.
//! It builds the rank image first if it is missing, prints where the
//! kubeconfig is and what to run next, and stops everything on Ctrl-C or
//! SIGTERM. A controller that stops itself (its Lease lost, its framework
//! driver ended) is started again after a pause ([`crate::restarts`], the
//! rule `--split` restarts processes by). Running tasks survive a restart: the agent adopts its services,
//! the offer layer and the controller recover their ids from the data dir.
//! With `--split` the same components run as child processes instead
//! (`split.rs`); the command lines of [`crate::components`] serve both ways.
//! Never used by the components themselves: it only starts and stops them.

use std::time::Duration;

use clap::Parser;

use crate::components::{
    LEASE_SECONDS, UpArgs, agent_commands, install_crd, offers_command, say, say_agents, say_ready, shutdown_signal,
    wait_for_agents,
};
use crate::credentials;
use crate::error::{FileAction, Part, Result, StackError, file};
use crate::images::{self, NODE_IMAGE, RANK_IMAGE};
use crate::nodes;
use crate::restarts::Restarts;
use crate::stack_file::{self, StackFile};

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

pub async fn run(args: UpArgs) -> Result<()> {
    let dir = args.data_dir.clone();
    // The kubeconfig, the API server's store and the registry live here.
    file(FileAction::Creating, &dir, mpiswarm_guard::private::dir(&dir))?;
    let dir = file(FileAction::Resolving, &dir, dir.canonicalize())?;
    if let Ok(other) = stack_file::running(&dir)
        && other.pid != std::process::id()
    {
        return Err(StackError::AlreadyRunning { dir, pid: other.pid });
    }
    let before = stack_file::previous(&dir);
    // One principal per agent: one per node with --nodes, else the one.
    let agents = args.nodes.nodes.map_or(1, |n| n as usize);
    credentials::ensure(&dir, agents)?;

    nodes::check(&args.nodes)?;
    if !args.no_build {
        ensure_image(RANK_IMAGE, false).await?;
        if args.nodes.nodes.is_some() {
            ensure_image(NODE_IMAGE, true).await?;
        }
    }

    if args.split {
        return crate::split::run(&args, &dir, before).await;
    }
    let mut api_args = mpiswarm_apiserver::ApiserverArgs::for_dir(&dir);
    api_args.listen = stack_file::reuse_or_any(before.as_ref().and_then(|b| stack_file::port_of(&b.apiserver)));
    api_args.token_auth_file = Some(crate::tenant::ensure_tokens_file(&dir)?);
    let api = mpiswarm_apiserver::start(api_args).await.map_err(|e| started(Part::ApiServer, e))?;
    say(&format!("API server on {}", api.url));
    // The controller identifies itself (User-Agent) so the API server's request log can tell its requests apart.
    let client = mpiswarm_controller::controller_client(Some(&api.kubeconfig))
        .await
        .map_err(|e| StackError::Client { kubeconfig: api.kubeconfig.clone(), source: Box::new(e) })?;
    install_crd(&client).await?;

    let offers_cli = offers_command(&args, &dir, before.as_ref())?;
    let offers =
        mpiswarm_offers::start(parse::<Offers>(offers_cli)?.args).await.map_err(|e| started(Part::OfferLayer, e))?;
    say(&format!("offer layer on {}", offers.url()));

    let commands = agent_commands(&args, &dir, &offers.url(), before.as_ref()).await?;
    let mut running = Vec::new();
    for (_, cli) in commands {
        running.push(tokio::spawn(mpiswarm_agent::run(parse::<Agent>(cli)?.args)));
    }
    let operator = credentials::read(&dir, credentials::OPERATOR)?;
    let agent_addrs = wait_for_agents(&[offers.url()], &operator, running.len(), &mut || {
        let Some(i) = running.iter().position(|a| a.is_finished()) else { return Ok(()) };
        let ended = futures::FutureExt::now_or_never(&mut running[i]);
        Err(StackError::AgentStoppedAtStart { agent: i + 1, why: format!("{ended:?}") })
    })
    .await?;
    say_agents(&args, &agent_addrs);

    let controller_listen = stack_file::reuse_or_any(before.as_ref().map(|b| b.controller.port()));
    let logs_listen = stack_file::reuse_or_any(before.as_ref().and_then(|b| b.controller_logs).map(|a| a.port()));
    let options = mpiswarm_controller::Options {
        master: offers.url(),
        credentials: Some(credentials::read(&dir, credentials::CONTROLLER)?.into_pair()),
        namespace: None,
        lease_namespace: "default".to_owned(),
        identity: format!("up-{}", std::process::id()),
        lease_seconds: LEASE_SECONDS,
        listen: controller_listen,
        logs: Some(mpiswarm_controller::logs::LogsOptions { listen: logs_listen, url: None, tls: None }),
        settings: mpiswarm_controller::Settings::default(),
    };
    let mut options = options;
    let controller =
        mpiswarm_controller::start(client.clone(), options.clone()).await.map_err(|e| started(Part::Controller, e))?;
    say(&format!("controller on {}", controller.addr));
    // A restarted controller serves where the stack file says it does.
    options.listen = controller.addr;
    if let (Some(logs), Some((addr, _))) = (options.logs.as_mut(), controller.logs.as_ref()) {
        logs.listen = *addr;
    }

    let file = StackFile {
        pid: std::process::id(),
        kubeconfig: api.kubeconfig.clone(),
        apiserver: api.url.clone(),
        offers: offers.url(),
        offers_replicas: Vec::new(),
        agents: agent_addrs,
        controller: controller.addr,
        controller_logs: controller.logs.as_ref().map(|(addr, _)| *addr),
        operator_credential: Some(credentials::credential_file(&dir, credentials::OPERATOR)),
        components: Vec::new(),
    };
    stack_file::write(&dir, &file)?;
    say_ready(&file, &dir);

    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    let mut controller = Some(controller);
    let mut restarts = Restarts::new();
    let outcome = loop {
        let Some(current) = controller.as_mut() else {
            controller = match mpiswarm_controller::start(client.clone(), options.clone()).await {
                Ok(c) => Some(c),
                Err(e) => break Err(started(Part::Controller, e)),
            };
            restarts.started();
            say("controller started again");
            continue;
        };
        tokio::select! {
            _ = &mut shutdown => break Ok(()),
            (a, i, _) = futures::future::select_all(running.iter_mut()) => {
                break Err(StackError::AgentStopped { agent: i + 1, why: match a {
                    Ok(Ok(())) => "without an error".to_owned(),
                    Ok(Err(e)) => e.to_string(),
                    Err(e) => e.to_string(),
                }});
            }
            // The controller stops itself when it cannot go on (its Lease
            // lost, its framework driver ended): started again, as --split
            // starts an exited process again (crate::restarts).
            ended = current.ended() => {
                controller = None;
                let (ran, pause) = restarts.stopped();
                let why = ended.map_or_else(|e| e.to_string(), |()| "without an error".to_owned());
                say(&format!(
                    "controller stopped ({why}) after {:.1} s; starting it again in {} s",
                    ran.as_secs_f64(),
                    pause.as_secs()
                ));
                tokio::select! {
                    _ = &mut shutdown => break Ok(()),
                    _ = tokio::time::sleep(pause) => {}
                }
            }
        }
    };
    say("stopping (running tasks keep running; `mpiswarm up` again picks them up)");
    stack_file::remove(&dir);
    if let Some(controller) = controller {
        controller.stop();
        let _stopped = tokio::time::timeout(Duration::from_secs(10), controller.wait()).await;
    }
    for agent in &running {
        agent.abort();
    }
    let _stopped = tokio::time::timeout(Duration::from_secs(10), offers.stop()).await;
    api.stop();
    outcome
}

async fn ensure_image(image: &str, node: bool) -> Result<()> {
    let present = tokio::process::Command::new("docker")
        .args(["image", "inspect", image])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .await
        .map_err(StackError::DockerMissing)?
        .success();
    if !present {
        say(&format!(
            "building {image} (debootstrap + docker import, about 2-3 minutes the first time; progress follows)"
        ));
        let version = image.rsplit(':').next().unwrap_or_default();
        images::build(version, false, node).await?;
    }
    Ok(())
}

/// A component's command line, parsed as its own subcommand would parse it.
fn parse<P: Parser>(command: Vec<String>) -> Result<P> {
    P::try_parse_from(&command).map_err(|source| StackError::CommandLine { command, source })
}

fn started(part: Part, e: impl std::error::Error + Send + Sync + 'static) -> StackError {
    StackError::Start { part, source: Box::new(e) }
}
