//! `mpiswarm logs JOB [-f] [--worker N] [--stderr]`: a task's output, kept
//! by its agent like a Mesos sandbox, while it runs and after it ended,
//! read through the controller's log endpoint (`GET /logs/NAMESPACE/JOB`)
//! with the caller's own Kubernetes token. The endpoint asks the API server
//! who the token is and whether it may `get mpijobs/log` on the job, so a
//! tenant reads its own jobs' output and nothing else, and nobody needs a
//! credential of the offer layer or the agents. Only the kubeconfig is
//! needed: the controller records the endpoint's URL in its ConfigMap
//! (`mpiswarm-framework`, key `logsUrl`, in `--controller-namespace`),
//! which `mpiswarm tenant add` lets every tenant read; `--logs-url` names it
//! instead. `--ca-file` is the CA an https endpoint's certificate must
//! chain to.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use mpiswarm_controller::framework_id::{CONFIG_MAP, LOGS_URL_KEY};
use mpiswarm_controller::logs::Chunk;
use mpiswarm_crds::MpiJob;
use secrecy::ExposeSecret;

use crate::run::Target;

#[derive(clap::Args, Debug, Clone)]
pub struct LogsArgs {
    /// The MpiJob.
    pub job: String,
    /// Keep following the output until the task ends.
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// A worker's output (0-based, in placement order) instead of the launcher's.
    #[arg(long)]
    pub worker: Option<u32>,
    /// stderr instead of stdout.
    #[arg(long)]
    pub stderr: bool,
    /// Namespace of the controller's framework ConfigMap, which says where its log endpoint is.
    #[arg(long, default_value = "default")]
    pub controller_namespace: String,
    /// The controller's log endpoint (default: the URL it recorded in its ConfigMap).
    #[arg(long, env = "MPISWARM_LOGS_URL")]
    pub logs_url: Option<String>,
    /// PEM CA file an https log endpoint's certificate must chain to (default: the public roots).
    #[arg(long, env = "MPISWARM_LOGS_CA_FILE")]
    pub ca_file: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub target: Target,
}

/// How long one read of the endpoint may take.
const READ_TIMEOUT: Duration = Duration::from_secs(60);
/// The wait between reads while following a task with no new output.
const FOLLOW_PAUSE: Duration = Duration::from_millis(500);
const CHUNK: u64 = 64 * 1024;

pub async fn run(args: LogsArgs) -> Result<()> {
    let kubeconfig = args.target.kubeconfig_path()?;
    let token = bearer_token(&kubeconfig).await?;
    let (client, ns) = args.target.client().await?;
    let base = match &args.logs_url {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None => recorded_url(&client, &args.controller_namespace).await?,
    };
    let ca = args.ca_file.as_deref().map(mpiswarm_mesos::tls::CaFile::read).transpose()?;
    // No redirects are followed (the token goes to the recorded endpoint only).
    let http = mpiswarm_mesos::tls::http_client(ca.as_ref());
    let url = format!("{base}/logs/{ns}/{}", args.job);
    let what = match args.worker {
        Some(i) => format!("worker {i}"),
        None => "launcher".to_owned(),
    };
    let jobs: Api<MpiJob> = Api::namespaced(client, &ns);

    let mut offset = 0u64;
    let mut out = std::io::stdout();
    loop {
        let mut query = vec![
            ("offset", offset.to_string()),
            ("length", CHUNK.to_string()),
            ("stream", if args.stderr { "stderr" } else { "stdout" }.to_owned()),
        ];
        if let Some(i) = args.worker {
            query.push(("worker", i.to_string()));
        }
        let resp = http
            .get(&url)
            .query(&query)
            .bearer_auth(&token)
            .timeout(READ_TIMEOUT)
            .send()
            .await
            .with_context(|| format!("GET {url}: the controller's log endpoint did not answer"))?;
        let status = resp.status();
        if !status.is_success() {
            let body: serde_json::Value = resp.json().await.unwrap_or_default();
            let message = body["message"].as_str().unwrap_or("(no message)");
            bail!(
                "the log endpoint {base} refused the {what}'s output of MpiJob {ns}/{} ({status}): {message}",
                args.job
            );
        }
        let chunk: Chunk = resp.json().await.with_context(|| format!("reading the answer of {url}"))?;
        if !chunk.data.is_empty() {
            out.write_all(chunk.data.as_bytes())?;
            out.flush()?;
            // The agent keeps bounded output: an answer may start later than asked.
            offset = chunk.offset.max(offset) + chunk.data.len() as u64;
            continue;
        }
        if !args.follow || task_ended(&jobs, &args.job, args.worker.is_none()).await? {
            return Ok(());
        }
        tokio::time::sleep(FOLLOW_PAUSE).await;
    }
}

