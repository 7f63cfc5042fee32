//! The agent's bookkeeping: which task runs as which service, what state the
//! framework last heard, and the transitions between. It turns offer-layer
//! events into Swarm operations ([`crate::launch`]) and Swarm observations
//! ([`crate::observe`]) into TaskStatus updates, which it hands to an outbox
//! that delivers them until the offer layer accepts them. It owns no
//! connection; [`crate::run`] wires it to the offer layer and to Docker.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mpiswarm_mesos::agent_api::{Event, EventType, ReportedTask};
use mpiswarm_mesos::{
    AgentId, Bytes, ExecutorInfo, FrameworkId, FrameworkInfo, Labels, Reason, Source, TaskId, TaskInfo, TaskState,
    TaskStatus,
};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::mpsc;
use tracing::Instrument as _;

use crate::launch::{self, LaunchFailure};
use crate::observe::Observed;
use crate::plan::{self, LaunchContext, TaskPlan};
use crate::store::{Store, StoreError, TaskRecord};
use crate::swarm::Swarm;

/// A status on its way to the offer layer (delivered by `mpiswarm_mesos::agent_session`).
pub use mpiswarm_mesos::agent_session::Outgoing;

#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// How long a service labelled as this agent's but unknown to it (no
    /// task record) is left alone before it is removed.
    pub orphan_grace: Duration,
    /// How many log lines a FAILED status carries.
    pub log_lines: usize,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self { orphan_grace: Duration::from_secs(60), log_lines: 20 }
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
    pub(crate) store: Store,
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
}

