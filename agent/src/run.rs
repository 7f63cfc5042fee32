//! `mpiswarm agent`: wires the [`Agent`] to Docker and to the offer layer.
//! Two things run side by side: the agent session of `mpiswarm_mesos`
//! (SUBSCRIBE, events, re-subscribe with backoff; each status POSTed as
//! UPDATE until the offer layer accepts it), and the resync (on every Docker
//! event for the agent's containers, and periodically, so missed events and
//! REJECTED tasks are seen too).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bollard::query_parameters::EventsOptions;
use clap::Args;
use futures::StreamExt;
use mpiswarm_mesos::AgentId;
use mpiswarm_mesos::agent_api::{AgentInfo, Event, ReportedTask};
use mpiswarm_mesos::agent_session::{self, AgentSide, Outgoing, SessionConfig};
use mpiswarm_mesos::client::AgentClient;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::Notify;

use crate::agent::{Agent, AgentConfig};
use crate::http::Connection;
use crate::mounts::HostPaths;
use crate::node::{self, NodeError};
use crate::store::{Store, StoreError};
use crate::swarm::{DockerSwarm, Swarm};
use crate::watchdog::{Panicked, Spawner, watchdog};
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
    /// The most bytes kept of each task's stdout and of its stderr (the
    /// last ones; served on /files/read).
    #[arg(long, default_value_t = 8 * 1024 * 1024)]
    pub output_limit_bytes: u64,
    /// Seconds the output of a task that ended by itself (FINISHED, FAILED)
    /// is kept after the agent forgot the task; killed tasks' output goes at once.
    #[arg(long, default_value_t = 3600.0)]
    pub output_retention_seconds: f64,
    /// A host directory under which tasks may bind-mount paths (HOST_PATH
    /// volumes); repeatable. Without it, host paths are refused.
    #[arg(long = "allow-host-path-prefix")]
    pub allow_host_path_prefixes: Vec<PathBuf>,
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
    #[error("cannot start on the data directory: {0}")]
    Start(#[from] crate::agent::StartError),
    #[error("cannot install the SIGTERM handler: {0}")]
    Signal(std::io::Error),
    #[error(transparent)]
    Panicked(#[from] Panicked),
    #[error("the agent's HTTP server failed: {0}")]
    Serve(std::io::Error),
    #[error("{0} stopped unexpectedly")]
    Stopped(&'static str),
    #[error("{0}")]
    HostPaths(String),
}

fn seconds(flag: &'static str, value: f64) -> Result<Duration, AgentError> {
    Duration::try_from_secs_f64(value).ok().filter(|d| !d.is_zero()).ok_or(AgentError::Seconds { flag, value })
}

/// Runs the agent until SIGTERM or Ctrl-C (then `Ok`, leaving its services
/// running), or until one of its tasks panics or its server fails (an error
/// naming it).
pub async fn run(args: AgentArgs) -> Result<(), AgentError> {
    let resync_every = seconds("resync-seconds", args.resync_seconds)?;
    let orphan_grace = seconds("orphan-grace-seconds", args.orphan_grace_seconds)?;
    let output_retention = seconds("output-retention-seconds", args.output_retention_seconds)?;
    let host_paths = HostPaths::allow(&args.allow_host_path_prefixes).map_err(AgentError::HostPaths)?;
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
    let config = AgentConfig {
        orphan_grace,
        output_limit: args.output_limit_bytes,
        output_retention,
        host_paths,
        ..AgentConfig::default()
    };
    let (spawner, failures) = watchdog();
    let (agent, outbox) =
        Agent::new(DockerSwarm { docker: docker.clone() }, node_id.clone(), store, config, spawner.clone())?;
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
    tracing::info!(addr = %local, "serving /healthz /readyz /metrics /state /files");
    let app = crate::http::router(Arc::clone(&agent), Arc::clone(&connection));
    let mut server = tokio::spawn(async move { axum::serve(listener, app).await });

    let client = AgentClient::new(&args.master, None);
    let _supervisor = supervise(Arc::clone(&agent), docker, resync_every, &spawner);
    // The port the HTTP endpoints really listen on (also with --listen ...:0),
    // so frameworks can find this agent's /files.
    let info = AgentInfo { hostname, id: None, resources, attributes, port: Some(i32::from(local.port())) };
    let side = Arc::new(Session { agent: Arc::clone(&agent), info, connection });
    let mut session = tokio::spawn(agent_session::run(client, side, outbox, SessionConfig::default()));
    let mut term = signal(SignalKind::terminate()).map_err(AgentError::Signal)?;
    let ended = tokio::select! {
        _ = tokio::signal::ctrl_c() => Ok(()),
        _ = term.recv() => Ok(()),
        p = failures.first() => Err(AgentError::Panicked(p)),
        served = &mut server => Err(match served {
            Ok(Ok(())) => AgentError::Stopped("the HTTP server"),
            Ok(Err(e)) => AgentError::Serve(e),
            Err(e) => AgentError::Panicked(Panicked { name: "http server".into(), message: e.to_string() }),
        }),
        s = &mut session => Err(match s {
            Ok(()) => AgentError::Stopped("the offer layer session"),
            Err(e) => AgentError::Panicked(Panicked { name: "offer layer session".into(), message: e.to_string() }),
        }),
    };
    server.abort();
    session.abort();
    // Whatever was recorded reaches the disk; running services are left as
    // they are for the next incarnation to adopt.
    agent.flush().await;
    match &ended {
        Ok(()) => tracing::info!("stopping on a signal; running tasks keep running"),
        Err(e) => tracing::error!(error = %e, "stopping"),
    }
    ended
}

/// The agent as the shared subscribe / UPDATE loop sees it.
struct Session<S: Swarm> {
    agent: Arc<Agent<S>>,
    /// Hostname, resources and attributes; the id is the agent's.
    info: AgentInfo,
    connection: Arc<Connection>,
}

impl<S: Swarm + 'static> AgentSide for Session<S> {
    fn agent_info(&self) -> AgentInfo {
        AgentInfo { id: self.agent.agent_id(), ..self.info.clone() }
    }

    fn agent_id(&self) -> Option<AgentId> {
        self.agent.agent_id()
    }

    fn reported_tasks(&self) -> Vec<ReportedTask> {
        self.agent.reported_tasks()
    }

    fn subscribed(&self, agent_id: &AgentId) {
        self.agent.set_agent_id(agent_id.clone());
    }

    fn handle(&self, event: Event) {
        self.agent.handle(event);
    }

    fn connected(&self, up: bool) {
        self.connection.subscribed.store(up, Ordering::Relaxed);
    }

    fn delivered(&self, _update: &Outgoing) {
        self.agent.counters.status_updates.inc();
    }
}

/// Starts the resync loop, woken by Docker events of managed containers and
/// every `every`, as watched work of `spawner`.
/// The loops stop when the returned guard is dropped.
pub fn supervise<S: Swarm + 'static>(
    agent: Arc<Agent<S>>,
    docker: bollard::Docker,
    every: Duration,
    spawner: &Spawner,
) -> Supervisor {
    let wake = Arc::new(Notify::new());
    Supervisor {
        tasks: vec![
            spawner.spawn("docker event watch", watch_docker(docker, Arc::clone(&wake))),
            spawner.spawn("resync", resync_loop(agent, wake, every)),
        ],
    }
}

/// Owns the background loops of [`supervise`]; aborts them when dropped.
pub struct Supervisor {
    tasks: Vec<tokio::task::AbortHandle>,
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
