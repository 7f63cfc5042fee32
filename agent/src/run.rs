//! `mpiswarm agent`: wires the [`Agent`] to Docker and to the offer layer.
//! Three loops run side by side: the subscription (SUBSCRIBE, events,
//! re-subscribe with backoff when the stream ends or falls silent), the
//! outbox (each status POSTed as UPDATE until the offer layer accepts it),
//! and the resync (on every Docker event for the agent's containers, and
//! periodically, so missed events and REJECTED tasks are seen too).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bollard::query_parameters::EventsOptions;
use clap::Args;
use futures::StreamExt;
use mpiswarm_mesos::agent_api::{AgentInfo, EventType};
use mpiswarm_mesos::client::{AgentClient, Backoff};
use tokio::sync::{Notify, mpsc};

use crate::agent::{Agent, AgentConfig, Outgoing};
use crate::http::Connection;
use crate::node::{self, NodeError};
use crate::store::{Store, StoreError};
use crate::swarm::{DockerSwarm, Swarm};
use std::sync::atomic::Ordering;

#[derive(Args, Debug, Clone)]
pub struct AgentArgs {
    /// The offer layer (or Mesos-compatible master) to register with.
    #[arg(long, env = "MPISWARM_MASTER", default_value = "http://127.0.0.1:5050")]
    pub master: String,
    /// Docker endpoint of a swarm manager (unix:///var/run/docker.sock,
    /// tcp://host:2375); default: DOCKER_HOST or the local socket.
    #[arg(long)]
    pub docker: Option<String>,
    /// Extra attributes, `rack=r1,zone=a` (on top of the swarm node labels and hostname).
    #[arg(long)]
    pub attributes: Option<String>,
    /// Resources to offer, Mesos syntax `cpus:4;mem:8192;network:1000`
    /// (default: what Docker reports for this node).
    #[arg(long)]
    pub resources: Option<String>,
    /// Where the agent keeps its id and task records across restarts.
    #[arg(long, default_value = ".mpiswarm/agent")]
    pub data_dir: PathBuf,
    /// The swarm node (id or hostname) whose tasks this agent runs; default:
    /// the node of the --docker engine. Set it when the manager endpoint is
    /// another node's engine (an agent per node, one manager).
    #[arg(long)]
    pub node: Option<String>,
    /// Hostname to register with (default: the swarm node's hostname).
    #[arg(long)]
    pub hostname: Option<String>,
    /// Where to serve /healthz, /readyz, /metrics and /state (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:5051")]
    pub listen: std::net::SocketAddr,
    /// Seconds between full resyncs with Swarm (events trigger them sooner).
    #[arg(long, default_value_t = 2.0)]
    pub resync_seconds: f64,
    /// Seconds a service labelled as this agent's but owned by no task is
    /// left alone before it is removed.
    #[arg(long, default_value_t = 60.0)]
    pub orphan_grace_seconds: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Node(#[from] NodeError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: std::net::SocketAddr, source: std::io::Error },
    #[error("--{flag} must be a positive number of seconds, got {value}")]
    Seconds { flag: &'static str, value: f64 },
}

fn seconds(flag: &'static str, value: f64) -> Result<Duration, AgentError> {
    Duration::try_from_secs_f64(value).ok().filter(|d| !d.is_zero()).ok_or(AgentError::Seconds { flag, value })
}

/// Runs the agent until the process ends.
pub async fn run(args: AgentArgs) -> Result<(), AgentError> {
    let resync_every = seconds("resync-seconds", args.resync_seconds)?;
    let orphan_grace = seconds("orphan-grace-seconds", args.orphan_grace_seconds)?;
    // Bad flags are refused before anything touches Docker (no swarm init
    // on behalf of an agent that cannot start).
    node::resources(&node::NodeFacts::default(), args.resources.as_deref())?;
    node::attributes(&node::NodeFacts::default(), "", args.attributes.as_deref())?;
    let docker = node::connect(args.docker.as_deref()).await?;
    let own = node::ensure_swarm(&docker).await?;
    let (node_id, facts) = node::facts(&docker, args.node.as_deref().unwrap_or(&own)).await?;
    let resources = node::resources(&facts, args.resources.as_deref())?;
    let attributes = node::attributes(&facts, &node_id, args.attributes.as_deref())?;
    let hostname = args.hostname.clone().unwrap_or_else(|| facts.hostname.clone());
    let store = Store::open(&args.data_dir)?;
    let config = AgentConfig { orphan_grace, ..AgentConfig::default() };
    let (agent, outbox) = Agent::new(DockerSwarm { docker: docker.clone() }, node_id.clone(), store, config)?;
    tracing::info!(%node_id, %hostname, agent_id = ?agent.agent_id(), master = %args.master, "agent starting");

    // Report what is true now, not what was true before the restart.
    if let Err(e) = agent.resync().await {
        tracing::warn!(error = %e, "initial resync failed");
    }

    let connection = Arc::new(Connection::default());
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|source| AgentError::Listen { addr: args.listen, source })?;
    let local = listener.local_addr().map_err(|source| AgentError::Listen { addr: args.listen, source })?;
    tracing::info!(addr = %local, "serving /healthz /readyz /metrics /state");
    let app = crate::http::router(Arc::clone(&agent), Arc::clone(&connection));
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "the agent's HTTP endpoints stopped");
        }
    });

    let client = AgentClient::new(&args.master, None);
    let _supervisor = supervise(Arc::clone(&agent), docker, resync_every);
    tokio::spawn(deliver(client.clone(), Arc::clone(&agent), outbox));
    let info = AgentInfo { hostname, id: None, resources, attributes, port: None };
    subscribe_forever(client, agent, info, connection).await;
    Ok(())
}

