//! The agent: a node's tasks as Swarm services, made of owned parts, each
//! with its own state and a narrow API, none of which knows the agent:
//!
//! - [`crate::tasks`]: the task table (records, statuses, launching and
//!   killing marks, the agent id);
//! - [`crate::output`]: the followers of tasks' output and the sandbox;
//! - [`crate::node_watch`]: the served node's health and whether it is served;
//! - [`crate::launch`]: launches and garbage collections, one at a time;
//! - [`crate::orphans`]: services no task owns, until their grace ends;
//! - [`crate::start_retries`]: tasks the engine could not start, started again.
//!
//! What the agent does with them lives beside it, one concern a file:
//! [`crate::events`] (offer-layer events), [`crate::lifecycle`] (launch,
//! kill, acknowledge), [`crate::resync`] (Swarm observations),
//! [`crate::node_health`] (a node that went down). It owns no connection;
//! [`crate::run`] wires it up.
//!
//! Why owned parts and not one actor (as Mesos' master is): almost all of
//! the agent's work is waiting on Docker (a service creation, a removal, a
//! log stream that lasts as long as the task), and that work must overlap
//! (one group's launch must not wait for another's kill, nor a kill for a
//! resync). An actor would have to spawn each wait anyway and take its
//! result back as a message, and would serialise the short bookkeeping the
//! parts already keep consistent on their own. Each part holds its std lock
//! only inside plain (non-async) methods, so no guard can live across an
//! `.await`; the one lock held across Swarm calls is the tokio mutex of
//! [`crate::launch::Objects`], which orders launches against collections.
//! Nothing blocking runs under a lock: records go to the writer thread
//! ([`crate::writer`]), sandbox I/O to `spawn_blocking`.

use std::sync::Arc;
use std::time::Duration;

use mpiswarm_mesos::agent_api::ReportedTask;
use mpiswarm_mesos::{AgentId, TaskId, TaskState};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::{mpsc, watch};

use crate::launch::Objects;
use crate::mounts::HostPaths;
use crate::node_watch::NodeWatch;
use crate::orphans::Orphans;
use crate::output::Outputs;
use crate::sandbox::Sandbox;
use crate::start_retries::StartRetries;
use crate::statuses::Outbox;
use crate::store::{Store, StoreError};
use crate::swarm::Swarm;
use crate::tasks::TaskTable;
use crate::watchdog::Spawner;
use crate::writer::Writer;

/// A status on its way to the offer layer (delivered by `mpiswarm_mesos::agent_session`).
pub use crate::statuses::Outgoing;

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
    /// Which volume driver options tasks may pass (none by default).
    pub volume_options: crate::mounts::VolumeOptions,
    /// Existing named volumes mounted as they are, uninspected (none by default).
    pub trusted_volumes: crate::existing::TrustedVolumes,
    /// How often the node's Swarm status is read ([`crate::node_health`]).
    pub node_check: Duration,
    /// How long Swarm must call the node down before its tasks are lost
    /// ([`crate::node_watch`]).
    pub node_down_confirm: Duration,
    /// How many times a task the engine could not start is started in all
    /// before its failure is reported ([`crate::start_retries`]).
    pub start_attempts: u32,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            orphan_grace: Duration::from_secs(60),
            log_lines: 20,
            output_limit: 8 * 1024 * 1024,
            output_retention: Duration::from_secs(3600),
            host_paths: HostPaths::none(),
            volume_options: crate::mounts::VolumeOptions::none(),
            trusted_volumes: crate::existing::TrustedVolumes::default(),
            node_check: Duration::from_secs(1),
            node_down_confirm: Duration::from_secs(3),
            start_attempts: 3,
        }
    }
}

pub struct Agent<S: Swarm> {
    pub(crate) swarm: Arc<S>,
    pub(crate) node_id: String,
    pub(crate) config: AgentConfig,
    pub(crate) tasks: TaskTable,
    pub(crate) outputs: Outputs<S>,
    pub(crate) node: NodeWatch,
    pub(crate) objects: Objects,
    pub(crate) orphans: Orphans,
    pub(crate) retries: StartRetries,
    pub(crate) spawner: Spawner,
    pub counters: Counters,
}

/// Monotonic counts exported on `/metrics`.
#[derive(Default)]
pub struct Counters {
    pub launched: Counter,
    pub launch_failures: Counter,
    /// Tasks the engine could not start, started again ([`crate::start_retries`]).
    pub start_retries: Counter,
    pub refused: Counter,
    pub status_updates: Counter,
    pub resyncs: Counter,
    pub objects_removed: Counter,
    pub orphans_removed: Counter,
    pub store_errors: Counter,
    /// Times the served node was seen go down (its tasks then went LOST).
    pub node_losses: Counter,
    /// Times Swarm called the node down and it was ready again within the
    /// confirmation period (its tasks stayed).
    pub node_flaps: Counter,
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
        let (outbox, rx) = Outbox::new();
        let agent_id = store.agent_id()?;
        let records = store.tasks()?;
        let counters = Counters::default();
        let swarm = Arc::new(swarm);
        let outputs = Outputs::new(
            Arc::clone(&swarm),
            store.dir(),
            config.output_limit,
            config.output_retention,
            spawner.clone(),
        );
        let writer = Writer::start(store, counters.store_errors.clone()).map_err(StartError::Writer)?;
        let agent = Arc::new(Self {
            swarm,
            node: NodeWatch::new(node_id.clone(), config.node_down_confirm),
            node_id,
            tasks: TaskTable::new(agent_id, records, writer, outbox),
            outputs,
            objects: Objects::new(),
            orphans: Orphans::new(config.orphan_grace),
            retries: StartRetries::new(config.start_attempts),
            config,
            spawner,
            counters,
        });
        Ok((agent, rx))
    }

    pub fn agent_id(&self) -> Option<AgentId> {
        self.tasks.agent_id()
    }

    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// Records the id the offer layer assigned (SUBSCRIBED) and keeps it for restarts.
    pub fn set_agent_id(&self, id: AgentId) {
        self.tasks.set_agent_id(id);
    }

    /// The session settled one status (accepted, or refused for good).
    pub fn status_settled(&self) {
        self.tasks.outbox().settled();
    }

    /// Whether the agent serves, as a receiver for the session (false while
    /// the node is down).
    pub fn serving_updates(&self) -> watch::Receiver<bool> {
        self.node.serving_updates()
    }

    /// The kept output of tasks (served on `/files`).
    pub fn sandbox(&self) -> &Sandbox {
        self.outputs.sandbox()
    }

    /// Waits until every record change made so far is on disk.
    pub async fn flush(&self) {
        self.tasks.flush().await;
    }

    /// What SUBSCRIBE reports: every live task and every terminal task whose
    /// terminal update the framework has not acknowledged.
    pub fn reported_tasks(&self) -> Vec<ReportedTask> {
        self.tasks.reported_tasks()
    }

    /// Every known task: service name, task id and the state last reported.
    pub fn snapshot(&self) -> Vec<(String, TaskId, TaskState)> {
        self.tasks.snapshot()
    }
}
