//! How a tracked task changes state and what the framework hears: every
//! change is recorded (queued to the writer) and its TaskStatus queued to the
//! outbox, both under the tasks lock so their order is the order of the
//! changes; a task that ended keeps its terminal state. Tasks the agent does
//! not track (refused or failed launches, unknown KILLs) get statuses too.

use std::time::{SystemTime, UNIX_EPOCH};

use mpiswarm_mesos::{AgentId, Bytes, FrameworkId, Labels, Reason, Source, TaskId, TaskState, TaskStatus};

use crate::agent::{Agent, Outgoing, Tracked};
use crate::locks::lock;
use crate::observe::Observed;
use crate::swarm::Swarm;

impl<S: Swarm + 'static> Agent<S> {
    /// [`Self::transition`] only if the task is still in `last` and no KILL
    /// took it over meanwhile (an observation made before a KILL must not
    /// overwrite it). Returns whether it happened.
    pub(crate) fn transition_from(&self, service_name: &str, last: TaskState, observed: Observed) -> bool {
        self.transition_if(service_name, |t| !t.killing && t.record.status.state == last, observed)
    }

    /// Records and reports a new state of a tracked task; a task that ended
    /// keeps its terminal state.
    pub(crate) fn transition(&self, service_name: &str, observed: Observed) -> bool {
        self.transition_if(service_name, |_| true, observed)
    }

    fn transition_if(&self, service_name: &str, guard: impl Fn(&Tracked) -> bool, observed: Observed) -> bool {
        let mut tasks = lock(&self.tasks);
        let Some(t) = tasks.get_mut(service_name) else { return false };
        if t.record.status.state.is_terminal() || !guard(t) {
            return false;
        }
        let status = self.status(
            &t.record.task_info.task_id,
            t.record.executor_info.as_ref().map(|e| &e.executor_id),
            &observed,
        );
        tracing::info!(task = %t.record.task_info.task_id, state = status.state.as_str(), message = %observed.message, "task state");
        t.record.status = status.clone();
        t.record.acknowledged = false;
        // Queued under the lock, so records reach the disk in the order of
        // the changes; written by the writer thread, off this worker.
        self.writer.save_task(t.record.clone());
        self.queue(Outgoing { framework_id: t.record.framework_id.clone(), status });
        true
    }

    pub(crate) fn send_untracked(
        &self,
        framework_id: &FrameworkId,
        task_id: &TaskId,
        executor_id: Option<&mpiswarm_mesos::ExecutorId>,
        state: TaskState,
        reason: Reason,
        message: String,
    ) {
        let observed = Observed { reason: Some(reason), ..Observed::simple(state, message) };
        let status = self.status(task_id, executor_id, &observed);
        self.queue(Outgoing { framework_id: framework_id.clone(), status });
    }

    fn status(
        &self,
        task_id: &TaskId,
        executor_id: Option<&mpiswarm_mesos::ExecutorId>,
        observed: &Observed,
    ) -> TaskStatus {
        new_status(task_id, executor_id, observed, self.agent_id())
    }
}

/// The TaskStatus the agent sends for `observed`: from the executor, with a
/// uuid to acknowledge, a timestamp, and the exit code label when there is one.
pub(crate) fn new_status(
    task_id: &TaskId,
    executor_id: Option<&mpiswarm_mesos::ExecutorId>,
    observed: &Observed,
    agent_id: Option<AgentId>,
) -> TaskStatus {
    let mut status = TaskStatus::new(task_id.clone(), observed.state);
    status.message = Some(observed.message.clone());
    status.source = Some(Source::SourceExecutor);
    status.reason = observed.reason;
    status.agent_id = agent_id;
    status.executor_id = executor_id.cloned();
    status.timestamp = SystemTime::now().duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs_f64());
    status.uuid = Some(Bytes::random_uuid());
    if let Some(code) = observed.exit_code {
        let code = code.to_string();
        status.labels = Some(Labels::from_pairs([(crate::labels::EXIT_CODE, code.as_str())]));
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exit_is_labelled_with_its_code_and_every_status_can_be_acknowledged() {
        let observed = Observed {
            reason: Some(Reason::ReasonCommandExecutorFailed),
            exit_code: Some(3),
            ..Observed::simple(TaskState::Failed, "container exited with code 3")
        };
        let executor = mpiswarm_mesos::ExecutorId::new("ex");
        let s = new_status(&TaskId::new("t"), Some(&executor), &observed, Some(AgentId::new("a")));
        assert_eq!((s.state, s.reason), (TaskState::Failed, Some(Reason::ReasonCommandExecutorFailed)));
        assert_eq!(s.labels.as_ref().and_then(|l| l.get(crate::labels::EXIT_CODE)), Some("3"));
        assert_eq!(s.message.as_deref(), Some("container exited with code 3"));
        assert_eq!((s.agent_id, s.executor_id), (Some(AgentId::new("a")), Some(executor)));
        assert_eq!(s.source, Some(Source::SourceExecutor));
        assert!(s.uuid.is_some() && s.timestamp.is_some());
        let running = new_status(&TaskId::new("t"), None, &Observed::simple(TaskState::Running, "up"), None);
        assert_eq!(running.labels, None, "no exit code, no label");
    }
}
