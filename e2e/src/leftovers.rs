//! What a finished test may not leave behind, checked on every node of a
//! [`Cluster`]: no service, secret or config labelled by mpiswarm's agents
//! (cluster-wide objects, so the manager lists them all), and on each node's
//! own engine no such network and no running container at all; while `up`
//! serves, the offer layer holds no task that has not ended (its resources
//! are all free again, so the next test starts on an idle cluster).

use std::time::Duration;

use crate::cluster::Cluster;
use crate::swarm::MANAGED_BY;
use crate::wait;

/// Removing a job's services, then its overlay, takes the agents a few
/// seconds after the job ends; Swarm stops the containers after that.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// Everything of mpiswarm's still on the cluster, one line per object; empty when clean.
pub fn leftovers(cluster: &Cluster) -> Vec<String> {
    let filter = format!("label={MANAGED_BY}");
    let mut left = Vec::new();
    for kind in ["service", "secret", "config"] {
        let out = cluster.exec(cluster.manager(), &["docker", kind, "ls", "-q", "--filter", &filter]);
        let listed = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            left.push(format!("{kind}s cannot be listed: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        left.extend(listed.split_whitespace().map(|id| format!("{kind} {id}")));
    }
    for node in cluster.nodes() {
        let networks = cluster.node_docker(node, &["network", "ls", "-q", "--filter", &filter]);
        left.extend(networks.split_whitespace().map(|id| format!("network {id} on {}", node.hostname)));
        let containers = cluster.node_docker(node, &["ps", "-q"]);
        left.extend(containers.split_whitespace().map(|id| format!("running container {id} on {}", node.hostname)));
    }
    if cluster.up_serves() {
        left.extend(live_offer_tasks(cluster));
    }
    left
}

/// Mesos' terminal task states: a task in one of them holds no resources.
const TERMINAL: [&str; 8] = [
    "TASK_FINISHED",
    "TASK_FAILED",
    "TASK_KILLED",
    "TASK_ERROR",
    "TASK_LOST",
    "TASK_DROPPED",
    "TASK_GONE",
    "TASK_GONE_BY_OPERATOR",
];

/// The tasks the offer layer books as not yet ended, one line each.
fn live_offer_tasks(cluster: &Cluster) -> Vec<String> {
    let state = match cluster.master_state() {
        Ok(state) => state,
        Err(e) => return vec![format!("the offer layer's state cannot be read: {e}")],
    };
    let frameworks = state["frameworks"].as_array().into_iter().flatten();
    frameworks
        .flat_map(|f| f["tasks"].as_array().into_iter().flatten())
        .filter(|t| !TERMINAL.contains(&t["state"].as_str().unwrap_or_default()))
        .map(|t| format!("task {} {} in the offer layer", t["id"].as_str().unwrap_or("?"), t["state"]))
        .collect()
}

/// Waits (at most [`DEADLINE`]) until nothing of mpiswarm's is left on any node.
pub fn assert_nothing_left(cluster: &Cluster) {
    wait::until(DEADLINE, "nothing of mpiswarm's left on any node", || {
        let left = leftovers(cluster);
        if left.is_empty() { Ok(()) } else { Err(left.join(", ")) }
    });
}
