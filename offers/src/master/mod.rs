//! The master's bookkeeping: frameworks, agents, offers, tasks and their
//! status updates, and the timers of failover. It turns validated calls
//! into events on the frameworks' and agents' streams and keeps the
//! [`Allocator`] told of every change.
//!
//! It does no I/O: events go into channels as encoded records, and registry
//! changes are handed to the [`Registrar`]'s thread as snapshots (the caller
//! awaits the write after releasing the master's lock). Time is passed in:
//! `now` is the time since the master started, and wall-clock timestamps are
//! derived from it ([`WallClock`]); the only clock it reads is a stopwatch
//! around each allocation run, for the allocation-time metric.
//!
//! | file | holds |
//! |---|---|
//! | `config.rs` | tunables and constants |
//! | `error.rs` | [`CallError`], what a refused call answers |
//! | `connection.rs` | event streams to clients |
//! | `clock.rs` | [`WallClock`]: `now` to Unix time |
//! | `books.rs` | the records: frameworks, agents, offers, tasks, executors, counters |
//! | `frameworks.rs` | SUBSCRIBE and every other scheduler call |
//! | `agents.rs` | agent SUBSCRIBE, UPDATE, disconnection, loss |
//! | `authz.rs` | who may register, call as, tear down and read what |
//! | `offers.rs` | allocation into OFFERS, ACCEPT, DECLINE, rescinds |
//! | `backlog.rs` | backpressure: agents behind on their launches get no offers |
//! | `updates.rs` | status update queues and the master's own statuses |
//! | `timers.rs` | what `tick(now)` runs |
//! | `views.rs` | `/master/state` and the metrics snapshot |

mod agents;
mod authz;
mod backlog;
mod books;
mod clock;
mod config;
mod connection;
mod error;
mod frameworks;
mod offers;
mod timers;
mod updates;
mod views;

use crate::allocator::{Allocator, AllocatorConfig};
use crate::registrar::{Registrar, Ticket};
use crate::registry::RegistryState;
use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

pub use books::{Agent, Counters, ExecutorEntry, Framework, OfferEntry, Task};
pub use clock::WallClock;
pub use config::{DEFAULT_AGENT_PORT, DEFAULT_LAUNCH_BACKLOG, MESOS_VERSION, MasterConfig};
pub use connection::{Connection, Opened};
pub use error::CallError;
pub use views::MetricsSnapshot;

use books::{ExecutorKey, TaskKey};

/// The agents the registry listed at start that have not re-registered yet.
#[derive(Debug)]
struct AwaitedAgents {
    ids: HashSet<String>,
    /// When those still missing are marked removed.
    deadline: Duration,
}

/// The master.
#[derive(Debug)]
pub struct Master {
    pub config: MasterConfig,
    pub master_id: String,
    clock: WallClock,
    allocator: Allocator,
    registry: RegistryState,
    registrar: Registrar,
    frameworks: HashMap<String, Framework>,
    agents: HashMap<String, Agent>,
    offers: HashMap<String, OfferEntry>,
    tasks: HashMap<TaskKey, Task>,
    executors: HashMap<ExecutorKey, ExecutorEntry>,
    /// After a restart: registry agents that have not re-registered yet.
    /// Frameworks are served meanwhile, as in Mesos; only these agents'
    /// tasks wait (reconciliation does not answer for them until they come
    /// back or the timeout marks them removed).
    awaited_agents: Option<AwaitedAgents>,
    completed_tasks: VecDeque<mpiswarm_mesos::TaskStatus>,
    next_id: u64,
    last_heartbeat: Duration,
    last_allocation: Duration,
    /// Until when (master time) this master may act: offer, launch, kill,
    /// run its timers, take calls. `None`: always (one offer layer, no
    /// election). Set by the election ([`crate::election`]).
    fence: Option<Duration>,
    /// When this replica won the Lease, until its first offer after it.
    elected_at: Option<Duration>,
    pub counters: Counters,
}

