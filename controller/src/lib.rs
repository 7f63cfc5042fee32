//! The MpiJob controller: it watches MpiJobs through kube-rs, is a Mesos
//! framework of the offer layer (or of any Mesos master), places each gang
//! with the policy engine, launches it through the agents and writes what
//! happens back into the MpiJob's status and Events.
//!
//! - [`plan`]: the reconcile decision, pure (table-tested);
//! - [`reconcile`]: finalizer, status writes (it is their only writer), Events, actions;
//!   [`expectations`] and [`retries`]: its own last writes and its retry backoff;
//! - [`driver`] and [`round`]: the Mesos subscription, and its decisions (pure);
//! - [`launch`]: a placed gang as LAUNCH_GROUP operations (pure);
//! - [`gang`], [`books`], [`restore`]: what is known of each gang;
//! - [`keys`], [`framework_id`]: the per-job SSH key and the framework id, in the cluster;
//! - [`volumes`]: which Docker volume a job's `dockerVolume.name` is on the nodes (pure);
//! - [`role_policy`]: which roles a namespace's jobs may use (pure);
//! - [`logs`]: the tenants' log endpoint (TokenReview and SubjectAccessReview, then the agent's `/files`).
//!
//! Only the leader (a `coordination.k8s.io/v1` Lease) reconciles and subscribes.

pub mod books;
pub mod context;
pub mod demand;
pub mod driver;
pub mod error;
pub mod events;
pub mod expectations;
#[cfg(test)]
mod fixtures;
pub mod framework_id;
pub mod gang;
mod http;
pub mod keys;
pub mod launch;
pub mod logs;
pub mod metrics;
pub mod names;
pub mod plan;
pub mod quota_record;
#[cfg(test)]
mod readme_tests;
pub mod reconcile;
pub mod restore;
pub mod retries;
pub mod role_policy;
pub mod round;
mod round_log;
pub mod volumes;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt as _;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::Controller;
use kube::runtime::watcher;
use kube_lease_manager::LeaseManagerBuilder;
use mpiswarm_crds::MpiJob;
use tokio::sync::{mpsc, watch};

pub use context::{Context, Settings};
pub use error::Error;

