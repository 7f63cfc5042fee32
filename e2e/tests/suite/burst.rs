//! Burst: a parameter sweep as users submit it, 120 MpiJobs of 2 ranks x
//! 0.1 cpu (pi; each job also reserves its 0.1-cpu launcher) in one
//! `kubectl apply`, 80 under role `mpi` (weight 2) and 40 under `batch`
//! (weight 1), `backoffLimit: 0`: one failure or lost task would fail its
//! job for good. Profile `network` (pack: both ranks and the launcher on one
//! node, as a sweep of small jobs is best run); under the default
//! `balanced` a node takes no more ranks than its whole free cpus, so a
//! 2-rank job needs two agents offered to its role at once, or a node with
//! 2 free cpus, and with two roles sharing 3 agents the burst crawled (27
//! of 120 in 80 s, measured 2026-12-06). The 3 nodes of 2 cpus hold 20 such jobs at a time, so
//! about 100 wait in mpiswarm's queue (phase Pending) while the agents
//! launch: the offer layer offers an agent to no one while
//! `--agent-launch-backlog` of its tasks are launched and not yet started.
//!
//! All 120 must succeed with no restart counted. The case prints its wall
//! time, the jobs per second from the apply to the last job's end, the
//! machine's load, and how often the offer layer held an agent back.

use std::time::{Duration, Instant};

use mpiswarm_e2e::{Cluster, Job, wait::POLL};

const JOBS: usize = 120;
const RANKS: u32 = 2;
const RANK_CPUS: f64 = 0.1;
/// 120 jobs at 20 a time, each some seconds of launch and MPI: about 150 s
/// on a quiet machine (0.83 jobs/s measured by hand at 964ba3f, one role).
const DEADLINE: Duration = Duration::from_secs(900);

fn name(i: usize) -> String {
    let role = if i % 3 == 2 { "batch" } else { "mpi" };
    format!("e2e-burst-{role}-{i:03}")
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn hundred_twenty_jobs_in_one_apply(cluster: &Cluster) {
    let manifests: Vec<String> = (0..JOBS)
        .map(|i| {
            let name = name(i);
            let role = if name.contains("-batch-") { "batch" } else { "mpi" };
            Job::pi(&name, RANKS, RANK_CPUS, 200_000).profile("network").role(role).backoff_limit(0).manifest()
        })
        .collect();
    let holds_before = backlog_holds(cluster);
    let started = Instant::now();
    cluster.apply(&manifests.join("\n"));
    let applied = started.elapsed().as_secs_f64();
    let (mut peak_pending, mut loads) = (0usize, Vec::new());
    let finished = loop {
        assert!(started.elapsed() < DEADLINE, "{JOBS} jobs did not end within {DEADLINE:?}");
        let listed: serde_json::Value =
            serde_json::from_str(&cluster.kubectl(&["get", "mpijob", "-o", "json"])).expect("kubectl get -o json");
        let jobs: Vec<serde_json::Value> = listed["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|j| j["metadata"]["name"].as_str().is_some_and(|n| n.starts_with("e2e-burst-")))
            .cloned()
            .collect();
        let phase = |j: &serde_json::Value| j["status"]["phase"].as_str().unwrap_or("Pending").to_owned();
        peak_pending = peak_pending.max(jobs.iter().filter(|j| phase(j) == "Pending").count());
        loads.push(load_average());
        let failed: Vec<String> = jobs
            .iter()
            .filter(|j| phase(j) == "Failed")
            .map(|j| format!("{}: {}", j["metadata"]["name"], j["status"]["message"]))
            .collect();
        assert!(failed.is_empty(), "{} jobs failed: {failed:?}", failed.len());
        if jobs.len() == JOBS && jobs.iter().all(|j| phase(j) == "Succeeded") {
            break jobs;
        }
        std::thread::sleep(POLL);
    };
    let took = started.elapsed().as_secs_f64();
    let restarted: Vec<String> = finished
        .iter()
        .filter(|j| j["status"]["restarts"].as_i64().unwrap_or(0) != 0)
        .map(|j| format!("{}: {} restarts", j["metadata"]["name"], j["status"]["restarts"]))
        .collect();
    assert!(restarted.is_empty(), "jobs restarted in the burst: {restarted:?}");
    let holds = backlog_holds(cluster) - holds_before;
    eprintln!(
        "burst: {JOBS} jobs of {RANKS} x {RANK_CPUS} cpu in {took:.1} s ({:.2} jobs/s; the apply took {applied:.1} s), \
         all Succeeded, no restart; at most {peak_pending} Pending at once; the offer layer held a backlogged agent \
         back {holds} times; load average (1, 5, 15 min) first {}, last {}",
        JOBS as f64 / took,
        loads.first().map_or("?", String::as_str),
        loads.last().map_or("?", String::as_str),
    );
    let names: Vec<String> = (0..JOBS).map(name).collect();
    cluster.delete_jobs(&names.iter().map(String::as_str).collect::<Vec<_>>());
}

/// How many times the offer layer passed an agent over as behind on its launches.
fn backlog_holds(cluster: &Cluster) -> i64 {
    let metrics = cluster.master_metrics().unwrap_or_else(|e| panic!("{e}"));
    metrics["allocator/launch_backlog_holds"].as_f64().unwrap_or_else(|| panic!("no backlog metric: {metrics}")) as i64
}
