//! mpiswarm's embedded Kubernetes-compatible API server: what
//! `mpiswarm apiserver` runs. It serves built-in kinds (namespaces, events in
//! two views, leases, secrets, configmaps, CRDs, RBAC objects, the access
//! and token reviews, and the workload and service kinds that are stored
//! only: `builtins`) and whatever custom resources applied CRDs declare,
//! from SQLite, so that kubectl, kube-rs and the Python client work against
//! it as against a real cluster. Every request but the health endpoints is
//! authenticated (`authn`: the admin token and `--token-auth-file`) and
//! authorized by RBAC (`authz`, `rbac`). It knows no mpiswarm type and runs
//! no controller.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub mod admission;
pub mod api;
pub mod apply;
pub mod audit;
pub mod authn;
pub mod authz;
pub mod builtins;
pub mod cascade;
pub mod cel_rules;
pub mod crd;
pub mod delete;
pub mod discovery;
pub mod error;
pub mod event_ttl;
pub mod events;
pub mod fields;
pub mod gnostic;
pub mod http;
pub mod list;
pub mod locks;
pub mod metrics;
pub mod openapi;
pub mod openapi_v2;
pub mod patch;
pub mod proto;
pub mod published;
pub mod query;
pub mod rbac;
pub mod rbac_defaults;
pub mod registry;
pub mod resource;
pub mod reviews;
pub mod schema;
pub mod selectors;
pub mod state;
pub mod store;
pub mod table;
pub mod tls;
pub mod views;
pub mod watch;
pub mod write;
pub mod writer;

/// `mpiswarm apiserver`
#[derive(clap::Args, Debug, Clone)]
pub struct ApiserverArgs {
    /// Address to listen on. TLS is always on except with --insecure-http.
    #[arg(long, default_value = "127.0.0.1:6443", env = "MPISWARM_APISERVER_LISTEN")]
    pub listen: SocketAddr,
    /// Directory for the database, the token, certificates and the kubeconfig.
    #[arg(long, default_value = ".mpiswarm", env = "MPISWARM_APISERVER_DATA_DIR")]
    pub data_dir: PathBuf,
    /// Serve plain HTTP; refused unless listening on loopback. The token is
    /// still required, but kubectl never sends a bearer token over plain HTTP,
    /// so this mode is for other clients (benchmarks, curl) only.
    #[arg(long, env = "MPISWARM_APISERVER_INSECURE_HTTP")]
    pub insecure_http: bool,
    /// How many changes are kept for watches; older resourceVersions get 410 Expired.
    #[arg(long, default_value_t = 20_000, env = "MPISWARM_APISERVER_WATCH_HISTORY")]
    pub watch_history: usize,
    /// Largest accepted request body, in bytes (kube-apiserver's limit is 3 MiB).
    #[arg(long, default_value_t = 3 * 1024 * 1024, env = "MPISWARM_APISERVER_MAX_BODY_BYTES")]
    pub max_body_bytes: usize,
    /// Interval between BOOKMARK events for watchers that allow them.
    #[arg(long, default_value_t = 60, env = "MPISWARM_APISERVER_BOOKMARK_SECONDS")]
    pub bookmark_seconds: u64,
    /// Events last seen longer ago than this are deleted (kube-apiserver's --event-ttl).
    #[arg(long, default_value_t = 3600, env = "MPISWARM_APISERVER_EVENT_TTL_SECONDS")]
    pub event_ttl_seconds: u64,
    /// Append every request to FILE as JSON lines, in the shape of
    /// kube-apiserver's audit log at the Metadata level (user, user agent,
    /// verb, resource, subresource, namespace, name, code; no bodies).
    #[arg(long, env = "MPISWARM_APISERVER_AUDIT_LOG")]
    pub audit_log: Option<PathBuf>,
    /// More users, in kube-apiserver's token file format: one CSV line
    /// `token,user,uid,"group1,group2"` each. Re-read when it changes, so
    /// a user added to a running server counts within seconds. What a user
    /// may do is RBAC's (Roles and bindings); the admin token of DIR/token
    /// stays, in group system:masters.
    #[arg(long, env = "MPISWARM_APISERVER_TOKEN_AUTH_FILE")]
    pub token_auth_file: Option<PathBuf>,
}

