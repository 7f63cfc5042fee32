//! `mpiswarm run FILE` and `mpiswarm status [JOB]`: submit an MpiJob by
//! server-side apply and follow it to its end, the way `docker run` follows
//! a container; and show where jobs stand. Both need only a kubeconfig (the
//! running stack's, or `--kubeconfig` for a cluster).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use mpiswarm_crds::{ConditionType, MpiJob, Phase};

use mpiswarm_stack::stack_file as stack;

#[derive(clap::Args, Debug, Clone)]
pub struct Target {
    /// Data dir of the local stack (`mpiswarm up`); its kubeconfig is used.
    #[arg(long, env = "MPISWARM_DATA_DIR", default_value = stack::DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
    /// Talk to this cluster instead of the local stack.
    #[arg(long, env = "MPISWARM_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Namespace of the job (default: the kubeconfig's, else `default`).
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// The MpiJob manifest (YAML or JSON).
    pub file: PathBuf,
    #[command(flatten)]
    pub target: Target,
    /// Give up following after this many seconds (the job keeps running).
    #[arg(long, default_value_t = 3600)]
    pub timeout_seconds: u64,
}

#[derive(clap::Args, Debug, Clone)]
pub struct StatusArgs {
    /// One job (default: every job of the namespace).
    pub job: Option<String>,
    /// Namespace of the controller's framework ConfigMap, where it records
    /// the roles' quota.
    #[arg(long, default_value = "default")]
    pub controller_namespace: String,
    #[command(flatten)]
    pub target: Target,
}

impl Target {
    /// `--kubeconfig`, or the local stack's.
    pub fn kubeconfig_path(&self) -> Result<PathBuf> {
        Ok(match &self.kubeconfig {
            Some(k) => k.clone(),
            None => stack::running(&self.data_dir)?.kubeconfig,
        })
    }

    pub async fn client(&self) -> Result<(kube::Client, String)> {
        let kubeconfig = self.kubeconfig_path()?;
        let client = mpiswarm_controller::client(Some(&kubeconfig)).await?;
        let ns = self.namespace.clone().unwrap_or_else(|| client.default_namespace().to_owned());
        Ok((client, ns))
    }
}

/// Exit code of `mpiswarm run`: 0 on Succeeded, 1 on Failed, 2 when the job was refused.
pub async fn run(args: RunArgs) -> Result<i32> {
    let text = std::fs::read_to_string(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let job = match mpiswarm_crds::parse_manifest(&text) {
        Ok(job) => job,
        Err(e) => {
            eprintln!("mpiswarm run: {}: {e}", args.file.display());
            return Ok(2);
        }
    };
    let (client, default_ns) = args.target.client().await?;
    let ns = job.namespace().unwrap_or(default_ns);
    let name = job.name_any();
    let jobs: Api<MpiJob> = Api::namespaced(client.clone(), &ns);

    // A finished job of the same name is replaced, so running a file twice runs it twice.
    if let Some(old) = jobs.get_opt(&name).await?
        && old.status.as_ref().and_then(|s| s.phase).is_some_and(Phase::is_finished)
    {
        eprintln!("mpiswarm run: replacing the finished job {ns}/{name}");
        jobs.delete(&name, &DeleteParams::foreground()).await?;
        wait_gone(&jobs, &name).await?;
    }

    let mut body = serde_json::to_value(&job)?;
    body["metadata"]["namespace"] = ns.clone().into();
    if let Some(m) = body["metadata"].as_object_mut() {
        m.remove("resourceVersion");
        m.remove("uid");
    }
    body.as_object_mut().map(|o| o.remove("status"));
    match jobs.patch(&name, &PatchParams::apply("mpiswarm-run").force(), &Patch::Apply(&body)).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 422 || e.code == 400 => {
            eprintln!("mpiswarm run: the API server refused {}: {}", args.file.display(), e.message);
            return Ok(2);
        }
        Err(e) => return Err(e.into()),
    }
    eprintln!("mpiswarm run: submitted {ns}/{name}");
    let followed = tokio::time::timeout(Duration::from_secs(args.timeout_seconds), follow(&jobs, &name)).await;
    let Ok(done) = followed else {
        eprintln!("mpiswarm run: gave up following after {}s; the job keeps running", args.timeout_seconds);
        return Ok(1);
    };
    let done = done?;
    let st = done.status.clone().unwrap_or_default();
    if let Some(out) = st.launcher.as_ref().and_then(|l| l.message.as_ref()) {
        println!("{}", out.trim_end());
    }
    match st.phase {
        Some(Phase::Succeeded) => {
            eprintln!("mpiswarm run: {name} succeeded");
            Ok(0)
        }
        _ => {
            let why = st.condition(ConditionType::Failed).map(|c| format!("{}: {}", c.reason, c.message));
            eprintln!("mpiswarm run: {name} failed: {}", why.or(st.message).unwrap_or_default());
            Ok(1)
        }
    }
}

