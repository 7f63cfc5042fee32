//! The task table: the agent id, which task runs as which service, what the
//! framework last heard of each, which services are being created, and which
//! of those a KILL waits for. Every change of a task's state is recorded
//! (queued to the [`Writer`]) and its TaskStatus queued to the [`Outbox`]
//! under the table's one lock, so records reach the disk and statuses reach
//! the framework in the order of the changes. A task that ended keeps its
//! terminal state.
//!
//! It owns its locks: no guard leaves a method and no method is async, so
//! no lock is ever held across an `.await`. It never touches Swarm, and the
//! disk only through the writer thread (queueing never blocks).

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, RwLock};

use mpiswarm_mesos::agent_api::{ReportedTask, Shutdown};
use mpiswarm_mesos::{AgentId, Bytes, ExecutorId, FrameworkId, Reason, TaskId, TaskState};

use crate::locks::{lock, read, write};
use crate::observe::Observed;
use crate::statuses::{Outbox, Outgoing, new_status};
use crate::store::TaskRecord;
use crate::writer::Writer;

/// A task as the table holds it.
pub(crate) struct Tracked {
    pub(crate) record: TaskRecord,
    /// A KILL, or the end of the task, is removing the service;
    /// observations are not reported.
    pub(crate) killing: bool,
}

/// A tracked task as the other parts need it: its service, whose it is,
/// and the state last reported.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TaskRef {
    pub(crate) service: String,
    pub(crate) framework_id: FrameworkId,
    pub(crate) task_id: TaskId,
    pub(crate) state: TaskState,
    pub(crate) image: String,
}

impl TaskRef {
    fn of(service: &str, t: &Tracked) -> Self {
        Self {
            service: service.to_owned(),
            framework_id: t.record.framework_id.clone(),
            task_id: t.record.task_info.task_id.clone(),
            state: t.record.status.state,
            image: t.record.image.clone(),
        }
    }
}

/// What a LAUNCH of a group may do.
#[derive(Debug)]
pub(crate) enum LaunchStart {
    /// Create the services; they are marked as launching.
    Go,
    /// A task of the group is already known (a retried ACCEPT): its status
    /// goes again instead.
    Known(Box<Outgoing>),
    /// A task of the group is being launched by an earlier LAUNCH, which
    /// reports it.
    InFlight(String),
}

/// What a KILL finds.
#[derive(Debug)]
pub(crate) enum KillStart {
    /// The service is being created: the KILL runs once the launch ended.
    Deferred,
    /// The agent does not know the task.
    Unknown,
    /// The task ended already: its terminal status goes again.
    Ended(Box<Outgoing>),
    /// The task is live and now marked as being killed: remove its service.
    Live,
}

#[derive(Default)]
struct Table {
    /// By service name (unique per framework and task).
    tasks: HashMap<String, Tracked>,
    /// Services being created, with their task as SUBSCRIBE reports it
    /// meanwhile (`TASK_STAGING`, as a Mesos agent reports a task it has
    /// queued): not yet observable, and a KILL for them waits.
    launching: HashMap<String, ReportedTask>,
    kill_requested: HashSet<String>,
}

pub struct TaskTable {
    table: Mutex<Table>,
    agent_id: RwLock<Option<AgentId>>,
    writer: Writer,
    outbox: Outbox,
}

impl TaskTable {
    /// The table of an agent with `agent_id` that remembers `records`.
    pub(crate) fn new(agent_id: Option<AgentId>, records: Vec<TaskRecord>, writer: Writer, outbox: Outbox) -> Self {
        let tasks = records
            .into_iter()
            .map(|record| (record.service_name.clone(), Tracked { record, killing: false }))
            .collect();
        Self { table: Mutex::new(Table { tasks, ..Table::default() }), agent_id: RwLock::new(agent_id), writer, outbox }
    }

    pub(crate) fn agent_id(&self) -> Option<AgentId> {
        read(&self.agent_id).clone()
    }

