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
use mpiswarm_mesos::client::args::{AgentCredentialArgs, AgentMasterArgs};
use mpiswarm_mesos::credential::Credential;
use mpiswarm_mesos::tls::{self, CaFile};
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
    /// `--master` and `--ca-file`, declared with the controller's in `mpiswarm_mesos`.
    #[command(flatten)]
    pub master: AgentMasterArgs,
    /// Docker endpoint of a swarm manager (unix:///var/run/docker.sock,
    /// tcp://host:2375); default: DOCKER_HOST or the local socket.
    #[arg(long, env = "MPISWARM_AGENT_DOCKER")]
    pub docker: Option<String>,
    /// Extra attributes, `rack=r1,zone=a` (on top of the swarm node labels and hostname).
    #[arg(long, env = "MPISWARM_AGENT_ATTRIBUTES")]
    pub attributes: Option<String>,
    /// Resources to offer, Mesos syntax `cpus:4;mem:8192;network:1000`
    /// (default: what Docker reports for this node).
    #[arg(long, env = "MPISWARM_AGENT_RESOURCES")]
    pub resources: Option<String>,
    /// Where the agent keeps its id and task records across restarts.
    #[arg(long, default_value = ".mpiswarm/agent", env = "MPISWARM_AGENT_DATA_DIR")]
    pub data_dir: PathBuf,
    /// The swarm node (id or hostname) whose tasks this agent runs; default:
    /// the node of the --docker engine. Set it when the manager endpoint is
    /// another node's engine (an agent per node, one manager), e.g. from a
    /// Swarm template: MPISWARM_AGENT_NODE={{.Node.ID}}.
    #[arg(long, env = "MPISWARM_AGENT_NODE")]
    pub node: Option<String>,
    /// Hostname to register with (default: the swarm node's hostname).
    #[arg(long, env = "MPISWARM_AGENT_HOSTNAME")]
    pub hostname: Option<String>,
    /// Where to serve /healthz, /readyz, /metrics, /state and /files (port 0:
    /// any free port). Beyond loopback only with --tls-cert/--tls-key and
    /// credentials for the master.
    #[arg(long, default_value = "127.0.0.1:5051", env = "MPISWARM_AGENT_LISTEN")]
    pub listen: std::net::SocketAddr,
    /// Seconds between full resyncs with Swarm (events trigger them sooner).
    #[arg(long, default_value_t = 2.0, env = "MPISWARM_AGENT_RESYNC_SECONDS")]
    pub resync_seconds: f64,
    /// Seconds between reads of the served node's Swarm status: when the
    /// manager marks it down, its tasks go TASK_LOST and the agent withdraws
    /// from the offer layer until the node is ready again.
    #[arg(long, default_value_t = 1.0, env = "MPISWARM_AGENT_NODE_CHECK_SECONDS")]
    pub node_check_seconds: f64,
    /// Seconds the manager must call the served node down (or disconnected)
    /// before its tasks go TASK_LOST; a node ready again sooner only
    /// flapped and keeps its tasks. 0 acts on the first reading.
    #[arg(long, default_value_t = 3.0, allow_negative_numbers = true, env = "MPISWARM_AGENT_NODE_DOWN_SECONDS")]
    pub node_down_seconds: f64,
    /// Seconds a service labelled as this agent's but owned by no task is
    /// left alone before it is removed.
    #[arg(long, default_value_t = 60.0, env = "MPISWARM_AGENT_ORPHAN_GRACE_SECONDS")]
    pub orphan_grace_seconds: f64,
    /// How many times in all a task is started when the engine could not
    /// start its container (the container never ran and its image is
    /// there, e.g. a busy engine's "device or resource busy"), before the
    /// failure is reported; 1 reports the first failure.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=10), env = "MPISWARM_AGENT_START_ATTEMPTS")]
    pub start_attempts: u32,
    /// The most bytes kept of each task's stdout and of its stderr (the
    /// last ones; served on /files/read).
    #[arg(long, default_value_t = 8 * 1024 * 1024, env = "MPISWARM_AGENT_OUTPUT_LIMIT_BYTES")]
    pub output_limit_bytes: u64,
    /// Seconds the output of a task that ended by itself (FINISHED, FAILED)
    /// is kept after the agent forgot the task; killed tasks' output goes at once.
    #[arg(long, default_value_t = 3600.0, env = "MPISWARM_AGENT_OUTPUT_RETENTION_SECONDS")]
    pub output_retention_seconds: f64,
    /// A host directory under which tasks may bind-mount paths (HOST_PATH
    /// volumes); repeatable (in the environment: separated by commas).
    /// Without it, host paths are refused.
    #[arg(long = "allow-host-path-prefix", env = "MPISWARM_AGENT_ALLOW_HOST_PATH_PREFIXES", value_delimiter = ',')]
    pub allow_host_path_prefixes: Vec<PathBuf>,
    /// A volume driver option tasks may pass, as DRIVER:KEY (e.g. nfs:addr);
    /// repeatable (in the environment: separated by commas). Without it,
    /// driver options are refused; the local driver never binds a host path.
    #[arg(long = "allow-volume-option", env = "MPISWARM_AGENT_ALLOW_VOLUME_OPTIONS", value_delimiter = ',')]
    pub allow_volume_options: Vec<String>,
    /// An existing named volume tasks may mount as it is, uninspected (the
    /// operator vouches for how it was made); repeatable (in the
    /// environment: separated by commas). Any other existing volume is
    /// mounted only if a task could have created it so.
    #[arg(long = "allow-existing-volume", env = "MPISWARM_AGENT_ALLOW_EXISTING_VOLUMES", value_delimiter = ',')]
    pub allow_existing_volumes: Vec<String>,
    /// The served node's own Docker engine, when --docker is another node's
    /// (a manager's): the agent inspects named volumes there, which only the
    /// node's engine sees. Without it such an agent mounts no existing
    /// volume it was not told to trust (--allow-existing-volume).
    #[arg(long, env = "MPISWARM_AGENT_NODE_DOCKER")]
    pub node_docker: Option<String>,
    /// `--principal` with `--secret-file`, or `--credential`, declared with
    /// `mpiswarm logs`' in `mpiswarm_mesos`.
    #[command(flatten)]
    pub credential: AgentCredentialArgs,
    /// Mesos credentials JSON of the principals that may read `/state` and
    /// `/files` (the controller's and operators'); without it they answer
    /// anyone who reaches them.
    #[arg(long, env = "MPISWARM_AGENT_HTTP_CREDENTIALS")]
    pub http_credentials: Option<PathBuf>,
    /// PEM certificate to serve the agent's endpoints over HTTPS; with --tls-key.
    #[arg(long, env = "MPISWARM_AGENT_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, env = "MPISWARM_AGENT_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
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
    #[error("--{flag} must be a number of seconds, 0 or more, got {value}")]
    SecondsOrZero { flag: &'static str, value: f64 },
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
    #[error(transparent)]
    HostPaths(#[from] crate::mounts::PrefixError),
    #[error(transparent)]
    Credential(#[from] mpiswarm_mesos::credential::CredentialError),
    #[error(transparent)]
    Tls(#[from] mpiswarm_mesos::tls::TlsError),
    #[error(
        "--node-docker {url} is the engine of swarm node {engine_node}, not of the served node {node_id}; give the served node's own engine"
    )]
    NodeDocker { url: String, engine_node: String, node_id: String },
}

fn seconds(flag: &'static str, value: f64) -> Result<Duration, AgentError> {
    Duration::try_from_secs_f64(value).ok().filter(|d| !d.is_zero()).ok_or(AgentError::Seconds { flag, value })
}

fn seconds_or_zero(flag: &'static str, value: f64) -> Result<Duration, AgentError> {
    Duration::try_from_secs_f64(value).map_err(|_| AgentError::SecondsOrZero { flag, value })
}

/// Runs the agent until SIGTERM or Ctrl-C (then `Ok`, leaving its services
/// running), or until one of its tasks panics or its server fails (an error
/// naming it).
pub async fn run(args: AgentArgs) -> Result<(), AgentError> {
    let resync_every = seconds("resync-seconds", args.resync_seconds)?;
    let orphan_grace = seconds("orphan-grace-seconds", args.orphan_grace_seconds)?;
    let node_check = seconds("node-check-seconds", args.node_check_seconds)?;
    let node_down_confirm = seconds_or_zero("node-down-seconds", args.node_down_seconds)?;
    let output_retention = seconds("output-retention-seconds", args.output_retention_seconds)?;
    let host_paths = HostPaths::allow(&args.allow_host_path_prefixes)?;
    let volume_options = crate::mounts::VolumeOptions::allow(&args.allow_volume_options)?;
    let security = Security::from_args(&args)?;
    // Bad flags are refused before anything touches Docker (no swarm init
    // on behalf of an agent that cannot start).
    node::resources(&node::NodeFacts::default(), args.resources.as_deref())?;
    node::attributes(&node::NodeFacts::default(), "", args.attributes.as_deref())?;
    let docker = node::connect(args.docker.as_deref()).await?;
    let own = node::ensure_swarm(&docker).await?;
    let (node_id, facts) = node::facts(&docker, args.node.as_deref().unwrap_or(&own)).await?;
    let node_engine = node_engine(&docker, &own, &node_id, args.node_docker.as_deref()).await?;
    let resources = node::resources(&facts, args.resources.as_deref())?;
    let attributes = node::attributes(&facts, &node_id, args.attributes.as_deref())?;
    let hostname = args.hostname.clone().unwrap_or_else(|| facts.hostname.clone());
    let store = Store::open(&args.data_dir)?;
    let config = AgentConfig {
        orphan_grace,
        output_limit: args.output_limit_bytes,
        output_retention,
        host_paths,
        volume_options,
        trusted_volumes: crate::existing::TrustedVolumes::new(args.allow_existing_volumes.iter().cloned()),
        node_check,
        node_down_confirm,
        start_attempts: args.start_attempts,
        ..AgentConfig::default()
    };
    let (spawner, failures) = watchdog();
    let (agent, outbox) = Agent::new(
        DockerSwarm { docker: docker.clone(), node_engine },
        node_id.clone(),
        store,
        config,
        spawner.clone(),
    )?;
    agent.name_node(&facts.hostname);
    tracing::info!(%node_id, %hostname, agent_id = ?agent.agent_id(), master = %args.master.url, "agent starting");

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
    let app = crate::http::router(Arc::clone(&agent), Arc::clone(&connection), security.readers);
    let mut server = tokio::spawn(serve(listener, app, security.tls));

    let client = AgentClient::new(&args.master.url, security.credential.map(Credential::into_pair))
        .trusting(security.ca.as_ref());
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

/// The served node's own engine, where its named volumes are seen: the
/// `--docker` engine when that is the node's (`own` is its node id), else
/// `--node-docker`, which must be the node's; else none.
async fn node_engine(
    docker: &bollard::Docker,
    own: &str,
    node_id: &str,
    node_docker: Option<&str>,
) -> Result<Option<bollard::Docker>, AgentError> {
    if let Some(url) = node_docker {
        let engine = node::connect(Some(url)).await?;
        let engine_node = node::swarm_node_id(&engine).await?;
        if engine_node != node_id {
            return Err(AgentError::NodeDocker { url: url.to_owned(), engine_node, node_id: node_id.to_owned() });
        }
        return Ok(Some(engine));
    }
    if own == node_id {
        return Ok(Some(docker.clone()));
    }
    tracing::warn!(
        %node_id,
        "the agent serves another node than its --docker engine's and has no --node-docker: it cannot inspect that node's volumes, so tasks mount only the named volumes of --allow-existing-volume"
    );
    Ok(None)
}

/// What the agent needs to talk safely: its credential for the master, the
/// CA it trusts, and the TLS configuration of its own endpoints.
struct Security {
    credential: Option<Credential>,
    /// Who may read `/state` and `/files` (`--http-credentials`).
    readers: Option<mpiswarm_mesos::basic_auth::Principals>,
    ca: Option<CaFile>,
    tls: Option<Arc<rustls::ServerConfig>>,
}

impl Security {
    /// Reads every file the flags name and applies the loopback rule, before
    /// anything touches Docker.
    fn from_args(args: &AgentArgs) -> Result<Self, AgentError> {
        let credential = args.credential.read()?;
        let readers = args.http_credentials.as_deref().map(mpiswarm_mesos::basic_auth::Principals::read).transpose()?;
        let ca = args.master.ca()?;
        let tls = tls::server_config_from_flags(args.tls_cert.as_deref(), args.tls_key.as_deref())?;
        // Off loopback the agent needs its own credential (to the offer
        // layer) and the readers of its /state and /files (task output).
        tls::check_listen(
            args.listen,
            tls.is_some(),
            credential.is_some() && readers.is_some(),
            "--tls-cert and --tls-key (MPISWARM_AGENT_TLS_CERT, MPISWARM_AGENT_TLS_KEY), --principal with --secret-file or --credential (MPISWARM_AGENT_PRINCIPAL, MPISWARM_AGENT_SECRET_FILE, MPISWARM_AGENT_CREDENTIAL), and --http-credentials (MPISWARM_AGENT_HTTP_CREDENTIALS)",
        )?;
        Ok(Self { credential, readers, ca, tls })
    }
}

/// Serves the agent's endpoints, over HTTPS when `tls` is given (through
/// `mpiswarm_guard::serve_tls`: a handshake deadline and a connection cap).
async fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> std::io::Result<()> {
    match tls {
        None => axum::serve(listener, app).await,
        Some(config) => {
            let limits = mpiswarm_guard::Limits::default();
            mpiswarm_guard::serve_tls(listener, config, app, limits, std::future::pending()).await;
            Ok(())
        }
    }
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

    fn settled(&self, _update: &Outgoing) {
        self.agent.status_settled();
    }

    fn serving(&self) -> Option<tokio::sync::watch::Receiver<bool>> {
        Some(self.agent.serving_updates())
    }
}

/// Starts the resync loop, woken by Docker events of managed containers and
/// every `every`, and the node's health check, as watched work of `spawner`.
/// The loops stop when the returned guard is dropped.
pub fn supervise<S: Swarm + 'static>(
    agent: Arc<Agent<S>>,
    docker: bollard::Docker,
    every: Duration,
    spawner: &Spawner,
) -> Supervisor {
    let wake = Arc::new(Notify::new());
    let node_check = agent.config.node_check;
    Supervisor {
        tasks: vec![
            spawner.spawn("node health check", crate::node_health::watch_node(Arc::clone(&agent), node_check)),
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
