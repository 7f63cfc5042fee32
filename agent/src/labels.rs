//! The `mpiswarm.io/` labels the agent puts on every Swarm object it creates.
//! They are how it finds its objects again after a restart and how it tells
//! them from everybody else's; nothing without `managed-by` is ever touched.

pub const PREFIX: &str = "mpiswarm.io/";
pub const MANAGED_BY: &str = "mpiswarm.io/managed-by";
pub const MANAGED_BY_VALUE: &str = "mpiswarm-agent";
pub const AGENT_ID: &str = "mpiswarm.io/agent-id";
pub const FRAMEWORK_ID: &str = "mpiswarm.io/framework-id";
pub const FRAMEWORK_ROLE: &str = "mpiswarm.io/framework-role";
pub const EXECUTOR_ID: &str = "mpiswarm.io/executor-id";
pub const TASK_ID: &str = "mpiswarm.io/task-id";
pub const TASK_NAME: &str = "mpiswarm.io/task-name";
/// Set by the controller on its TaskInfos and copied through unchanged.
pub const JOB_UID: &str = "mpiswarm.io/job-uid";
/// Set by the controller (`launcher` / `worker`) and copied through unchanged.
pub const ROLE: &str = "mpiswarm.io/role";
/// NetworkInfo label selecting the Swarm network driver (only `overlay`).
pub const NETWORK_DRIVER: &str = "mpiswarm.io/network-driver";

/// The label filter (`key=value`) that selects one agent's objects.
pub fn owned_by(agent_id: &str) -> String {
    format!("{AGENT_ID}={agent_id}")
}

/// Where a TaskInfo label goes on the service: keys already under
/// `mpiswarm.io/` (job uid, role...) keep their name, any other key is
/// namespaced so a framework cannot overwrite the agent's own labels.
pub fn for_task_label(key: &str) -> String {
    if key.starts_with(PREFIX) { key.to_owned() } else { format!("{PREFIX}label.{key}") }
}

/// TaskStatus label carrying a container's exit code (defined with the agent API).
pub const EXIT_CODE: &str = mpiswarm_mesos::agent_api::EXIT_CODE_LABEL;