    /// Records the id the offer layer assigned and keeps it for restarts.
    pub(crate) fn set_agent_id(&self, id: AgentId) {
        let mut current = write(&self.agent_id);
        if current.as_ref() != Some(&id) {
            if let Some(old) = current.as_ref() {
                tracing::warn!(%old, new = %id, "the offer layer assigned a new agent id; services of the old id become orphans");
            }
            self.writer.save_agent_id(id.clone());
            *current = Some(id);
        }
    }

    pub(crate) fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    /// Waits until every record change made so far is on disk.
    pub(crate) async fn flush(&self) {
        self.writer.flush().await;
    }

    /// Marks the services of `group` as launching (each with its task as
    /// SUBSCRIBE reports it until its service exists), unless one of them is
    /// known or being launched already.
    pub(crate) fn begin_launch(&self, group: Vec<(String, ReportedTask)>) -> LaunchStart {
        let mut table = lock(&self.table);
        if let Some(t) = group.iter().find_map(|(s, _)| table.tasks.get(s)) {
            let status = t.record.status.clone();
            return LaunchStart::Known(Box::new(Outgoing { framework_id: t.record.framework_id.clone(), status }));
        }
        if let Some((s, _)) = group.iter().find(|(s, _)| table.launching.contains_key(s)) {
            return LaunchStart::InFlight(s.clone());
        }
        table.launching.extend(group);
        LaunchStart::Go
    }

    /// Tracks a task whose service was created, and reports `observed`.
    pub(crate) fn launched(&self, record: TaskRecord, observed: Observed) {
        let service = record.service_name.clone();
        lock(&self.table).tasks.insert(service.clone(), Tracked { record, killing: false });
        self.transition(&service, observed);
    }

    /// Ends the launch of `services`; returns those a KILL waits for.
    pub(crate) fn end_launch(&self, services: &[String]) -> Vec<String> {
        let mut table = lock(&self.table);
        for s in services {
            table.launching.remove(s);
        }
        services.iter().filter(|s| table.kill_requested.remove(*s)).cloned().collect()
    }

    /// What a KILL of `service` does; a live task is marked as being killed.
    pub(crate) fn begin_kill(&self, service: &str) -> KillStart {
        let mut table = lock(&self.table);
        if table.launching.contains_key(service) {
            table.kill_requested.insert(service.to_owned());
            return KillStart::Deferred;
        }
        match table.tasks.get_mut(service) {
            None => KillStart::Unknown,
            Some(t) if t.record.status.state.is_terminal() => KillStart::Ended(Box::new(Outgoing {
                framework_id: t.record.framework_id.clone(),
                status: t.record.status.clone(),
            })),
            Some(t) => {
                t.killing = true;
                KillStart::Live
            }
        }
    }

    /// Claims the end of `service`, observed while it was in `last`: marks
    /// it as being removed (as a KILL does, so neither a resync nor a KILL
    /// starts a second removal) unless a KILL took it over or its state
    /// moved meanwhile. Returns whether the caller now owns the removal;
    /// [`Self::end_kill`] releases it.
    pub(crate) fn begin_end(&self, service: &str, last: TaskState) -> bool {
        let mut table = lock(&self.table);
        match table.tasks.get_mut(service) {
            Some(t) if !t.killing && t.record.status.state == last && !last.is_terminal() => {
                t.killing = true;
                true
            }
            _ => false,
        }
    }

    /// Marks a KILL of `service` as over (done or failed).
    pub(crate) fn end_kill(&self, service: &str) {
        if let Some(t) = lock(&self.table).tasks.get_mut(service) {
            t.killing = false;
        }
    }

    /// [`Self::transition`] only if the task is still in `last` and no KILL
    /// took it over meanwhile (an observation made before a KILL must not
    /// overwrite it). Returns whether it happened.
    pub(crate) fn transition_from(&self, service: &str, last: TaskState, observed: Observed) -> bool {
        self.transition_if(service, |t| !t.killing && t.record.status.state == last, observed)
    }

