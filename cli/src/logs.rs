//! `mpiswarm logs JOB [-f] [--worker N]`: a task's output, kept by its agent
//! like a Mesos sandbox, while it runs and after it ended. Only the
//! kubeconfig is needed: the job's status names the gang and its nodes, the
//! controller's ConfigMap names the framework and the master, and the
//! master's `/master/state` says where each agent serves `/files/read`.

use std::io::Write;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::Api;
use mpiswarm_controller::framework_id::{CONFIG_MAP, MASTER_KEY};
use mpiswarm_controller::names::{TaskName, TaskRole};
use mpiswarm_crds::MpiJob;

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
    #[command(flatten)]
    pub target: Target,
}

const CHUNK: u64 = 64 * 1024;

pub async fn run(args: LogsArgs) -> Result<()> {
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
    let master = data.get(MASTER_KEY).context("the controller did not record its master")?.clone();
    let agent = agent_url(&master, &node.agent_id).await?;
    let file = format!("/tasks/{framework}/{task}/{}", if args.stderr { "stderr" } else { "stdout" });

    let http = reqwest::Client::new();
    let mut offset = 0u64;
    let mut out = std::io::stdout();
    loop {
        let resp = http
            .get(format!("{agent}/files/read"))
            .query(&[("path", file.as_str()), ("offset", &offset.to_string()), ("length", &CHUNK.to_string())])
            .send()
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

/// The agent's base URL from the master's state (Mesos' `pid` is `slave(1)@IP:PORT`).
async fn agent_url(master: &str, agent_id: &str) -> Result<String> {
    let state: serde_json::Value = reqwest::get(format!("{master}/master/state"))
        .await
        .with_context(|| format!("asking the master at {master} where agent {agent_id} is"))?
        .json()
        .await?;
    let agents = state["slaves"].as_array().cloned().unwrap_or_default();
    let a = agents
        .iter()
        .find(|a| a["id"].as_str() == Some(agent_id))
        .with_context(|| format!("the master at {master} does not know agent {agent_id}"))?;
    let pid = a["pid"].as_str().context("the master did not say where the agent serves")?;
    let addr = pid.rsplit('@').next().unwrap_or(pid);
    Ok(format!("http://{addr}"))
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