/// kubectl's client-side-apply annotation: a JSON copy of the applied object.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// `mpiswarm controller`.
#[derive(clap::Args, Debug, Clone)]
pub struct ControllerArgs {
    /// Kubeconfig of the API server (default: in-cluster config, then $KUBECONFIG, then ~/.kube/config).
    #[arg(long, env = "MPISWARM_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// `--master` and `--ca-file`, declared with the agent's in `mpiswarm_mesos`.
    #[command(flatten)]
    pub master: mpiswarm_mesos::client::args::MasterArgs,
    /// A Mesos credential file for the master's authentication:
    /// `{"principal":"...","secret":"..."}` or `principal secret`. Also
    /// spelled `--credential`, as `mpiswarm agent` and `mpiswarm logs` take it.
    #[arg(long, visible_alias = "credential", env = "MPISWARM_MASTER_CREDENTIALS")]
    pub master_credentials: Option<PathBuf>,
    /// Watch MpiJobs of this namespace only (default: all namespaces).
    #[arg(long, env = "MPISWARM_NAMESPACE")]
    pub namespace: Option<String>,
    /// Namespace of the leader Lease and the framework-id ConfigMap.
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pub lease_namespace: String,
    /// This replica's identity in the Lease (default: hostname and pid).
    #[arg(long, env = "MPISWARM_IDENTITY")]
    pub identity: Option<String>,
    /// Seconds a Lease is held without renewal before another replica takes it.
    #[arg(long, env = "MPISWARM_LEASE_SECONDS", default_value_t = 15)]
    pub lease_seconds: u64,
    /// Address of /healthz, /readyz and /metrics.
    #[arg(long, env = "MPISWARM_CONTROLLER_LISTEN", default_value = "127.0.0.1:8090")]
    pub listen: SocketAddr,
    /// Seconds a launched gang may take until every task runs.
    #[arg(long, env = "MPISWARM_LAUNCH_TIMEOUT", default_value_t = 300)]
    pub launch_timeout_seconds: i64,
    /// Let later jobs of a role start while its head does not fit, for this many seconds of the head's wait (0: strict FIFO).
    #[arg(long, env = "MPISWARM_BACKFILL_SECONDS", default_value_t = 60)]
    pub backfill_seconds: u64,
    /// A named Docker volume every namespace's jobs reach under its own
    /// name (`dockerVolume.name`); repeatable (in the environment: separated
    /// by commas). Any other volume is its namespace's own, NAMESPACE.NAME
    /// on the nodes. A name with '.' is refused (it could be a namespaced one).
    #[arg(long = "shared-volume", env = "MPISWARM_SHARED_VOLUMES", value_delimiter = ',')]
    pub shared_volumes: Vec<volumes::SharedVolume>,
    /// Append each offer round's input and outcome to FILE as JSON lines.
    #[arg(long, env = "MPISWARM_ROUND_LOG")]
    pub round_log: Option<PathBuf>,
    /// MpiJobs reconciled at the same time.
    #[arg(long, env = "MPISWARM_CONCURRENCY", default_value_t = 16)]
    pub concurrency: u16,
    /// Waiting jobs of a role one offer round tries at most, oldest first
    /// (Slurm's default_queue_depth); the rest are tried in the next round.
    #[arg(long, env = "MPISWARM_QUEUE_DEPTH", default_value_t = context::DEFAULT_QUEUE_DEPTH,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub queue_depth: u32,
    /// Serve the tenants' log endpoint (`GET /logs/NAMESPACE/JOB`, bearer
    /// token checked by the API server) on this address; off loopback only
    /// with --logs-tls-cert and --logs-tls-key. Without it there is none.
    #[arg(long, env = "MPISWARM_CONTROLLER_LOGS_LISTEN")]
    pub logs_listen: Option<SocketAddr>,
    /// The URL tenants reach the log endpoint at, recorded in the framework
    /// ConfigMap for `mpiswarm logs` (default: from --logs-listen; needed
    /// when that is an unspecified address such as 0.0.0.0).
    #[arg(long, env = "MPISWARM_CONTROLLER_LOGS_URL", requires = "logs_listen")]
    pub logs_url: Option<String>,
    /// PEM certificate to serve the log endpoint over HTTPS; with --logs-tls-key.
    #[arg(long, env = "MPISWARM_CONTROLLER_LOGS_TLS_CERT", requires_all = ["logs_tls_key", "logs_listen"])]
    pub logs_tls_cert: Option<PathBuf>,
    /// PEM private key of --logs-tls-cert.
    #[arg(long, env = "MPISWARM_CONTROLLER_LOGS_TLS_KEY", requires = "logs_tls_cert")]
    pub logs_tls_key: Option<PathBuf>,
}

/// Everything `start` needs, without the kubeconfig handling.
#[derive(Debug, Clone)]
pub struct Options {
    pub master: String,
    pub credentials: Option<(String, String)>,
    pub namespace: Option<String>,
    pub lease_namespace: String,
    pub identity: String,
    pub lease_seconds: u64,
    pub listen: SocketAddr,
    /// The tenants' log endpoint, if the controller serves one.
    pub logs: Option<logs::LogsOptions>,
    pub settings: Settings,
}

