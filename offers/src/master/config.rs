//! The master's tunables and the constants it answers with. Plain data:
//! parsed from flags by `server.rs`, read by every part of the master.

use crate::acl::Acls;
use std::collections::BTreeMap;
use std::time::Duration;

/// The Mesos version we answer as: client libraries check it.
pub const MESOS_VERSION: &str = "1.11.0";

/// The port an agent serves on when its `AgentInfo` does not say (Mesos' default).
pub const DEFAULT_AGENT_PORT: i32 = 5051;

/// Tunables of the master.
#[derive(Debug, Clone)]
pub struct MasterConfig {
    pub hostname: String,
    pub port: u16,
    pub heartbeat_interval: Duration,
    pub allocation_interval: Duration,
    pub offer_timeout: Option<Duration>,
    /// How long a disconnected agent (or, after a restart, one the registry
    /// lists) has to come back before it is lost.
    pub agent_reregister_timeout: Duration,
    pub status_update_retry_interval: Duration,
    pub weights: BTreeMap<String, f64>,
    /// Quota limits by role (`--quota`): the most of each scalar a role may
    /// hold, offered or used, over the whole cluster.
    pub quotas: BTreeMap<String, BTreeMap<String, f64>>,
    /// Who may register frameworks and agents, tear frameworks down and read
    /// the operator endpoints (`--acls`; permissive when not given).
    pub acls: Acls,
    /// Backpressure (`--agent-launch-backlog`): an agent with this many
    /// tasks launched and not yet reported started (STAGING) is offered to
    /// no one until fewer are; 0 offers it regardless.
    pub launch_backlog: usize,
}

/// The default `--agent-launch-backlog`: a few task groups' worth. An agent
/// creates one group's Swarm objects at a time (about a second each on a
/// loaded engine), so more queued there only waits longer, in the engine
/// instead of in the scheduler's queue.
pub const DEFAULT_LAUNCH_BACKLOG: usize = 8;

impl Default for MasterConfig {
    fn default() -> Self {
        Self {
            hostname: "127.0.0.1".into(),
            port: 5050,
            heartbeat_interval: Duration::from_secs(15),
            allocation_interval: Duration::from_secs(1),
            offer_timeout: None,
            agent_reregister_timeout: Duration::from_secs(75),
            status_update_retry_interval: Duration::from_secs(10),
            weights: BTreeMap::new(),
            quotas: BTreeMap::new(),
            acls: Acls::default(),
            launch_backlog: DEFAULT_LAUNCH_BACKLOG,
        }
    }
}

impl MasterConfig {
    /// `HOST:PORT`, as MasterInfo advertises it: a replica's identity in the Lease.
    pub fn address(&self) -> String {
        format!("{}:{}", self.hostname, self.port)
    }

    /// `master@HOST:PORT`, the master's libprocess pid as Mesos reports it.
    pub fn pid(&self) -> String {
        format!("master@{}", self.address())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_mesos_defaults() {
        let c = MasterConfig::default();
        assert_eq!(c.heartbeat_interval, Duration::from_secs(15));
        assert_eq!(c.agent_reregister_timeout, Duration::from_secs(75));
        assert_eq!(c.status_update_retry_interval, Duration::from_secs(10));
        assert_eq!(c.offer_timeout, None);
        assert_eq!(c.pid(), "master@127.0.0.1:5050");
    }
}
