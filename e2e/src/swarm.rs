//! Swarm's own record of mpiswarm's tasks, read from the manager's engine
//! (`/tasks`, `/nodes`): which node each task of a job is on, in which
//! state, with what reservation. The suite compares this truth with what
//! the MpiJob's status claims; nothing here trusts mpiswarm's word.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Mutex;

use serde_json::Value;

use crate::engine;

/// Label the agent puts on everything it creates (agent/src/labels.rs).
pub const MANAGED_BY: &str = "mpiswarm.io/managed-by=mpiswarm-agent";
/// Labels the controller sets on its tasks and the agent copies through.
pub const JOB_UID: &str = "mpiswarm.io/job-uid";
pub const JOB_NAME: &str = "mpiswarm.io/job-name";
pub const ROLE: &str = "mpiswarm.io/role";
pub const GENERATION: &str = "mpiswarm.io/gang-generation";

/// One Swarm task of mpiswarm's, as the manager records it.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub id: String,
    pub service_id: String,
    /// Hostname of the node it is assigned to (empty while unassigned).
    pub node: String,
    /// Swarm's observed state: `pending`, `running`, `complete`, `failed`...
    pub state: String,
    pub desired_state: String,
    /// Reserved cpus (the service's `Reservations.NanoCPUs`).
    pub cpus: f64,
    pub job_uid: String,
    pub job_name: String,
    /// `worker` or `launcher`.
    pub role: String,
    pub generation: String,
    /// Swarm's error for a failed or rejected task.
    pub error: String,
    pub exit_code: Option<i64>,
}

impl Task {
    /// Swarm has the task on a node and has not yet let it go: it holds its
    /// reservation there (assigned up to running).
    pub fn holds_node(&self) -> bool {
        matches!(self.state.as_str(), "assigned" | "accepted" | "preparing" | "ready" | "starting" | "running")
    }

    fn from_json(t: &Value, hostnames: &HashMap<String, String>) -> Option<Task> {
        let labels = &t["Spec"]["ContainerSpec"]["Labels"];
        let label = |k: &str| labels[k].as_str().unwrap_or_default().to_owned();
        let (key, value) = MANAGED_BY.split_once('=')?;
        if labels[key] != value {
            return None;
        }
        let node_id = t["NodeID"].as_str().unwrap_or_default();
        Some(Task {
            id: t["ID"].as_str()?.to_owned(),
            service_id: t["ServiceID"].as_str().unwrap_or_default().to_owned(),
            node: hostnames.get(node_id).cloned().unwrap_or_default(),
            state: t["Status"]["State"].as_str().unwrap_or_default().to_owned(),
            desired_state: t["DesiredState"].as_str().unwrap_or_default().to_owned(),
            cpus: t["Spec"]["Resources"]["Reservations"]["NanoCPUs"].as_f64().unwrap_or(0.0) / 1e9,
            job_uid: label(JOB_UID),
            job_name: label(JOB_NAME),
            role: label(ROLE),
            generation: label(GENERATION),
            error: t["Status"]["Err"].as_str().unwrap_or_default().to_owned(),
            exit_code: t["Status"]["ContainerStatus"]["ExitCode"].as_i64(),
        })
    }
}

/// The manager's engine, through the socket `up --nodes` gives it in the data dir.
pub struct Swarm {
    socket: PathBuf,
    /// Node id -> hostname; refreshed when a task names an unknown id.
    hostnames: Mutex<HashMap<String, String>>,
}

impl Swarm {
    pub fn new(socket: PathBuf) -> Swarm {
        Swarm { socket, hostnames: Mutex::new(HashMap::new()) }
    }

