//! Which task's output a read means, and where its agent serves it: the
//! task id follows from the job's uid, gang generation and the asked role
//! ([`crate::names::TaskName`], the ids the controller launched), the agent
//! from the job's placement (the launcher runs on the first placed node),
//! and the agent's address from the master's `/master/state` (Mesos' `pid`,
//! `slave(1)@IP:PORT`). Pure.

use kube::ResourceExt;
use mpiswarm_crds::MpiJob;

use crate::logs::error::LogError;
use crate::logs::request::Stream;
use crate::names::{TaskName, TaskRole};

/// One task of a placed job, and the agent that holds its output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacedTask {
    pub task: TaskName,
    pub agent_id: String,
    pub node: String,
}

impl PlacedTask {
    /// The file's path in the agent's `/files` (as Mesos names a sandbox file).
    pub fn path(&self, framework_id: &str, stream: Stream) -> String {
        format!("/tasks/{framework_id}/{}/{}", self.task, stream.file())
    }
}

/// The task `role` of `job`'s current gang generation, or why there is none.
pub fn placed_task(job: &MpiJob, role: TaskRole) -> Result<PlacedTask, LogError> {
    let name = job.name_any();
    let uid = job.uid().ok_or_else(|| LogError::NoUid { job: name.clone() })?;
    let status = job.status.as_ref();
    let nodes = status.and_then(|s| s.placement.as_ref()).map(|p| p.nodes.as_slice()).unwrap_or_default();
    if nodes.is_empty() {
        return Err(LogError::NotPlaced { job: name, message: status.and_then(|s| s.message.clone()) });
    }
    let index = match role {
        TaskRole::Launcher => 0,
        TaskRole::Worker(i) => i as usize,
    };
    let node =
        nodes.get(index).ok_or(LogError::NoSuchWorker { job: name, worker: index as u32, workers: nodes.len() })?;
    let generation = status.and_then(|s| s.gang_generation).and_then(|g| u32::try_from(g).ok()).unwrap_or(0);
    Ok(PlacedTask {
        task: TaskName::new(&uid, generation, role),
        agent_id: node.agent_id.clone(),
        node: node.node.clone(),
    })
}

/// The base URL of agent `agent_id` in the master's state, reached with
/// the master's scheme (Mesos secures a cluster as a whole: an agent off
/// loopback serves HTTPS only).
pub fn agent_url(state: &serde_json::Value, master: &str, task: &PlacedTask) -> Result<String, LogError> {
    let agents = state["slaves"].as_array().or_else(|| state["agents"].as_array());
    let agent =
        agents.into_iter().flatten().find(|a| a["id"].as_str() == Some(task.agent_id.as_str())).ok_or_else(|| {
            LogError::UnknownAgent { master: master.to_owned(), agent: task.agent_id.clone(), node: task.node.clone() }
        })?;
    let pid = agent["pid"].as_str().unwrap_or_default();
    let address = pid.rsplit_once('@').map(|(_, a)| a).unwrap_or(pid);
    if address.is_empty() || address.contains('/') {
        return Err(LogError::AgentAddress { agent: task.agent_id.clone(), pid: pid.to_owned() });
    }
    let scheme = if master.starts_with("https://") { "https" } else { "http" };
    Ok(format!("{scheme}://{address}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const UID: &str = "0c5e7a1b-93f2-4d1e-8a77-2f0a9d1b3c4e";

    fn job(status: serde_json::Value) -> MpiJob {
        serde_json::from_value(json!({
            "apiVersion": "mpiswarm.io/v1alpha1", "kind": "MpiJob",
            "metadata": {"name": "pi", "namespace": "team-a", "uid": UID},
            "spec": {"image": "i", "command": ["x"], "ranks": 3, "resources": {"cpus": 0.5, "memory": "64Mi"}},
            "status": status,
        }))
        .unwrap()
    }

    fn placed() -> MpiJob {
        job(
            json!({"phase": "Running", "gangGeneration": 2, "placement": {"policy": "pack", "reason": "r", "nodeCount": 2,
            "nodes": [{"node": "n1", "agentId": "a1", "ranks": 2, "worker": "worker-0"},
                      {"node": "n2", "agentId": "a2", "ranks": 1, "worker": "worker-1"}]}}),
        )
    }

    #[test]
    fn the_launcher_is_on_the_first_node_and_worker_n_on_the_nth_of_the_current_generation() {
        let launcher = placed_task(&placed(), TaskRole::Launcher).unwrap();
        assert_eq!(launcher.task.to_string(), "mpijob-0c5e7a1b93f2-g2-launcher");
        assert_eq!((launcher.agent_id.as_str(), launcher.node.as_str()), ("a1", "n1"));
        let worker = placed_task(&placed(), TaskRole::Worker(1)).unwrap();
        assert_eq!(worker.task.to_string(), "mpijob-0c5e7a1b93f2-g2-worker-1");
        assert_eq!(worker.agent_id, "a2");
        assert_eq!(worker.path("fw-1", Stream::Stderr), "/tasks/fw-1/mpijob-0c5e7a1b93f2-g2-worker-1/stderr");
    }

    #[test]
    fn a_job_not_placed_or_a_worker_it_does_not_have_is_refused_saying_so() {
        let waiting = job(json!({"phase": "Pending", "message": "waiting for offers"}));
        let err = placed_task(&waiting, TaskRole::Launcher).unwrap_err();
        assert_eq!(err.to_string(), "MpiJob pi has not been placed yet (waiting for offers): it has no output");
        let err = placed_task(&placed(), TaskRole::Worker(2)).unwrap_err();
        assert!(matches!(err, LogError::NoSuchWorker { worker: 2, workers: 2, .. }), "{err}");
        let mut no_uid = placed();
        no_uid.metadata.uid = None;
        assert!(matches!(placed_task(&no_uid, TaskRole::Launcher), Err(LogError::NoUid { .. })));
    }

    #[test]
    fn the_agent_is_found_in_the_masters_state_with_the_masters_scheme() {
        let task = placed_task(&placed(), TaskRole::Worker(1)).unwrap();
        let state = json!({"slaves": [{"id": "a1", "pid": "slave(1)@10.0.0.1:5051"}, {"id": "a2", "pid": "slave(1)@10.0.0.2:5051"}]});
        assert_eq!(agent_url(&state, "https://m:5050", &task).unwrap(), "https://10.0.0.2:5051");
        assert_eq!(agent_url(&state, "http://127.0.0.1:5050", &task).unwrap(), "http://10.0.0.2:5051");
        let err = agent_url(&json!({"slaves": []}), "http://m", &task).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the master at http://m does not know agent a2 (node n2): its output cannot be reached"
        );
        let odd = json!({"slaves": [{"id": "a2", "pid": "slave(1)@evil/path"}]});
        assert!(matches!(agent_url(&odd, "http://m", &task), Err(LogError::AgentAddress { .. })));
    }
}
