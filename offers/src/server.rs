//! Command-line arguments and the running server: binds the listener,
//! opens the registry and starts its writer, runs the master's clock, serves
//! HTTP, and stops on SIGINT/SIGTERM or with an error when a server task
//! panics (the panic policy in README.md).

use crate::http::{HttpConfig, Shared, router};
use crate::master::{Master, MasterConfig, WallClock};
use crate::registrar::Registrar;
use crate::registry::Registry;
use crate::registry_api::ApiRegistry;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// `mpiswarm offers`: a Mesos-compatible offer layer (v1 scheduler API, DRF).
#[derive(Debug, Clone, clap::Args)]
pub struct OffersArgs {
    /// Address to serve the scheduler API, agent API and operator endpoints on.
    #[arg(long, default_value = "127.0.0.1:5050", env = "MPISWARM_OFFERS_LISTEN")]
    pub listen: SocketAddr,
    /// Directory of the registry (agent and framework ids survive restarts
    /// here). Replicas (--lease-name) keep it in the API server instead.
    #[arg(long, env = "MPISWARM_OFFERS_DATA_DIR", required_unless_present = "lease_name")]
    pub data_dir: Option<PathBuf>,
    /// Role weights for DRF, e.g. `mpi=2,batch=1` (default weight 1).
    #[arg(long, default_value = "", value_parser = parse_weights, env = "MPISWARM_OFFERS_WEIGHTS")]
    pub weights: BTreeMap<String, f64>,
    /// Quota limits by role, e.g. `team-a=cpus:4;mem:8192,team-b=cpus:2`:
    /// the most a role holds (offered or used) over the whole cluster.
    #[arg(long, default_value = "", value_parser = parse_quotas, env = "MPISWARM_OFFERS_QUOTA")]
    pub quota: BTreeMap<String, BTreeMap<String, f64>>,
    /// Seconds between batch allocation runs.
    #[arg(long, default_value_t = 1.0, value_parser = parse_seconds, env = "MPISWARM_OFFERS_ALLOCATION_INTERVAL")]
    pub allocation_interval: f64,
    /// Backpressure: an agent with this many tasks launched and not yet
    /// reported started is offered to no one until fewer are, so a burst of
    /// jobs waits in the scheduler's queue rather than in the agents' engines
    /// (0: no limit).
    #[arg(long, default_value_t = crate::master::DEFAULT_LAUNCH_BACKLOG, env = "MPISWARM_OFFERS_AGENT_LAUNCH_BACKLOG")]
    pub agent_launch_backlog: usize,
    /// Seconds after which unanswered offers are rescinded (never if unset).
    #[arg(long, value_parser = parse_seconds, env = "MPISWARM_OFFERS_OFFER_TIMEOUT")]
    pub offer_timeout: Option<f64>,
    /// Seconds between HEARTBEAT events.
    #[arg(long, default_value_t = 15.0, value_parser = parse_seconds, env = "MPISWARM_OFFERS_HEARTBEAT_INTERVAL")]
    pub heartbeat_interval: f64,
    /// Seconds a disconnected agent (or, after a restart, a registered one)
    /// has to come back before its tasks are LOST.
    #[arg(long, default_value_t = 75.0, value_parser = parse_seconds, env = "MPISWARM_OFFERS_AGENT_REREGISTER_TIMEOUT")]
    pub agent_reregister_timeout: f64,
    /// Seconds between re-sends of an unacknowledged status update.
    #[arg(long, default_value_t = 10.0, value_parser = parse_seconds, env = "MPISWARM_OFFERS_STATUS_UPDATE_RETRY_INTERVAL")]
    pub status_update_retry_interval: f64,
    /// Mesos credentials JSON (`{"credentials":[{"principal":..,"secret":..}]}`);
    /// when given, the APIs require HTTP basic authentication. Required to
    /// listen beyond loopback.
    #[arg(long, env = "MPISWARM_OFFERS_CREDENTIALS")]
    pub credentials: Option<PathBuf>,
    /// Mesos ACLs JSON: which principals may register frameworks in which
    /// roles, tear down frameworks, register agents and read the operator
    /// endpoints (see offers/README.md). Without it everything is allowed.
    #[arg(long, env = "MPISWARM_OFFERS_ACLS")]
    pub acls: Option<PathBuf>,
    /// PEM certificate (then its chain) to serve HTTPS with; with --tls-key.
    /// Required to listen beyond loopback.
    #[arg(long, env = "MPISWARM_OFFERS_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, env = "MPISWARM_OFFERS_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Largest accepted request body, in bytes.
    #[arg(long, default_value_t = 4 * 1024 * 1024, env = "MPISWARM_OFFERS_MAX_BODY_BYTES")]
    pub max_body_bytes: usize,
    /// Run as a non-leading master that redirects (307) every scheduler call to HOST:PORT.
    #[arg(long, env = "MPISWARM_OFFERS_REDIRECT_TO", conflicts_with = "lease_name")]
    pub redirect_to: Option<String>,
    /// Run as one of several replicas: the leader is elected with this
    /// `coordination.k8s.io/v1` Lease (holder: the advertised HOST:PORT);
    /// the others redirect callers to it. The registry is then the
    /// `OfferRegistry` of the same name and namespace in the API server
    /// (its CRD installed beforehand), not --data-dir. Needs a kubeconfig
    /// (--kubeconfig, else in-cluster or $KUBECONFIG). Without it this is
    /// the only replica.
    #[arg(long, env = "MPISWARM_OFFERS_LEASE_NAME")]
    pub lease_name: Option<String>,
    /// Namespace of the Lease.
    #[arg(long, default_value = "default", env = "MPISWARM_OFFERS_LEASE_NAMESPACE")]
    pub lease_namespace: String,
    /// Seconds a Lease record stands unrenewed before a standby takes it over;
    /// the leader stops acting 2/3 of it after its last renewal, and renews
    /// every 1/8 of it (see offers/README.md).
    #[arg(long, default_value_t = 8.0, value_parser = parse_seconds, env = "MPISWARM_OFFERS_LEASE_SECONDS")]
    pub lease_seconds: f64,
    /// Kubeconfig for the Lease (with --lease-name).
    #[arg(long, env = "MPISWARM_OFFERS_KUBECONFIG", requires = "lease_name")]
    pub kubeconfig: Option<PathBuf>,
    /// Hostname advertised in MasterInfo (default: the listen address).
    #[arg(long, env = "MPISWARM_OFFERS_ADVERTISE_HOST")]
    pub advertise_host: Option<String>,
}

