//! Backpressure on launches. The master sends LAUNCH at the rate frameworks
//! ACCEPT; an agent starts them at the rate its engine creates services.
//! Without a brake a burst of jobs would all be accepted at once and queue
//! inside the agents, where a launch can time out, and the scheduler could
//! no longer choose what runs next. So a task counts as the agent's backlog
//! from its LAUNCH until the agent reports it started (it leaves STAGING),
//! and an agent with `launch_backlog` or more such tasks is offered to no
//! one: the burst waits in the framework's queue, and the agent is offered
//! again as soon as it has caught up (not only at the next batch run).
//! Slurm's `defer` under a full RPC queue and Kubernetes' scheduler, which
//! binds no faster than the API server takes bindings, brake the same way.

use std::collections::HashMap;
use std::time::Duration;

use mpiswarm_mesos::TaskState;

use super::Master;

impl Master {
    /// The tasks each agent was told to launch and has not reported started.
    pub(super) fn staging_by_agent(&self) -> HashMap<&str, usize> {
        let mut staging: HashMap<&str, usize> = HashMap::new();
        for task in self.tasks.values().filter(|t| t.state == TaskState::Staging) {
            *staging.entry(task.agent_id.value.as_str()).or_default() += 1;
        }
        staging
    }

    /// Marks, before an allocation run, which agents are behind.
    pub(super) fn mark_backlogs(&mut self) {
        let limit = self.config.launch_backlog;
        if limit == 0 {
            return;
        }
        let staging: HashMap<String, usize> =
            self.staging_by_agent().into_iter().map(|(agent, n)| (agent.to_owned(), n)).collect();
        let marked = self.allocator.set_backlogged(|agent| staging.get(agent).is_some_and(|n| *n >= limit));
        if marked > 0 {
            tracing::debug!(agents = marked, limit, "agents behind on their launches are not offered");
        }
        self.counters.agents_backlogged = marked as u64;
        self.counters.backlog_holds += marked as u64;
    }

    /// A task of `agent` left STAGING: if that brought a held-back agent
    /// under the limit, it is offered now.
    pub(super) fn launch_caught_up(&mut self, agent: &str, now: Duration) {
        let limit = self.config.launch_backlog;
        if limit == 0 || !self.allocator.is_backlogged(agent) {
            return;
        }
        if self.staging_by_agent().get(agent).copied().unwrap_or(0) < limit {
            self.allocate(now, Some(&[agent.to_owned()]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Agent;
    use super::super::testing::{events_of, framework_with_stream, task_on, test_master};
    use super::*;
    use mpiswarm_mesos::quantities::Quantities;
    use mpiswarm_mesos::scheduler::EventType;
    use mpiswarm_mesos::{AgentId, TaskId, TaskStatus};

    fn offers(events: &mut tokio::sync::mpsc::UnboundedReceiver<bytes::Bytes>) -> usize {
        events_of(events).iter().filter(|e| e.kind == EventType::Offers).count()
    }

    #[test]
    fn an_agent_behind_on_its_launches_is_offered_again_as_soon_as_one_started() {
        let (mut m, _dir) = test_master();
        m.config.launch_backlog = 2;
        let mut events = framework_with_stream(&mut m, "F-1");
        let info = serde_json::from_value(serde_json::json!({"hostname": "node1"})).unwrap();
        let total = Quantities::scalar("cpus", 4.0);
        let agent = Agent {
            id: AgentId::new("A-1"),
            info,
            total: total.clone(),
            conn: None,
            lost_deadline: None,
            peer_ip: None,
        };
        m.agents.insert("A-1".into(), agent);
        m.allocator.add_agent("A-1", total, &[]);
        let staging: Vec<_> = ["t1", "t2"]
            .into_iter()
            .map(|t| {
                let key = task_on(&mut m, "F-1", "A-1", t);
                m.tasks.get_mut(&key).unwrap().state = TaskState::Staging;
                key
            })
            .collect();
        m.allocate(Duration::ZERO, None);
        assert_eq!(offers(&mut events), 0, "2 tasks staging, limit 2: not offered");
        assert_eq!((m.counters.agents_backlogged, m.counters.backlog_holds), (1, 1));
        // The batch run is not put off by runs over single agents.
        assert_eq!(m.last_allocation, Duration::ZERO);
        let now = Duration::from_millis(100);
        m.apply_status(&staging[0], TaskStatus::new(TaskId::new("t1"), TaskState::Starting), now);
        assert_eq!(offers(&mut events), 1, "offered as soon as it caught up, not at the next batch run");
        assert_eq!(m.counters.agents_backlogged, 0);
        assert_eq!(m.last_allocation, Duration::ZERO, "a run over one agent leaves the batch run's time");
    }

    #[test]
    fn a_limit_of_zero_never_holds_an_agent_back() {
        let (mut m, _dir) = test_master();
        m.config.launch_backlog = 0;
        let _events = framework_with_stream(&mut m, "F-1");
        for t in ["t1", "t2", "t3"] {
            let key = task_on(&mut m, "F-1", "A-1", t);
            m.tasks.get_mut(&key).unwrap().state = TaskState::Staging;
        }
        m.allocator.add_agent("A-1", Quantities::scalar("cpus", 4.0), &[]);
        m.mark_backlogs();
        assert!(!m.allocator.is_backlogged("A-1"));
        assert_eq!(m.staging_by_agent().get("A-1"), Some(&3));
    }
}