    /// Records and reports a new state of a tracked task; a task that ended
    /// keeps its terminal state.
    pub(crate) fn transition(&self, service: &str, observed: Observed) -> bool {
        self.transition_if(service, |_| true, observed)
    }

    fn transition_if(&self, service: &str, guard: impl Fn(&Tracked) -> bool, observed: Observed) -> bool {
        let agent_id = self.agent_id();
        let mut table = lock(&self.table);
        let Some(t) = table.tasks.get_mut(service) else { return false };
        if t.record.status.state.is_terminal() || !guard(t) {
            return false;
        }
        let executor_id = t.record.executor_info.as_ref().map(|e| &e.executor_id);
        let status = new_status(&t.record.task_info.task_id, executor_id, &observed, agent_id);
        tracing::info!(task = %t.record.task_info.task_id, state = status.state.as_str(), message = %observed.message, "task state");
        t.record.status = status.clone();
        t.record.acknowledged = false;
        // Queued under the lock, so records reach the disk in the order of
        // the changes; written by the writer thread, off this worker.
        self.writer.save_task(t.record.clone());
        self.outbox.queue(Outgoing { framework_id: t.record.framework_id.clone(), status });
        true
    }

    /// Reports a state of a task the agent does not track (a refused or
    /// failed launch, a KILL of an unknown task).
    pub(crate) fn send_untracked(
        &self,
        framework_id: &FrameworkId,
        task_id: &TaskId,
        executor_id: Option<&ExecutorId>,
        state: TaskState,
        reason: Reason,
        message: String,
    ) {
        let observed = Observed { reason: Some(reason), ..Observed::simple(state, message) };
        let status = new_status(task_id, executor_id, &observed, self.agent_id());
        self.outbox.queue(Outgoing { framework_id: framework_id.clone(), status });
    }

    /// Queues a status again (a duplicate LAUNCH, a KILL of an ended task).
    pub(crate) fn resend(&self, outgoing: Outgoing) {
        self.outbox.queue(outgoing);
    }

    /// ACKNOWLEDGED: a terminal task whose latest status it acknowledges is
    /// forgotten (its state returned); a live one is marked acknowledged.
    pub(crate) fn acknowledged(&self, service: &str, uuid: &Bytes) -> Option<TaskState> {
        let mut table = lock(&self.table);
        let t = table.tasks.get_mut(service)?;
        if t.record.status.uuid.as_ref() != Some(uuid) {
            return None;
        }
        let state = t.record.status.state;
        if state.is_terminal() {
            table.tasks.remove(service);
            self.writer.forget_task(service);
            Some(state)
        } else {
            t.record.acknowledged = true;
            None
        }
    }

    /// Live tasks that no KILL is taking over, and (with `and_launching`)
    /// also those whose services are still being created.
    pub(crate) fn live(&self, and_launching: bool) -> Vec<TaskRef> {
        let table = lock(&self.table);
        table
            .tasks
            .iter()
            .filter(|(_, t)| !t.killing && !t.record.status.state.is_terminal())
            .filter(|(name, _)| and_launching || !table.launching.contains_key(*name))
            .map(|(name, t)| TaskRef::of(name, t))
            .collect()
    }

    /// Services being created now.
    pub(crate) fn launching(&self) -> HashSet<String> {
        lock(&self.table).launching.keys().cloned().collect()
    }

