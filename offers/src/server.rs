//! Command-line arguments and the running server: binds the listener,
//! opens the registry, runs the master's clock, serves HTTP.

use crate::http::{HttpConfig, Shared, router};
use crate::master::{Master, MasterConfig};
use crate::registry::Registry;
use std::collections::{BTreeMap, HashMap};
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
    /// Directory of the registry (agent and framework ids survive restarts here).
    #[arg(long, env = "MPISWARM_OFFERS_DATA_DIR")]
    pub data_dir: PathBuf,
    /// Role weights for DRF, e.g. `mpi=2,batch=1` (default weight 1).
    #[arg(long, default_value = "", value_parser = parse_weights)]
    pub weights: BTreeMap<String, f64>,
    /// Seconds between batch allocation runs.
    #[arg(long, default_value_t = 1.0, value_parser = parse_seconds)]
    pub allocation_interval: f64,
    /// Seconds after which unanswered offers are rescinded (never if unset).
    #[arg(long, value_parser = parse_seconds)]
    pub offer_timeout: Option<f64>,
    /// Seconds between HEARTBEAT events.
    #[arg(long, default_value_t = 15.0, value_parser = parse_seconds)]
    pub heartbeat_interval: f64,
    /// Seconds a disconnected agent (or, after a restart, a registered one)
    /// has to come back before its tasks are LOST.
    #[arg(long, default_value_t = 75.0, value_parser = parse_seconds)]
    pub agent_reregister_timeout: f64,
    /// Seconds between re-sends of an unacknowledged status update.
    #[arg(long, default_value_t = 10.0, value_parser = parse_seconds)]
    pub status_update_retry_interval: f64,
    /// Mesos credentials JSON (`{"credentials":[{"principal":..,"secret":..}]}`);
    /// when given, the APIs require HTTP basic authentication.
    #[arg(long)]
    pub credentials: Option<PathBuf>,
    /// Largest accepted request body, in bytes.
    #[arg(long, default_value_t = 4 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Run as a non-leading master that redirects (307) every scheduler call to HOST:PORT.
    #[arg(long)]
    pub redirect_to: Option<String>,
    /// Hostname advertised in MasterInfo (default: the listen address).
    #[arg(long)]
    pub advertise_host: Option<String>,
}

/// Why the offer layer could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Registry(#[from] crate::registry::RegistryError),
    #[error("cannot read the credentials file {path}: {source}")]
    CredentialsRead { path: PathBuf, source: std::io::Error },
    #[error(
        "the credentials file {path} is not Mesos credentials JSON ({source}); expected {{\"credentials\":[{{\"principal\":\"...\",\"secret\":\"...\"}}]}}"
    )]
    CredentialsParse { path: PathBuf, source: serde_json::Error },
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("the HTTP server failed: {0}")]
    Serve(std::io::Error),
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
        crate::master::validate_role(role.trim())?;
        let w: f64 =
            weight.trim().parse().map_err(|_| format!("weight of role '{role}' is not a number: '{weight}'"))?;
        if !w.is_finite() || w <= 0.0 {
            return Err(format!("weight of role '{role}' must be positive, got {w}"));
        }
        out.insert(role.trim().to_owned(), w);
    }
    Ok(out)
}

#[derive(serde::Deserialize)]
struct CredentialsFile {
    credentials: Vec<Credential>,
}

#[derive(serde::Deserialize)]
struct Credential {
    principal: String,
    #[serde(default)]
    secret: String,
}

fn load_credentials(path: &PathBuf) -> Result<HashMap<String, String>, Error> {
    let bytes = std::fs::read(path).map_err(|source| Error::CredentialsRead { path: path.clone(), source })?;
    let file: CredentialsFile =
        serde_json::from_slice(&bytes).map_err(|source| Error::CredentialsParse { path: path.clone(), source })?;
    Ok(file.credentials.into_iter().map(|c| (c.principal, c.secret)).collect())
}

/// A server that is listening; dropping it does not stop it, [`Running::stop`] does.
pub struct Running {
    pub addr: SocketAddr,
    pub shared: Arc<Shared>,
    task: tokio::task::JoinHandle<Result<(), Error>>,
    stop: tokio::sync::watch::Sender<bool>,
}

impl Running {
    /// `http://ADDR`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops serving (open streams end) and waits for the server to finish.
    pub async fn stop(self) -> Result<(), Error> {
        let _ = self.stop.send(true);
        // Graceful shutdown waits for open connections; event streams never
        // end on their own.
        self.shared.master().close_all_streams();
        self.task.await.unwrap_or(Ok(()))
    }

    /// Waits until the server fails.
    pub async fn wait(self) -> Result<(), Error> {
        self.task.await.unwrap_or(Ok(()))
    }
}

/// Binds, recovers from the registry and starts serving in the background.
pub async fn start(args: OffersArgs) -> Result<Running, Error> {
    let registry = Registry::open(&args.data_dir)?;
    let credentials = args.credentials.as_ref().map(load_credentials).transpose()?;
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
    };
    let master = Master::new(config, registry);
    if master.is_recovering() {
        tracing::info!("recovering: waiting for registered agents to re-subscribe");
    }
    let shared = Shared::new(
        master,
        HttpConfig { credentials, redirect_to: args.redirect_to.clone(), max_body_bytes: args.max_body_bytes },
    );
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let clock = {
        let shared = shared.clone();
        let mut stopped = stopped.clone();
        async move {
            // The master's timers are checked 20 times a second; each timer
            // still fires on its own configured interval.
            let mut ticks = tokio::time::interval(Duration::from_millis(50));
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = ticks.tick() => {
                        let now = shared.now();
                        shared.master().tick(now);
                    }
                    _ = stopped.changed() => return,
                }
            }
        }
    };
    let app = router(shared.clone());
    tracing::info!(%addr, "offer layer listening");
    let task = tokio::spawn(async move {
        let clock = tokio::spawn(clock);
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.changed().await;
            })
            .await
            .map_err(Error::Serve);
        clock.abort();
        served
    });
    Ok(Running { addr, shared, task, stop })
}

/// Runs the offer layer until it fails or the process is interrupted.
pub async fn run(args: OffersArgs) -> Result<(), Error> {
    let running = start(args).await?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => {
            if let Err(e) = r {
                tracing::warn!(error = %e, "cannot wait for Ctrl-C");
            }
            running.stop().await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_credentials_file_in_the_wrong_format_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("creds.json");
        std::fs::write(&path, r#"{"principal":"p"}"#).unwrap();
        let err = load_credentials(&path).unwrap_err().to_string();
        assert!(err.contains("creds.json") && err.contains("\"credentials\""), "{err}");
        let missing = load_credentials(&dir.path().join("nope.json")).unwrap_err().to_string();
        assert!(missing.contains("nope.json"), "{missing}");
    }
}