/// Why the offer layer could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Registry(#[from] crate::registry::RegistryError),
    #[error(transparent)]
    Credentials(#[from] mpiswarm_mesos::credential::CredentialError),
    #[error(transparent)]
    Acls(#[from] crate::acl::AclError),
    #[error(transparent)]
    Tls(#[from] mpiswarm_mesos::tls::TlsError),
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("the HTTP server failed: {0}")]
    Serve(std::io::Error),
    #[error(
        "the offer layer stopped because {0}; this is a bug: report it with the log above, then restart (ids and tasks recover from the registry and the agents)"
    )]
    Panicked(String),
    #[error("cannot reach the API server for the Lease: {0}")]
    Kube(String),
    #[error("--data-dir is required without --lease-name (a single replica keeps its registry on disk)")]
    NoDataDir,
    #[error(transparent)]
    Election(#[from] crate::election::ElectionError),
    #[error("cannot install the {signal} handler: {source}")]
    Signal { signal: &'static str, source: std::io::Error },
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim_end_matches('s').parse().map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("'{s}' must be a non-negative number of seconds"));
    }
    Ok(v)
}

/// `mpi=2,batch=1` -> {mpi: 2, batch: 1}.
pub fn parse_weights(s: &str) -> Result<BTreeMap<String, f64>, String> {
    let mut out = BTreeMap::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (role, weight) = part.split_once('=').ok_or_else(|| format!("weight '{part}' is not ROLE=WEIGHT"))?;
        mpiswarm_mesos::validate_role(role.trim()).map_err(|e| e.to_string())?;
        let w: f64 =
            weight.trim().parse().map_err(|_| format!("weight of role '{role}' is not a number: '{weight}'"))?;
        if !w.is_finite() || w <= 0.0 {
            return Err(format!("weight of role '{role}' must be positive, got {w}"));
        }
        out.insert(role.trim().to_owned(), w);
    }
    Ok(out)
}

