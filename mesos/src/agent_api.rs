//! The mpiswarm agent API: how a node agent and the offer layer talk.
//!
//! It is the scheduler API's style turned around: the agent POSTs a
//! SUBSCRIBE [`Call`] to `/api/v1/agent` and keeps the response open as a
//! RecordIO stream of [`Event`]s (LAUNCH, LAUNCH_GROUP, KILL, SHUTDOWN,
//! ACKNOWLEDGED, MESSAGE, HEARTBEAT, ERROR); it POSTs UPDATE calls carrying
//! `TaskStatus`, and WITHDRAW when it stops serving, with the
//! `Mesos-Stream-Id` it was given. The protocol, its
//! status codes and its retry rules are documented in `offers/README.md`;
//! these types are its only definition.

use crate::base64_bytes::Bytes;
use crate::framework::FrameworkInfo;
use crate::ids::{AgentId, ExecutorId, FrameworkId, TaskId};
use crate::resources::{Attribute, Resource};
use crate::status::TaskStatus;
use crate::task::{ExecutorInfo, KillPolicy, TaskGroupInfo, TaskInfo};
use serde::{Deserialize, Serialize};

/// The path of the agent API on the offer layer.
pub const PATH: &str = "/api/v1/agent";

/// TaskStatus label in which an agent reports a terminal task's exit code
/// (`0` with TASK_FINISHED, the code with TASK_FAILED).
pub const EXIT_CODE_LABEL: &str = "mpiswarm.io/exit-code";

/// What an agent is: its identity, capacity and attributes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentInfo {
    /// The node's hostname; offers carry it.
    pub hostname: String,
    /// Absent on the very first SUBSCRIBE; the offer layer assigns one in
    /// SUBSCRIBED and the agent must persist it and send it from then on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<AgentId>,
    /// Total resources of the node (unreserved), e.g. cpus, mem, disk, ports.
    #[serde(default)]
    pub resources: Vec<Resource>,
    /// Facts frameworks place by (e.g. `swarm_node_id`, `rack`).
    #[serde(default)]
    pub attributes: Vec<Attribute>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

/// A task the agent already runs, reported on (re-)SUBSCRIBE so the offer
/// layer can rebuild its books after its own restart or a reconnect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportedTask {
    pub framework_id: FrameworkId,
    /// The TaskInfo as launched (its resources are counted as used).
    pub task_info: TaskInfo,
    /// The executor of a LAUNCH_GROUP task, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor_info: Option<ExecutorInfo>,
    /// The task's latest status. Terminal tasks are reported until their
    /// terminal update was ACKNOWLEDGED.
    pub status: TaskStatus,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Subscribe {
    pub agent_info: AgentInfo,
    #[serde(default)]
    pub tasks: Vec<ReportedTask>,
}

/// A task status change; `framework_id` is needed because task ids are only
/// unique within a framework.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Update {
    pub framework_id: FrameworkId,
    pub status: TaskStatus,
}

/// The agent stops serving for a while (its node is down) and ends its
/// subscription, listing every task it knows (as on SUBSCRIBE). A task the
/// offer layer has on the agent that the list lacks was launched on the
/// stream the agent stopped reading: the agent never saw it, so it never
/// started, and the offer layer ends it at once as TASK_DROPPED (TASK_LOST
/// to a framework that is not partition-aware), REASON_AGENT_DRAINING,
/// instead of holding it until the agent is declared lost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Withdraw {
    #[serde(default)]
    pub tasks: Vec<ReportedTask>,
}

/// `Call.type` of the agent API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CallType {
    Subscribe,
    Update,
    Withdraw,
}

/// A call from agent to offer layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call {
    #[serde(rename = "type")]
    pub kind: CallType,
    /// Required on UPDATE: the id SUBSCRIBED assigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<AgentId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscribe: Option<Subscribe>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update: Option<Update>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withdraw: Option<Withdraw>,
}

impl Call {
    pub fn subscribe(agent_info: AgentInfo, tasks: Vec<ReportedTask>) -> Self {
        Self {
            kind: CallType::Subscribe,
            agent_id: agent_info.id.clone(),
            subscribe: Some(Subscribe { agent_info, tasks }),
            update: None,
            withdraw: None,
        }
    }

    pub fn update(agent_id: AgentId, framework_id: FrameworkId, status: TaskStatus) -> Self {
        Self {
            kind: CallType::Update,
            agent_id: Some(agent_id),
            subscribe: None,
            update: Some(Update { framework_id, status }),
            withdraw: None,
        }
    }

