//! Deleting a running job that spans the 3 nodes: `kubectl delete` (which
//! waits) returns only once no node lists anything of it, checked right
//! after it returns, with no wait (see mpiswarm_e2e::leftovers).

use std::time::Duration;

use mpiswarm_e2e::{Cluster, Job};

const START_DEADLINE: Duration = Duration::from_secs(180);

pub fn delete_returns_when_nothing_is_left(cluster: &Cluster) {
    // 2 x 0.45 a node, spread: every node has ranks, and the job's overlay,
    // secret and config are used on all three.
    let job = Job::held("e2e-teardown", 6, 0.45, 1_000).policy("spread").max_ranks_per_node(2);
    cluster.submit(&job);
    cluster.wait_job(&job.name, START_DEADLINE, "Running", |s| s.phase() == "Running");
    cluster.delete_jobs(&[&job.name]);
    let left = mpiswarm_e2e::leftovers::leftovers(cluster);
    assert!(left.is_empty(), "left right after `kubectl delete` returned: {left:?}");
}