impl ControllerArgs {
    pub fn options(&self) -> Result<Options, Error> {
        let credentials = self
            .master_credentials
            .as_deref()
            .map(mpiswarm_mesos::credential::Credential::from_file)
            .transpose()
            .map_err(Error::MasterCredentials)?
            .map(mpiswarm_mesos::credential::Credential::into_pair);
        let master_ca = self.master.ca().map_err(Error::CaFile)?;
        let backfill = if self.backfill_seconds == 0 {
            mpiswarm_policy::Backfill::Off
        } else {
            mpiswarm_policy::Backfill::WhileHeadWaitsLessThan { max_head_wait_secs: self.backfill_seconds }
        };
        Ok(Options {
            master: self.master.url.clone(),
            credentials,
            namespace: self.namespace.clone(),
            lease_namespace: self.lease_namespace.clone(),
            identity: self.identity.clone().unwrap_or_else(default_identity),
            lease_seconds: self.lease_seconds,
            listen: self.listen,
            logs: self.logs_options()?,
            settings: Settings {
                launch_timeout: self.launch_timeout_seconds,
                backfill,
                round_log: self.round_log.clone(),
                concurrency: self.concurrency.max(1),
                queue_depth: self.queue_depth as usize,
                master_ca,
                shared_volumes: volumes::SharedVolumes::new(self.shared_volumes.iter().cloned()),
                ..Settings::default()
            },
        })
    }
}

impl ControllerArgs {
    /// `--logs-listen` and its TLS: off loopback only with TLS (the
    /// endpoint always requires a token), and an unspecified address only
    /// with `--logs-url`, since what is recorded must be reachable.
    fn logs_options(&self) -> Result<Option<logs::LogsOptions>, Error> {
        let Some(listen) = self.logs_listen else { return Ok(None) };
        let tls =
            mpiswarm_mesos::tls::server_config_from_flags(self.logs_tls_cert.as_deref(), self.logs_tls_key.as_deref())
                .map_err(Error::LogsTls)?;
        mpiswarm_mesos::tls::check_listen(
            listen,
            tls.is_some(),
            true,
            "--logs-tls-cert and --logs-tls-key (MPISWARM_CONTROLLER_LOGS_TLS_CERT, MPISWARM_CONTROLLER_LOGS_TLS_KEY)",
        )
        .map_err(Error::LogsTls)?;
        if listen.ip().is_unspecified() && self.logs_url.is_none() {
            return Err(Error::LogsUrlNeeded { listen });
        }
        Ok(Some(logs::LogsOptions { listen, url: self.logs_url.clone(), tls }))
    }
}

fn default_identity() -> String {
    let host = std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_owned()).unwrap_or_else(|_| "host".into());
    format!("{host}-{}", std::process::id())
}

/// The User-Agent of the controller's own requests. An API server's audit
/// log names the client by it, so the controller's requests can be told
/// from those of other clients that share its credentials (the embedded API
/// server has one token): the RBAC test relies on it.
pub const USER_AGENT: &str = concat!("mpiswarm-controller/", env!("CARGO_PKG_VERSION"));

/// A kube client from a kubeconfig file, or inferred (in-cluster, $KUBECONFIG, ~/.kube/config).
pub async fn client(kubeconfig: Option<&std::path::Path>) -> Result<kube::Client, Error> {
    Ok(kube::Client::try_from(config(kubeconfig).await?)?)
}

/// The controller's own client: as [`client`], and it says [`USER_AGENT`].
pub async fn controller_client(kubeconfig: Option<&std::path::Path>) -> Result<kube::Client, Error> {
    let mut config = config(kubeconfig).await?;
    config.headers.push((axum::http::header::USER_AGENT, axum::http::HeaderValue::from_static(USER_AGENT)));
    Ok(kube::Client::try_from(config)?)
}

async fn config(kubeconfig: Option<&std::path::Path>) -> Result<kube::Config, Error> {
    let _already = rustls::crypto::ring::default_provider().install_default();
    let config = match kubeconfig {
        Some(path) => {
            let unreadable = |source| Error::Kubeconfig { path: path.to_owned(), source };
            let kc = Kubeconfig::read_from(path).map_err(unreadable)?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.map_err(unreadable)?
        }
        None => kube::Config::infer().await?,
    };
    Ok(config)
}

