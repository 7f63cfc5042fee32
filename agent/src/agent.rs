//! The agent's state: which task runs as which service, what the framework
//! last heard of each, and the handles it works through (Swarm, the writer
//! of its data directory, the outbox of statuses, the spawner of its work).
//! The transitions live beside it: [`crate::events`] (offer-layer events),
//! [`crate::lifecycle`] (launch, kill, acknowledge), [`crate::statuses`]
//! (state changes and the TaskStatus they send), [`crate::resync`] (Swarm
//! observations). It owns no connection; [`crate::run`] wires it up.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use mpiswarm_mesos::agent_api::ReportedTask;
use mpiswarm_mesos::{AgentId, TaskId, TaskState};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::{mpsc, watch};

use crate::locks::{lock, read, write};
use crate::mounts::HostPaths;
use crate::node_health::NodeWatch;
use crate::output::Follower;
use crate::sandbox::Sandbox;
use crate::store::{Store, StoreError, TaskRecord};
use crate::swarm::Swarm;
use crate::watchdog::Spawner;
use crate::writer::Writer;

/// A status on its way to the offer layer (delivered by `mpiswarm_mesos::agent_session`).
pub use mpiswarm_mesos::agent_session::Outgoing;

#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// How long a service labelled as this agent's but unknown to it (no
    /// task record) is left alone before it is removed.
    pub orphan_grace: Duration,
    /// How many log lines a terminal status carries.
    pub log_lines: usize,
    /// The most bytes of each of a task's stdout and stderr that are kept.
    pub output_limit: u64,
    /// How long the output of a task that ended by itself is kept once no
    /// tracked task owns it.
    pub output_retention: Duration,
    /// Where bind mounts may come from (none by default).
    pub host_paths: HostPaths,
    /// How often the node's Swarm status is read ([`crate::node_health`]).
    pub node_check: Duration,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            orphan_grace: Duration::from_secs(60),
            log_lines: 20,
            output_limit: 8 * 1024 * 1024,
            output_retention: Duration::from_secs(3600),
            host_paths: HostPaths::none(),
            node_check: Duration::from_secs(1),
        }
    }
}

pub(crate) struct Tracked {
    pub(crate) record: TaskRecord,
    /// A KILL is removing the service; observations are not reported.
    pub(crate) killing: bool,
}

pub struct Agent<S: Swarm> {
    pub(crate) swarm: S,
    pub(crate) node_id: String,
    pub(crate) writer: Writer,
    pub(crate) config: AgentConfig,
    pub(crate) agent_id: RwLock<Option<AgentId>>,
    /// By service name (unique per framework and task).
    pub(crate) tasks: Mutex<HashMap<String, Tracked>>,
    /// Services being created: not yet observable, and a KILL for them waits.
    pub(crate) launching: Mutex<HashSet<String>>,
    pub(crate) kill_requested: Mutex<HashSet<String>>,
    pub(crate) orphans: Mutex<HashMap<String, Instant>>,
    /// Serialises launches with garbage collection (see [`crate::launch`]).
    pub(crate) objects: tokio::sync::Mutex<()>,
    pub(crate) gc_pending: Mutex<bool>,
    pub(crate) outbox: mpsc::UnboundedSender<Outgoing>,
    pub(crate) spawner: Spawner,
    /// The kept output of tasks, and who follows it.
    pub(crate) sandbox: Sandbox,
    pub(crate) followers: Mutex<HashMap<String, Follower>>,
    pub(crate) last_output_expiry: Mutex<Option<Instant>>,
    /// The served node's health as last seen ([`crate::node_health`]).
    pub(crate) node_watch: Mutex<NodeWatch>,
    /// False while the node is down: the session then holds no subscription.
    pub(crate) serving: watch::Sender<bool>,
    /// Statuses queued to the outbox, and those the session has settled
    /// (accepted or refused for good): a withdrawal waits for the first.
    pub(crate) statuses_queued: AtomicU64,
    pub(crate) statuses_settled: watch::Sender<u64>,
    pub counters: Counters,
}

/// Monotonic counts exported on `/metrics`.
#[derive(Default)]
pub struct Counters {
    pub launched: Counter,
    pub launch_failures: Counter,
    pub refused: Counter,
    pub status_updates: Counter,
    pub resyncs: Counter,
    pub objects_removed: Counter,
    pub orphans_removed: Counter,
    pub store_errors: Counter,
    /// Times the served node was seen go down (its tasks then went LOST).
    pub node_losses: Counter,
}

/// Why the agent could not start on its data directory.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot start the data directory writer thread: {0}")]
    Writer(std::io::Error),
}