/// `team-a=cpus:4;mem:8192,team-b=cpus:2` -> {team-a: {cpus: 4, mem: 8192}, team-b: {cpus: 2}}.
pub fn parse_quotas(s: &str) -> Result<BTreeMap<String, BTreeMap<String, f64>>, String> {
    let mut out = BTreeMap::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (role, limits) =
            part.split_once('=').ok_or_else(|| format!("quota '{part}' is not ROLE=NAME:VALUE;..."))?;
        let role = role.trim();
        mpiswarm_mesos::validate_role(role).map_err(|e| e.to_string())?;
        let mut limit = BTreeMap::new();
        for item in limits.split(';').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, value) = item
                .split_once(':')
                .ok_or_else(|| format!("quota of role '{role}': '{item}' is not NAME:VALUE (e.g. cpus:4)"))?;
            let v: f64 = value
                .trim()
                .parse()
                .map_err(|_| format!("quota of role '{role}': {name} '{value}' is not a number"))?;
            if !v.is_finite() || v < 0.0 {
                return Err(format!("quota of role '{role}': {name} must be a non-negative number, got {v}"));
            }
            limit.insert(name.trim().to_owned(), v);
        }
        if limit.is_empty() {
            return Err(format!("quota of role '{role}' names no resource (e.g. {role}=cpus:4;mem:8192)"));
        }
        out.insert(role.to_owned(), limit);
    }
    Ok(out)
}

/// A server that is listening; dropping it does not stop it, [`Running::stop`] does.
pub struct Running {
    pub addr: SocketAddr,
    /// Whether it serves HTTPS.
    pub tls: bool,
    pub shared: Arc<Shared>,
    task: tokio::task::JoinHandle<Result<(), Error>>,
    stop: tokio::sync::watch::Sender<bool>,
}

/// What a server task that ended by panic or cancellation means.
fn joined(result: Result<Result<(), Error>, tokio::task::JoinError>, what: &str) -> Result<(), Error> {
    match result {
        Ok(served) => served,
        Err(e) if e.is_panic() => {
            Err(Error::Panicked(format!("{what} panicked: {}", crate::fatal::panic_message(e.into_panic().as_ref()))))
        }
        Err(e) => Err(Error::Panicked(format!("{what} was cancelled: {e}"))),
    }
}

impl Running {
    /// `http://ADDR`, or `https://ADDR` with TLS.
    pub fn url(&self) -> String {
        format!("{}://{}", if self.tls { "https" } else { "http" }, self.addr)
    }

    /// Stops serving (open streams end), waits for the server to finish and
    /// for the registry writes already made.
    pub async fn stop(self) -> Result<(), Error> {
        let _ = self.stop.send(true);
        // Graceful shutdown waits for open connections; event streams never
        // end on their own.
        let last_write = {
            let mut master = self.shared.master();
            master.close_all_streams();
            master.registry_ticket_since(0)
        };
        let served = joined(self.task.await, "the server task");
        if let Some(ticket) = last_write
            && let Err(e) = ticket.durable().await
        {
            tracing::error!(error = %e, "the last registry write failed while stopping");
        }
        served
    }

    /// Waits until the server fails (it does not end otherwise).
    pub async fn wait(self) -> Result<(), Error> {
        joined(self.task.await, "the server task")
    }
}

