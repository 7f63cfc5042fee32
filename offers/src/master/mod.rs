//! The master's bookkeeping: frameworks, agents, offers, tasks and their
//! status updates, and the timers of failover. It turns validated calls
//! into events on the frameworks' and agents' streams and keeps the
//! [`Allocator`] told of every change. It does no I/O besides the registry
//! file and sending already-encoded events into channels; time is passed
//! in (`now` = time since the master started).

mod agents;
mod frameworks;
mod offers;
mod views;

use crate::allocator::{Allocator, AllocatorConfig};
use crate::registry::Registry;
use bytes::Bytes;
use mpiswarm_mesos::quantities::Quantities;
use mpiswarm_mesos::{
    AgentId, ExecutorId, FrameworkId, FrameworkInfo, TaskId, TaskInfo, TaskState, TaskStatus, agent_api, recordio,
};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::Duration;
use tokio::sync::mpsc;

pub use views::MetricsSnapshot;

/// The Mesos version we answer as: client libraries check it.
pub const MESOS_VERSION: &str = "1.11.0";

/// Tunables of the master.
#[derive(Debug, Clone)]
pub struct MasterConfig {
    pub hostname: String,
    pub port: u16,
    pub heartbeat_interval: Duration,
    pub allocation_interval: Duration,
    pub offer_timeout: Option<Duration>,
    pub agent_reregister_timeout: Duration,
    pub status_update_retry_interval: Duration,
    pub weights: BTreeMap<String, f64>,
}

impl Default for MasterConfig {
    fn default() -> Self {
        Self {
            hostname: "127.0.0.1".into(),
            port: 5050,
            heartbeat_interval: Duration::from_secs(15),
            allocation_interval: Duration::from_secs(1),
            offer_timeout: None,
            agent_reregister_timeout: Duration::from_secs(75),
            status_update_retry_interval: Duration::from_secs(10),
            weights: BTreeMap::new(),
        }
    }
}

/// A call the master refuses, with the HTTP status Mesos would answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status}: {message}")]
pub struct CallError {
    pub status: u16,
    pub message: String,
}

impl CallError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self { status: 400, message: message.into() }
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self { status: 403, message: message.into() }
    }
}

/// One open event stream (to a framework or an agent).
#[derive(Debug)]
pub struct Connection {
    pub stream_id: String,
    tx: mpsc::UnboundedSender<Bytes>,
}

impl Connection {
    fn open() -> (Self, mpsc::UnboundedReceiver<Bytes>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self { stream_id: uuid::Uuid::new_v4().to_string(), tx }, rx)
    }

    /// Sends one event as a RecordIO record; false if the stream is gone.
    fn send<E: Serialize>(&self, event: &E) -> bool {
        match recordio::encode_json(event) {
            Ok(record) => self.tx.send(record).is_ok(),
            Err(e) => {
                tracing::error!(error = %e, "cannot encode event");
                false
            }
        }
    }
}

/// A newly opened stream: its id and the events to write to the client.
#[derive(Debug)]
pub struct Opened {
    pub id: String,
    pub stream_id: String,
    pub events: mpsc::UnboundedReceiver<Bytes>,
}

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
    fn partition_aware(&self) -> bool {
        self.info.has_capability(mpiswarm_mesos::framework::CapabilityType::PartitionAware)
    }

    fn multi_role(&self) -> bool {
        self.info.has_capability(mpiswarm_mesos::framework::CapabilityType::MultiRole)
    }

    fn send(&self, event: &mpiswarm_mesos::scheduler::Event) {
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
}

