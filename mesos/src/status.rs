//! `TaskStatus` with every `TaskState`, `Source` and `Reason` of mesos.proto.

use crate::base64_bytes::Bytes;
use crate::ids::{AgentId, ExecutorId, TaskId};
use crate::resources::Labels;
use serde::{Deserialize, Serialize};

/// `TaskState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum TaskState {
    #[serde(rename = "TASK_STAGING")]
    Staging,
    #[serde(rename = "TASK_STARTING")]
    Starting,
    #[serde(rename = "TASK_RUNNING")]
    Running,
    #[serde(rename = "TASK_KILLING")]
    Killing,
    #[serde(rename = "TASK_FINISHED")]
    Finished,
    #[serde(rename = "TASK_FAILED")]
    Failed,
    #[serde(rename = "TASK_KILLED")]
    Killed,
    #[serde(rename = "TASK_ERROR")]
    Error,
    #[serde(rename = "TASK_LOST")]
    Lost,
    #[serde(rename = "TASK_DROPPED")]
    Dropped,
    #[serde(rename = "TASK_UNREACHABLE")]
    Unreachable,
    #[serde(rename = "TASK_GONE")]
    Gone,
    #[serde(rename = "TASK_GONE_BY_OPERATOR")]
    GoneByOperator,
    #[serde(rename = "TASK_UNKNOWN")]
    Unknown,
}

impl TaskState {
    /// The task's node is gone or cannot be reached (Mesos' LOST family).
    pub fn is_lost(self) -> bool {
        matches!(self, Self::Lost | Self::Gone | Self::Unreachable | Self::GoneByOperator)
    }

    /// Terminal states: the task holds no resources any more. LOST is
    /// terminal in Mesos (a lost task can only come back as a new one).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Finished
                | Self::Failed
                | Self::Killed
                | Self::Error
                | Self::Lost
                | Self::Dropped
                | Self::Gone
                | Self::GoneByOperator
        )
    }

    /// The protobuf name, e.g. `TASK_RUNNING`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Staging => "TASK_STAGING",
            Self::Starting => "TASK_STARTING",
            Self::Running => "TASK_RUNNING",
            Self::Killing => "TASK_KILLING",
            Self::Finished => "TASK_FINISHED",
            Self::Failed => "TASK_FAILED",
            Self::Killed => "TASK_KILLED",
            Self::Error => "TASK_ERROR",
            Self::Lost => "TASK_LOST",
            Self::Dropped => "TASK_DROPPED",
            Self::Unreachable => "TASK_UNREACHABLE",
            Self::Gone => "TASK_GONE",
            Self::GoneByOperator => "TASK_GONE_BY_OPERATOR",
            Self::Unknown => "TASK_UNKNOWN",
        }
    }
}

/// `TaskStatus.Source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Source {
    SourceMaster,
    SourceAgent,
    SourceExecutor,
}

/// `TaskStatus.Reason`: every reason of mesos.proto.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Reason {
    ReasonCommandExecutorFailed,
    ReasonContainerLaunchFailed,
    ReasonContainerLimitation,
    ReasonContainerLimitationDisk,
    ReasonContainerLimitationMemory,
    ReasonContainerPreempted,
    ReasonContainerUpdateFailed,
    ReasonMaxCompletionTimeReached,
    ReasonExecutorRegistrationTimeout,
    ReasonExecutorReregistrationTimeout,
    ReasonExecutorTerminated,
    ReasonExecutorUnregistered,
    ReasonFrameworkRemoved,
    ReasonGcError,
    ReasonInvalidFrameworkid,
    ReasonInvalidOffers,
    ReasonIoSwitchboardExited,
    ReasonMasterDisconnected,
    ReasonReconciliation,
    ReasonResourcesUnknown,
    ReasonAgentDisconnected,
    ReasonAgentDraining,
    ReasonAgentRemoved,
    ReasonAgentRemovedByOperator,
    ReasonAgentReregistered,
    ReasonAgentRestarted,
    ReasonAgentUnknown,
    ReasonTaskKilledDuringLaunch,
    ReasonTaskCheckStatusUpdated,
    ReasonTaskHealthCheckStatusUpdated,
    ReasonTaskGroupInvalid,
    ReasonTaskGroupUnauthorized,
    ReasonTaskInvalid,
    ReasonTaskUnauthorized,
    ReasonTaskUnknown,
}

/// `TimeInfo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeInfo {
    pub nanoseconds: i64,
}

/// `TaskStatus`: one state change of one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskStatus {
    pub task_id: TaskId,
    pub state: TaskState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Bytes>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<AgentId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor_id: Option<ExecutorId>,
    /// Seconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<f64>,
    /// 16 bytes when the update must be acknowledged; absent on updates the
    /// master generates (reconciliation, invalid offers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<Bytes>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_status: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Labels>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_status: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreachable_time: Option<TimeInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limitation: Option<serde_json::Value>,
}

impl TaskStatus {
    /// A bare status of `task_id` in `state`; set the other fields as needed.
    pub fn new(task_id: TaskId, state: TaskState) -> Self {
        Self {
            task_id,
            state,
            message: None,
            source: None,
            reason: None,
            data: None,
            agent_id: None,
            executor_id: None,
            timestamp: None,
            uuid: None,
            healthy: None,
            check_status: None,
            labels: None,
            container_status: None,
            unreachable_time: None,
            limitation: None,
        }
    }
}