impl Master {
    /// A master that recovers from the registry's `state`: its frameworks
    /// are known (not connected) and its agents are awaited for
    /// `agent_reregister_timeout`. Registry changes are written by `registrar`.
    pub fn new(config: MasterConfig, state: RegistryState, registrar: Registrar, clock: WallClock) -> Self {
        let mut allocator = Allocator::new(AllocatorConfig {
            allocation_interval: config.allocation_interval,
            ..AllocatorConfig::default()
        });
        for (role, weight) in &config.weights {
            allocator.set_weight(role, *weight);
        }
        for (role, limit) in &config.quotas {
            allocator.set_limit(role, limit.clone());
        }
        let mut master = Self {
            config,
            master_id: uuid::Uuid::new_v4().to_string(),
            clock,
            allocator,
            registry: RegistryState::default(),
            registrar,
            frameworks: HashMap::new(),
            agents: HashMap::new(),
            offers: HashMap::new(),
            tasks: HashMap::new(),
            executors: HashMap::new(),
            awaited_agents: None,
            completed_tasks: VecDeque::new(),
            next_id: 0,
            last_heartbeat: Duration::ZERO,
            last_allocation: Duration::ZERO,
            fence: None,
            elected_at: None,
            counters: Counters::default(),
        };
        master.adopt(state);
        master
    }

    /// Recovers from the registry's `state`, in a master that knows no
    /// framework or agent yet (at start, or a standby that won the Lease and
    /// read the shared registry): its frameworks are known, not connected;
    /// its agents are awaited for `agent_reregister_timeout`.
    pub fn adopt(&mut self, state: RegistryState) {
        let ids: HashSet<String> = state.agents.keys().cloned().collect();
        self.awaited_agents =
            (!ids.is_empty()).then_some(AwaitedAgents { ids, deadline: self.config.agent_reregister_timeout });
        for (id, info) in &state.frameworks {
            let id = mpiswarm_mesos::FrameworkId::new(id);
            let fw = Framework::recovered(id, Some(info.clone()));
            self.allocator.add_framework(fw.id.value.as_str(), &fw.roles, &[]);
            self.allocator.set_framework_active(&fw.id.value, false);
            self.frameworks.insert(fw.id.value.clone(), fw);
        }
        self.registry = state;
    }

    /// Whether this master must not act at `now`: it is a standby, or it led
    /// and its last renewal of the Lease is older than the fence allows.
    pub fn is_fenced(&self, now: Duration) -> bool {
        self.fence.is_some_and(|until| now >= until)
    }

    /// The election moves the fence: `Some(ZERO)` while standing by, the end
    /// of the fence after each renewal.
    pub fn set_fence(&mut self, until: Option<Duration>) {
        self.fence = until;
    }

    /// This master starts leading at `now` (won the election): the agents
    /// the registry lists get the whole re-register timeout from now, not
    /// from the process's start.
    pub fn begin_leading(&mut self, now: Duration) {
        if let Some(awaited) = self.awaited_agents.as_mut() {
            awaited.deadline = now + self.config.agent_reregister_timeout;
        }
        self.last_allocation = now;
        self.last_heartbeat = now;
        self.elected_at = Some(now);
        self.counters.leader_elected += 1;
    }

    /// Offers went out at `now`: the first after an election is timed.
    fn offered(&mut self, count: usize, now: Duration) {
        self.counters.offers_sent += count as u64;
        if let Some(at) = self.elected_at.take() {
            self.counters.elected_to_first_offer = Some(now.saturating_sub(at).as_secs_f64());
        }
    }

    /// The refusal of a call to a fenced master (503: the caller retries,
    /// or tries another replica).
    pub fn fence_refusal(&self, now: Duration) -> Option<CallError> {
        self.is_fenced(now).then(|| {
            CallError::unavailable(
                "This offer layer is not the leader (it holds no current Lease); retry, or call another replica",
            )
        })
    }

    /// Whether registered agents are still expected back after a restart.
    pub fn is_recovering(&self) -> bool {
        self.awaited_agents.is_some()
    }