    pub fn withdraw(agent_id: AgentId, tasks: Vec<ReportedTask>) -> Self {
        Self {
            kind: CallType::Withdraw,
            agent_id: Some(agent_id),
            subscribe: None,
            update: None,
            withdraw: Some(Withdraw { tasks }),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Subscribed {
    pub agent_id: AgentId,
    pub heartbeat_interval_seconds: f64,
}

/// Run one task (from an ACCEPT with a LAUNCH operation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Launch {
    pub framework_id: FrameworkId,
    pub framework_info: FrameworkInfo,
    pub task_info: TaskInfo,
}

/// Run a task group under one executor, all or none (LAUNCH_GROUP).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchGroup {
    pub framework_id: FrameworkId,
    pub framework_info: FrameworkInfo,
    pub executor_info: ExecutorInfo,
    pub task_group: TaskGroupInfo,
}

/// Kill one task; the agent answers with TASK_KILLING (optional) then TASK_KILLED.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kill {
    pub framework_id: FrameworkId,
    pub task_id: TaskId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill_policy: Option<KillPolicy>,
}

/// Shut down an executor and all its tasks or, without `executor_id`, every
/// task of the framework (it was torn down or failed over for good).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shutdown {
    pub framework_id: FrameworkId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor_id: Option<ExecutorId>,
}

/// The framework acknowledged the update `uuid` of `task_id`; a terminal
/// task may now be forgotten by the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Acknowledged {
    pub framework_id: FrameworkId,
    pub task_id: TaskId,
    pub uuid: Bytes,
}

/// A framework MESSAGE for an executor on this agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub framework_id: FrameworkId,
    pub executor_id: ExecutorId,
    pub data: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Error {
    pub message: String,
}

/// `Event.type` of the agent API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EventType {
    Subscribed,
    Launch,
    LaunchGroup,
    Kill,
    Shutdown,
    Acknowledged,
    Message,
    Heartbeat,
    Error,
    #[serde(other)]
    Unknown,
}

/// An event from offer layer to agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    #[serde(rename = "type")]
    pub kind: EventType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscribed: Option<Subscribed>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<Launch>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_group: Option<LaunchGroup>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill: Option<Kill>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown: Option<Shutdown>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acknowledged: Option<Acknowledged>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Error>,
}

impl Event {
    fn bare(kind: EventType) -> Self {
        Self {
            kind,
            subscribed: None,
            launch: None,
            launch_group: None,
            kill: None,
            shutdown: None,
            acknowledged: None,
            message: None,
            error: None,
        }
    }

    pub fn subscribed(agent_id: AgentId, heartbeat_interval_seconds: f64) -> Self {
        Self {
            subscribed: Some(Subscribed { agent_id, heartbeat_interval_seconds }),
            ..Self::bare(EventType::Subscribed)
        }
    }

    pub fn launch(launch: Launch) -> Self {
        Self { launch: Some(launch), ..Self::bare(EventType::Launch) }
    }

    pub fn launch_group(launch_group: LaunchGroup) -> Self {
        Self { launch_group: Some(launch_group), ..Self::bare(EventType::LaunchGroup) }
    }

    pub fn kill(kill: Kill) -> Self {
        Self { kill: Some(kill), ..Self::bare(EventType::Kill) }
    }

    pub fn shutdown(shutdown: Shutdown) -> Self {
        Self { shutdown: Some(shutdown), ..Self::bare(EventType::Shutdown) }
    }

    pub fn acknowledged(acknowledged: Acknowledged) -> Self {
        Self { acknowledged: Some(acknowledged), ..Self::bare(EventType::Acknowledged) }
    }

    pub fn message(message: Message) -> Self {
        Self { message: Some(message), ..Self::bare(EventType::Message) }
    }

    pub fn heartbeat() -> Self {
        Self::bare(EventType::Heartbeat)
    }

    pub fn error(message: impl Into<String>) -> Self {
        Self { error: Some(Error { message: message.into() }), ..Self::bare(EventType::Error) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_info_carries_its_port_like_mesos_and_older_agents_send_none() {
        let mut info =
            AgentInfo { hostname: "node1".into(), id: None, resources: vec![], attributes: vec![], port: Some(5051) };
        let json = serde_json::to_value(&info).unwrap();
        assert_eq!(json["port"], 5051);
        assert_eq!(serde_json::from_value::<AgentInfo>(json).unwrap(), info);
        info.port = None;
        let json = serde_json::to_value(&info).unwrap();
        assert!(json.get("port").is_none(), "{json}");
        let old: AgentInfo = serde_json::from_str(r#"{"hostname": "n"}"#).unwrap();
        assert_eq!(old.port, None);
    }
}
