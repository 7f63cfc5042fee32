//! The one writer of the agent's data directory: a thread that applies
//! writes (task records, their removal, the agent id) in the order they were
//! queued, each durable before the next ([`crate::store`] fsyncs). Callers
//! queue without blocking and never wait for the disk, so a write may be
//! queued under the agent's locks and on an async worker; nothing else in
//! the agent touches the data directory after start-up.
//!
//! A failed write is logged with its path and counted (`store_errors` on
//! `/metrics`); the agent keeps running on what it has in memory.

use prometheus_client::metrics::counter::Counter;
use std::sync::mpsc;

use mpiswarm_mesos::AgentId;

use crate::store::{Store, StoreError, TaskRecord};

enum Op {
    SaveTask(Box<TaskRecord>),
    ForgetTask(String),
    SaveAgentId(AgentId),
    /// Answered once everything queued before it is on disk.
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// The queue to the writer thread; the thread ends when this is dropped.
pub struct Writer {
    queue: mpsc::Sender<Op>,
}

impl Writer {
    /// Starts the writer thread over `store`, counting failures in `errors`.
    pub fn start(store: Store, errors: Counter) -> std::io::Result<Self> {
        let (queue, ops) = mpsc::channel();
        std::thread::Builder::new().name("agent-store".into()).spawn(move || write_all(&store, &ops, &errors))?;
        Ok(Self { queue })
    }

    pub fn save_task(&self, record: TaskRecord) {
        self.send(Op::SaveTask(Box::new(record)));
    }

    pub fn forget_task(&self, service_name: &str) {
        self.send(Op::ForgetTask(service_name.to_owned()));
    }

    pub fn save_agent_id(&self, id: AgentId) {
        self.send(Op::SaveAgentId(id));
    }

    /// Waits until every write queued before this call is on disk.
    pub async fn flush(&self) {
        let (done, written) = tokio::sync::oneshot::channel();
        self.send(Op::Flush(done));
        // An error means the thread is gone, and with it any pending write.
        let _ = written.await;
    }

    fn send(&self, op: Op) {
        if self.queue.send(op).is_err() {
            tracing::error!("the data directory writer has stopped; a write is lost");
        }
    }
}

fn write_all(store: &Store, ops: &mpsc::Receiver<Op>, errors: &Counter) {
    for op in ops {
        let result: Result<(), StoreError> = match op {
            Op::SaveTask(record) => store.save_task(&record),
            Op::ForgetTask(service) => store.forget_task(&service),
            Op::SaveAgentId(id) => store.save_agent_id(&id),
            Op::Flush(done) => {
                let _ = done.send(());
                Ok(())
            }
        };
        if let Err(e) = result {
            errors.inc();
            tracing::error!(error = %e, "a write to the data directory failed; a restart may not know this change");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::record;
    use mpiswarm_mesos::TaskState;

    #[tokio::test]
    async fn writes_land_in_order_and_flush_waits_for_them() {
        let dir = tempfile::tempdir().unwrap();
        let errors = Counter::default();
        let writer = Writer::start(Store::open(dir.path()).unwrap(), errors.clone()).unwrap();
        let mut r = record("s1");
        writer.save_task(r.clone());
        r.status.state = TaskState::Finished;
        writer.save_task(r.clone());
        writer.save_task(record("s2"));
        writer.forget_task("s2");
        writer.save_agent_id(AgentId::new("agent-9"));
        writer.flush().await;
        let store = Store::open(dir.path()).unwrap();
        let tasks = store.tasks().unwrap();
        assert_eq!(tasks.len(), 1, "s2 was saved, then forgotten");
        assert_eq!(tasks[0].status.state, TaskState::Finished, "the later save of s1 won");
        assert_eq!(store.agent_id().unwrap(), Some(AgentId::new("agent-9")));
        assert_eq!(errors.get(), 0);
    }

    #[tokio::test]
    async fn a_failed_write_is_counted_and_the_writer_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let errors = Counter::default();
        let writer = Writer::start(Store::open(dir.path()).unwrap(), errors.clone()).unwrap();
        std::fs::remove_dir_all(dir.path().join("tasks")).unwrap();
        writer.save_task(record("s1"));
        writer.save_agent_id(AgentId::new("agent-1"));
        writer.flush().await;
        assert_eq!(errors.get(), 1);
        assert_eq!(Store::open(dir.path()).unwrap().agent_id().unwrap(), Some(AgentId::new("agent-1")));
    }
}
