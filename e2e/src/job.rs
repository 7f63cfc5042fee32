//! MpiJobs as the suite writes them ([`Job`], a builder rendered to JSON,
//! which kubectl reads as YAML) and reads them back ([`Status`]), plus
//! [`Cluster::watch_job`], which follows one job to its end while recording
//! where Swarm ran its tasks.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::swarm::{Task, worker_ranks};
use crate::wait;

/// The rank program of the suite: the pi of stack/images/pi.c, a few seconds of
/// darts on ranks of 0.45 cpu.
pub const PI: &str = "/usr/local/bin/pi";

/// The file whose presence in a rank container releases a [`Job::held`] job.
pub const RELEASE_FILE: &str = "/tmp/mpiswarm-e2e-release";

/// An MpiJob to apply.
#[derive(Debug, Clone)]
pub struct Job {
    pub name: String,
    spec: Value,
}

impl Job {
    /// `ranks` ranks of `cpus` running pi over `samples` darts in the rank image.
    pub fn pi(name: &str, ranks: u32, cpus: f64, samples: u64) -> Job {
        let spec = json!({
            "image": crate::images::RANK,
            "command": [PI],
            "args": [samples.to_string()],
            "ranks": ranks,
            "resources": {"cpus": cpus, "memory": "64Mi"},
            "runPolicy": {"activeDeadlineSeconds": 600},
        });
        Job { name: name.to_owned(), spec }
    }

    /// Like [`Job::pi`], but every rank waits (at most 300 s) until
    /// [`Cluster::release`] drops [`RELEASE_FILE`] into its container, then
    /// runs pi: a job that holds its place exactly as long as a test needs.
    pub fn held(name: &str, ranks: u32, cpus: f64, samples: u64) -> Job {
        let script = format!(
            "i=0; while [ ! -e {RELEASE_FILE} ] && [ $i -lt 600 ]; do sleep 0.5; i=$((i+1)); done; exec {PI} {samples}"
        );
        Job::pi(name, ranks, cpus, samples).command(&["sh", "-c", &script])
    }

    pub fn profile(mut self, profile: &str) -> Job {
        self.spec["profile"] = profile.into();
        self
    }

    pub fn policy(mut self, policy: &str) -> Job {
        self.spec["placement"]["policy"] = policy.into();
        self
    }

    pub fn max_ranks_per_node(mut self, max: u32) -> Job {
        self.spec["placement"]["maxRanksPerNode"] = max.into();
        self
    }

    pub fn node_selector(mut self, key: &str, value: &str) -> Job {
        self.spec["placement"]["nodeSelector"][key] = value.into();
        self
    }

    pub fn role(mut self, role: &str) -> Job {
        self.spec["role"] = role.into();
        self
    }

    pub fn image(mut self, image: &str) -> Job {
        self.spec["image"] = image.into();
        self
    }

    /// The command and args every rank runs.
    pub fn command(mut self, command: &[&str]) -> Job {
        self.spec["command"] = json!(command);
        self.spec["args"] = json!([]);
        self
    }

    pub fn backoff_limit(mut self, limit: u32) -> Job {
        self.spec["runPolicy"]["backoffLimit"] = limit.into();
        self
    }

    /// Any other spec field, by JSON pointer-free key path.
    pub fn set(mut self, key: &str, value: Value) -> Job {
        self.spec[key] = value;
        self
    }

    /// The manifest (JSON, which is YAML) for `kubectl apply -f -`.
    pub fn manifest(&self) -> String {
        json!({
            "apiVersion": "mpiswarm.io/v1alpha1",
            "kind": "MpiJob",
            "metadata": {"name": self.name},
            "spec": self.spec,
        })
        .to_string()
    }
}

/// An MpiJob as `kubectl get -o json` returns it.
#[derive(Debug, Clone)]
pub struct Status(pub Value);

impl Status {
    pub fn uid(&self) -> &str {
        self.0["metadata"]["uid"].as_str().unwrap_or_default()
    }

    pub fn phase(&self) -> &str {
        self.0["status"]["phase"].as_str().unwrap_or_default()
    }

    pub fn is_finished(&self) -> bool {
        matches!(self.phase(), "Succeeded" | "Failed")
    }