/// A controller started in this process.
pub struct Running {
    pub addr: SocketAddr,
    /// The log endpoint's address and the URL recorded for it, if it serves one.
    pub logs: Option<(SocketAddr, String)>,
    pub context: Arc<Context>,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<(), Error>>,
}

impl Running {
    /// Stops reconciling and unsubscribes (running tasks keep running: the
    /// master keeps them for `failover_timeout`).
    pub fn stop(&self) {
        self.shutdown.send_replace(true);
    }

    /// Waits until the controller ends (stopped, or leadership lost).
    pub async fn wait(self) -> Result<(), Error> {
        self.task.await?
    }

    /// Waits until the controller ends, keeping the handle (a supervisor's
    /// `select!`); the controller is of no further use after it returns.
    pub async fn ended(&mut self) -> Result<(), Error> {
        (&mut self.task).await?
    }
}

/// `mpiswarm controller`: runs until SIGTERM or Ctrl-C.
pub async fn run(args: ControllerArgs) -> Result<(), Error> {
    let client = controller_client(args.kubeconfig.as_deref()).await?;
    let running = start(client, args.options()?).await?;
    tracing::info!(addr = %running.addr, "controller serving /healthz, /readyz, /metrics");
    let stop = running.shutdown.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("stopping the controller");
        stop.send_replace(true);
    });
    running.wait().await
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ignored = ctrl_c.await;
                return;
            }
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ignored = ctrl_c.await;
}

/// Starts the controller in this process: health endpoints at once, then,
/// once this replica holds the Lease, the reconciler and the framework driver.
pub async fn start(client: kube::Client, options: Options) -> Result<Running, Error> {
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let (commands_tx, commands_rx) = mpsc::unbounded_channel();
    let (trigger_tx, trigger_rx) = futures::channel::mpsc::unbounded();
    let events = events::Publisher::new(client.clone(), context::FIELD_MANAGER, &options.identity);
    let ctx = Arc::new(Context::new(client.clone(), events, options.settings.clone(), commands_tx, trigger_tx));
    let listener = tokio::net::TcpListener::bind(options.listen).await.map_err(|source| Error::Serve {
        what: "health and metrics",
        addr: options.listen.to_string(),
        source,
    })?;
    let addr = listener.local_addr().map_err(|source| Error::Serve {
        what: "health and metrics",
        addr: options.listen.to_string(),
        source,
    })?;
    let http = tokio::spawn(http::serve(listener, ctx.clone(), shutdown_rx.clone()));
    let logs = match &options.logs {
        Some(logs) => Some(serve_logs(&client, &options, logs, &ctx, shutdown_rx.clone()).await?),
        None => None,
    };
    let servers = Servers {
        http,
        logs: logs.as_ref().map(|(_, _, task)| task.abort_handle()),
        logs_url: logs.as_ref().map(|(_, url, _)| url.clone()),
    };
    let task = tokio::spawn(lead(client, options, ctx.clone(), commands_rx, trigger_rx, shutdown_rx, servers));
    Ok(Running { addr, logs: logs.map(|(addr, url, _)| (addr, url)), context: ctx, shutdown: shutdown_tx, task })
}

/// The HTTP servers `lead` stops when it ends, and the log endpoint's URL
/// it records in the framework ConfigMap.
struct Servers {
    http: tokio::task::JoinHandle<std::io::Result<()>>,
    logs: Option<tokio::task::AbortHandle>,
    logs_url: Option<String>,
}

