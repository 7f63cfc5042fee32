//! What the controller reports about an `MpiJob`: phase, standard
//! Kubernetes conditions, placement, worker and launcher states. This module
//! owns the vocabulary and the condition bookkeeping rules (a transition time
//! moves only when a condition's status changes); it never talks to an API.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::reason::ConditionReason;

/// Lifecycle phase, one word for `kubectl get`.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Accepted, waiting for resources.
    #[default]
    Pending,
    /// Offers are being matched against the gang.
    Scheduling,
    /// Tasks were launched; not all ranks run yet.
    Launching,
    /// Every worker and the launcher run.
    Running,
    /// The launcher exited 0.
    Succeeded,
    /// The launcher failed, the deadline passed, or the backoff limit was reached.
    Failed,
    /// `runPolicy.suspend` is true.
    Suspended,
}

impl Phase {
    /// Whether the job has ended for good.
    pub fn is_finished(self) -> bool {
        matches!(self, Phase::Succeeded | Phase::Failed)
    }
}

/// The condition types an `MpiJob` carries. `Succeeded` and `Failed` are
/// terminal; `kubectl wait --for=condition=Succeeded` waits on the former.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConditionType {
    Created,
    Scheduled,
    Running,
    Succeeded,
    Failed,
    Suspended,
    Restarting,
    Unschedulable,
    Invalid,
}

impl ConditionType {
    pub const ALL: [ConditionType; 9] = [
        ConditionType::Created,
        ConditionType::Scheduled,
        ConditionType::Running,
        ConditionType::Succeeded,
        ConditionType::Failed,
        ConditionType::Suspended,
        ConditionType::Restarting,
        ConditionType::Unschedulable,
        ConditionType::Invalid,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ConditionType::Created => "Created",
            ConditionType::Scheduled => "Scheduled",
            ConditionType::Running => "Running",
            ConditionType::Succeeded => "Succeeded",
            ConditionType::Failed => "Failed",
            ConditionType::Suspended => "Suspended",
            ConditionType::Restarting => "Restarting",
            ConditionType::Unschedulable => "Unschedulable",
            ConditionType::Invalid => "Invalid",
        }
    }
}

impl std::fmt::Display for ConditionType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Status of an `MpiJob`, written by the controller through the status subresource.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MpiJobStatus {
    /// Lifecycle phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,

    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Standard Kubernetes conditions, one per type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,

    /// Where the ranks were placed and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<PlacementStatus>,

    /// Worker counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<WorkersStatus>,

    /// The container that runs `mpirun`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher: Option<LauncherStatus>,

    /// Gang restarts so far.
    #[serde(default)]
    pub restarts: i32,

    /// The gang generation the controller launches next or runs now; Mesos
    /// task ids carry it, so every restart gets fresh ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang_generation: Option<i32>,

    /// When the gang was first launched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,

    /// When the job succeeded or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,

    /// A human-readable summary of the current state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The policy the engine actually applied to a gang (`auto` is resolved
/// to one of these). kubectl's `Policy` column shows it.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum AppliedPolicy {
    /// Fewest nodes.
    Pack,
    /// Most nodes, ranks balanced.
    Spread,
}

impl AppliedPolicy {
    /// The policy as the status spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            AppliedPolicy::Pack => "pack",
            AppliedPolicy::Spread => "spread",
        }
    }
}

impl std::fmt::Display for AppliedPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where the ranks went.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlacementStatus {
    /// `pack` or `spread`: the policy actually applied.
    pub policy: AppliedPolicy,
    /// Why that policy was chosen, e.g. "auto: profile network packs ranks".
    pub reason: String,
    /// Number of nodes used (the `Nodes` printer column).
    pub node_count: i32,
    /// One entry per node.
    #[serde(default)]
    pub nodes: Vec<NodePlacement>,
}

/// Ranks on one node.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct NodePlacement {
    /// Node hostname.
    pub node: String,
    /// Mesos agent id of the node.
    pub agent_id: String,
    /// Ranks (MPI slots) on that node.
    pub ranks: i32,
    /// Name of the worker that hosts them.
    pub worker: String,
}

/// Worker counts.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct WorkersStatus {
    pub total: i32,
    pub running: i32,
    pub succeeded: i32,
    pub failed: i32,
}

/// The launcher's state.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LauncherStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Last task state, e.g. `TASK_RUNNING`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl MpiJobStatus {
    /// The condition of `type_`, if present.
    pub fn condition(&self, type_: ConditionType) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_.as_str())
    }

    /// Whether condition `type_` is present with status "True".
    pub fn is_true(&self, type_: ConditionType) -> bool {
        self.condition(type_).is_some_and(|c| c.status == "True")
    }

    /// Sets a condition the way Kubernetes' `meta.SetStatusCondition` does:
    /// the transition time changes only when the status flips, reason and
    /// message always follow the latest call. Returns whether anything changed,
    /// so callers publish an Event only on transitions.
    pub fn set_condition(
        &mut self,
        type_: ConditionType,
        status: bool,
        reason: ConditionReason,
        message: &str,
        observed_generation: Option<i64>,
        now: Time,
    ) -> bool {
        let status = if status { "True" } else { "False" };
        let reason = reason.as_str();
        match self.conditions.iter_mut().find(|c| c.type_ == type_.as_str()) {
            Some(c) => {
                let flipped = c.status != status;
                let changed = flipped
                    || c.reason != reason
                    || c.message != message
                    || c.observed_generation != observed_generation;
                if flipped {
                    c.last_transition_time = now;
                }
                c.status = status.to_string();
                c.reason = reason.to_string();
                c.message = message.to_string();
                c.observed_generation = observed_generation;
                changed
            }
            None => {
                self.conditions.push(Condition {
                    type_: type_.as_str().to_string(),
                    status: status.to_string(),
                    reason: reason.to_string(),
                    message: message.to_string(),
                    observed_generation,
                    last_transition_time: now,
                });
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn at(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).expect("valid timestamp"))
    }

    #[test]
    fn a_condition_keeps_its_transition_time_until_its_status_flips() {
        let mut s = MpiJobStatus::default();
        assert!(s.set_condition(
            ConditionType::Running,
            true,
            ConditionReason::GangRunning,
            "all ranks run",
            Some(1),
            at(10)
        ));
        assert!(!s.set_condition(
            ConditionType::Running,
            true,
            ConditionReason::GangRunning,
            "all ranks run",
            Some(1),
            at(20)
        ));
        assert_eq!(s.condition(ConditionType::Running).map(|c| &c.last_transition_time), Some(&at(10)));
        assert!(s.set_condition(
            ConditionType::Running,
            false,
            ConditionReason::LauncherSucceeded,
            "launcher exited",
            Some(1),
            at(30)
        ));
        assert_eq!(s.condition(ConditionType::Running).map(|c| &c.last_transition_time), Some(&at(30)));
        assert!(!s.is_true(ConditionType::Running));
    }

    #[test]
    fn a_changed_message_is_a_change_but_not_a_transition() {
        let mut s = MpiJobStatus::default();
        s.set_condition(
            ConditionType::Unschedulable,
            true,
            ConditionReason::GangDoesNotFit,
            "needs 16 cpus",
            None,
            at(1),
        );
        assert!(s.set_condition(
            ConditionType::Unschedulable,
            true,
            ConditionReason::GangDoesNotFit,
            "needs 8 cpus",
            None,
            at(2)
        ));
        let c = s.condition(ConditionType::Unschedulable).expect("condition present");
        assert_eq!(c.last_transition_time, at(1));
        assert_eq!(c.message, "needs 8 cpus");
        assert_eq!(s.conditions.len(), 1);
    }
}