impl ApiserverArgs {
    /// Defaults for `dir` on an ephemeral loopback port (tests, embedding).
    pub fn for_dir(dir: impl Into<PathBuf>) -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir: dir.into(),
            insecure_http: false,
            watch_history: 20_000,
            max_body_bytes: 3 * 1024 * 1024,
            bookmark_seconds: 60,
            event_ttl_seconds: 3600,
            audit_log: None,
            token_auth_file: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
    #[error("cannot listen on {0}: {1}")]
    Listen(SocketAddr, #[source] std::io::Error),
    #[error("storage: {0}")]
    Storage(String),
    #[error("TLS: {0}")]
    Tls(String),
    #[error("{0} is in use by another apiserver (its lock file is held); stop that one or choose another --data-dir")]
    Locked(String),
    #[error("the server cannot go on: {0}; see the log above, then restart it")]
    Failed(String),
    #[error(transparent)]
    Audit(#[from] audit::Error),
    #[error(transparent)]
    TokenFile(#[from] authn::Error),
}

/// A started server.
pub struct Running {
    pub addr: SocketAddr,
    pub url: String,
    pub kubeconfig: PathBuf,
    pub token: String,
    pub api: Arc<api::Api>,
    /// `--audit-log`, when given.
    pub audit: Option<audit::AuditLog>,
    /// The server, the event sweeper and the token file watcher, by name (for messages).
    tasks: Vec<(&'static str, tokio::task::JoinHandle<()>)>,
    /// Held while running: one server per data directory.
    _lock: std::fs::File,
}

impl Running {
    /// Resolves when the server can no longer serve: one of its tasks ended
    /// (a panic included) or the storage writer thread stopped.
    pub async fn failure(&mut self) -> Error {
        let api = self.api.clone();
        let names: Vec<&'static str> = self.tasks.iter().map(|(name, _)| *name).collect();
        tokio::select! {
            (result, i, _) = futures::future::select_all(self.tasks.iter_mut().map(|(_, t)| t)) => {
                let how = match result {
                    Err(e) if e.is_panic() => "panicked",
                    Err(_) => "was cancelled",
                    Ok(()) => "returned",
                };
                Error::Failed(format!("{} {how}", names.get(i).unwrap_or(&"a server task")))
            }
            _ = api.store.writer_stopped() => Error::Failed("the storage writer thread stopped".into()),
        }
    }

    /// Stop serving (open connections are dropped).
    pub fn stop(&self) {
        self.api.stopping.send_replace(true);
        for (_, t) in &self.tasks {
            t.abort();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Open the store, write the kubeconfig and start serving.
pub async fn start(args: ApiserverArgs) -> Result<Running, Error> {
    let dir = args.data_dir.clone();
    // The directory holds the admin token, the CA key and every Secret.
    mpiswarm_guard::private::dir(&dir).map_err(|e| Error::Io(dir.display().to_string(), e))?;
    // Two servers on one database would each serve a stale in-memory copy.
    let lock_path = dir.join("lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| Error::Io(lock_path.display().to_string(), e))?;
    lock.try_lock().map_err(|_| Error::Locked(dir.display().to_string()))?;
    let db = dir.join("state.sqlite");
    // SQLite creates its -wal and -shm files with the database file's mode;
    // those an earlier version left wider are narrowed too.
    mpiswarm_guard::private::file(&db).map_err(|e| Error::Io(db.display().to_string(), e))?;
    for companion in ["state.sqlite-wal", "state.sqlite-shm"] {
        tls::narrow_existing(&dir.join(companion))?;
    }
    let store = store::Store::open(&db, args.watch_history.max(1)).map_err(|e| Error::Storage(e.message))?;
    let api = Arc::new(api::Api::new(store));
    api.ensure_namespaces().await.map_err(|e| Error::Storage(e.message))?;
    rbac_defaults::ensure(&api).await.map_err(|e| Error::Storage(e.message))?;
    let token = tls::token(&dir)?;
    let token_file = args.token_auth_file.as_deref().map(authn::TokenFile::load).transpose()?;
    if args.insecure_http && !args.listen.ip().is_loopback() {
        return Err(Error::Tls(format!("--insecure-http is only allowed on loopback, not on {}", args.listen)));
    }
    let listener = tokio::net::TcpListener::bind(args.listen).await.map_err(|e| Error::Listen(args.listen, e))?;
    let addr = listener.local_addr().map_err(|e| Error::Listen(args.listen, e))?;
    let use_tls = !args.insecure_http;
    let tls = if use_tls { Some(tls::load_or_create(&dir, addr)?) } else { None };
    let host = if addr.ip().is_unspecified() { "127.0.0.1".to_string() } else { addr.ip().to_string() };
    let url = format!("{}://{host}:{}", if use_tls { "https" } else { "http" }, addr.port());
    let audit = args.audit_log.as_deref().map(audit::AuditLog::open).transpose()?;
    let kubeconfig = dir.join("kubeconfig");
    let kc = tls::kubeconfig(&url, &token, tls.as_ref().map(|t| t.ca_pem.as_str()));
    mpiswarm_guard::private::write(&kubeconfig, kc.as_bytes())
        .map_err(|e| Error::Io(kubeconfig.display().to_string(), e))?;
    let (token_file, seen) = match token_file {
        Some((file, seen)) => (Some(Arc::new(file)), seen),
        None => (None, None),
    };
    let shared = Arc::new(http::Shared {
        api: api.clone(),
        authn: authn::Authenticator::new(token.clone(), token_file.clone()),
        policy: authz::PolicyCache::new(&api.store),
        max_body: args.max_body_bytes,
        server_address: format!("{host}:{}", addr.port()),
        watch_timeout: Duration::from_secs(30 * 60),
        bookmark_every: Duration::from_secs(args.bookmark_seconds.max(1)),
        audit: audit.clone(),
        openapi: Default::default(),
    });
    let app = http::router(shared);
    let task = match tls {
        None => tokio::spawn(async move {
            let app = app.into_make_service_with_connect_info::<SocketAddr>();
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "server stopped");
            }
        }),
        Some(tls) => tokio::spawn(mpiswarm_guard::serve_tls(
            listener,
            tls.config,
            app,
            mpiswarm_guard::Limits::default(),
            std::future::pending(),
        )),
    };
    let sweeper = tokio::spawn(event_ttl::sweep(api.clone(), Duration::from_secs(args.event_ttl_seconds)));
    let mut tasks = vec![("the HTTP server", task), ("the event TTL sweep", sweeper)];
    if let Some(file) = token_file {
        tasks.push(("the token auth file watcher", tokio::spawn(file.watch(seen))));
    }
    tracing::info!(%url, kubeconfig = %kubeconfig.display(), "apiserver listening");
    Ok(Running { addr, url, kubeconfig, token, api, audit, tasks, _lock: lock })
}

/// `mpiswarm apiserver`: serve until SIGINT or SIGTERM, or fail with an
/// error as soon as a server task or the storage writer dies.
pub async fn run(args: ApiserverArgs) -> Result<(), Error> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut running = start(args).await?;
    eprintln!("mpiswarm apiserver listening on {}; kubeconfig: {}", running.url, running.kubeconfig.display());
    let mut term = signal(SignalKind::terminate()).map_err(|e| Error::Io("SIGTERM handler".into(), e))?;
    let outcome = tokio::select! {
        _ = tokio::signal::ctrl_c() => Ok(()),
        _ = term.recv() => Ok(()),
        e = running.failure() => Err(e),
    };
    running.stop();
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_server_task_that_ends_is_a_failure_with_its_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut running = start(ApiserverArgs::for_dir(dir.path())).await.expect("starts");
        running.tasks[1].1.abort();
        let e = tokio::time::timeout(Duration::from_secs(30), running.failure()).await.expect("noticed");
        assert_eq!(
            e.to_string(),
            "the server cannot go on: the event TTL sweep was cancelled; see the log above, then restart it"
        );
    }

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: ApiserverArgs,
    }

    #[test]
    fn the_token_file_is_a_flag_and_an_environment_variable() {
        use clap::{CommandFactory, Parser};
        let cli = Cli::try_parse_from(["apiserver", "--token-auth-file", "/etc/mpiswarm/tokens.csv"]).expect("parses");
        assert_eq!(cli.args.token_auth_file, Some(PathBuf::from("/etc/mpiswarm/tokens.csv")));
        let none = Cli::try_parse_from(["apiserver"]).expect("parses");
        assert_eq!(none.args.token_auth_file, None, "no token file unless one is given");
        let arg = Cli::command().get_arguments().find(|a| a.get_id() == "token_auth_file").cloned().expect("the flag");
        assert_eq!(arg.get_env().and_then(|e| e.to_str()), Some("MPISWARM_APISERVER_TOKEN_AUTH_FILE"));
    }

    #[tokio::test]
    async fn the_token_file_watcher_is_a_named_server_task() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tokens = dir.path().join("tokens.csv");
        std::fs::write(&tokens, "t,team-a,a\n").expect("write");
        let mut args = ApiserverArgs::for_dir(dir.path().join("data"));
        args.token_auth_file = Some(tokens);
        let mut running = start(args).await.expect("starts");
        let (name, watcher) = &running.tasks[2];
        assert_eq!(*name, "the token auth file watcher");
        watcher.abort();
        let e = tokio::time::timeout(Duration::from_secs(30), running.failure()).await.expect("noticed");
        assert!(e.to_string().contains("the token auth file watcher was cancelled"), "{e}");
    }
}
