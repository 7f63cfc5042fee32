//! Load: 100 small MpiJobs applied at once (one `kubectl apply` of 100 JSON documents),
//! 67 under role `mpi` (weight 2) and 33 under `batch` (weight 1), in the
//! weights' proportion, so that both queues empty at about the same time and
//! both roles wait for most of the run (with 50 and 50, `mpi` ran out of
//! waiting jobs halfway and only that half could be counted). All must
//! succeed; Swarm is sampled at every poll while they run.
//!
//! - Capacity: in every sample, the cpus reserved by the tasks Swarm holds
//!   on a node (assigned up to running) never exceed what that node's agent
//!   advertises to the offer layer.
//! - Fair shares: a sample counts while both roles have work waiting: a job
//!   of each role with no task on Swarm in this sample and still `Pending`
//!   when `kubectl get` lists the jobs right after it (phases only move on,
//!   so Pending then was Pending at the sample; `Scheduling` means placed,
//!   no longer waiting). Each counted sample reads two shares: the cpus each
//!   role holds in the offer layer's allocator (`/master/state` roles:
//!   offered or used, what weighted DRF compares) and the cpus its jobs'
//!   tasks hold in Swarm. Over the counted samples (equally spaced, so a
//!   time average) both series must follow the weights 2:1 within a bound
//!   derived from the run (`mpiswarm_e2e::shares`): half of what one offer
//!   moves (one job's cpus: offers are whole) plus the mean's sampling
//!   noise, estimated by batch means, at a 0.1% false-failure rate; a run
//!   too noisy to tell 2:1 from 1:1 fails as undecided. The allocator's
//!   series is what weighted DRF decided; Swarm's is what runs, one launch
//!   later.
//!
//! Why both: measured on Swarm alone the ratio failed CI at 1.46 and at
//! 2.50 (1-cpu jobs, a fixed bound of 2 +- 20%). Offers are whole (every
//! free cpu of an agent goes to the one role DRF picks, as in Mesos), and
//! jobs started together on a node end together, so a role behind its
//! share can be handed a whole node and overshoot: a low run spent 36 of
//! 130 samples at 3:3 and 18 at 5:1. Smaller jobs make each step smaller,
//! and the derived bound widens with a run's own noise instead of failing
//! it, while a run that is really off (or says nothing) still fails.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use mpiswarm_e2e::shares::{Judged, Verdict, Weights};
use mpiswarm_e2e::{Cluster, Job, swarm::held_cpus, wait::POLL};

const JOBS: usize = 100;
/// Every third job is a `batch` job, the others `mpi` ones: 33 and 67.
fn role_of_index(i: usize) -> &'static str {
    if i % 3 == 2 { "batch" } else { "mpi" }
}
/// 100 jobs of a quarter cpu, 24 at a time, each some seconds of launch and MPI.
const DEADLINE: Duration = Duration::from_secs(900);
/// Each job: 2 ranks of 0.075 cpu plus the 0.1-cpu launcher, a quarter cpu
/// in all, so a node holds 8 jobs and the 3 nodes 24 (16 mpi, 8 batch at 2:1).
/// Offers are whole (everything free on an agent goes to one role, as in
/// Mesos), so shares move in steps of what one offer holds, and every job
/// ramps up and down in Swarm as it starts and ends: with 1-cpu jobs (6 at
/// a time) one step tipped 4:2 into 5:1 or 3:3, and the time-averaged ratio
/// swung between 1.76 and 2.52 from run to run; smaller jobs make each step
/// and ramp a smaller part of a role's share. (Quarter-cpu jobs lost 8 of
/// 100 in a `.ci/run` once: Swarm called node2 down, "heartbeat failure",
/// for a moment, and its agent lost the tasks at that first reading. Agents
/// now wait for `--node-down-seconds`, 3 s, before a node is lost. Then ten
/// runs in a row on one quiet cluster (`suite load --repeat 10`,
/// 2026-12-06) lost no job: 142 to 190 s each; allocator ratio 1.91 to
/// 2.12, Swarm's 1.94 to 2.16, against the bound 1.6 to 2.4. Swarm called
/// no node down in those runs, so they did not exercise the 3 s. With a
/// 1 s Swarm heartbeat one run in six then failed 12 jobs: Swarm's manager,
/// at a load average near 20, called two live nodes down and shut their
/// tasks down itself, whatever the agents did; `up --nodes` now forms its
/// swarm with a 3 s heartbeat. Ten runs in a row of that code, while a
/// release build ran beside them (load average up to 19 on 2 cores,
/// `suite load --repeat 10`, 2026-12-07): 10 of 10 passed, no job lost,
/// 183 to 219 s each; allocator ratio 1.86 to 2.15 (median 1.99), Swarm's
/// 1.79 to 2.27, Swarm within 7% of the allocator in every run: the
/// widest run is 0.15 from 2, the bound allows 0.4.)
const RANKS: u32 = 2;
const RANK_CPUS: f64 = 0.075;
/// The weights `up` is given for this suite (mpi=2, batch=1), and the step
/// an allocation moves: one job's cpus, its ranks' and the default launcher's.
const WEIGHTS: Weights =
    Weights { a: 2.0, b: 1.0, granule: RANKS as f64 * RANK_CPUS + mpiswarm_policy::DEFAULT_LAUNCHER.cpus };