impl<S: Swarm + 'static> Agent<S> {
    /// An agent over `swarm` on `node_id`, with the tasks remembered in
    /// `store`, spawning its work with `spawner`. Statuses go to the
    /// returned receiver.
    pub fn new(
        swarm: S,
        node_id: String,
        store: Store,
        config: AgentConfig,
        spawner: Spawner,
    ) -> Result<(Arc<Self>, mpsc::UnboundedReceiver<Outgoing>), StartError> {
        let (outbox, rx) = mpsc::unbounded_channel();
        let agent_id = store.agent_id()?;
        let mut tasks = HashMap::new();
        for record in store.tasks()? {
            tasks.insert(record.service_name.clone(), Tracked { record, killing: false });
        }
        let counters = Counters::default();
        let sandbox = crate::output::sandbox_in(store.dir(), config.output_limit);
        let writer = Writer::start(store, counters.store_errors.clone()).map_err(StartError::Writer)?;
        let agent = Arc::new(Self {
            swarm,
            node_id: node_id.clone(),
            writer,
            config,
            agent_id: RwLock::new(agent_id),
            tasks: Mutex::new(tasks),
            launching: Mutex::default(),
            kill_requested: Mutex::default(),
            orphans: Mutex::default(),
            objects: tokio::sync::Mutex::new(()),
            gc_pending: Mutex::new(true),
            outbox,
            spawner,
            sandbox,
            followers: Mutex::default(),
            last_output_expiry: Mutex::default(),
            node_watch: Mutex::new(NodeWatch::new(node_id.clone())),
            serving: watch::channel(true).0,
            statuses_queued: AtomicU64::new(0),
            statuses_settled: watch::channel(0).0,
            counters,
        });
        Ok((agent, rx))
    }

    pub fn agent_id(&self) -> Option<AgentId> {
        read(&self.agent_id).clone()
    }

    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// Records the id the offer layer assigned (SUBSCRIBED) and keeps it for restarts.
    pub fn set_agent_id(&self, id: AgentId) {
        let mut current = write(&self.agent_id);
        if current.as_ref() != Some(&id) {
            if let Some(old) = current.as_ref() {
                tracing::warn!(%old, new = %id, "the offer layer assigned a new agent id; services of the old id become orphans");
            }
            self.writer.save_agent_id(id.clone());
            *current = Some(id);
        }
    }

    /// Queues a status for the offer layer (counted, so a withdrawal can
    /// wait until it is settled).
    pub(crate) fn queue(&self, outgoing: Outgoing) {
        self.statuses_queued.fetch_add(1, Ordering::SeqCst);
        if self.outbox.send(outgoing).is_err() {
            // The session is gone (the agent is stopping): nothing to wait for.
            self.statuses_queued.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// The session settled one status (accepted, or refused for good).
    pub fn status_settled(&self) {
        self.statuses_settled.send_modify(|n| *n += 1);
    }

    /// Whether the agent serves, as a receiver for the session (false while
    /// the node is down).
    pub fn serving_updates(&self) -> watch::Receiver<bool> {
        self.serving.subscribe()
    }

    /// The kept output of tasks (served on `/files`).
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// Waits until every record change made so far is on disk.
    pub async fn flush(&self) {
        self.writer.flush().await;
    }

    /// What SUBSCRIBE reports: every live task and every terminal task whose
    /// terminal update the framework has not acknowledged.
    pub fn reported_tasks(&self) -> Vec<ReportedTask> {
        lock(&self.tasks).values().filter(|t| reported(&t.record)).map(|t| report(&t.record)).collect()
    }

    /// Every known task: service name, task id and the state last reported.
    pub fn snapshot(&self) -> Vec<(String, TaskId, TaskState)> {
        let mut out: Vec<_> = lock(&self.tasks)
            .iter()
            .map(|(name, t)| (name.clone(), t.record.task_info.task_id.clone(), t.record.status.state))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

/// Whether SUBSCRIBE reports `record`: unless its terminal update was acknowledged.
fn reported(record: &TaskRecord) -> bool {
    !(record.status.state.is_terminal() && record.acknowledged)
}

fn report(record: &TaskRecord) -> ReportedTask {
    ReportedTask {
        framework_id: record.framework_id.clone(),
        task_info: record.task_info.clone(),
        executor_info: record.executor_info.clone(),
        status: record.status.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::record;

    #[test]
    fn a_task_is_reported_until_its_terminal_update_is_acknowledged() {
        let mut r = record("s");
        assert!(reported(&r), "running");
        r.acknowledged = true;
        assert!(reported(&r), "an acknowledged RUNNING still runs");
        r.status.state = TaskState::Finished;
        r.acknowledged = false;
        assert!(reported(&r), "FINISHED, not yet acknowledged");
        r.acknowledged = true;
        assert!(!reported(&r));
        assert_eq!(report(&r).task_info, r.task_info);
    }
}
