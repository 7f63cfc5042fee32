//! Task status updates on their way to frameworks: each task's queue of
//! unacknowledged updates (only the head is sent, and re-sent until it is
//! acknowledged), the statuses the master decides itself (no agent, no
//! acknowledgement), and what a task gives back when it ends. Never talks to
//! agents.

use super::books::TaskKey;
use super::{Framework, Master};
use mpiswarm_mesos::scheduler::Event;
use mpiswarm_mesos::{AgentId, Reason, TaskId, TaskState, TaskStatus};
use std::time::Duration;

/// How many ended tasks `/master/state` keeps showing.
const COMPLETED_TASKS_KEPT: usize = 1000;

impl Master {
    /// A status the master itself generates (no uuid: it needs no acknowledgement).
    pub(super) fn master_status(
        &self,
        task_id: &TaskId,
        agent_id: Option<&AgentId>,
        state: TaskState,
        reason: Reason,
        message: String,
        now: Duration,
    ) -> TaskStatus {
        let mut s = TaskStatus::new(task_id.clone(), state);
        s.agent_id = agent_id.cloned();
        s.source = Some(mpiswarm_mesos::Source::SourceMaster);
        s.reason = Some(reason);
        s.message = Some(message);
        s.timestamp = Some(self.clock.timestamp(now));
        s
    }

    /// The state a framework is told for a task the master does not know.
    pub(super) fn unknown_task_state(&self, fw: &str) -> TaskState {
        if self.frameworks.get(fw).is_some_and(Framework::partition_aware) {
            TaskState::Unknown
        } else {
            TaskState::Lost
        }
    }

    /// Sends a status straight to a framework (no queue, no acknowledgement).
    pub(super) fn send_status(&self, fw: &str, status: TaskStatus) {
        if let Some(f) = self.frameworks.get(fw) {
            f.send(&Event::update(status));
        }
    }

    /// Sends a status the master itself decided (no agent involved, no
    /// acknowledgement expected) to the task's framework and records it as
    /// the task's latest.
    pub(super) fn send_master_status(&mut self, key: &TaskKey, status: TaskStatus, state: TaskState) {
        self.send_status(&key.0, status.clone());
        if let Some(t) = self.tasks.get_mut(key) {
            t.latest = status;
            t.state = state;
        }
    }

    /// A new state of a known task: books it, frees resources if terminal,
    /// and queues the update for the framework.
    pub(super) fn apply_status(&mut self, key: &TaskKey, status: TaskStatus, now: Duration) {
        let Some(task) = self.tasks.get_mut(key) else { return };
        // An agent re-sends an update whose 202 it did not see: same uuid, same update.
        if status.uuid.is_some() && task.pending.iter().any(|p| p.uuid == status.uuid) {
            tracing::debug!(task = %key.1, "duplicate update ignored");
            return;
        }
        let was_terminal = task.state.is_terminal();
        if was_terminal && task.state != status.state {
            tracing::debug!(task = %key.1, "update after a terminal state ignored");
            return;
        }
        let left_staging = task.state == TaskState::Staging && status.state != TaskState::Staging;
        let agent = task.agent_id.value.clone();
        task.state = status.state;
        task.latest = status.clone();
        task.latest.uuid = None;
        if status.state.is_terminal() && !was_terminal {
            self.release_task_resources(key, now);
        }
        self.enqueue_update(key, status, now);
        if left_staging {
            self.launch_caught_up(&agent, now);
        }
    }

    /// Puts a status on a task's update queue and sends it if it is the head.
    pub(super) fn enqueue_update(&mut self, key: &TaskKey, mut status: TaskStatus, now: Duration) {
        if status.uuid.is_none() {
            status.uuid = Some(mpiswarm_mesos::Bytes::random_uuid());
        }
        let Some(task) = self.tasks.get_mut(key) else { return };
        task.pending.push_back(status);
        if task.pending.len() == 1 {
            self.send_update_head(key, now);
        }
    }

    pub(super) fn send_update_head(&mut self, key: &TaskKey, now: Duration) {
        let Some(task) = self.tasks.get_mut(key) else { return };
        let Some(head) = task.pending.front() else { return };
        let Some(fw) = self.frameworks.get(&key.0) else { return };
        if fw.conn.is_some() {
            fw.send(&Event::update(head.clone()));
            task.last_sent = Some(now);
            self.counters.updates_forwarded += 1;
        }
    }