    /// Ranks per node as `status.placement.nodes` says.
    pub fn placement(&self) -> BTreeMap<String, i64> {
        self.0["status"]["placement"]["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| Some((n["node"].as_str()?.to_owned(), n["ranks"].as_i64()?)))
            .collect()
    }

    /// `(status, reason, message)` of condition `type_`, if present.
    pub fn condition(&self, type_: &str) -> Option<(String, String, String)> {
        let c = self.0["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_)?;
        let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
        Some((s("status"), s("reason"), s("message")))
    }

    pub fn message(&self) -> &str {
        self.0["status"]["message"].as_str().unwrap_or_default()
    }

    /// `status.startTime` / `status.completionTime` (RFC 3339, comparable as text).
    pub fn start_time(&self) -> &str {
        self.0["status"]["startTime"].as_str().unwrap_or_default()
    }

    pub fn completion_time(&self) -> &str {
        self.0["status"]["completionTime"].as_str().unwrap_or_default()
    }

    pub fn launcher_node(&self) -> Option<&str> {
        self.0["status"]["launcher"]["node"].as_str()
    }

    pub fn launcher_exit_code(&self) -> Option<i64> {
        self.0["status"]["launcher"]["exitCode"].as_i64()
    }
}

/// What [`Cluster::watch_job`] saw: the job's last status and every task
/// Swarm held for it on the way (by task id, so a task seen in several
/// samples counts once).
#[derive(Debug)]
pub struct Watched {
    pub status: Status,
    pub tasks: Vec<Task>,
}

impl Watched {
    /// Ranks per node of the job's workers as Swarm ran them.
    pub fn swarm_placement(&self, rank_cpus: f64) -> BTreeMap<String, i64> {
        worker_ranks(&self.tasks, rank_cpus)
    }

    /// Nodes Swarm ran the job's launcher on.
    pub fn launcher_nodes(&self) -> BTreeSet<String> {
        self.tasks.iter().filter(|t| t.role == "launcher").map(|t| t.node.clone()).collect()
    }

    /// Fails unless Swarm's placement equals `status.placement` and `expected`
    /// (ranks per node, sorted), and the launcher ran where the status says.
    pub fn assert_placement(&self, rank_cpus: f64, expected: &[i64]) {
        let swarm = self.swarm_placement(rank_cpus);
        let status = self.status.placement();
        assert_eq!(swarm, status, "Swarm's truth (left) and status.placement (right) disagree: {:?}", self.tasks);
        let mut shape: Vec<i64> = swarm.values().copied().collect();
        shape.sort_unstable_by(|a, b| b.cmp(a));
        assert_eq!(shape, expected, "ranks per node: {swarm:?}");
        let launcher: Vec<String> = self.launcher_nodes().into_iter().collect();
        assert_eq!(
            launcher.iter().map(String::as_str).collect::<Vec<_>>(),
            self.status.launcher_node().into_iter().collect::<Vec<_>>(),
            "the launcher ran where status.launcher.node says"
        );
    }
}

impl Cluster {
    /// The MpiJob `name`, or None if it does not exist.
    pub fn job(&self, name: &str) -> Option<Status> {
        let out = self.kubectl_with(&["get", "mpijob", name, "-o", "json"], None);
        if !out.status.success() {
            return None;
        }
        serde_json::from_slice(&out.stdout).ok().map(Status)
    }

    /// Applies `job` and returns its uid.
    pub fn submit(&self, job: &Job) -> String {
        self.apply(&job.manifest());
        let status = self.job(&job.name).unwrap_or_else(|| panic!("{} was applied but cannot be read", job.name));
        status.uid().to_owned()
    }

    /// Waits until `check` holds for job `name`'s status.
    pub fn wait_job(&self, name: &str, deadline: Duration, what: &str, check: impl Fn(&Status) -> bool) -> Status {
        wait::until(deadline, &format!("{name}: {what}"), || match self.job(name) {
            Some(s) if check(&s) => Ok(s),
            Some(s) => Err(format!("phase {:?}, status {}", s.phase(), s.0["status"])),
            None => Err("no such MpiJob".into()),
        })
    }

    /// Follows job `name` (uid `uid`) until it has ended, sampling Swarm at
    /// every poll; returns its final status and each task Swarm held for it.
    pub fn watch_job(&self, name: &str, uid: &str, deadline: Duration) -> Watched {
        self.watch_jobs(&[(name, uid)], deadline).remove(0)
    }

    /// [`Cluster::watch_job`] for several jobs at once (names and uids), in their order.
    pub fn watch_jobs(&self, jobs: &[(&str, &str)], deadline: Duration) -> Vec<Watched> {
        let mut seen: Vec<BTreeMap<String, Task>> = vec![BTreeMap::new(); jobs.len()];
        let what = format!("{:?} end", jobs.iter().map(|j| j.0).collect::<Vec<_>>());
        let statuses = wait::until(deadline, &what, || {
            let tasks = self.swarm().tasks()?;
            for t in tasks.into_iter().filter(Task::holds_node) {
                if let Some(i) = jobs.iter().position(|(_, uid)| *uid == t.job_uid) {
                    seen[i].insert(t.id.clone(), t);
                }
            }
            let mut statuses = Vec::new();
            for (name, _) in jobs {
                match self.job(name) {
                    Some(s) if s.is_finished() => statuses.push(s),
                    Some(s) => return Err(format!("{name}: phase {:?}, status {}", s.phase(), s.0["status"])),
                    None => return Err(format!("{name}: no such MpiJob")),
                }
            }
            Ok(statuses)
        });
        statuses
            .into_iter()
            .zip(seen)
            .map(|(status, tasks)| Watched { status, tasks: tasks.into_values().collect() })
            .collect()
    }

    /// Releases a [`Job::held`] job: [`RELEASE_FILE`] in each of its
    /// containers on every node (found by the job-uid label they carry).
    /// Once the first worker is released its ranks may finish the job, and
    /// the other containers stop: one that stopped meanwhile is no failure.
    pub fn release(&self, uid: &str) {
        let filter = format!("label={}={uid}", crate::swarm::JOB_UID);
        let mut released = Vec::new();
        let mut refused = Vec::new();
        for node in self.nodes() {
            let containers = self.node_docker(node, &["ps", "-q", "--filter", &filter]);
            for c in containers.split_whitespace() {
                let out = self.exec(node, &["docker", "exec", c, "touch", RELEASE_FILE]);
                if out.status.success() {
                    released.push(c.to_owned());
                } else {
                    refused.push(format!("{c} on {}: {}", node.hostname, String::from_utf8_lossy(&out.stderr).trim()));
                }
            }
        }
        assert!(!released.is_empty(), "no running container of job {uid} could be released: {refused:?}");
    }

    /// Deletes MpiJobs (waiting until they are gone).
    pub fn delete_jobs(&self, names: &[&str]) {
        let mut args = vec!["delete", "mpijob", "--wait=true", "--ignore-not-found"];
        args.extend_from_slice(names);
        self.kubectl(&args);
    }
}