/// Binds the log endpoint's listener (so a taken port fails the start) and
/// serves it: its address, the URL to record, and its task.
async fn serve_logs(
    client: &kube::Client,
    options: &Options,
    logs: &logs::LogsOptions,
    ctx: &Arc<Context>,
    shutdown: watch::Receiver<bool>,
) -> Result<(SocketAddr, String, tokio::task::JoinHandle<()>), Error> {
    let bind_error = |source| Error::Serve { what: "the log endpoint", addr: logs.listen.to_string(), source };
    let listener = tokio::net::TcpListener::bind(logs.listen).await.map_err(bind_error)?;
    let addr = listener.local_addr().map_err(bind_error)?;
    let url = logs.advertised(addr);
    let reader = logs::LogReader::new(
        client.clone(),
        &options.master,
        options.credentials.clone(),
        options.settings.master_ca.clone(),
        framework_id::FrameworkIdStore::new(
            client.clone(),
            &options.lease_namespace,
            framework_id::CONFIG_MAP,
            &options.master,
        ),
        ctx.metrics.log_reads.clone(),
    );
    let app = logs::router(Arc::new(reader));
    let tls = logs.tls.clone();
    let task = tokio::spawn(async move {
        if let Err(e) = logs::serve(listener, app, tls, shutdown).await {
            tracing::error!(error = %e, "the log endpoint stopped");
        }
    });
    tracing::info!(%addr, %url, "serving the tenants' log endpoint");
    Ok((addr, url, task))
}

async fn lead(
    client: kube::Client,
    options: Options,
    ctx: Arc<Context>,
    commands: mpsc::UnboundedReceiver<Command>,
    trigger: futures::channel::mpsc::UnboundedReceiver<kube::runtime::reflector::ObjectRef<MpiJob>>,
    mut shutdown: watch::Receiver<bool>,
    servers: Servers,
) -> Result<(), Error> {
    let lease = LeaseManagerBuilder::new(client.clone(), "mpiswarm-controller")
        .with_namespace(&options.lease_namespace)
        .with_identity(&options.identity)
        .with_duration(options.lease_seconds)
        .with_grace(options.lease_seconds.div_ceil(3).max(1))
        .build()
        .await?;
    let (mut leading, lease_task) = lease.watch().await;
    tracing::info!(identity = %options.identity, "waiting to lead");
    loop {
        if *leading.borrow() {
            break;
        }
        tokio::select! {
            changed = leading.changed() => changed.map_err(|_| Error::LeaseManagerStopped)?,
            _ = shutdown.changed() => {
                drop(leading);
                let _released = lease_task.await;
                return Ok(());
            }
        }
    }
    tracing::info!(identity = %options.identity, "leading");

    let jobs: Api<MpiJob> = match &options.namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    // The cache keeps every MpiJob for the controller's life; managedFields
    // (often the larger half of an object) and kubectl's last-applied copy
    // of the whole object are dropped from it, as nothing here reads them.
    let (reader, writer) = kube::runtime::reflector::store();
    let stream = watcher(jobs, watcher::Config::default().any_semantic())
        .default_backoff()
        .modify(|job: &mut MpiJob| {
            job.managed_fields_mut().clear();
            job.annotations_mut().remove(LAST_APPLIED);
        })
        .reflect(writer)
        .touched_objects();
    // Bounded concurrency: a controller that starts with thousands of jobs
    // reconciles them a few at a time instead of holding thousands of
    // requests (and their buffers) at once.
    let controller = Controller::for_stream(stream, reader.clone())
        .with_config(kube::runtime::controller::Config::default().concurrency(options.settings.concurrency));
    let _set = ctx.store.set(reader);
    // The namespaces' role policy (`role_policy`): cached, and complete
    // before the first reconcile, so a job is never admitted on a policy
    // not read yet.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace_config = match &options.namespace {
        Some(ns) => watcher::Config::default().fields(&format!("metadata.name={ns}")),
        None => watcher::Config::default(),
    };
    let (namespace_reader, namespace_writer) = kube::runtime::reflector::store();
    let mut namespace_watch = tokio::spawn(
        watcher(namespaces, namespace_config.any_semantic())
            .default_backoff()
            .modify(|ns: &mut Namespace| ns.managed_fields_mut().clear())
            .reflect(namespace_writer)
            .for_each(|event| {
                if let Err(e) = event {
                    tracing::warn!(error = %e, "watching Namespaces (their role policy) failed; retrying");
                }
                futures::future::ready(())
            }),
    );
    tokio::select! {
        ready = namespace_reader.wait_until_ready() => ready.map_err(|_| Error::NamespacesUnread)?,
        _ = &mut namespace_watch => return Err(Error::NamespacesUnread),
    }
    let _set = ctx.namespaces.set(namespace_reader);
    let mut driver = tokio::spawn(driver::run(
        ctx.clone(),
        driver::DriverConfig {
            master: options.master.clone(),
            credentials: options.credentials.clone(),
            ca: options.settings.master_ca.clone(),
            framework_name: "mpiswarm".to_owned(),
            user: "root".to_owned(),
            framework_ids: framework_id::FrameworkIdStore::new(
                client.clone(),
                &options.lease_namespace,
                framework_id::CONFIG_MAP,
                &options.master,
            )
            .with_logs_url(servers.logs_url.clone()),
        },
        commands,
        shutdown.clone(),
    ));
    let mut stop = shutdown.clone();
    let reconciling = controller
        .reconcile_on(trigger)
        .graceful_shutdown_on(async move {
            let _closed = stop.wait_for(|s| *s).await;
        })
        .run(reconcile::reconcile, reconcile::error_policy, ctx.clone())
        .for_each(|_| futures::future::ready(()));
    let lost = async {
        while *leading.borrow() {
            if leading.changed().await.is_err() {
                break;
            }
        }
    };
    let outcome = tokio::select! {
        _ = reconciling => Ok(()),
        _ = lost => Err(Error::LeaseLost { identity: options.identity.clone() }),
        // The driver ends on its own only at a shutdown; any other end (a
        // panic) leaves a controller that can no longer launch anything.
        ended = &mut driver => driver_ended(ended, *shutdown.borrow()),
    };
    if let Err(e @ Error::DriverEnded(_)) = &outcome {
        tracing::error!(error = %e, "stopping: a controller without its framework driver launches nothing");
    }
    // After a lost lease stop at once; after a shutdown give the driver a moment.
    let grace = if outcome.is_err() { Duration::ZERO } else { Duration::from_secs(5) };
    // (A finished driver's handle is not polled again: its end was read above or is of no use now.)
    if !driver.is_finished() && tokio::time::timeout(grace, &mut driver).await.is_err() {
        driver.abort();
    }
    drop(leading);
    namespace_watch.abort();
    let _released = tokio::time::timeout(Duration::from_secs(5), lease_task).await;
    servers.http.abort();
    if let Some(logs) = servers.logs {
        logs.abort();
    }
    outcome
}