    /// Ended tasks (no KILL under way) whose service `exists`: the agent
    /// stopped between reporting the end and removing the service.
    pub(crate) fn ended_with_service(&self, exists: impl Fn(&str) -> bool) -> Vec<String> {
        lock(&self.table)
            .tasks
            .iter()
            .filter(|(name, t)| !t.killing && t.record.status.state.is_terminal() && exists(name))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The services of every tracked task.
    pub(crate) fn services(&self) -> HashSet<String> {
        lock(&self.table).tasks.keys().cloned().collect()
    }

    /// Every (framework id, task id) the table tracks.
    pub(crate) fn owners(&self) -> HashSet<(String, String)> {
        lock(&self.table)
            .tasks
            .values()
            .map(|t| (t.record.framework_id.value.clone(), t.record.task_info.task_id.value.clone()))
            .collect()
    }

    /// The live tasks a SHUTDOWN ends.
    pub(crate) fn shutdown_victims(&self, s: &Shutdown) -> Vec<TaskId> {
        shutdown_victims(lock(&self.table).tasks.values(), s)
    }

    /// What SUBSCRIBE reports: every live task, every terminal task whose
    /// terminal update the framework has not acknowledged, and every task
    /// whose service is still being created (`TASK_STAGING`): a task left
    /// out is one the master calls unknown to the agent and LOST.
    pub(crate) fn reported_tasks(&self) -> Vec<ReportedTask> {
        let table = lock(&self.table);
        let tracked = table.tasks.values().filter(|t| reported(&t.record)).map(|t| report(&t.record));
        let queued =
            table.launching.iter().filter(|(name, _)| !table.tasks.contains_key(*name)).map(|(_, r)| r.clone());
        tracked.chain(queued).collect()
    }

    /// Every known task: service name, task id and the state last reported.
    pub(crate) fn snapshot(&self) -> Vec<(String, TaskId, TaskState)> {
        let mut out: Vec<_> = lock(&self.table)
            .tasks
            .iter()
            .map(|(name, t)| (name.clone(), t.record.task_info.task_id.clone(), t.record.status.state))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

/// The live tasks a SHUTDOWN ends: the framework's, or only its executor's
/// when one is named.
fn shutdown_victims<'a>(tasks: impl Iterator<Item = &'a Tracked>, s: &Shutdown) -> Vec<TaskId> {
    tasks
        .filter(|t| t.record.framework_id == s.framework_id)
        .filter(|t| {
            s.executor_id.is_none() || t.record.executor_info.as_ref().map(|e| &e.executor_id) == s.executor_id.as_ref()
        })
        .filter(|t| !t.record.status.state.is_terminal())
        .map(|t| t.record.task_info.task_id.clone())
        .collect()
}

/// Whether SUBSCRIBE reports `record`: unless its terminal update was acknowledged.
fn reported(record: &TaskRecord) -> bool {
    !(record.status.state.is_terminal() && record.acknowledged)
}

/// A task of a group being launched as SUBSCRIBE reports it: `TASK_STAGING`.
pub(crate) fn staging(record: &TaskRecord) -> ReportedTask {
    let mut status = mpiswarm_mesos::TaskStatus::new(record.task_info.task_id.clone(), TaskState::Staging);
    status.executor_id = record.executor_info.as_ref().map(|e| e.executor_id.clone());
    ReportedTask {
        framework_id: record.framework_id.clone(),
        task_info: record.task_info.clone(),
        executor_info: record.executor_info.clone(),
        status,
    }
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
    use crate::store::Store;
    use crate::store::tests::record;
    use mpiswarm_mesos::{ExecutorInfo, FrameworkId, TaskState};
    use prometheus_client::metrics::counter::Counter;

    fn tracked(service: &str, framework: &str, executor: Option<&str>, state: TaskState) -> Tracked {
        let mut r = record(service);
        r.framework_id = FrameworkId::new(framework);
        r.executor_info = executor.map(ExecutorInfo::default_executor);
        r.status.state = state;
        Tracked { record: r, killing: false }
    }

    fn table() -> (TaskTable, tokio::sync::mpsc::UnboundedReceiver<Outgoing>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let writer = Writer::start(Store::open(dir.path()).unwrap(), Counter::default()).unwrap();
        let (outbox, rx) = Outbox::new();
        (TaskTable::new(Some(AgentId::new("A")), vec![], writer, outbox), rx, dir)
    }

    #[test]
    fn shutdown_ends_the_live_tasks_of_the_framework_or_of_its_executor() {
        let tasks = [
            tracked("a", "fw", Some("e1"), TaskState::Running),
            tracked("b", "fw", Some("e2"), TaskState::Starting),
            tracked("c", "fw", None, TaskState::Finished),
            tracked("d", "other", Some("e1"), TaskState::Running),
        ];
        let ids = |v: Vec<TaskId>| v.into_iter().map(|t| t.value).collect::<Vec<_>>();
        let all = Shutdown { framework_id: FrameworkId::new("fw"), executor_id: None };
        assert_eq!(ids(shutdown_victims(tasks.iter(), &all)), vec!["a", "b"]);
        let one = Shutdown { framework_id: FrameworkId::new("fw"), executor_id: Some(ExecutorId::new("e2")) };
        assert_eq!(ids(shutdown_victims(tasks.iter(), &one)), vec!["b"]);
    }

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

    #[tokio::test]
    async fn a_kill_during_a_launch_waits_for_it_and_a_second_launch_of_the_same_task_does_not_start() {
        let (table, _rx, _dir) = table();
        let s = vec!["s1".to_owned()];
        let group = || vec![("s1".to_owned(), staging(&record("s1")))];
        assert!(matches!(table.begin_launch(group()), LaunchStart::Go));
        let reported = table.reported_tasks();
        assert_eq!(reported.len(), 1, "a task being launched is reported to a SUBSCRIBE");
        assert_eq!(reported[0].status.state, TaskState::Staging);
        assert!(matches!(table.begin_launch(group()), LaunchStart::InFlight(name) if name == "s1"));
        assert!(matches!(table.begin_kill("s1"), KillStart::Deferred));
        table.launched(record("s1"), Observed::simple(TaskState::Starting, "created"));
        let reported = table.reported_tasks();
        assert_eq!(reported.len(), 1, "reported once, as tracked, once its service exists");
        assert_eq!(reported[0].status.state, TaskState::Starting);
        assert_eq!(table.end_launch(&s), s, "the deferred KILL runs now");
        assert!(matches!(table.begin_launch(group()), LaunchStart::Known(o) if o.status.state == TaskState::Starting));
        assert!(matches!(table.begin_kill("s1"), KillStart::Live));
        assert!(table.live(true).is_empty(), "a task being killed is not observed");
        assert!(!table.transition_from("s1", TaskState::Starting, Observed::simple(TaskState::Running, "up")));
        table.end_kill("s1");
        assert!(table.transition_from("s1", TaskState::Starting, Observed::simple(TaskState::Running, "up")));
        assert!(matches!(table.begin_kill("nope"), KillStart::Unknown));
    }

    #[tokio::test]
    async fn changes_are_queued_in_order_and_an_ended_task_keeps_its_end_until_acknowledged() {
        let (table, mut rx, dir) = table();
        table.launched(record("s1"), Observed::simple(TaskState::Starting, "created"));
        assert!(table.transition("s1", Observed::simple(TaskState::Finished, "done")));
        assert!(!table.transition("s1", Observed::simple(TaskState::Running, "late")), "an end is kept");
        let sent: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok()).map(|o| o.status).collect();
        assert_eq!(sent.iter().map(|s| s.state).collect::<Vec<_>>(), vec![TaskState::Starting, TaskState::Finished]);
        assert!(matches!(table.begin_kill("s1"), KillStart::Ended(o) if o.status.state == TaskState::Finished));
        assert_eq!(table.acknowledged("s1", sent[0].uuid.as_ref().unwrap()), None, "not the latest status");
        assert_eq!(table.acknowledged("s1", sent[1].uuid.as_ref().unwrap()), Some(TaskState::Finished));
        table.flush().await;
        assert!(Store::open(dir.path()).unwrap().tasks().unwrap().is_empty(), "forgotten on disk too");
        assert!(table.snapshot().is_empty());
    }
}
