//! `mpiswarm logs JOB [-f] [--worker N]`: a task's output, kept by its agent
//! like a Mesos sandbox, while it runs and after it ended. Only the
//! kubeconfig is needed: the job's status names the gang and its nodes, the
//! controller's ConfigMap names the framework and the master, and the
//! master's `/master/state` says where each agent serves `/files/read`.
//!
//! Against a secured offer layer (TLS and credentials, as off loopback):
//! `--ca-file` is the CA to trust instead of the public roots, and the
//! credential (`--credential FILE`, or `--principal` with `--secret-file`)
//! goes to the master and to the agents as HTTP basic authentication. The
//! agents are reached with the master's scheme: Mesos secures a cluster as
//! a whole, and an agent beyond loopback serves HTTPS only. On the local
//! stack (no `--kubeconfig`) without a credential flag, the operator
//! credential `up` made and recorded in `DATA/stack.json` is used.

use std::io::Write;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::Api;
use mpiswarm_controller::framework_id::{CONFIG_MAP, MASTER_KEY};
use mpiswarm_controller::names::{TaskName, TaskRole};
use mpiswarm_crds::MpiJob;
use mpiswarm_mesos::client::args::{CredentialArgs, LookupMasterArgs};
use mpiswarm_mesos::credential::Credential;

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
    /// Namespace of the controller's framework ConfigMap.
    #[arg(long, default_value = "default")]
    pub controller_namespace: String,
    /// `--master` (by default the one the controller recorded, which may be
    /// the controller pod's own loopback) and `--ca-file`, for the master
    /// and its agents.
    #[command(flatten)]
    pub master: LookupMasterArgs,
    /// How to authenticate to the master and the agents.
    #[command(flatten)]
    pub credential: CredentialArgs,
    #[command(flatten)]
    pub target: Target,
}

/// How to talk to the master and the agents: one HTTP client trusting
/// `--ca-file`, and the credential every request carries.
struct Mesos {
    http: reqwest::Client,
    credential: Option<Credential>,
}

impl Mesos {
    /// Reads the files the flags name before anything is asked of the cluster.
    fn from_args(args: &LogsArgs) -> Result<Self> {
        let credential = match args.credential.read()? {
            Some(given) => Some(given),
            None if args.target.kubeconfig.is_none() => {
                let recorded = mpiswarm_stack::stack_file::read(&args.target.data_dir).ok();
                let file = recorded.and_then(|s| s.operator_credential);
                file.map(|f| Credential::from_file(&f)).transpose()?
            }
            None => None,
        };
        let ca = args.master.ca()?;
        Ok(Self { http: mpiswarm_mesos::tls::http_client(ca.as_ref()), credential })
    }

    async fn get(&self, url: &str, query: &[(&str, &str)]) -> Result<reqwest::Response> {
        let mut req = self.http.get(url).query(query);
        if let Some(c) = &self.credential {
            req = req.basic_auth(&c.principal, Some(&c.secret));
        }
        let resp = req.send().await.with_context(|| format!("GET {url}"))?;
        if matches!(resp.status().as_u16(), 401 | 403) {
            let how = match &self.credential {
                None => "it requires credentials: pass --credential FILE, or --principal with --secret-file".to_owned(),
                Some(c) => format!("it refused principal {:?}: check the credential", c.principal),
            };
            bail!("{url} answered {}: {how}", resp.status());
        }
        Ok(resp)
    }
}

const CHUNK: u64 = 64 * 1024;

