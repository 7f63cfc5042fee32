//! The master's records: one per framework, agent, outstanding offer, task
//! and executor, plus the counters behind the metrics. Plain data with the
//! small questions each record answers about itself; the decisions that
//! change them live in `frameworks.rs`, `agents.rs`, `offers.rs`,
//! `updates.rs` and `timers.rs`.

use super::config::DEFAULT_AGENT_PORT;
use super::connection::Connection;
use mpiswarm_mesos::quantities::Quantities;
use mpiswarm_mesos::{AgentId, ExecutorId, FrameworkId, FrameworkInfo, TaskInfo, TaskState, TaskStatus, agent_api};
use std::collections::VecDeque;
use std::net::IpAddr;
use std::time::Duration;

/// Tasks are keyed by (framework id, task id): task ids are unique only within a framework.
pub type TaskKey = (String, String);
/// Executors are keyed by (agent id, framework id, executor id).
pub type ExecutorKey = (String, String, String);

#[derive(Debug)]
pub struct Framework {
    pub id: FrameworkId,
    pub info: FrameworkInfo,
    pub roles: Vec<String>,
    pub conn: Option<Connection>,
    pub failover_deadline: Option<Duration>,
    /// Known only from agents' reports or the registry after a restart; it
    /// has not re-subscribed yet, and no failover timer runs (MESOS-4659).
    pub recovered: bool,
}

impl Framework {
    /// A framework the master knows of without a subscription: from the
    /// registry (with its info) or from an agent's report (without).
    pub fn recovered(id: FrameworkId, info: Option<FrameworkInfo>) -> Self {
        let mut info = info.unwrap_or_else(|| FrameworkInfo {
            roles: Vec::new(),
            capabilities: Vec::new(),
            ..FrameworkInfo::new("", "(recovered from agents)", &[])
        });
        info.id = Some(id.clone());
        let roles = info.effective_roles();
        Self { id, info, roles, conn: None, failover_deadline: None, recovered: true }
    }

    pub fn partition_aware(&self) -> bool {
        self.info.has_capability(mpiswarm_mesos::framework::CapabilityType::PartitionAware)
    }

    pub fn multi_role(&self) -> bool {
        self.info.has_capability(mpiswarm_mesos::framework::CapabilityType::MultiRole)
    }

    /// Sends an event if the framework is connected.
    pub fn send(&self, event: &mpiswarm_mesos::scheduler::Event) {
        if let Some(conn) = &self.conn {
            conn.send(event);
        }
    }
}

#[derive(Debug)]
pub struct Agent {
    pub id: AgentId,
    pub info: agent_api::AgentInfo,
    pub total: Quantities,
    pub conn: Option<Connection>,
    pub lost_deadline: Option<Duration>,
    /// The address its SUBSCRIBE came from, if the HTTP layer knew it.
    pub peer_ip: Option<IpAddr>,
}

impl Agent {
    /// Sends an event; false if the agent is not connected.
    pub fn send(&self, event: &agent_api::Event) -> bool {
        self.conn.as_ref().is_some_and(|c| c.send(event))
    }

    /// The port its HTTP endpoint serves on (`AgentInfo.port`, 5051 if unset, as in Mesos).
    pub fn port(&self) -> i32 {
        self.info.port.unwrap_or(DEFAULT_AGENT_PORT)
    }

    /// `slave(1)@IP:PORT`, the agent's libprocess pid as Mesos reports it.
    pub fn pid(&self) -> Option<String> {
        self.peer_ip.map(|ip| format!("slave(1)@{}", std::net::SocketAddr::new(ip, self.port().clamp(0, 65535) as u16)))
    }

    /// Mesos' `Offer.url`: where the agent's HTTP endpoint is.
    pub fn url(&self) -> Option<mpiswarm_mesos::Url> {
        let ip = self.peer_ip?;
        Some(mpiswarm_mesos::Url {
            scheme: "http".into(),
            address: mpiswarm_mesos::Address {
                hostname: Some(self.info.hostname.clone()),
                ip: Some(ip.to_string()),
                port: self.port(),
            },
            path: Some("/slave(1)".into()),
        })
    }
}