/// The bearer token of the kubeconfig's current user: its `token`, or the
/// file its `tokenFile` names. Client certificates and exec plugins prove
/// the user to the API server only, so they cannot be passed on.
async fn bearer_token(kubeconfig: &Path) -> Result<String> {
    let kc = Kubeconfig::read_from(kubeconfig).with_context(|| format!("reading {}", kubeconfig.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("loading {}", kubeconfig.display()))?;
    let auth = &config.auth_info;
    if let Some(token) = &auth.token {
        return Ok(token.expose_secret().trim().to_owned());
    }
    if let Some(file) = &auth.token_file {
        let token =
            std::fs::read_to_string(file).with_context(|| format!("reading the kubeconfig's tokenFile {file}"))?;
        return Ok(token.trim().to_owned());
    }
    let has = if auth.exec.is_some() {
        "an exec plugin"
    } else if auth.client_certificate.is_some() || auth.client_certificate_data.is_some() {
        "a client certificate"
    } else if auth.auth_provider.is_some() {
        "an auth provider"
    } else if auth.username.is_some() {
        "a user name and password"
    } else {
        "no credentials"
    };
    bail!(
        "the current user of {} has {has}, not a bearer token: the log endpoint authenticates callers by a bearer token (`token` or `tokenFile` in the kubeconfig's user), checked by the API server; use a kubeconfig with one (`mpiswarm tenant add` writes such a kubeconfig)",
        kubeconfig.display()
    )
}

/// The log endpoint's URL as the controller recorded it.
async fn recorded_url(client: &kube::Client, namespace: &str) -> Result<String> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let cm = match cms.get_opt(CONFIG_MAP).await {
        Ok(cm) => cm,
        Err(kube::Error::Api(e)) if e.code == 403 => bail!(
            "you may not read ConfigMap {namespace}/{CONFIG_MAP}, where the controller records its log endpoint ({}): ask an operator for access (`mpiswarm tenant add` grants it to tenants), or pass --logs-url",
            e.message
        ),
        Err(e) => return Err(e).with_context(|| format!("reading ConfigMap {namespace}/{CONFIG_MAP}")),
    };
    let cm = cm.with_context(|| {
        format!("no ConfigMap {CONFIG_MAP} in namespace {namespace}: is the controller running and subscribed (or is it in another namespace: --controller-namespace)?")
    })?;
    let url = cm.data.unwrap_or_default().get(LOGS_URL_KEY).cloned().with_context(|| {
        format!("the controller records no log endpoint in ConfigMap {namespace}/{CONFIG_MAP} ({LOGS_URL_KEY}): it runs without --logs-listen; pass --logs-url if it serves one elsewhere")
    })?;
    Ok(url.trim_end_matches('/').to_owned())
}

/// Whether there is no more output to wait for: the job finished, or (for
/// the launcher) the launcher ended.
async fn task_ended(jobs: &Api<MpiJob>, name: &str, launcher: bool) -> Result<bool> {
    let job = jobs.get(name).await?;
    let st = job.status.unwrap_or_default();
    if st.phase.is_some_and(mpiswarm_crds::Phase::is_finished) {
        return Ok(true);
    }
    Ok(launcher
        && st
            .launcher
            .and_then(|l| l.state)
            .is_some_and(|s| !matches!(s.as_str(), "TASK_STAGING" | "TASK_STARTING" | "TASK_RUNNING")))
}
