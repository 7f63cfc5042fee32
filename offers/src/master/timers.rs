//! Everything that happens because time passed, checked by [`Master::tick`]:
//! heartbeats, batch allocation, offer timeouts, framework failover
//! deadlines, the loss of agents that stay away (disconnected ones, and
//! after a restart the ones the registry lists that never re-registered),
//! and update retries. Time is the `now` passed in; nothing here reads a clock.

use super::Master;
use mpiswarm_mesos::{AgentId, agent_api};
use std::time::Duration;

impl Master {
    /// Runs every timer that is due at `now`.
    pub fn tick(&mut self, now: Duration) {
        if self.is_fenced(now) {
            return;
        }
        self.expire_awaited_agents(now);
        if now.saturating_sub(self.last_heartbeat) >= self.config.heartbeat_interval {
            self.last_heartbeat = now;
            self.heartbeat();
        }
        self.expire_offers(now);
        let expired: Vec<String> = self
            .frameworks
            .values()
            .filter(|f| f.conn.is_none() && f.failover_deadline.is_some_and(|d| now >= d))
            .map(|f| f.id.value.clone())
            .collect();
        for id in expired {
            tracing::info!(framework = %id, "framework failover timeout expired; removing it");
            self.remove_framework(&id, now);
        }
        let lost: Vec<String> = self
            .agents
            .values()
            .filter(|a| a.conn.is_none() && a.lost_deadline.is_some_and(|d| now >= d))
            .map(|a| a.id.value.clone())
            .collect();
        for id in lost {
            self.remove_agent(&id, now, "did not re-register within the agent re-register timeout");
        }
        self.retry_updates(now);
        if now.saturating_sub(self.last_allocation) >= self.config.allocation_interval {
            self.allocate(now, None);
        }
    }

    /// After a restart, the agents the registry lists that did not come back
    /// within the re-register timeout are marked removed (Mesos marks them
    /// unreachable): every framework gets FAILURE for each, and from then on
    /// reconciliation answers their tasks TASK_UNREACHABLE (TASK_LOST for
    /// frameworks that are not partition-aware).
    fn expire_awaited_agents(&mut self, now: Duration) {
        let Some(awaited) = self.awaited_agents.as_ref() else { return };
        if !awaited.ids.is_empty() && now < awaited.deadline {
            return;
        }
        let Some(awaited) = self.awaited_agents.take() else { return };
        if awaited.ids.is_empty() {
            tracing::info!("every registered agent re-registered after the restart");
            return;
        }
        for id in &awaited.ids {
            tracing::warn!(agent = %id, "agent did not re-register after the restart; marking it unreachable");
            self.registry.agent_removed(id);
            self.broadcast_failure(id);
        }
        self.persist_registry();
    }

    fn heartbeat(&self) {
        let fw_event = mpiswarm_mesos::scheduler::Event::heartbeat();
        for f in self.frameworks.values() {
            f.send(&fw_event);
        }
        let agent_event = agent_api::Event::heartbeat();
        for a in self.agents.values() {
            a.send(&agent_event);
        }
    }

    /// Tells every framework that agent `agent` is gone.
    pub(super) fn broadcast_failure(&self, agent: &str) {
        let event = mpiswarm_mesos::scheduler::Event::failure(mpiswarm_mesos::scheduler::Failure {
            agent_id: Some(AgentId::new(agent)),
            executor_id: None,
            status: None,
        });
        for f in self.frameworks.values() {
            f.send(&event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{events_of, framework_with_stream, test_master_with_registry};
    use super::*;
    use crate::registry::{RegisteredAgent, RegistryState};
    use mpiswarm_mesos::scheduler::{Event, EventType};

    fn registry_with_agent(id: &str) -> RegistryState {
        let mut s = RegistryState::default();
        s.agents.insert(id.into(), RegisteredAgent { hostname: "node1".into(), principal: None });
        s
    }

    #[test]
    fn a_registered_agent_that_never_returns_is_marked_removed_at_the_timeout_and_frameworks_hear_of_it() {
        let (mut m, _dir) = test_master_with_registry(registry_with_agent("A-old"));
        let mut events = framework_with_stream(&mut m, "F-1");
        assert!(m.is_awaiting_agent("A-old"));
        let timeout = m.config.agent_reregister_timeout;
        m.tick(timeout - Duration::from_millis(1));
        assert!(m.is_awaiting_agent("A-old"), "still awaited before the timeout");
        assert!(events_of(&mut events).iter().all(|e| e.kind != EventType::Failure));
        m.tick(timeout);
        assert!(!m.is_awaiting_agent("A-old"));
        assert!(m.registry.removed_agents.contains(&"A-old".to_owned()));
        let failures: Vec<Event> =
            events_of(&mut events).into_iter().filter(|e| e.kind == EventType::Failure).collect();
        assert_eq!(failures.len(), 1);
        assert_eq!(failures[0].failure.as_ref().and_then(|f| f.agent_id.clone()), Some(AgentId::new("A-old")));
    }

    #[test]
    fn heartbeats_go_out_once_per_interval() {
        let (mut m, _dir) = test_master_with_registry(RegistryState::default());
        let mut events = framework_with_stream(&mut m, "F-1");
        let interval = m.config.heartbeat_interval;
        let beats = |events: &mut _| events_of(events).iter().filter(|e| e.kind == EventType::Heartbeat).count();
        m.tick(interval);
        assert_eq!(beats(&mut events), 1);
        m.tick(interval + Duration::from_millis(1));
        assert_eq!(beats(&mut events), 0, "not twice in one interval");
        m.tick(interval * 2);
        assert_eq!(beats(&mut events), 1);
    }

    #[test]
    fn a_disconnected_framework_is_removed_when_its_failover_timeout_passes() {
        let (mut m, _dir) = test_master_with_registry(RegistryState::default());
        let _events = framework_with_stream(&mut m, "F-1");
        if let Some(f) = m.frameworks.get_mut("F-1") {
            f.conn = None;
            f.failover_deadline = Some(Duration::from_secs(3));
        }
        m.tick(Duration::from_secs(2));
        assert!(m.frameworks.contains_key("F-1"));
        m.tick(Duration::from_secs(3));
        assert!(!m.frameworks.contains_key("F-1"));
        assert!(m.registry.removed_frameworks.contains(&"F-1".to_owned()));
    }
}