pub async fn run(args: LogsArgs) -> Result<()> {
    let mesos = Mesos::from_args(&args)?;
    let (client, ns) = args.target.client().await?;
    let jobs: Api<MpiJob> = Api::namespaced(client.clone(), &ns);
    let job = jobs.get_opt(&args.job).await?.with_context(|| format!("no MpiJob {} in namespace {ns}", args.job))?;
    let uid = job.uid().context("the job has no uid")?;
    let st = job.status.clone().unwrap_or_default();
    let placement = st.placement.clone().with_context(|| {
        format!("{} has not been placed yet ({}): there is no output", args.job, st.message.clone().unwrap_or_default())
    })?;
    let (role, node) = match args.worker {
        Some(i) => {
            let n = placement.nodes.get(i as usize).with_context(|| {
                format!(
                    "{} has {} workers (0 to {})",
                    args.job,
                    placement.nodes.len(),
                    placement.nodes.len().saturating_sub(1)
                )
            })?;
            (TaskRole::Worker(i), n)
        }
        None => (TaskRole::Launcher, placement.nodes.first().context("the placement has no node")?),
    };
    let generation = u32::try_from(st.gang_generation.unwrap_or(0)).unwrap_or(0);
    let task = TaskName::new(&uid, generation, role).to_string();

    let cms: Api<ConfigMap> = Api::namespaced(client, &args.controller_namespace);
    let cm = cms.get_opt(CONFIG_MAP).await?.with_context(|| {
        format!("no ConfigMap {CONFIG_MAP} in {}: is the controller running?", args.controller_namespace)
    })?;
    let data = cm.data.unwrap_or_default();
    let framework = data.get("frameworkId").context("the controller has not subscribed yet")?.clone();
    let master = match args.master.given() {
        Some(m) => m.to_owned(),
        None => data.get(MASTER_KEY).context("the controller did not record its master: pass --master")?.clone(),
    };
    let agent = agent_url(&mesos, &master, &node.agent_id).await?;
    let file = format!("/tasks/{framework}/{task}/{}", if args.stderr { "stderr" } else { "stdout" });

    let mut offset = 0u64;
    let mut out = std::io::stdout();
    loop {
        let resp = mesos
            .get(
                &format!("{agent}/files/read"),
                &[("path", file.as_str()), ("offset", &offset.to_string()), ("length", &CHUNK.to_string())],
            )
            .await
            .with_context(|| format!("reading {file} from the agent at {agent}"))?;
        if resp.status().as_u16() == 404 {
            bail!("{file} is not on the agent at {agent} (not started yet, or removed after its retention period)");
        }
        let body: serde_json::Value = resp.error_for_status()?.json().await?;
        let data = body["data"].as_str().unwrap_or_default();
        if !data.is_empty() {
            out.write_all(data.as_bytes())?;
            out.flush()?;
            offset += data.len() as u64;
            continue;
        }
        if !args.follow || task_ended(&jobs, &args.job, role).await? {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The agent's base URL from the master's state (Mesos' `pid` is
/// `slave(1)@IP:PORT`), with the master's scheme.
async fn agent_url(mesos: &Mesos, master: &str, agent_id: &str) -> Result<String> {
    let master = master.trim_end_matches('/');
    let state: serde_json::Value = mesos
        .get(&format!("{master}/master/state"), &[])
        .await
        .with_context(|| format!("asking the master at {master} where agent {agent_id} is"))?
        .error_for_status()?
        .json()
        .await?;
    let agents = state["slaves"].as_array().cloned().unwrap_or_default();
    let a = agents
        .iter()
        .find(|a| a["id"].as_str() == Some(agent_id))
        .with_context(|| format!("the master at {master} does not know agent {agent_id}"))?;
    let pid = a["pid"].as_str().context("the master did not say where the agent serves")?;
    let addr = pid.rsplit('@').next().unwrap_or(pid);
    let scheme = if master.starts_with("https://") { "https" } else { "http" };
    Ok(format!("{scheme}://{addr}"))
}

async fn task_ended(jobs: &Api<MpiJob>, name: &str, role: TaskRole) -> Result<bool> {
    let job = jobs.get(name).await?;
    let st = job.status.unwrap_or_default();
    if st.phase.is_some_and(mpiswarm_crds::Phase::is_finished) {
        return Ok(true);
    }
    Ok(role == TaskRole::Launcher
        && st
            .launcher
            .and_then(|l| l.state)
            .is_some_and(|s| !matches!(s.as_str(), "TASK_STAGING" | "TASK_STARTING" | "TASK_RUNNING")))
}
