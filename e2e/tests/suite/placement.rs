//! Placement on 3 nodes of 2 cpus, ranks of 0.45 cpu and the default
//! 0.1-cpu launcher: each case runs real MPI (stack/images/pi.c) and compares
//! where Swarm ran the tasks with the MpiJob's `status.placement`.

use std::time::Duration;

use mpiswarm_e2e::{Cluster, Job};

/// One job from apply to its end, launch and MPI start-up included.
const JOB_DEADLINE: Duration = Duration::from_secs(300);
const RANK_CPUS: f64 = 0.45;
/// Darts for pi: well under a second of work per rank.
const SAMPLES: u64 = 20_000_000;
/// How long a waiting job is watched for a partial gang.
const WATCH: Duration = Duration::from_secs(10);

/// Runs `job` to its end; it must succeed with Swarm's placement equal to
/// its status and to `expected` (ranks per node, largest first).
fn runs_as(cluster: &Cluster, job: Job, expected: &[i64]) -> mpiswarm_e2e::Watched {
    let uid = cluster.submit(&job);
    let watched = cluster.watch_job(&job.name, &uid, JOB_DEADLINE);
    assert_eq!(watched.status.phase(), "Succeeded", "{}: {}", job.name, watched.status.0["status"]);
    watched.assert_placement(RANK_CPUS, expected);
    watched
}

pub fn network_packs(cluster: &Cluster) {
    // 4 x 0.45 + 0.1 = 1.9 of a node's 2 cpus: 2 nodes are the fewest.
    let job = Job::pi("e2e-network", 8, RANK_CPUS, SAMPLES).profile("network");
    let w = runs_as(cluster, job, &[4, 4]);
    assert_eq!(w.status.0["status"]["placement"]["policy"], "pack", "{}", w.status.0["status"]["placement"]);
}

pub fn cpu_spreads(cluster: &Cluster) {
    let job = Job::pi("e2e-cpu", 8, RANK_CPUS, SAMPLES).profile("cpu");
    let w = runs_as(cluster, job, &[3, 3, 2]);
    assert_eq!(w.status.0["status"]["placement"]["policy"], "spread", "{}", w.status.0["status"]["placement"]);
}

pub fn spread_capped_fits(cluster: &Cluster) {
    let job = Job::pi("e2e-spread-6", 6, RANK_CPUS, SAMPLES).policy("spread").max_ranks_per_node(2);
    runs_as(cluster, job, &[2, 2, 2]);
}

pub fn spread_capped_refused(cluster: &Cluster) {
    let job = Job::pi("e2e-spread-7", 7, RANK_CPUS, SAMPLES).policy("spread").max_ranks_per_node(2);
    let uid = cluster.submit(&job);
    let status = cluster.wait_job(&job.name, JOB_DEADLINE, "Unschedulable", |s| {
        s.condition("Unschedulable").is_some_and(|(status, _, _)| status == "True")
    });
    let (_, reason, message) = status.condition("Unschedulable").unwrap_or_default();
    assert!(message.contains("maxRanksPerNode 2"), "the cap is named: {reason}: {message}");
    assert!(status.placement().is_empty(), "nothing placed: {}", status.0["status"]);
    let tasks = cluster.swarm().job_tasks(&uid).unwrap_or_else(|e| panic!("{e}"));
    assert!(tasks.is_empty(), "no task of an unschedulable job on Swarm: {tasks:?}");
    cluster.delete_jobs(&[&job.name]);
}

pub fn node_selector(cluster: &Cluster) {
    // rack-1 is node1 and node3; spread without the selector would use all three.
    let job = Job::pi("e2e-rack-1", 4, RANK_CPUS, SAMPLES).profile("cpu").node_selector("rack", "rack-1");
    let w = runs_as(cluster, job, &[2, 2]);
    let nodes: Vec<String> = w.status.placement().into_keys().collect();
    assert_eq!(nodes, ["node1", "node3"], "only rack-1's nodes");
    assert!(w.launcher_nodes().iter().all(|n| n != "node2"), "the launcher is in rack-1 too: {:?}", w.launcher_nodes());
}

pub fn overfill_waits(cluster: &Cluster) {
    // Each needs 8 x 0.45 + 0.1 = 3.7 of the 6 cpus, 4 ranks a node at most:
    // the second cannot start beside the first. The first is held until the
    // second has been seen waiting.
    let first = Job::held("e2e-fill-1", 8, RANK_CPUS, SAMPLES).profile("network");
    let second = Job::pi("e2e-fill-2", 8, RANK_CPUS, SAMPLES).profile("network");
    let first_uid = cluster.submit(&first);
    cluster.wait_job(&first.name, JOB_DEADLINE, "Running", |s| s.phase() == "Running");
    let second_uid = cluster.submit(&second);
    // For WATCH, sampled at every poll: the second has no task anywhere (no
    // partial gang) and waits, while the first keeps running.
    let start = std::time::Instant::now();
    let mut samples = 0;
    while start.elapsed() < WATCH {
        let tasks = cluster.swarm().tasks().unwrap_or_else(|e| panic!("{e}"));
        let of_second: Vec<_> = tasks.iter().filter(|t| t.job_uid == second_uid).collect();
        assert!(of_second.is_empty(), "the second job has tasks while the first runs: {of_second:?}");
        assert!(tasks.iter().any(|t| t.job_uid == first_uid && t.state == "running"), "the first job runs: {tasks:?}");
        let waiting = cluster.job(&second.name).expect("the second job");
        assert!(matches!(waiting.phase(), "Pending" | "Scheduling"), "the second job waits: {}", waiting.0["status"]);
        samples += 1;
        std::thread::sleep(mpiswarm_e2e::wait::POLL);
    }
    eprintln!("the second job waited whole through {samples} samples of Swarm");
    cluster.release(&first_uid);
    let watched = cluster.watch_jobs(&[(&first.name, &first_uid), (&second.name, &second_uid)], JOB_DEADLINE);
    for w in &watched {
        assert_eq!(w.status.phase(), "Succeeded", "{}", w.status.0["status"]);
        w.assert_placement(RANK_CPUS, &[4, 4]);
    }
    let (ended, started) = (watched[0].status.completion_time(), watched[1].status.start_time());
    assert!(started >= ended, "the second started ({started}) when the first had ended ({ended})");
}