impl Agent {
    fn send(&self, event: &agent_api::Event) -> bool {
        self.conn.as_ref().is_some_and(|c| c.send(event))
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
struct ExecutorEntry {
    role: String,
    resources: Quantities,
    tasks: usize,
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
}

type TaskKey = (String, String);
type ExecutorKey = (String, String, String);

/// The master.
#[derive(Debug)]
pub struct Master {
    pub config: MasterConfig,
    pub master_id: String,
    allocator: Allocator,
    registry: Registry,
    frameworks: HashMap<String, Framework>,
    agents: HashMap<String, Agent>,
    offers: HashMap<String, OfferEntry>,
    tasks: HashMap<TaskKey, Task>,
    executors: HashMap<ExecutorKey, ExecutorEntry>,
    /// Registry agents that have not re-registered since a restart.
    recovering: Option<(HashSet<String>, Duration)>,
    completed_tasks: VecDeque<TaskStatus>,
    next_id: u64,
    last_heartbeat: Duration,
    last_allocation: Duration,
    pub counters: Counters,
}

const COMPLETED_TASKS_KEPT: usize = 1000;

impl Master {
    /// A master that recovers from `registry`: if it lists agents, the
    /// master is recovering until they re-register or
    /// `agent_reregister_timeout` passes.
    pub fn new(config: MasterConfig, registry: Registry) -> Self {
        let mut allocator = Allocator::new(AllocatorConfig {
            allocation_interval: config.allocation_interval,
            ..AllocatorConfig::default()
        });
        for (role, weight) in &config.weights {
            allocator.set_weight(role, *weight);
        }
        let pending: HashSet<String> = registry.state.agents.keys().cloned().collect();
        let recovering = (!pending.is_empty()).then_some((pending, config.agent_reregister_timeout));
        let mut frameworks = HashMap::new();
        for (id, info) in &registry.state.frameworks {
            frameworks.insert(id.clone(), Framework::recovered(FrameworkId::new(id), Some(info.clone())));
        }
        for fw in frameworks.values() {
            allocator.add_framework(fw.id.value.as_str(), &fw.roles, &[]);
            allocator.set_framework_active(&fw.id.value, false);
        }
        Self {
            config,
            master_id: uuid::Uuid::new_v4().to_string(),
            allocator,
            registry,
            frameworks,
            agents: HashMap::new(),
            offers: HashMap::new(),
            tasks: HashMap::new(),
            executors: HashMap::new(),
            recovering,
            completed_tasks: VecDeque::new(),
            next_id: 0,
            last_heartbeat: Duration::ZERO,
            last_allocation: Duration::ZERO,
            counters: Counters::default(),
        }
    }

    /// While true, frameworks get 503: agents are still re-registering.
    pub fn is_recovering(&self) -> bool {
        self.recovering.is_some()
    }

    fn next_id(&mut self, kind: &str) -> String {
        self.next_id += 1;
        format!("{}-{kind}{:04}", self.master_id, self.next_id)
    }

    fn save_registry(&self) {
        if let Err(e) = self.registry.save() {
            tracing::error!(error = %e, "registry not saved; ids may not survive a restart");
        }
    }

    /// Everything that happens with time: heartbeats, batch allocation,
    /// offer timeouts, failover and agent-loss deadlines, update retries,
    /// the end of recovery.
    pub fn tick(&mut self, now: Duration) {
        if let Some((pending, deadline)) = &self.recovering
            && (pending.is_empty() || now >= *deadline)
        {
            self.finish_recovery(now);
        }
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
        if !self.is_recovering() && now.saturating_sub(self.last_allocation) >= self.config.allocation_interval {
            self.allocate(now, None);
        }
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

    fn finish_recovery(&mut self, now: Duration) {
        let Some((pending, _)) = self.recovering.take() else { return };
        for id in pending {
            tracing::warn!(agent = %id, "agent did not re-register after the restart; marking it removed");
            self.registry.state.agent_removed(&id);
            self.broadcast_failure(&id);
        }
        self.save_registry();
        tracing::info!("recovery finished");
        self.allocate(now, None);
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

    fn broadcast_failure(&self, agent: &str) {
        let event = mpiswarm_mesos::scheduler::Event::failure(mpiswarm_mesos::scheduler::Failure {
            agent_id: Some(AgentId::new(agent)),
            executor_id: None,
            status: None,
        });
        for f in self.frameworks.values() {
            f.send(&event);
        }
    }

    /// Puts a status on a task's update queue and sends it if it is the head.
    fn enqueue_update(&mut self, key: &TaskKey, mut status: TaskStatus, now: Duration) {
        if status.uuid.is_none() {
            status.uuid = Some(mpiswarm_mesos::Bytes::random_uuid());
        }
        let Some(task) = self.tasks.get_mut(key) else { return };
        task.pending.push_back(status);
        if task.pending.len() == 1 {
            self.send_update_head(key, now);
        }
    }

    fn send_update_head(&mut self, key: &TaskKey, now: Duration) {
        let Some(task) = self.tasks.get_mut(key) else { return };
        let Some(head) = task.pending.front() else { return };
        let Some(fw) = self.frameworks.get(&key.0) else { return };
        if fw.conn.is_some() {
            fw.send(&mpiswarm_mesos::scheduler::Event::update(head.clone()));
            task.last_sent = Some(now);
            self.counters.updates_forwarded += 1;
        }
    }

    fn retry_updates(&mut self, now: Duration) {
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
    fn release_task_resources(&mut self, key: &TaskKey, now: Duration) {
        let Some(task) = self.tasks.get(key) else { return };
        let (fw, role, agent) = (key.0.clone(), task.role.clone(), task.agent_id.value.clone());
        let resources = task.resources.clone();
        let executor = task.executor_id.clone();
        self.allocator.recover(&fw, &role, &agent, &resources, None, now);
        if let Some(executor) = executor {
            let ekey = (agent.clone(), fw.clone(), executor.value.clone());
            if let Some(e) = self.executors.get_mut(&ekey) {
                e.tasks = e.tasks.saturating_sub(1);
                if e.tasks == 0 {
                    let e = self.executors.remove(&ekey).expect("present");
                    self.allocator.recover(&fw, &e.role, &agent, &e.resources, None, now);
                }
            }
        }
    }

    fn complete_task(&mut self, key: &TaskKey) {
        if let Some(task) = self.tasks.remove(key) {
            self.completed_tasks.push_back(task.latest);
            while self.completed_tasks.len() > COMPLETED_TASKS_KEPT {
                self.completed_tasks.pop_front();
            }
        }
    }
}

impl Framework {
    fn recovered(id: FrameworkId, info: Option<FrameworkInfo>) -> Self {
        let mut info = info.unwrap_or_else(|| FrameworkInfo {
            roles: Vec::new(),
            capabilities: Vec::new(),
            ..FrameworkInfo::new("", "(recovered from agents)", &[])
        });
        info.id = Some(id.clone());
        let roles = info.effective_roles();
        Self { id, info, roles, conn: None, failover_deadline: None, recovered: true }
    }
}

/// A status the master itself generates (no uuid: it needs no acknowledgement).
fn master_status(
    task_id: &TaskId,
    agent_id: Option<&AgentId>,
    state: TaskState,
    reason: mpiswarm_mesos::Reason,
    message: String,
) -> TaskStatus {
    let mut s = TaskStatus::new(task_id.clone(), state);
    s.agent_id = agent_id.cloned();
    s.source = Some(mpiswarm_mesos::Source::SourceMaster);
    s.reason = Some(reason);
    s.message = Some(message);
    s.timestamp = Some(wall_clock_seconds());
    s
}

fn wall_clock_seconds() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// Mesos' role name rules (roles::validate).
pub fn validate_role(role: &str) -> Result<(), String> {
    if role == "*" {
        return Ok(());
    }
    if role.is_empty() {
        return Err("role name must not be empty".into());
    }
    if role == "." || role == ".." || role.starts_with('-') {
        return Err(format!("role name '{role}' is invalid: it may not be '.', '..' or start with '-'"));
    }
    if role.chars().any(|c| c.is_whitespace() || c.is_control() || c == '\\') {
        return Err(format!("role name '{role}' is invalid: it contains whitespace, a control character or '\\'"));
    }
    if role.starts_with('/') || role.ends_with('/') || role.contains("//") {
        return Err(format!("role name '{role}' is invalid: empty path component"));
    }
    Ok(())
}