/// Binds, recovers from the registry and starts serving in the background.
pub async fn start(args: OffersArgs) -> Result<Running, Error> {
    let credentials = args.credentials.as_deref().map(mpiswarm_mesos::basic_auth::Principals::read).transpose()?;
    let acls = args.acls.as_deref().map(crate::acl::Acls::read).transpose()?.unwrap_or_default();
    let tls = mpiswarm_mesos::tls::server_config_from_flags(args.tls_cert.as_deref(), args.tls_key.as_deref())?;
    mpiswarm_mesos::tls::check_listen(
        args.listen,
        tls.is_some(),
        credentials.is_some(),
        "--tls-cert and --tls-key (MPISWARM_OFFERS_TLS_CERT, MPISWARM_OFFERS_TLS_KEY) and --credentials (MPISWARM_OFFERS_CREDENTIALS)",
    )?;
    let listener =
        tokio::net::TcpListener::bind(args.listen).await.map_err(|source| Error::Bind { addr: args.listen, source })?;
    let addr = listener.local_addr().map_err(|source| Error::Bind { addr: args.listen, source })?;
    let config = MasterConfig {
        hostname: args.advertise_host.clone().unwrap_or_else(|| addr.ip().to_string()),
        port: addr.port(),
        heartbeat_interval: Duration::from_secs_f64(args.heartbeat_interval.max(0.01)),
        allocation_interval: Duration::from_secs_f64(args.allocation_interval.max(0.001)),
        offer_timeout: args.offer_timeout.map(Duration::from_secs_f64),
        agent_reregister_timeout: Duration::from_secs_f64(args.agent_reregister_timeout),
        status_update_retry_interval: Duration::from_secs_f64(args.status_update_retry_interval.max(0.01)),
        weights: args.weights.clone(),
        quotas: args.quota.clone(),
        acls,
        launch_backlog: args.agent_launch_backlog,
    };
    let identity = config.address();
    let (state, registrar, election) = match &args.lease_name {
        None => {
            let registry = Registry::open(args.data_dir.as_deref().ok_or(Error::NoDataDir)?)?;
            let registrar = Registrar::spawn(registry.path().to_owned())?;
            (registry.state, registrar, None)
        }
        Some(name) => {
            let client = kube_client(&args).await?;
            let lock = crate::election::LeaseLock {
                api: kube::Api::namespaced(client.clone(), &args.lease_namespace),
                namespace: args.lease_namespace.clone(),
                name: name.clone(),
                identity: identity.clone(),
                timing: crate::election::Timing::of_lease(Duration::from_secs_f64(args.lease_seconds.max(0.8))),
            };
            let shared_registry = ApiRegistry::new(client, &args.lease_namespace, name, &identity);
            let writer = shared_registry.clone();
            let runtime = tokio::runtime::Handle::current();
            // A write may take as long as a Lease stands unrenewed, no longer.
            let deadline = lock.timing.lease;
            let registrar = Registrar::spawn_writing(move |state| {
                runtime.block_on(writer.write_within(state, deadline)).map_err(|e| e.to_string())
            })?;
            // A standby knows nothing until it wins the Lease and claims the registry.
            (crate::registry::RegistryState::default(), registrar, Some((lock, shared_registry)))
        }
    };
    // The master's time starts now: `now` counts from this instant, and
    // wall-clock timestamps from the wall time read here, once.
    let started = std::time::Instant::now();
    let master = Master::new(config, state, registrar, WallClock::system());
    if master.is_recovering() {
        tracing::info!("registry read: frameworks are served; registered agents have until the re-register timeout");
    }
    let shared = Shared::new(
        master,
        HttpConfig { credentials, redirect_to: args.redirect_to.clone(), max_body_bytes: args.max_body_bytes },
        started,
    );
    if let Some((lock, registry)) = &election {
        // A replica starts as a standby: it takes no call and runs no
        // timer until it holds the Lease.
        shared.master().set_fence(Some(Duration::ZERO));
        shared.leadership.set(crate::leadership::Leadership::Following { leader: None });
        tracing::info!(lease = %format!("{}/{}", lock.namespace, lock.name), registry = %registry.object(),
            identity = %lock.identity, timing = ?lock.timing, "standing by for the offer layer's Lease");
    }
    let clock = {
        let shared = shared.clone();
        async move {
            // The master's timers are checked 20 times a second; each timer
            // still fires on its own configured interval.
            let mut ticks = tokio::time::interval(Duration::from_millis(50));
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let now = shared.now();
                shared.master().tick(now);
            }
        }
    };
    let background = {
        let shared = shared.clone();
        async move {
            let elected = async {
                match election {
                    Some((lock, registry)) => {
                        Err(Error::Election(crate::election::run(&shared, &lock, &registry).await))
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                never = clock => never,
                lost = elected => lost,
            }
        }
    };
    let app = router(shared.clone());
    let served = tls.is_some();
    let (task, stop) = serve(listener, tls, app, background, shared.fatal.clone());
    tracing::info!(%addr, tls = served, "offer layer listening");
    Ok(Running { addr, tls: served, shared, task, stop })
}

/// Serves `app` and runs `clock` (the master's timers, which never end, and
/// the election, which ends only when this replica lost the Lease) until
/// stopped, or until a panic in a handler, a stream callback or the clock:
/// then the task ends with [`Error::Panicked`], or with the election's error.
fn serve(
    listener: tokio::net::TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    app: axum::Router,
    clock: impl Future<Output = Result<std::convert::Infallible, Error>> + Send + 'static,
    fatal: crate::fatal::Fatal,
) -> (tokio::task::JoinHandle<Result<(), Error>>, tokio::sync::watch::Sender<bool>) {
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(async move {
        let mut clock = tokio::spawn(clock);
        let served = async move {
            match tls {
                None => {
                    axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
                        .with_graceful_shutdown(async move {
                            let _ = stopped.changed().await;
                        })
                        .await
                }
                Some(config) => {
                    let stopping = async move {
                        let _ = stopped.changed().await;
                    };
                    mpiswarm_guard::serve_tls(listener, config, app, mpiswarm_guard::Limits::default(), stopping).await;
                    Ok(())
                }
            }
        };
        let result = tokio::select! {
            served = served => served.map_err(Error::Serve),
            ended = &mut clock => match ended {
                Err(e) if e.is_panic() => Err(Error::Panicked(format!(
                    "the master's clock panicked: {}",
                    crate::fatal::panic_message(e.into_panic().as_ref())
                ))),
                Ok(Err(e)) => Err(e),
                _ => Err(Error::Panicked("the master's clock stopped".into())),
            },
            message = fatal.wait() => Err(Error::Panicked(message)),
        };
        clock.abort();
        result
    });
    (task, stop)
}

/// The client of `--kubeconfig` (else in-cluster or $KUBECONFIG), for the
/// Lease and the registry of `--lease-name`.
async fn kube_client(args: &OffersArgs) -> Result<kube::Client, Error> {
    let _already = rustls::crypto::ring::default_provider().install_default();
    let mut config = match &args.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| Error::Kube(format!("reading {}: {e}", path.display())))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| Error::Kube(format!("loading {}: {e}", path.display())))?
        }
        None => kube::Config::infer().await.map_err(|e| Error::Kube(e.to_string()))?,
    };
    config.headers.push((axum::http::header::USER_AGENT, axum::http::HeaderValue::from_static(USER_AGENT)));
    kube::Client::try_from(config).map_err(|e| Error::Kube(e.to_string()))
}