    /// Hostname by node id, as the manager lists its nodes.
    fn nodes(&self) -> Result<HashMap<String, String>, String> {
        let nodes = engine::get(&self.socket, "/nodes")?;
        Ok(nodes
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| Some((n["ID"].as_str()?.to_owned(), n["Description"]["Hostname"].as_str()?.to_owned())))
            .collect())
    }

    /// Every task of mpiswarm's that Swarm knows now.
    pub fn tasks(&self) -> Result<Vec<Task>, String> {
        let tasks = engine::get(&self.socket, "/tasks")?;
        let tasks = tasks.as_array().cloned().unwrap_or_default();
        let mut hostnames = self.hostnames.lock().unwrap_or_else(|e| e.into_inner());
        let unknown =
            tasks.iter().filter_map(|t| t["NodeID"].as_str()).any(|id| !id.is_empty() && !hostnames.contains_key(id));
        if unknown {
            *hostnames = self.nodes()?;
        }
        Ok(tasks.iter().filter_map(|t| Task::from_json(t, &hostnames)).collect())
    }

    /// The tasks of one job (by uid).
    pub fn job_tasks(&self, uid: &str) -> Result<Vec<Task>, String> {
        Ok(self.tasks()?.into_iter().filter(|t| t.job_uid == uid).collect())
    }
}

/// Reserved cpus per node of the tasks that hold one (see [`Task::holds_node`]).
pub fn held_cpus(tasks: &[Task]) -> BTreeMap<String, f64> {
    let mut per_node = BTreeMap::new();
    for t in tasks.iter().filter(|t| t.holds_node()) {
        *per_node.entry(t.node.clone()).or_insert(0.0) += t.cpus;
    }
    per_node
}

/// Ranks per node of a job's workers, from their reservations: a worker
/// hosting k ranks of `rank_cpus` reserves k x rank_cpus.
pub fn worker_ranks(tasks: &[Task], rank_cpus: f64) -> BTreeMap<String, i64> {
    let mut per_node = BTreeMap::new();
    for t in tasks.iter().filter(|t| t.role == "worker") {
        *per_node.entry(t.node.clone()).or_insert(0) += (t.cpus / rank_cpus).round() as i64;
    }
    per_node
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn task(node: &str, state: &str, role: &str, nano: i64) -> Value {
        json!({"ID": "t", "ServiceID": "s", "NodeID": node, "DesiredState": "running",
               "Status": {"State": state},
               "Spec": {"Resources": {"Reservations": {"NanoCPUs": nano}},
                        "ContainerSpec": {"Labels": {"mpiswarm.io/managed-by": "mpiswarm-agent",
                                                     "mpiswarm.io/job-uid": "u1", "mpiswarm.io/role": role}}}})
    }

    #[test]
    fn tasks_are_read_with_their_node_reservation_and_job() {
        let names: HashMap<String, String> = [("n1".to_owned(), "node1".to_owned())].into();
        let t = Task::from_json(&task("n1", "running", "worker", 900_000_000), &names).unwrap();
        assert_eq!((t.node.as_str(), t.cpus, t.job_uid.as_str(), t.role.as_str()), ("node1", 0.9, "u1", "worker"));
        let mut foreign = task("n1", "running", "worker", 1);
        foreign["Spec"]["ContainerSpec"]["Labels"] = json!({"other": "x"});
        assert_eq!(Task::from_json(&foreign, &names), None, "tasks of others are not mpiswarm's");
    }

    #[test]
    fn only_tasks_that_hold_a_node_count_and_ranks_come_from_reservations() {
        let names: HashMap<String, String> =
            [("a".to_owned(), "node1".to_owned()), ("b".to_owned(), "node2".to_owned())].into();
        let tasks: Vec<Task> = [
            task("a", "running", "worker", 1_800_000_000),
            task("a", "running", "launcher", 100_000_000),
            task("b", "starting", "worker", 1_350_000_000),
            task("b", "complete", "worker", 900_000_000),
        ]
        .iter()
        .map(|t| Task::from_json(t, &names).unwrap())
        .collect();
        let held = held_cpus(&tasks);
        assert!((held["node1"] - 1.9).abs() < 1e-9 && (held["node2"] - 1.35).abs() < 1e-9, "{held:?}");
        let live: Vec<Task> = tasks.iter().filter(|t| t.holds_node()).cloned().collect();
        assert_eq!(worker_ranks(&live, 0.45), BTreeMap::from([("node1".into(), 4), ("node2".into(), 3)]));
    }
}
