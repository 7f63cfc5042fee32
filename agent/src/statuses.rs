//! Statuses on their way to the offer layer: the [`Outbox`] the session
//! drains (`mpiswarm_mesos::agent_session` POSTs each as UPDATE), with a
//! count of the statuses queued and of those the session settled (accepted,
//! or refused for good), so a withdrawal can wait until what it reported
//! has arrived; and [`new_status`], the TaskStatus the agent sends for an
//! observed state.
//!
//! It owns no lock (an atomic counter and a watch channel), decides no
//! state change (that is [`crate::tasks`]'), and never blocks: queueing is a
//! send on an unbounded channel.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mpiswarm_mesos::{AgentId, Bytes, Labels, Source, TaskId, TaskStatus};
use tokio::sync::{mpsc, watch};

use crate::observe::Observed;

/// A status on its way to the offer layer (delivered by `mpiswarm_mesos::agent_session`).
pub use mpiswarm_mesos::agent_session::Outgoing;

/// The queue of statuses to the session, counted.
pub struct Outbox {
    sender: mpsc::UnboundedSender<Outgoing>,
    queued: AtomicU64,
    settled: watch::Sender<u64>,
}

impl Outbox {
    /// An outbox and the receiver the session drains.
    pub fn new() -> (Self, mpsc::UnboundedReceiver<Outgoing>) {
        let (sender, rx) = mpsc::unbounded_channel();
        (Self { sender, queued: AtomicU64::new(0), settled: watch::channel(0).0 }, rx)
    }

    /// Queues a status for the offer layer.
    pub fn queue(&self, outgoing: Outgoing) {
        self.queued.fetch_add(1, Ordering::SeqCst);
        if self.sender.send(outgoing).is_err() {
            // The session is gone (the agent is stopping): nothing to wait for.
            self.queued.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// The session settled one status (accepted, or refused for good).
    pub fn settled(&self) {
        self.settled.send_modify(|n| *n += 1);
    }

    /// Waits until every status queued so far was settled, at most
    /// `deadline`; false if the deadline came first.
    pub async fn wait_settled(&self, deadline: Duration) -> bool {
        let target = self.queued.load(Ordering::SeqCst);
        let mut settled = self.settled.subscribe();
        tokio::time::timeout(deadline, settled.wait_for(|n| *n >= target)).await.is_ok()
    }

    /// Stands in for the session in tests: settles everything queued so far.
    #[cfg(test)]
    pub(crate) fn settle_all(&self) {
        self.settled.send_replace(self.queued.load(Ordering::SeqCst));
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
    use mpiswarm_mesos::{FrameworkId, Reason, TaskState};

    #[tokio::test]
    async fn a_wait_for_settlement_ends_once_the_session_settled_every_queued_status() {
        let (outbox, mut rx) = Outbox::new();
        let outgoing = || Outgoing {
            framework_id: FrameworkId::new("F"),
            status: TaskStatus::new(TaskId::new("t"), TaskState::Lost),
        };
        outbox.queue(outgoing());
        outbox.queue(outgoing());
        let waiting = outbox.wait_settled(Duration::from_secs(60));
        tokio::pin!(waiting);
        assert!(futures::poll!(&mut waiting).is_pending(), "nothing settled yet");
        outbox.settled();
        assert!(futures::poll!(&mut waiting).is_pending(), "one of two settled");
        outbox.settled();
        assert!(waiting.await, "both settled");
        assert_eq!((rx.try_recv().is_ok(), rx.try_recv().is_ok()), (true, true));
        drop(rx);
        outbox.queue(outgoing());
        assert!(outbox.wait_settled(Duration::from_secs(60)).await, "a status nobody can take is not waited for");
    }

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