impl<S: Swarm + 'static> Agent<S> {
    /// An agent over `swarm` on `node_id`, with the tasks remembered in
    /// `store`. Statuses go to the returned receiver.
    pub fn new(
        swarm: S,
        node_id: String,
        store: Store,
        config: AgentConfig,
    ) -> Result<(Arc<Self>, mpsc::UnboundedReceiver<Outgoing>), StoreError> {
        let (outbox, rx) = mpsc::unbounded_channel();
        let agent_id = store.agent_id()?;
        let mut tasks = HashMap::new();
        for record in store.tasks()? {
            tasks.insert(record.service_name.clone(), Tracked { record, killing: false });
        }
        let agent = Arc::new(Self {
            swarm,
            node_id,
            store,
            config,
            agent_id: RwLock::new(agent_id),
            tasks: Mutex::new(tasks),
            launching: Mutex::default(),
            kill_requested: Mutex::default(),
            orphans: Mutex::default(),
            objects: tokio::sync::Mutex::new(()),
            gc_pending: Mutex::new(true),
            outbox,
            counters: Counters::default(),
        });
        Ok((agent, rx))
    }

    pub fn agent_id(&self) -> Option<AgentId> {
        self.agent_id.read().expect("agent id lock").clone()
    }

    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// Records the id the offer layer assigned (SUBSCRIBED) and keeps it for restarts.
    pub fn set_agent_id(&self, id: AgentId) -> Result<(), StoreError> {
        let previous = self.agent_id();
        if previous.as_ref() != Some(&id) {
            if let Some(old) = previous {
                tracing::warn!(%old, new = %id, "the offer layer assigned a new agent id; services of the old id become orphans");
            }
            self.store.save_agent_id(&id)?;
            *self.agent_id.write().expect("agent id lock") = Some(id);
        }
        Ok(())
    }

    /// What SUBSCRIBE reports: every live task and every terminal task whose
    /// terminal update the framework has not acknowledged.
    pub fn reported_tasks(&self) -> Vec<ReportedTask> {
        let tasks = self.tasks.lock().expect("tasks lock");
        tasks
            .values()
            .filter(|t| !(t.record.status.state.is_terminal() && t.record.acknowledged))
            .map(|t| ReportedTask {
                framework_id: t.record.framework_id.clone(),
                task_info: t.record.task_info.clone(),
                executor_info: t.record.executor_info.clone(),
                status: t.record.status.clone(),
            })
            .collect()
    }

    /// Every known task: service name, task id and the state last reported.
    pub fn snapshot(&self) -> Vec<(String, TaskId, TaskState)> {
        let tasks = self.tasks.lock().expect("tasks lock");
        let mut out: Vec<_> = tasks
            .iter()
            .map(|(name, t)| (name.clone(), t.record.task_info.task_id.clone(), t.record.status.state))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Handles one event of the offer layer's stream. Long work (creating and
    /// removing services) runs in its own task so the stream keeps flowing.
    pub fn handle(self: &Arc<Self>, event: Event) {
        match event.kind {
            EventType::Launch => {
                if let Some(l) = event.launch {
                    let me = Arc::clone(self);
                    let span = tracing::info_span!("launch", framework = %l.framework_id, task = %l.task_info.task_id);
                    tokio::spawn(
                        async move { me.launch(l.framework_id, &l.framework_info, None, vec![l.task_info]).await }
                            .instrument(span),
                    );
                }
            }
            EventType::LaunchGroup => {
                if let Some(l) = event.launch_group {
                    let me = Arc::clone(self);
                    let span = tracing::info_span!("launch_group", framework = %l.framework_id, executor = %l.executor_info.executor_id);
                    tokio::spawn(
                        async move {
                            me.launch(l.framework_id, &l.framework_info, Some(l.executor_info), l.task_group.tasks)
                                .await
                        }
                        .instrument(span),
                    );
                }
            }
            EventType::Kill => {
                if let Some(k) = event.kill {
                    let me = Arc::clone(self);
                    tokio::spawn(async move { me.kill_task(&k.framework_id, &k.task_id).await });
                }
            }
            EventType::Shutdown => {
                if let Some(s) = event.shutdown {
                    let victims: Vec<TaskId> = {
                        let tasks = self.tasks.lock().expect("tasks lock");
                        tasks
                            .values()
                            .filter(|t| t.record.framework_id == s.framework_id)
                            .filter(|t| {
                                s.executor_id.is_none()
                                    || t.record.executor_info.as_ref().map(|e| &e.executor_id) == s.executor_id.as_ref()
                            })
                            .filter(|t| !t.record.status.state.is_terminal())
                            .map(|t| t.record.task_info.task_id.clone())
                            .collect()
                    };
                    for task_id in victims {
                        let me = Arc::clone(self);
                        let fw = s.framework_id.clone();
                        tokio::spawn(async move { me.kill_task(&fw, &task_id).await });
                    }
                }
            }
            EventType::Acknowledged => {
                if let Some(a) = event.acknowledged {
                    self.acknowledged(&a.framework_id, &a.task_id, &a.uuid);
                }
            }
            EventType::Subscribed | EventType::Heartbeat | EventType::Message | EventType::Unknown => {}
            EventType::Error => {
                tracing::warn!(message = ?event.error.map(|e| e.message), "offer layer sent ERROR");
            }
        }
    }

    /// LAUNCH (one task) and LAUNCH_GROUP: all tasks start, or none does.
    pub async fn launch(
        self: &Arc<Self>,
        framework_id: FrameworkId,
        framework_info: &FrameworkInfo,
        executor: Option<ExecutorInfo>,
        tasks: Vec<TaskInfo>,
    ) {
        let Some(agent_id) = self.agent_id() else {
            tracing::error!("LAUNCH before SUBSCRIBED; ignoring");
            return;
        };
        let role = framework_info.roles.first().cloned().or_else(|| framework_info.role.clone());
        let ctx = LaunchContext {
            agent_id: &agent_id.value,
            framework_id: &framework_id,
            framework_role: role.as_deref(),
            executor_id: executor.as_ref().map(|e| &e.executor_id),
        };
        let plans: Result<Vec<TaskPlan>, plan::InvalidTask> =
            tasks.iter().map(|t| TaskPlan::from_task_info(t, &ctx)).collect();
        let executor_id = executor.as_ref().map(|e| e.executor_id.clone());
        let plans = match plans {
            Ok(p) => p,
            Err(invalid) => {
                tracing::warn!(error = %invalid, "refusing task group");
                self.counters.refused.inc();
                for t in &tasks {
                    let (state, reason, message) = if t.task_id.value == invalid.task_id {
                        (TaskState::Error, Reason::ReasonTaskInvalid, invalid.to_string())
                    } else {
                        (
                            TaskState::Killed,
                            Reason::ReasonTaskGroupInvalid,
                            format!("not launched because its group is invalid: {invalid}"),
                        )
                    };
                    self.send_untracked(&framework_id, &t.task_id, executor_id.as_ref(), state, reason, message);
                }
                return;
            }
        };
        // Duplicate launches (a retried ACCEPT) re-report instead of relaunching.
        {
            let tasks_map = self.tasks.lock().expect("tasks lock");
            if let Some(p) = plans.iter().find(|p| tasks_map.contains_key(&p.service_name)) {
                let existing = &tasks_map[&p.service_name].record;
                tracing::warn!(task = %p.task_id, "task already known; re-sending its status");
                let _ = self.outbox.send(Outgoing { framework_id, status: existing.status.clone() });
                return;
            }
        }
        let names: Vec<String> = plans.iter().map(|p| p.service_name.clone()).collect();
        self.launching.lock().expect("launching lock").extend(names.iter().cloned());
        let result = {
            let _objects = self.objects.lock().await;
            launch::launch_group(&self.swarm, &self.node_id, &agent_id.value, &plans).await
        };
        match result {
            Ok(()) => {
                for (plan, task) in plans.iter().zip(&tasks) {
                    let record = TaskRecord {
                        framework_id: framework_id.clone(),
                        framework_role: role.clone(),
                        executor_info: executor.clone(),
                        task_info: task.clone(),
                        service_name: plan.service_name.clone(),
                        image: plan.image.clone(),
                        status: TaskStatus::new(task.task_id.clone(), TaskState::Staging),
                        acknowledged: false,
                    };
                    self.tasks
                        .lock()
                        .expect("tasks lock")
                        .insert(plan.service_name.clone(), Tracked { record, killing: false });
                    let created = format!("service {} created", plan.service_name);
                    self.transition(&plan.service_name, Observed::simple(TaskState::Starting, created));
                }
                tracing::info!(services = ?names, "launched");
                self.counters.launched.inc_by(plans.len() as u64);
            }
            Err(LaunchFailure { task_id, source }) => {
                tracing::warn!(%task_id, error = %source, "launch failed; the group is rolled back");
                self.counters.launch_failures.inc();
                *self.gc_pending.lock().expect("gc lock") = true;
                for t in &tasks {
                    let (state, reason, message) = if t.task_id.value == task_id {
                        (TaskState::Failed, Reason::ReasonContainerLaunchFailed, source.to_string())
                    } else {
                        (
                            TaskState::Killed,
                            Reason::ReasonTaskKilledDuringLaunch,
                            format!("not launched because task '{task_id}' of its group failed: {source}"),
                        )
                    };
                    self.send_untracked(&framework_id, &t.task_id, executor_id.as_ref(), state, reason, message);
                }
            }
        }
        {
            let mut launching = self.launching.lock().expect("launching lock");
            for n in &names {
                launching.remove(n);
            }
        }
        let killed: Vec<String> = {
            let mut requested = self.kill_requested.lock().expect("kill lock");
            names.iter().filter(|n| requested.remove(*n)).cloned().collect()
        };
        for name in killed {
            self.kill_service(&name).await;
        }
    }

    /// KILL: remove the service; TASK_KILLED once it is gone.
    pub async fn kill_task(self: &Arc<Self>, framework_id: &FrameworkId, task_id: &TaskId) {
        let name = plan::service_name(framework_id, task_id);
        if self.launching.lock().expect("launching lock").contains(&name) {
            self.kill_requested.lock().expect("kill lock").insert(name);
            return;
        }
        let known = self.tasks.lock().expect("tasks lock").get(&name).map(|t| t.record.status.clone());
        match known {
            None => self.send_untracked(
                framework_id,
                task_id,
                None,
                TaskState::Lost,
                Reason::ReasonTaskUnknown,
                format!("task '{task_id}' is not known on this agent"),
            ),
            Some(status) if status.state.is_terminal() => {
                // Already over: the framework gets the terminal state again.
                let _ = self.outbox.send(Outgoing { framework_id: framework_id.clone(), status });
            }
            Some(_) => self.kill_service(&name).await,
        }
    }

    async fn kill_service(self: &Arc<Self>, name: &str) {
        if let Some(t) = self.tasks.lock().expect("tasks lock").get_mut(name) {
            t.killing = true;
        }
        // No TASK_KILLING: Mesos sends it only to frameworks with the
        // TASK_KILLING_STATE capability, and the kill is quick here.
        let removed = self.swarm.remove_service(name).await;
        *self.gc_pending.lock().expect("gc lock") = true;
        match removed {
            Ok(()) => {
                self.transition(name, Observed::simple(TaskState::Killed, "killed: service removed"));
            }
            Err(e) => {
                tracing::error!(service = name, error = %e, "could not remove service");
                if let Some(t) = self.tasks.lock().expect("tasks lock").get_mut(name) {
                    t.killing = false;
                }
                return;
            }
        }
        if let Some(t) = self.tasks.lock().expect("tasks lock").get_mut(name) {
            t.killing = false;
        }
        self.collect_garbage().await;
    }

    fn acknowledged(&self, framework_id: &FrameworkId, task_id: &TaskId, uuid: &Bytes) {
        let name = plan::service_name(framework_id, task_id);
        let mut tasks = self.tasks.lock().expect("tasks lock");
        let Some(t) = tasks.get_mut(&name) else { return };
        if t.record.status.uuid.as_ref() != Some(uuid) {
            return;
        }
        if t.record.status.state.is_terminal() {
            tasks.remove(&name);
            if let Err(e) = self.store.forget_task(&name) {
                tracing::warn!(error = %e, "could not forget an acknowledged task");
            }
        } else {
            t.record.acknowledged = true;
        }
    }

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
        let mut tasks = self.tasks.lock().expect("tasks lock");
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
        if let Err(e) = self.store.save_task(&t.record) {
            tracing::error!(error = %e, "could not persist task state");
        }
        let _ = self.outbox.send(Outgoing { framework_id: t.record.framework_id.clone(), status });
        true
    }

    fn send_untracked(
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
        let _ = self.outbox.send(Outgoing { framework_id: framework_id.clone(), status });
    }

    fn status(
        &self,
        task_id: &TaskId,
        executor_id: Option<&mpiswarm_mesos::ExecutorId>,
        observed: &Observed,
    ) -> TaskStatus {
        let mut status = TaskStatus::new(task_id.clone(), observed.state);
        status.message = Some(observed.message.clone());
        status.source = Some(Source::SourceExecutor);
        status.reason = observed.reason;
        status.agent_id = self.agent_id();
        status.executor_id = executor_id.cloned();
        status.timestamp = SystemTime::now().duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs_f64());
        status.uuid = Some(Bytes::random_uuid());
        if let Some(code) = observed.exit_code {
            let code = code.to_string();
            status.labels = Some(Labels::from_pairs([(crate::labels::EXIT_CODE, code.as_str())]));
        }
        status
    }
}