/// The load's MpiJobs as `kubectl get` lists them now.
fn load_jobs(cluster: &Cluster) -> Vec<serde_json::Value> {
    let listed: serde_json::Value =
        serde_json::from_str(&cluster.kubectl(&["get", "mpijob", "-o", "json"])).expect("kubectl get -o json");
    listed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|j| j["metadata"]["name"].as_str().and_then(role_of).is_some())
        .cloned()
        .collect()
}

fn role_of(name: &str) -> Option<&'static str> {
    ["mpi", "batch"].into_iter().find(|r| name.starts_with(&format!("e2e-load-{r}-")))
}

pub fn hundred_jobs_under_weights_2_to_1(cluster: &Cluster) {
    let advertised = cluster.advertised_cpus();
    assert_eq!(advertised.len(), cluster.nodes().len(), "every node's agent advertises: {advertised:?}");
    let mut jobs = Vec::new();
    for i in 0..JOBS {
        let role = role_of_index(i);
        let job =
            Job::pi(&format!("e2e-load-{role}-{i:02}"), RANKS, RANK_CPUS, 2_000_000).profile("network").role(role);
        jobs.push(job.manifest());
    }
    // One apply of a stream of 100 JSON documents (kubectl reads a stream
    // that starts with `{` as JSON, without `---`).
    let started = Instant::now();
    cluster.apply(&jobs.join("\n"));

    let (mut peak, mut samples) = (BTreeMap::<String, f64>::new(), 0);
    // Per counted sample: (mpi, batch) cpus held in Swarm, and as the allocator has them.
    let (mut counted, mut allocated) = (Vec::<(f64, f64)>::new(), Vec::<(f64, f64)>::new());
    let finished = loop {
        assert!(started.elapsed() < DEADLINE, "100 jobs did not end within {DEADLINE:?}");
        let tasks = cluster.swarm().tasks().unwrap_or_else(|e| panic!("{e}"));
        let by_role = cluster.allocated_cpus_by_role();
        // Listed after the sample, never before: a listing older than the
        // sample counted jobs the controller had placed since (the last
        // jobs of a role, launching, seen as waiting while the other role
        // rightly took the nodes: 5.5:0.5 for seconds, ratio 2.44).
        let items = &load_jobs(cluster);
        samples += 1;
        for (node, cpus) in held_cpus(&tasks) {
            let limit = advertised.get(&node).copied().unwrap_or(0.0);
            assert!(cpus <= limit + 1e-6, "{node} holds {cpus} cpus of tasks, its agent advertises {limit}: {tasks:?}");
            let p = peak.entry(node).or_insert(0.0);
            *p = p.max(cpus);
        }
        let role_by_uid: HashMap<&str, &str> = items
            .iter()
            .filter_map(|j| Some((j["metadata"]["uid"].as_str()?, role_of(j["metadata"]["name"].as_str()?)?)))
            .collect();
        // Waiting: no task on Swarm at the sample and Pending after it.
        let waiting = |role: &str| {
            items.iter().any(|j| {
                let uid = j["metadata"]["uid"].as_str().unwrap_or_default();
                role_of(j["metadata"]["name"].as_str().unwrap_or_default()) == Some(role)
                    && j["status"]["phase"].as_str().unwrap_or("Pending") == "Pending"
                    && !tasks.iter().any(|t| t.job_uid == uid)
            })
        };
        if waiting("mpi") && waiting("batch") {
            let held = |role: &str| {
                tasks
                    .iter()
                    .filter(|t| t.holds_node() && role_by_uid.get(t.job_uid.as_str()) == Some(&role))
                    .map(|t| t.cpus)
                    .sum::<f64>()
            };
            counted.push((held("mpi"), held("batch")));
            let cpus = |role: &str| by_role.get(role).copied().unwrap_or(0.0);
            allocated.push((cpus("mpi"), cpus("batch")));
        }
        let done =
            items.iter().filter(|j| matches!(j["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))).count();
        if done == JOBS {
            break items.clone();
        }
        std::thread::sleep(POLL);
    };
    let took = started.elapsed().as_secs_f64();
    let failed: Vec<String> = finished
        .iter()
        .filter(|j| j["status"]["phase"] != "Succeeded")
        .map(|j| format!("{}: {}", j["metadata"]["name"], j["status"]["message"]))
        .collect();
    assert!(failed.is_empty(), "{} of 100 jobs failed: {failed:?}", failed.len());

    let (swarm, allocator) = (Judged::of(&counted, WEIGHTS), Judged::of(&allocated, WEIGHTS));
    eprintln!(
        "load: 100 jobs in {took:.1} s; {samples} samples of Swarm; peak cpus held per node {peak:?} \
         (advertised {advertised:?}); {} samples with both roles waiting; mpi:batch cpus allocated by the \
         offer layer {allocator}; held in Swarm {swarm}",
        counted.len(),
    );
    for (what, judged) in [("allocated by the offer layer", &allocator), ("held in Swarm", &swarm)] {
        match judged.verdict() {
            Verdict::Follows => {}
            Verdict::Off(why) => panic!("mpi:batch cpus {what} do not follow the weights 2:1 while both wait: {why}"),
            Verdict::Undecided(why) => {
                panic!("mpi:batch cpus {what}: the run cannot tell whether they follow 2:1: {why}")
            }
        }
    }
    let names: Vec<String> =
        finished.iter().filter_map(|j| j["metadata"]["name"].as_str().map(str::to_owned)).collect();
    cluster.delete_jobs(&names.iter().map(String::as_str).collect::<Vec<_>>());
}