/// The User-Agent of the replicas' Kubernetes client (Lease and registry),
/// which tells their requests apart in an audit log whatever credential
/// they use: the RBAC test of `manifests/20-rbac.yaml` relies on it.
pub const USER_AGENT: &str = concat!("mpiswarm-offers/", env!("CARGO_PKG_VERSION"));

/// Resolves on SIGINT (Ctrl-C) or SIGTERM, with the signal's name.
async fn interrupted() -> Result<&'static str, Error> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).map_err(|source| Error::Signal { signal: "SIGTERM", source })?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.map(|()| "SIGINT").map_err(|source| Error::Signal { signal: "SIGINT", source }),
        _ = term.recv() => Ok("SIGTERM"),
    }
}

/// Runs the offer layer until SIGINT or SIGTERM (then it stops cleanly and
/// returns `Ok`) or until it fails (then the error: a panicked task is an
/// error, never a success).
pub async fn run(args: OffersArgs) -> Result<(), Error> {
    let mut running = start(args).await?;
    eprintln!("mpiswarm offers listening on {}", running.url());
    let signal = tokio::select! {
        signal = interrupted() => signal?,
        ended = &mut running.task => return joined(ended, "the server task"),
    };
    tracing::info!(signal, "stopping");
    running.stop().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotas_parse_and_bad_ones_name_the_offending_value() {
        let q = parse_quotas("team-a=cpus:4;mem:8192, team-b=cpus:2").unwrap();
        assert_eq!(q["team-a"], BTreeMap::from([("cpus".to_owned(), 4.0), ("mem".to_owned(), 8192.0)]));
        assert_eq!(q["team-b"]["cpus"], 2.0);
        assert!(parse_quotas("").unwrap().is_empty());
        assert_eq!(parse_quotas("team-a").unwrap_err(), "quota 'team-a' is not ROLE=NAME:VALUE;...");
        assert_eq!(
            parse_quotas("team-a=cpus").unwrap_err(),
            "quota of role 'team-a': 'cpus' is not NAME:VALUE (e.g. cpus:4)"
        );
        assert_eq!(parse_quotas("team-a=cpus:x").unwrap_err(), "quota of role 'team-a': cpus 'x' is not a number");
        assert!(parse_quotas("team-a=cpus:-1").unwrap_err().contains("non-negative"));
        assert!(parse_quotas("team-a=").unwrap_err().contains("names no resource"));
    }

    #[test]
    fn weights_parse_and_bad_ones_name_the_offending_value() {
        let w = parse_weights("mpi=2, batch=1").unwrap();
        assert_eq!(w, BTreeMap::from([("batch".to_owned(), 1.0), ("mpi".to_owned(), 2.0)]));
        assert!(parse_weights("").unwrap().is_empty());
        assert_eq!(parse_weights("mpi").unwrap_err(), "weight 'mpi' is not ROLE=WEIGHT");
        assert_eq!(parse_weights("mpi=x").unwrap_err(), "weight of role 'mpi' is not a number: 'x'");
        assert_eq!(parse_weights("mpi=0").unwrap_err(), "weight of role 'mpi' must be positive, got 0");
        assert!(parse_weights("bad role=1").unwrap_err().contains("'bad role'"));
    }

    async fn bound() -> (tokio::net::TcpListener, SocketAddr) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        (listener, addr)
    }

    async fn ended(task: tokio::task::JoinHandle<Result<(), Error>>) -> Result<(), Error> {
        let joined_in_time = tokio::time::timeout(Duration::from_secs(30), task).await;
        joined(joined_in_time.expect("the server task ends within 30 s"), "the server task")
    }

    async fn boom() -> &'static str {
        panic!("boom")
    }

    #[tokio::test]
    async fn a_panicking_request_handler_answers_500_and_ends_the_server_with_an_error() {
        let fatal = crate::fatal::Fatal::default();
        let app = axum::Router::new().route("/boom", axum::routing::get(boom)).layer(fatal.catch_panic_layer());
        let (listener, addr) = bound().await;
        let (task, _stop) = serve(listener, None, app, std::future::pending(), fatal);
        let resp = reqwest::get(format!("http://{addr}/boom")).await.unwrap();
        assert_eq!(resp.status().as_u16(), 500);
        assert!(resp.text().await.unwrap().contains("boom"));
        let err = ended(task).await.unwrap_err();
        assert!(matches!(&err, Error::Panicked(m) if m == "a request handler panicked: boom"), "{err}");
    }

    #[tokio::test]
    async fn a_panicking_clock_ends_the_server_with_an_error() {
        let (listener, _) = bound().await;
        let clock = async { panic!("tick") };
        let (task, _stop) = serve(listener, None, axum::Router::new(), clock, crate::fatal::Fatal::default());
        let err = ended(task).await.unwrap_err();
        assert!(matches!(&err, Error::Panicked(m) if m == "the master's clock panicked: tick"), "{err}");
    }

    #[tokio::test]
    async fn a_stopped_server_ends_with_success() {
        let (listener, _) = bound().await;
        let (task, stop) =
            serve(listener, None, axum::Router::new(), std::future::pending(), crate::fatal::Fatal::default());
        stop.send(true).unwrap();
        ended(task).await.unwrap();
    }
}
