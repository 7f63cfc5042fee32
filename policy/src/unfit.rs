//! Why a job does not fit: the typed kind and the sentence a user reads in
//! the job's `Unschedulable` condition. Only the types: the shortfall
//! analysis that writes the sentence is `explain.rs`. Imports nothing of this
//! crate, so every module may use it.

use serde::{Deserialize, Serialize};

/// What kind of obstacle stopped the job; stable for metrics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum UnfitKind {
    /// The demand itself is impossible (e.g. 0 ranks); no offer can help.
    InvalidDemand,
    /// No agent offered anything usable.
    NoOffers,
    /// No offered agent matches the nodeSelector.
    NoMatchingAgent,
    /// The matching agents together offer less of some resource than the gang needs.
    InsufficientResources,
    /// Enough in total, but not in pieces of whole ranks (per-node limits included).
    Fragmented,
    /// No matching agent has room for the launcher next to a rank.
    NoRoomForLauncher,
    /// The whole gang needs more than its role's quota limit lets the role hold.
    ExceedsQuota,
}

/// The job cannot start now; `reason` says why in one sentence with numbers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{reason}")]
#[serde(rename_all = "camelCase")]
pub struct Unfit {
    pub kind: UnfitKind,
    pub reason: String,
}

impl Unfit {
    pub fn new(kind: UnfitKind, reason: String) -> Self {
        Self { kind, reason }
    }
}
