//! Load: 100 small MpiJobs applied at once (one `kubectl apply` of 100 JSON documents),
//! half under role `mpi` (weight 2), half under `batch` (weight 1). All must
//! succeed; Swarm is sampled at every poll while they run.
//!
//! - Capacity: in every sample, the cpus reserved by the tasks Swarm holds
//!   on a node (assigned up to running) never exceed what that node's agent
//!   advertises to the offer layer.
//! - Fair shares: a sample counts while both roles have work waiting (a job
//!   of each role Pending when last listed by `kubectl get`, every 3 s, and
//!   with no task on Swarm in this sample); the
//!   running share of a role is the cpus its jobs' tasks hold in Swarm. Over
//!   the counted samples (equally spaced, so this is a time average) the
//!   ratio sum(mpi cpus) / sum(batch cpus) must be 2 +- 20%.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use mpiswarm_e2e::{Cluster, Job, swarm::held_cpus, wait::POLL};

const JOBS_PER_ROLE: usize = 50;
/// 100 jobs of ~1 cpu, 6 at a time, each a few seconds of launch and MPI.
const DEADLINE: Duration = Duration::from_secs(900);
/// Each job: 2 ranks of 0.45 cpu plus the 0.1-cpu launcher, 1 cpu in all.
const RANK_CPUS: f64 = 0.45;
const WEIGHT_RATIO: f64 = 2.0;
const TOLERANCE: f64 = 0.2;
/// Counted samples needed for the ratio to mean anything.
const MIN_SAMPLES: usize = 10;
/// How often the MpiJobs are listed (Swarm is sampled at every poll).
const LIST_EVERY: Duration = Duration::from_secs(3);

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
    for i in 0..JOBS_PER_ROLE {
        for role in ["mpi", "batch"] {
            let job =
                Job::pi(&format!("e2e-load-{role}-{i:02}"), 2, RANK_CPUS, 2_000_000).profile("network").role(role);
            jobs.push(job.manifest());
        }
    }
    // One apply of a stream of 100 JSON documents (kubectl reads a stream
    // that starts with `{` as JSON, without `---`; a `kind: List` fails its
    // client-side validation against the embedded API server: see the README).
    let started = Instant::now();
    cluster.apply(&jobs.join("\n"));

    let (mut peak, mut counted, mut samples) = (BTreeMap::<String, f64>::new(), Vec::<(f64, f64)>::new(), 0);
    let mut listed: Option<(Instant, Vec<serde_json::Value>)> = None;
    let finished = loop {
        assert!(started.elapsed() < DEADLINE, "100 jobs did not end within {DEADLINE:?}");
        let tasks = cluster.swarm().tasks().unwrap_or_else(|e| panic!("{e}"));
        // Swarm at every poll (one GET); the MpiJobs every LIST_EVERY, as
        // kubectl decoding 100 jobs costs far more than the sample itself.
        if listed.as_ref().is_none_or(|(at, _)| at.elapsed() >= LIST_EVERY) {
            listed = Some((Instant::now(), load_jobs(cluster)));
        }
        let items = &listed.as_ref().expect("listed above").1;
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
        // Waiting: not started when last listed, and no task on Swarm now.
        let waiting = |role: &str| {
            items.iter().any(|j| {
                let uid = j["metadata"]["uid"].as_str().unwrap_or_default();
                role_of(j["metadata"]["name"].as_str().unwrap_or_default()) == Some(role)
                    && matches!(j["status"]["phase"].as_str().unwrap_or("Pending"), "Pending" | "Scheduling")
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
        }
        let done =
            items.iter().filter(|j| matches!(j["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))).count();
        if done == 2 * JOBS_PER_ROLE {
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

    let (mpi, batch): (f64, f64) = counted.iter().fold((0.0, 0.0), |(m, b), (x, y)| (m + x, b + y));
    let ratios: Vec<f64> = counted.iter().filter(|(_, b)| *b > 0.0).map(|(m, b)| m / b).collect();
    let (lo, hi) = ratios.iter().fold((f64::MAX, 0.0f64), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
    eprintln!(
        "load: 100 jobs in {took:.1} s; {samples} samples of Swarm; peak cpus held per node {peak:?} \
         (advertised {advertised:?}); {} samples with both roles waiting: mean cpus mpi {:.2} batch {:.2}, \
         ratio {:.2} (per sample {lo:.2}..{hi:.2})",
        counted.len(),
        mpi / counted.len().max(1) as f64,
        batch / counted.len().max(1) as f64,
        mpi / batch,
    );
    assert!(counted.len() >= MIN_SAMPLES, "only {} samples had both roles waiting", counted.len());
    let ratio = mpi / batch;
    assert!(
        (ratio - WEIGHT_RATIO).abs() <= WEIGHT_RATIO * TOLERANCE,
        "running shares mpi:batch {ratio:.2} while both wait, weights 2:1 +-20%"
    );
    let names: Vec<String> =
        finished.iter().filter_map(|j| j["metadata"]["name"].as_str().map(str::to_owned)).collect();
    cluster.delete_jobs(&names.iter().map(String::as_str).collect::<Vec<_>>());
}