/// What the framework driver's end means for the controller: nothing at a
/// shutdown, the end of this controller otherwise.
fn driver_ended(ended: Result<Result<(), Error>, tokio::task::JoinError>, shutting_down: bool) -> Result<(), Error> {
    match ended {
        Ok(Ok(())) if shutting_down => Ok(()),
        Ok(Ok(())) => Err(Error::DriverEnded("it returned while no shutdown was asked".to_owned())),
        Ok(Err(e)) => Err(Error::DriverEnded(e.to_string())),
        Err(e) => Err(Error::DriverEnded(e.to_string())),
    }
}

use context::Command;

#[cfg(test)]
mod driver_end_tests {
    use super::*;

    #[tokio::test]
    async fn a_driver_that_panics_or_returns_while_leading_ends_the_controller_and_a_shutdown_does_not() {
        let panicked = tokio::spawn(async { panic!("offer round bug") }).await;
        let err = driver_ended(panicked.map(|()| Ok(())), false).unwrap_err();
        assert!(
            err.to_string().contains("the framework driver ended while leading")
                && err.to_string().contains("panicked"),
            "{err}"
        );
        assert_eq!(err.metric_label(), "driver");
        assert!(matches!(driver_ended(Ok(Ok(())), false), Err(Error::DriverEnded(_))));
        assert!(driver_ended(Ok(Ok(())), true).is_ok(), "at a shutdown the driver ends first and that is fine");
    }
}