#[derive(Debug, Clone)]
pub struct OfferEntry {
    pub framework: String,
    pub role: String,
    pub agent: String,
    pub resources: Quantities,
    pub created: Duration,
}

#[derive(Debug)]
pub struct Task {
    pub framework_id: FrameworkId,
    pub agent_id: AgentId,
    pub info: TaskInfo,
    pub executor_id: Option<ExecutorId>,
    pub role: String,
    pub resources: Quantities,
    pub state: TaskState,
    pub latest: TaskStatus,
    /// Updates not yet acknowledged by the framework; only the head is sent.
    pub pending: VecDeque<TaskStatus>,
    pub last_sent: Option<Duration>,
    /// A KILL the agent has not been able to receive yet (it was disconnected).
    pub kill_requested: bool,
}

#[derive(Debug)]
pub struct ExecutorEntry {
    pub role: String,
    pub resources: Quantities,
    pub tasks: usize,
}

/// Counters exported as metrics.
#[derive(Debug, Default, Clone)]
pub struct Counters {
    pub allocation_runs: u64,
    pub allocation_seconds_total: f64,
    pub offers_sent: u64,
    pub offers_declined: u64,
    pub offers_accepted: u64,
    pub offers_rescinded: u64,
    pub tasks_launched: u64,
    pub updates_forwarded: u64,
    pub updates_retried: u64,
    pub frameworks_removed: u64,
    pub agents_removed: u64,
    pub invalid_calls: u64,
    /// Agents behind on their launches at the last allocation run.
    pub agents_backlogged: u64,
    /// Times an allocation run passed an agent over because it was behind.
    pub backlog_holds: u64,
    /// Times this replica won the offer layer's Lease (0 or 1: a replica
    /// that loses it stops).
    pub leader_elected: u64,
    /// Times this replica saw the Lease pass to another holder (itself included).
    pub leader_changes: u64,
    /// Seconds from winning the Lease to the first offer sent after it.
    pub elected_to_first_offer: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(port: Option<i32>, peer_ip: Option<IpAddr>) -> Agent {
        let mut info: agent_api::AgentInfo = serde_json::from_value(serde_json::json!({"hostname": "node1"})).unwrap();
        info.port = port;
        Agent { id: AgentId::new("A-1"), info, total: Quantities::new(), conn: None, lost_deadline: None, peer_ip }
    }

    #[test]
    fn an_agent_without_a_port_serves_on_5051_as_in_mesos() {
        let a = agent(None, Some("10.0.0.7".parse().unwrap()));
        assert_eq!(a.port(), 5051);
        assert_eq!(a.pid().as_deref(), Some("slave(1)@10.0.0.7:5051"));
    }

    #[test]
    fn the_offer_url_names_the_agent_hostname_peer_ip_and_port() {
        let a = agent(Some(5052), Some("127.0.0.1".parse().unwrap()));
        let url = a.url().unwrap();
        assert_eq!(
            serde_json::to_value(&url).unwrap(),
            serde_json::json!({"scheme": "http", "address": {"hostname": "node1", "ip": "127.0.0.1", "port": 5052}, "path": "/slave(1)"})
        );
        assert_eq!(agent(Some(5052), None).url(), None, "no address known, no url");
    }

    #[test]
    fn a_framework_recovered_from_an_agent_report_is_in_the_default_role_until_it_subscribes() {
        let f = Framework::recovered(FrameworkId::new("F-1"), None);
        assert!(f.recovered && f.conn.is_none());
        assert_eq!(f.roles, vec!["*".to_owned()]);
        assert_eq!(f.info.id, Some(FrameworkId::new("F-1")));
        let f = Framework::recovered(FrameworkId::new("F-2"), Some(FrameworkInfo::new("root", "mpi", &["mpi"])));
        assert_eq!(f.roles, vec!["mpi".to_owned()]);
    }
}
