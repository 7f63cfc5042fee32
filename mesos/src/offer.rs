//! `Offer` and `Offer.Operation` (mesos.proto): what the master offers and
//! what a framework does with it in ACCEPT.

use crate::framework::Url;
use crate::ids::{AgentId, ExecutorId, FrameworkId, OfferId};
use crate::resources::{AllocationInfo, Attribute, Resource};
use crate::task::{ExecutorInfo, TaskGroupInfo, TaskInfo};
use serde::{Deserialize, Serialize};

/// `Offer`: free resources of one agent for one role.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offer {
    pub id: OfferId,
    pub framework_id: FrameworkId,
    pub agent_id: AgentId,
    pub hostname: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<Url>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<serde_json::Value>,
    #[serde(default)]
    pub resources: Vec<Resource>,
    #[serde(default)]
    pub attributes: Vec<Attribute>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub executor_ids: Vec<ExecutorId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailability: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation_info: Option<AllocationInfo>,
}

/// `Offer.Operation.Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OperationType {
    Unknown,
    Launch,
    LaunchGroup,
    Reserve,
    Unreserve,
    Create,
    Destroy,
    GrowVolume,
    ShrinkVolume,
    CreateDisk,
    DestroyDisk,
}

/// `Offer.Operation.Launch`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Launch {
    #[serde(default)]
    pub task_infos: Vec<TaskInfo>,
}

/// `Offer.Operation.LaunchGroup`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchGroup {
    pub executor: ExecutorInfo,
    pub task_group: TaskGroupInfo,
}

/// `Offer.Operation`. Reservation and volume operations are carried as raw
/// JSON: the offer layer does not implement them and answers them with an
/// operation error rather than dropping them silently.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Operation {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<OperationType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<Launch>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_group: Option<LaunchGroup>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserve: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreserve: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destroy: Option<serde_json::Value>,
}

impl Operation {
    fn bare(kind: OperationType) -> Self {
        Self {
            kind: Some(kind),
            id: None,
            launch: None,
            launch_group: None,
            reserve: None,
            unreserve: None,
            create: None,
            destroy: None,
        }
    }

    /// A LAUNCH of `tasks`.
    pub fn launch(tasks: Vec<TaskInfo>) -> Self {
        Self { launch: Some(Launch { task_infos: tasks }), ..Self::bare(OperationType::Launch) }
    }

    /// A LAUNCH_GROUP of `task_group` under `executor`.
    pub fn launch_group(executor: ExecutorInfo, task_group: TaskGroupInfo) -> Self {
        Self { launch_group: Some(LaunchGroup { executor, task_group }), ..Self::bare(OperationType::LaunchGroup) }
    }
}