    /// Whether `agent` is listed in the registry and has not re-registered since the restart.
    pub fn is_awaiting_agent(&self, agent: &str) -> bool {
        self.awaited_agents.as_ref().is_some_and(|a| a.ids.contains(agent))
    }

    fn next_id(&mut self, kind: &str) -> String {
        self.next_id += 1;
        format!("{}-{kind}{:04}", self.master_id, self.next_id)
    }

    /// Hands the registry's current state to the writer thread.
    fn persist_registry(&mut self) {
        self.registrar.submit(&self.registry);
    }

    /// The number of registry snapshots handed over so far; with
    /// [`Master::registry_ticket_since`] a caller learns whether its call changed the registry.
    pub fn registry_seq(&self) -> u64 {
        self.registrar.submitted()
    }

    /// The ticket of the newest registry write, if one was made after `seq`.
    pub fn registry_ticket_since(&self, seq: u64) -> Option<Ticket> {
        let newest = self.registrar.submitted();
        (newest > seq).then(|| self.registrar.ticket(newest))
    }

    /// What the registry writer has done: written, failed, and the last error.
    pub fn registry_progress(&self) -> crate::registrar::Progress {
        self.registrar.progress()
    }

    /// Ends every event stream (the server is stopping): clients see their
    /// stream close and reconnect to whoever serves next.
    pub fn close_all_streams(&mut self) {
        for f in self.frameworks.values_mut() {
            f.conn = None;
        }
        for a in self.agents.values_mut() {
            a.conn = None;
        }
    }
}

/// Builders for the unit tests of the master's files.
#[cfg(test)]
mod testing {
    use super::*;
    use mpiswarm_mesos::quantities::Quantities;
    use mpiswarm_mesos::{AgentId, FrameworkId, FrameworkInfo, TaskId, TaskInfo, TaskState, TaskStatus};

    pub fn test_master_with_registry(state: RegistryState) -> (Master, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let registrar = Registrar::spawn(dir.path().join("registry.json")).unwrap();
        (Master::new(MasterConfig::default(), state, registrar, WallClock::starting_at(1_000_000.0)), dir)
    }

    pub fn test_master() -> (Master, tempfile::TempDir) {
        test_master_with_registry(RegistryState::default())
    }

    /// A subscribed framework `id` (role `mpi`); returns its event stream.
    pub fn framework_with_stream(m: &mut Master, id: &str) -> tokio::sync::mpsc::UnboundedReceiver<bytes::Bytes> {
        let (conn, events) = Connection::open();
        let mut f = Framework::recovered(FrameworkId::new(id), Some(FrameworkInfo::new("root", id, &["mpi"])));
        f.conn = Some(conn);
        f.recovered = false;
        m.allocator.add_framework(id, &f.roles, &[]);
        m.frameworks.insert(id.to_owned(), f);
        events
    }

    /// The scheduler events a framework's stream holds now.
    pub fn events_of(
        rx: &mut tokio::sync::mpsc::UnboundedReceiver<bytes::Bytes>,
    ) -> Vec<mpiswarm_mesos::scheduler::Event> {
        let mut out = Vec::new();
        while let Ok(record) = rx.try_recv() {
            let text = std::str::from_utf8(&record).unwrap();
            let json = text.split_once('\n').unwrap().1;
            out.push(serde_json::from_str(json).unwrap());
        }
        out
    }

    /// A RUNNING task `task` of framework `fw` on agent `agent`, in the books only.
    pub fn task_on(m: &mut Master, fw: &str, agent: &str, task: &str) -> TaskKey {
        let key: TaskKey = (fw.to_owned(), task.to_owned());
        let info = TaskInfo::new(task, task, &AgentId::new(agent));
        m.tasks.insert(
            key.clone(),
            Task {
                framework_id: FrameworkId::new(fw),
                agent_id: AgentId::new(agent),
                info,
                executor_id: None,
                role: "mpi".into(),
                resources: Quantities::new(),
                state: TaskState::Running,
                latest: TaskStatus::new(TaskId::new(task), TaskState::Running),
                pending: VecDeque::new(),
                last_sent: None,
                kill_requested: false,
            },
        );
        key
    }
}