/// Prints a line per change of phase (one live line on a terminal) until the job ends.
async fn follow(jobs: &Api<MpiJob>, name: &str) -> Result<MpiJob> {
    let tty = std::io::stderr().is_terminal();
    let mut last = String::new();
    let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut stream = watcher(jobs.clone(), cfg).applied_objects().boxed();
    while let Some(job) = stream.try_next().await? {
        let line = describe(&job);
        if line != last {
            if tty {
                eprint!("\r\x1b[2K{line}");
            } else {
                eprintln!("{line}");
            }
            let _flushed = std::io::stderr().flush();
            last = line;
        }
        if job.status.as_ref().and_then(|s| s.phase).is_some_and(Phase::is_finished) {
            if tty {
                eprintln!();
            }
            return Ok(job);
        }
    }
    bail!("the watch of {name} ended before the job did")
}

fn describe(job: &MpiJob) -> String {
    let st = job.status.clone().unwrap_or_default();
    let phase = st.phase.map(|p| format!("{p:?}")).unwrap_or_else(|| "Submitted".into());
    let placement = st
        .placement
        .as_ref()
        .map(|p| {
            let nodes: Vec<String> = p.nodes.iter().map(|n| format!("{}x{}", n.node, n.ranks)).collect();
            format!(" [{} on {}]", p.policy, nodes.join(" "))
        })
        .unwrap_or_default();
    let message = st.message.filter(|m| !m.is_empty()).map(|m| format!(" {m}")).unwrap_or_default();
    format!("{}: {phase}{placement}{message}", job.name_any())
}

async fn wait_gone(jobs: &Api<MpiJob>, name: &str) -> Result<()> {
    let cond = kube::runtime::wait::await_condition(jobs.clone(), name, |j: Option<&MpiJob>| j.is_none());
    tokio::time::timeout(Duration::from_secs(120), cond)
        .await
        .with_context(|| format!("{name} was not deleted within 120 s"))??;
    Ok(())
}

/// `mpiswarm status [JOB]`.
pub async fn status(args: StatusArgs) -> Result<()> {
    let (client, ns) = args.target.client().await?;
    let jobs: Api<MpiJob> = Api::namespaced(client.clone(), &ns);
    let list = match &args.job {
        Some(name) => vec![jobs.get_opt(name).await?.with_context(|| format!("no MpiJob {name} in namespace {ns}"))?],
        None => jobs.list(&Default::default()).await?.items,
    };
    let roles: std::collections::BTreeSet<String> = list.iter().map(|j| j.spec.role.clone()).collect();
    let quotas = recorded_quotas(&client, &args.controller_namespace).await;
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client, &ns);
    for job in list {
        println!("{}", describe(&job));
        let st = job.status.clone().unwrap_or_default();
        for c in &st.conditions {
            println!("  {:<14} {:<6} {:<20} {}", c.type_, c.status, c.reason, c.message);
        }
        if args.job.is_some() {
            let uid = job.uid().unwrap_or_default();
            let evs = events.list(&Default::default()).await?.items;
            let mut mine: Vec<_> =
                evs.into_iter().filter(|e| e.involved_object.uid.as_deref() == Some(uid.as_str())).collect();
            mine.sort_by_key(|e| e.meta().creation_timestamp.clone().map(|t| t.0));
            for e in mine.iter().rev().take(10).rev() {
                println!(
                    "  event {:<12} {}",
                    e.reason.clone().unwrap_or_default(),
                    e.message.clone().unwrap_or_default()
                );
            }
        }
    }
    // Each listed job's role against its quota, as the controller last read it.
    for (role, quota) in quotas.iter().filter(|(role, _)| roles.contains(*role)) {
        println!("quota {}", mpiswarm_controller::quota_record::describe(role, quota));
    }
    Ok(())
}

/// The roles' quota the controller records in its framework ConfigMap;
/// none when the ConfigMap is not there or not readable (a cluster
/// without quota, or a user without the read: the jobs' status is still
/// shown).
async fn recorded_quotas(client: &kube::Client, namespace: &str) -> mpiswarm_controller::quota_record::Quotas {
    use mpiswarm_controller::framework_id::CONFIG_MAP;
    use mpiswarm_controller::quota_record::QUOTAS_KEY;
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), namespace);
    let Ok(Some(cm)) = cms.get_opt(CONFIG_MAP).await else { return Default::default() };
    let text = cm.data.and_then(|d| d.get(QUOTAS_KEY).cloned()).unwrap_or_default();
    serde_json::from_str(&text).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpiswarm_crds::MpiJobStatus;

    fn job(status: Option<MpiJobStatus>) -> MpiJob {
        const PI: &str = "apiVersion: mpiswarm.io/v1alpha1\nkind: MpiJob\nmetadata: {name: pi}\n\
                          spec: {image: mpiswarm/openmpi:0.1.0, command: [pi], ranks: 4}\n";
        let mut job = mpiswarm_crds::parse_manifest(PI).expect("a minimal MpiJob parses");
        job.status = status;
        job
    }

    /// A job without a message yet: no trailing space after its phase.
    #[test]
    fn a_line_without_a_message_ends_with_the_phase() {
        assert_eq!(describe(&job(None)), "pi: Submitted");
        let running = MpiJobStatus { phase: Some(Phase::Running), ..Default::default() };
        assert_eq!(describe(&job(Some(running))), "pi: Running");
    }

    #[test]
    fn a_message_follows_the_phase_after_one_space() {
        let st = MpiJobStatus {
            phase: Some(Phase::Pending),
            message: Some("waiting for offers".into()),
            ..Default::default()
        };
        assert_eq!(describe(&job(Some(st))), "pi: Pending waiting for offers");
    }
}