    /// Re-sends every unacknowledged head whose last send is older than the retry interval.
    pub(super) fn retry_updates(&mut self, now: Duration) {
        let retry = self.config.status_update_retry_interval;
        let due: Vec<TaskKey> = self
            .tasks
            .iter()
            .filter(|(k, t)| {
                !t.pending.is_empty()
                    && self.frameworks.get(&k.0).is_some_and(|f| f.conn.is_some())
                    && t.last_sent.is_none_or(|s| now.saturating_sub(s) >= retry)
            })
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            self.counters.updates_retried += 1;
            self.send_update_head(&key, now);
        }
    }

    /// Frees what a task holds (it ended or was removed).
    pub(super) fn release_task_resources(&mut self, key: &TaskKey, now: Duration) {
        let Some(task) = self.tasks.get(key) else { return };
        let (fw, role, agent) = (key.0.clone(), task.role.clone(), task.agent_id.value.clone());
        let resources = task.resources.clone();
        let executor = task.executor_id.clone();
        self.allocator.recover(&fw, &role, &agent, &resources, None, now);
        let Some(executor) = executor else { return };
        let ekey = (agent.clone(), fw.clone(), executor.value.clone());
        let Some(e) = self.executors.get_mut(&ekey) else { return };
        e.tasks = e.tasks.saturating_sub(1);
        if e.tasks > 0 {
            return;
        }
        if let Some(e) = self.executors.remove(&ekey) {
            self.allocator.recover(&fw, &e.role, &agent, &e.resources, None, now);
        }
    }

    /// Moves an ended task from the books to the completed list.
    pub(super) fn complete_task(&mut self, key: &TaskKey) {
        if let Some(task) = self.tasks.remove(key) {
            self.completed_tasks.push_back(task.latest);
            while self.completed_tasks.len() > COMPLETED_TASKS_KEPT {
                self.completed_tasks.pop_front();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{framework_with_stream, task_on, test_master};
    use super::*;

    fn running(task: &str) -> TaskStatus {
        TaskStatus::new(TaskId::new(task), TaskState::Running)
    }

    #[test]
    fn only_the_head_of_a_task_queue_is_sent_until_it_is_acknowledged() {
        let (mut m, _dir) = test_master();
        let mut events = framework_with_stream(&mut m, "F-1");
        let key = task_on(&mut m, "F-1", "A-1", "t1");
        m.enqueue_update(&key, running("t1"), Duration::ZERO);
        m.enqueue_update(&key, TaskStatus::new(TaskId::new("t1"), TaskState::Finished), Duration::ZERO);
        assert!(events.try_recv().is_ok(), "the head was sent");
        assert!(events.try_recv().is_err(), "the second waits for the acknowledgement of the first");
        assert_eq!(m.tasks[&key].pending.len(), 2);
    }

    #[test]
    fn an_unacknowledged_head_is_sent_again_after_the_retry_interval() {
        let (mut m, _dir) = test_master();
        let mut events = framework_with_stream(&mut m, "F-1");
        let key = task_on(&mut m, "F-1", "A-1", "t1");
        m.enqueue_update(&key, running("t1"), Duration::ZERO);
        events.try_recv().unwrap();
        let retry = m.config.status_update_retry_interval;
        m.retry_updates(retry - Duration::from_millis(1));
        assert!(events.try_recv().is_err(), "not before the interval");
        m.retry_updates(retry);
        assert!(events.try_recv().is_ok(), "re-sent at the interval");
        assert_eq!(m.counters.updates_retried, 1);
    }

    #[test]
    fn the_same_update_sent_twice_by_an_agent_is_queued_once() {
        let (mut m, _dir) = test_master();
        let _events = framework_with_stream(&mut m, "F-1");
        let key = task_on(&mut m, "F-1", "A-1", "t1");
        let mut status = running("t1");
        status.uuid = Some(mpiswarm_mesos::Bytes::random_uuid());
        m.apply_status(&key, status.clone(), Duration::ZERO);
        m.apply_status(&key, status, Duration::ZERO);
        assert_eq!(m.tasks[&key].pending.len(), 1);
    }

    #[test]
    fn master_statuses_are_stamped_from_the_time_passed_in() {
        let (m, _dir) = test_master();
        let s = m.master_status(
            &TaskId::new("t"),
            None,
            TaskState::Lost,
            Reason::ReasonReconciliation,
            "gone".into(),
            Duration::from_secs(5),
        );
        assert_eq!(s.timestamp, Some(m.clock.timestamp(Duration::from_secs(5))));
        assert_eq!(s.uuid, None, "the master's own statuses need no acknowledgement");
    }
}