async fn subscribe_forever<S: Swarm + 'static>(
    client: AgentClient,
    agent: Arc<Agent<S>>,
    info: AgentInfo,
    connection: Arc<Connection>,
) {
    let backoff = Backoff { initial: Duration::from_millis(200), max: Duration::from_secs(10) };
    let mut attempt = 0;
    loop {
        let info = AgentInfo { id: agent.agent_id(), ..info.clone() };
        match client.subscribe(info, agent.reported_tasks()).await {
            Ok(mut sub) => {
                attempt = 0;
                if let Err(e) = agent.set_agent_id(sub.subscribed.agent_id.clone()) {
                    tracing::error!(error = %e, "cannot persist the agent id; a restart will register a new agent");
                }
                tracing::info!(agent_id = %sub.subscribed.agent_id, "subscribed");
                connection.subscribed.store(true, Ordering::Relaxed);
                let silence = Duration::from_secs_f64(sub.subscribed.heartbeat_interval_seconds.max(1.0) * 3.0);
                loop {
                    match tokio::time::timeout(silence, sub.events.next()).await {
                        Ok(Some(Ok(event))) => {
                            let is_error = event.kind == EventType::Error;
                            agent.handle(event);
                            if is_error {
                                break;
                            }
                        }
                        Ok(Some(Err(e))) => {
                            tracing::warn!(error = %e, "event stream broken; re-subscribing");
                            break;
                        }
                        Ok(None) => {
                            tracing::warn!("event stream ended; re-subscribing");
                            break;
                        }
                        Err(_) => {
                            tracing::warn!(?silence, "no event (not even a heartbeat); re-subscribing");
                            break;
                        }
                    }
                }
                connection.subscribed.store(false, Ordering::Relaxed);
            }
            Err(e) => {
                tracing::warn!(error = %e, attempt, "SUBSCRIBE failed; retrying");
                tokio::time::sleep(backoff.delay(attempt)).await;
                attempt = attempt.saturating_add(1);
            }
        }
    }
}

/// POSTs each status in order, retrying until the offer layer takes it. A
/// 400 means the offer layer will never take it; that is logged and dropped.
async fn deliver<S: Swarm + 'static>(
    client: AgentClient,
    agent: Arc<Agent<S>>,
    mut outbox: mpsc::UnboundedReceiver<Outgoing>,
) {
    let backoff = Backoff { initial: Duration::from_millis(100), max: Duration::from_secs(5) };
    while let Some(item) = outbox.recv().await {
        let mut attempt = 0;
        loop {
            let Some(agent_id) = agent.agent_id() else {
                tokio::time::sleep(backoff.delay(attempt)).await;
                attempt += 1;
                continue;
            };
            match client.update(&agent_id, &item.framework_id, item.status.clone()).await {
                Ok(()) => {
                    agent.counters.status_updates.inc();
                    break;
                }
                Err(e) if e.status() == Some(400) => {
                    tracing::error!(error = %e, task = %item.status.task_id, "offer layer refused an update");
                    break;
                }
                Err(e) => {
                    tracing::debug!(error = %e, attempt, "UPDATE not accepted yet; retrying");
                    tokio::time::sleep(backoff.delay(attempt)).await;
                    attempt = attempt.saturating_add(1);
                }
            }
        }
    }
}

/// Starts the resync loop, woken by Docker events of managed containers and
/// every `every`.
/// The loops stop when the returned guard is dropped.
pub fn supervise<S: Swarm + 'static>(agent: Arc<Agent<S>>, docker: bollard::Docker, every: Duration) -> Supervisor {
    let wake = Arc::new(Notify::new());
    Supervisor {
        tasks: vec![
            tokio::spawn(watch_docker(docker, Arc::clone(&wake))),
            tokio::spawn(resync_loop(agent, wake, every)),
        ],
    }
}

/// Owns the background loops of [`supervise`]; aborts them when dropped.
pub struct Supervisor {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

async fn resync_loop<S: Swarm + 'static>(agent: Arc<Agent<S>>, wake: Arc<Notify>, every: Duration) {
    loop {
        tokio::select! {
            () = wake.notified() => {}
            () = tokio::time::sleep(every) => {}
        }
        if let Err(e) = agent.resync().await {
            tracing::warn!(error = %e, "resync failed");
        }
    }
}

/// Wakes the resync on every container event of a managed container.
async fn watch_docker(docker: bollard::Docker, wake: Arc<Notify>) {
    loop {
        let filters = std::collections::HashMap::from([
            ("type".to_owned(), vec!["container".to_owned()]),
            ("label".to_owned(), vec![format!("{}={}", crate::labels::MANAGED_BY, crate::labels::MANAGED_BY_VALUE)]),
        ]);
        let mut events = docker.events(Some(EventsOptions { filters: Some(filters), ..Default::default() }));
        while let Some(event) = events.next().await {
            match event {
                Ok(_) => wake.notify_one(),
                Err(e) => {
                    tracing::warn!(error = %e, "docker event stream failed");
                    break;
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
