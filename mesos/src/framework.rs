//! `FrameworkInfo`, `MasterInfo`, `Address`, `URL` and `Filters`
//! (mesos.proto): who a framework is, who the master is, and how long a
//! refusal lasts.

use crate::ids::FrameworkId;
use crate::resources::Labels;
use serde::{Deserialize, Serialize};

/// `FrameworkInfo.Capability.Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CapabilityType {
    RevocableResources,
    TaskKillingState,
    GpuResources,
    SharedResources,
    PartitionAware,
    MultiRole,
    ReservationRefinement,
    RegionAware,
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capability {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<CapabilityType>,
}

/// `FrameworkInfo`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrameworkInfo {
    pub user: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<FrameworkId>,
    /// Seconds the master keeps a disconnected framework's tasks (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover_timeout: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<bool>,
    /// Deprecated single role (default `"*"`); superseded by `roles` with MULTI_ROLE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webui_url: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<Capability>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Labels>,
}

impl FrameworkInfo {
    /// A framework of `name` run as `user` in the given roles, MULTI_ROLE capable.
    pub fn new(user: &str, name: &str, roles: &[&str]) -> Self {
        Self {
            user: user.to_owned(),
            name: name.to_owned(),
            id: None,
            failover_timeout: None,
            checkpoint: None,
            role: None,
            roles: roles.iter().map(|r| (*r).to_owned()).collect(),
            hostname: None,
            principal: None,
            webui_url: None,
            capabilities: vec![Capability { kind: Some(CapabilityType::MultiRole) }],
            labels: None,
        }
    }

    pub fn has_capability(&self, capability: CapabilityType) -> bool {
        self.capabilities.iter().any(|c| c.kind == Some(capability))
    }

    /// The roles this framework subscribes to: `roles` when given (MULTI_ROLE
    /// frameworks), otherwise the deprecated `role` (default `"*"`).
    pub fn effective_roles(&self) -> Vec<String> {
        if !self.roles.is_empty() {
            return self.roles.clone();
        }
        vec![self.role.clone().unwrap_or_else(|| "*".to_owned())]
    }
}

/// `Address`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Address {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    pub port: i32,
}

/// `URL`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Url {
    pub scheme: String,
    pub address: Address,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// `MasterInfo`: sent in SUBSCRIBED.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MasterInfo {
    pub id: String,
    /// IPv4 address packed in network byte order as Mesos does (127.0.0.1 = 16777343).
    pub ip: u32,
    pub port: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<Address>,
}

/// `Filters`: how long declined resources stay refused.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Filters {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refuse_seconds: Option<f64>,
}

impl Filters {
    /// The proto default of `refuse_seconds`.
    pub const DEFAULT_REFUSE_SECONDS: f64 = 5.0;
    /// Mesos caps filters at one year.
    pub const MAX_REFUSE_SECONDS: f64 = 365.0 * 24.0 * 3600.0;

    pub fn refuse(seconds: f64) -> Self {
        Self { refuse_seconds: Some(seconds) }
    }

    /// `refuse_seconds` with Mesos' rules: absent, negative or not finite
    /// means the default 5 s; more than a year is capped at a year.
    pub fn effective_refuse_seconds(filters: Option<&Filters>) -> f64 {
        match filters.and_then(|f| f.refuse_seconds) {
            Some(s) if s.is_finite() && s >= 0.0 => s.min(Self::MAX_REFUSE_SECONDS),
            _ => Self::DEFAULT_REFUSE_SECONDS,
        }
    }
}
