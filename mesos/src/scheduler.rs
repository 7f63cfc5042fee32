//! The v1 scheduler API (scheduler.proto): `Call` from framework to master,
//! `Event` from master to framework. Both keep the proto's shape, a `type`
//! plus one lowercase sub-message, so unknown or future fields round-trip
//! through serde exactly as stout would treat them.

use crate::base64_bytes::Bytes;
use crate::framework::{Filters, FrameworkInfo, MasterInfo};
use crate::ids::{AgentId, ExecutorId, FrameworkId, OfferId, TaskId};
use crate::master_error::MasterError;
use crate::offer::{Offer, Operation};
use crate::resources::Resource;
use crate::status::TaskStatus;
use crate::task::KillPolicy;
use serde::{Deserialize, Serialize};

/// `Call.Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CallType {
    Subscribe,
    Teardown,
    Accept,
    Decline,
    AcceptInverseOffers,
    DeclineInverseOffers,
    Revive,
    Kill,
    Shutdown,
    Acknowledge,
    AcknowledgeOperationStatus,
    Reconcile,
    ReconcileOperations,
    Message,
    Request,
    Suppress,
    UpdateFramework,
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Subscribe {
    pub framework_info: FrameworkInfo,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suppressed_roles: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offer_constraints: Option<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Accept {
    #[serde(default)]
    pub offer_ids: Vec<OfferId>,
    #[serde(default)]
    pub operations: Vec<Operation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filters: Option<Filters>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Decline {
    #[serde(default)]
    pub offer_ids: Vec<OfferId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filters: Option<Filters>,
}

/// `Revive` and `Suppress`: an empty `roles` means all of the framework's roles.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Roles {
    #[serde(default)]
    pub roles: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kill {
    pub task_id: TaskId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<AgentId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill_policy: Option<KillPolicy>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shutdown {
    pub executor_id: ExecutorId,
    pub agent_id: AgentId,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Acknowledge {
    pub agent_id: AgentId,
    pub task_id: TaskId,
    pub uuid: Bytes,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReconcileTask {
    pub task_id: TaskId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<AgentId>,
}

/// `Reconcile`: an empty `tasks` asks for every task the master knows (implicit).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Reconcile {
    #[serde(default)]
    pub tasks: Vec<ReconcileTask>,
}

/// `Call.Message` and `Event.Message`: opaque data between framework and executor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub agent_id: AgentId,
    pub executor_id: ExecutorId,
    pub data: Bytes,
}

/// `mesos.v1.Request`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ResourceRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<AgentId>,
    #[serde(default)]
    pub resources: Vec<Resource>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Request {
    #[serde(default)]
    pub requests: Vec<ResourceRequest>,
}

/// `Call`: `{"framework_id":..., "type":"ACCEPT", "accept":{...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framework_id: Option<FrameworkId>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<CallType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscribe: Option<Subscribe>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accept: Option<Accept>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decline: Option<Decline>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accept_inverse_offers: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decline_inverse_offers: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revive: Option<Roles>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill: Option<Kill>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown: Option<Shutdown>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acknowledge: Option<Acknowledge>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acknowledge_operation_status: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconcile: Option<Reconcile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconcile_operations: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<Request>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suppress: Option<Roles>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_framework: Option<Subscribe>,
}

impl Call {
    /// A call of `kind` from `framework_id` with no sub-message yet.
    pub fn new(kind: CallType, framework_id: Option<FrameworkId>) -> Self {
        Self {
            framework_id,
            kind: Some(kind),
            subscribe: None,
            accept: None,
            decline: None,
            accept_inverse_offers: None,
            decline_inverse_offers: None,
            revive: None,
            kill: None,
            shutdown: None,
            acknowledge: None,
            acknowledge_operation_status: None,
            reconcile: None,
            reconcile_operations: None,
            message: None,
            request: None,
            suppress: None,
            update_framework: None,
        }
    }

    /// SUBSCRIBE; with `framework_info.id` set this is a re-subscription.
    pub fn subscribe(framework_info: FrameworkInfo) -> Self {
        let id = framework_info.id.clone();
        Self {
            subscribe: Some(Subscribe { framework_info, suppressed_roles: Vec::new(), offer_constraints: None }),
            ..Self::new(CallType::Subscribe, id)
        }
    }

    pub fn accept(
        framework_id: &FrameworkId,
        offer_ids: Vec<OfferId>,
        operations: Vec<Operation>,
        filters: Option<Filters>,
    ) -> Self {
        Self {
            accept: Some(Accept { offer_ids, operations, filters }),
            ..Self::new(CallType::Accept, Some(framework_id.clone()))
        }
    }

    pub fn decline(framework_id: &FrameworkId, offer_ids: Vec<OfferId>, filters: Option<Filters>) -> Self {
        Self {
            decline: Some(Decline { offer_ids, filters }),
            ..Self::new(CallType::Decline, Some(framework_id.clone()))
        }
    }

    pub fn revive(framework_id: &FrameworkId, roles: Vec<String>) -> Self {
        Self { revive: Some(Roles { roles }), ..Self::new(CallType::Revive, Some(framework_id.clone())) }
    }

    pub fn suppress(framework_id: &FrameworkId, roles: Vec<String>) -> Self {
        Self { suppress: Some(Roles { roles }), ..Self::new(CallType::Suppress, Some(framework_id.clone())) }
    }

    pub fn kill(framework_id: &FrameworkId, task_id: TaskId, agent_id: Option<AgentId>) -> Self {
        Self {
            kill: Some(Kill { task_id, agent_id, kill_policy: None }),
            ..Self::new(CallType::Kill, Some(framework_id.clone()))
        }
    }

    pub fn shutdown(framework_id: &FrameworkId, executor_id: ExecutorId, agent_id: AgentId) -> Self {
        Self {
            shutdown: Some(Shutdown { executor_id, agent_id }),
            ..Self::new(CallType::Shutdown, Some(framework_id.clone()))
        }
    }

    pub fn acknowledge(framework_id: &FrameworkId, agent_id: AgentId, task_id: TaskId, uuid: Bytes) -> Self {
        Self {
            acknowledge: Some(Acknowledge { agent_id, task_id, uuid }),
            ..Self::new(CallType::Acknowledge, Some(framework_id.clone()))
        }
    }

    /// RECONCILE; an empty `tasks` is implicit reconciliation.
    pub fn reconcile(framework_id: &FrameworkId, tasks: Vec<ReconcileTask>) -> Self {
        Self { reconcile: Some(Reconcile { tasks }), ..Self::new(CallType::Reconcile, Some(framework_id.clone())) }
    }

    pub fn message(framework_id: &FrameworkId, agent_id: AgentId, executor_id: ExecutorId, data: Bytes) -> Self {
        Self {
            message: Some(Message { agent_id, executor_id, data }),
            ..Self::new(CallType::Message, Some(framework_id.clone()))
        }
    }

    pub fn request(framework_id: &FrameworkId, requests: Vec<ResourceRequest>) -> Self {
        Self { request: Some(Request { requests }), ..Self::new(CallType::Request, Some(framework_id.clone())) }
    }

    pub fn teardown(framework_id: &FrameworkId) -> Self {
        Self::new(CallType::Teardown, Some(framework_id.clone()))
    }
}

/// `Event.Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EventType {
    Subscribed,
    Offers,
    InverseOffers,
    Rescind,
    RescindInverseOffer,
    Update,
    UpdateOperationStatus,
    Message,
    Failure,
    Error,
    Heartbeat,
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Subscribed {
    pub framework_id: FrameworkId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_interval_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_info: Option<MasterInfo>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Offers {
    #[serde(default)]
    pub offers: Vec<Offer>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rescind {
    pub offer_id: OfferId,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Update {
    pub status: TaskStatus,
}

/// `Failure`: without `executor_id` the agent was lost; with it, that executor exited.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Failure {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<AgentId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor_id: Option<ExecutorId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Error {
    pub message: String,
}

impl Error {
    /// What the message means (see [`MasterError`]).
    pub fn kind(&self) -> MasterError {
        MasterError::parse(&self.message)
    }
}

/// `Event`: `{"type":"OFFERS","offers":{"offers":[...]}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    #[serde(rename = "type", default = "unknown_event")]
    pub kind: EventType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscribed: Option<Subscribed>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offers: Option<Offers>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inverse_offers: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rescind: Option<Rescind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rescind_inverse_offer: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update: Option<Update>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_operation_status: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Error>,
}

fn unknown_event() -> EventType {
    EventType::Unknown
}

impl Event {
    fn bare(kind: EventType) -> Self {
        Self {
            kind,
            subscribed: None,
            offers: None,
            inverse_offers: None,
            rescind: None,
            rescind_inverse_offer: None,
            update: None,
            update_operation_status: None,
            message: None,
            failure: None,
            error: None,
        }
    }

    pub fn subscribed(framework_id: FrameworkId, heartbeat_interval_seconds: f64, master_info: MasterInfo) -> Self {
        Self {
            subscribed: Some(Subscribed {
                framework_id,
                heartbeat_interval_seconds: Some(heartbeat_interval_seconds),
                master_info: Some(master_info),
            }),
            ..Self::bare(EventType::Subscribed)
        }
    }

    pub fn offers(offers: Vec<Offer>) -> Self {
        Self { offers: Some(Offers { offers }), ..Self::bare(EventType::Offers) }
    }

    pub fn rescind(offer_id: OfferId) -> Self {
        Self { rescind: Some(Rescind { offer_id }), ..Self::bare(EventType::Rescind) }
    }

    pub fn update(status: TaskStatus) -> Self {
        Self { update: Some(Update { status }), ..Self::bare(EventType::Update) }
    }

    pub fn message(message: Message) -> Self {
        Self { message: Some(message), ..Self::bare(EventType::Message) }
    }

    pub fn failure(failure: Failure) -> Self {
        Self { failure: Some(failure), ..Self::bare(EventType::Failure) }
    }

    pub fn error(message: impl Into<String>) -> Self {
        Self { error: Some(Error { message: message.into() }), ..Self::bare(EventType::Error) }
    }

    pub fn heartbeat() -> Self {
        Self::bare(EventType::Heartbeat)
    }
}
