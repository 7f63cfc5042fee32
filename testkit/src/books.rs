//! The test agent's books: the tasks it holds and how events move them
//! (LAUNCH by the program rules of [`crate::program`], KILL, SHUTDOWN,
//! ACKNOWLEDGED), and the statuses that go out. The connection is
//! `mpiswarm_mesos::agent_session`'s; this module is its [`AgentSide`].

use crate::program::{self, Outcome};
use mpiswarm_mesos::agent_api::{self, AgentInfo, EXIT_CODE_LABEL, EventType, ReportedTask};
use mpiswarm_mesos::agent_session::{AgentSide, Outgoing};
use mpiswarm_mesos::{
    AgentId, Bytes, ExecutorInfo, FrameworkId, Labels, Reason, Source, TaskInfo, TaskState, TaskStatus,
};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, watch};
use tokio::task::AbortHandle;

/// One task as the test agent knows it.
#[derive(Debug, Clone)]
pub struct TestTask {
    pub framework_id: FrameworkId,
    pub info: TaskInfo,
    pub executor: Option<ExecutorInfo>,
    pub status: TaskStatus,
    /// The terminal update was acknowledged: the task may be forgotten.
    pub acknowledged: bool,
}

impl TestTask {
    /// The task as an agent reports it when it (re-)subscribes.
    pub fn reported(&self) -> ReportedTask {
        ReportedTask {
            framework_id: self.framework_id.clone(),
            task_info: self.info.clone(),
            executor_info: self.executor.clone(),
            status: self.status.clone(),
        }
    }

    /// Whether the task has not ended (it would still hold a container).
    pub fn is_running(&self) -> bool {
        !self.status.state.is_terminal()
    }
}

type Key = (String, String);

#[derive(Debug, Default)]
pub(crate) struct Books {
    pub(crate) agent_id: Option<AgentId>,
    pub(crate) tasks: BTreeMap<Key, TestTask>,
    /// `sleep N` tasks waiting to finish.
    pub(crate) timers: BTreeMap<Key, AbortHandle>,
    subscriptions: u64,
}

/// What the agent's tasks (the session, timers) and its handle share.
pub(crate) struct Inner {
    /// Hostname, resources and attributes; the id lives in the books.
    info: AgentInfo,
    pub(crate) books: Mutex<Books>,
    outbox: mpsc::UnboundedSender<Outgoing>,
    /// Bumped whenever the books change, so tests await changes instead of polling.
    changed: Arc<watch::Sender<u64>>,
    /// The number of SUBSCRIBEDs so far.
    subscribed: watch::Sender<u64>,
}

impl Inner {
    /// Books for the agent `info` (re-registering as `info.id` if set),
    /// sending statuses to `outbox` and bumping `changed` on every change.
    pub(crate) fn new(
        info: AgentInfo,
        outbox: mpsc::UnboundedSender<Outgoing>,
        changed: Arc<watch::Sender<u64>>,
    ) -> Self {
        let books = Books { agent_id: info.id.clone(), ..Books::default() };
        Self { info, books: Mutex::new(books), outbox, changed, subscribed: watch::channel(0).0 }
    }

    /// Counts SUBSCRIBEDs.
    pub(crate) fn subscriptions(&self) -> watch::Receiver<u64> {
        self.subscribed.subscribe()
    }

    /// Stops every `sleep` timer (the agent is gone).
    pub(crate) fn stop_timers(&self) {
        if let Ok(b) = self.books.lock() {
            for timer in b.timers.values() {
                timer.abort();
            }
        }
    }
}

fn reported(books: &Books) -> Vec<ReportedTask> {
    books.tasks.values().filter(|t| !(t.status.state.is_terminal() && t.acknowledged)).map(TestTask::reported).collect()
}

/// The books as the agent session sees them.
pub(crate) struct Side(pub(crate) Arc<Inner>);

impl AgentSide for Side {
    fn agent_info(&self) -> AgentInfo {
        AgentInfo { id: self.agent_id(), ..self.0.info.clone() }
    }

    fn agent_id(&self) -> Option<AgentId> {
        self.0.books.lock().ok().and_then(|b| b.agent_id.clone())
    }

    fn reported_tasks(&self) -> Vec<ReportedTask> {
        self.0.books.lock().map(|b| reported(&b)).unwrap_or_default()
    }

    fn subscribed(&self, agent_id: &AgentId) {
        if let Ok(mut b) = self.0.books.lock() {
            b.agent_id = Some(agent_id.clone());
            b.subscriptions += 1;
            self.0.subscribed.send_replace(b.subscriptions);
        }
    }

    fn handle(&self, event: agent_api::Event) {
        handle(&event, &self.0);
    }
}

fn now() -> Option<f64> {
    SystemTime::now().duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs_f64())
}

/// A new status of `task` as an executor reports it (with a uuid to acknowledge).
fn new_status(task: &TestTask, agent: Option<&AgentId>, state: TaskState) -> TaskStatus {
    let mut s = TaskStatus::new(task.info.task_id.clone(), state);
    s.agent_id = agent.cloned();
    s.source = Some(Source::SourceExecutor);
    s.uuid = Some(Bytes::random_uuid());
    s.executor_id = task.executor.as_ref().map(|e| e.executor_id.clone());
    s.timestamp = now();
    s
}

/// How a task moves on: the state, and what the status says about it.
struct Step {
    state: TaskState,
    reason: Option<Reason>,
    message: String,
    exit_code: Option<i32>,
}

impl Step {
    fn to(state: TaskState, message: impl Into<String>) -> Self {
        Self { state, reason: None, message: message.into(), exit_code: None }
    }

    fn because(self, reason: Reason) -> Self {
        Self { reason: Some(reason), ..self }
    }

    /// The program ended with `code`, as the real agent reports a container's exit.
    fn exited(code: i32) -> Self {
        if code == 0 {
            Self { exit_code: Some(0), ..Self::to(TaskState::Finished, "test agent: the program exited with code 0") }
        } else {
            Self {
                exit_code: Some(code),
                ..Self::to(TaskState::Failed, format!("test agent: the program exited with code {code}"))
                    .because(Reason::ReasonCommandExecutorFailed)
            }
        }
    }
}

impl Inner {
    /// Records and sends the next status of a task that has not ended.
    fn transition(&self, books: &mut Books, key: &Key, step: Step) {
        let agent = books.agent_id.clone();
        let Some(t) = books.tasks.get_mut(key) else { return };
        if t.status.state.is_terminal() {
            return;
        }
        let mut s = new_status(t, agent.as_ref(), step.state);
        s.reason = step.reason;
        s.message = Some(step.message);
        if let Some(code) = step.exit_code {
            s.labels = Some(Labels::from_pairs([(EXIT_CODE_LABEL, code.to_string().as_str())]));
        }
        t.status = s.clone();
        t.acknowledged = false;
        if step.state.is_terminal()
            && let Some(timer) = books.timers.remove(key)
        {
            timer.abort();
        }
        let _ = self.outbox.send(Outgoing { framework_id: t.framework_id.clone(), status: s });
    }

    fn changed(&self) {
        self.changed.send_modify(|n| *n += 1);
    }
}

/// LAUNCH and LAUNCH_GROUP: all of the group starts, or none does (a task
/// labelled [`program::FAIL_LAUNCH_LABEL`] fails the group's launch, as a
/// container that cannot start fails the real agent's).
fn launch(
    inner: &Arc<Inner>,
    books: &mut Books,
    fw: &FrameworkId,
    infos: &[TaskInfo],
    executor: Option<&ExecutorInfo>,
) {
    // A retried launch re-reports what the agent already has.
    let known: Vec<TaskStatus> = infos
        .iter()
        .filter_map(|i| books.tasks.get(&(fw.value.clone(), i.task_id.value.clone())))
        .map(|t| t.status.clone())
        .collect();
    if !known.is_empty() {
        for s in known {
            let _ = inner.outbox.send(Outgoing { framework_id: fw.clone(), status: s });
        }
        return;
    }
    let culprit =
        infos.iter().find(|i| program::fails_launch(i, &inner.info.hostname)).map(|i| i.task_id.value.clone());
    for info in infos {
        let key = (fw.value.clone(), info.task_id.value.clone());
        let task = TestTask {
            framework_id: fw.clone(),
            info: info.clone(),
            executor: executor.cloned(),
            status: TaskStatus::new(info.task_id.clone(), TaskState::Staging),
            acknowledged: false,
        };
        books.tasks.insert(key.clone(), task);
        let step = match &culprit {
            Some(c) if *c == info.task_id.value => Step::to(
                TaskState::Failed,
                format!("test agent: launch failed on purpose ({}=true)", program::FAIL_LAUNCH_LABEL),
            )
            .because(Reason::ReasonContainerLaunchFailed),
            Some(c) => Step::to(TaskState::Killed, format!("not launched because task '{c}' of its group failed"))
                .because(Reason::ReasonTaskKilledDuringLaunch),
            None => Step::to(TaskState::Running, "test agent: running"),
        };
        inner.transition(books, &key, step);
        if culprit.is_some() {
            continue;
        }
        match program::outcome(info.command.as_ref()) {
            Outcome::Exits(code) => inner.transition(books, &key, Step::exited(code)),
            Outcome::FinishesAfter(after) => {
                let weak = Arc::downgrade(inner);
                let timer_key = key.clone();
                let timer = tokio::spawn(async move {
                    tokio::time::sleep(after).await;
                    let Some(inner) = weak.upgrade() else { return };
                    if let Ok(mut b) = inner.books.lock() {
                        b.timers.remove(&timer_key);
                        inner.transition(&mut b, &timer_key, Step::exited(0));
                    }
                    inner.changed();
                });
                books.timers.insert(key, timer.abort_handle());
            }
            Outcome::RunsUntilKilled => {}
        }
    }
}

/// KILL: the task goes KILLED; an ended task's terminal status is sent
/// again; an unknown task is LOST (REASON_TASK_UNKNOWN), as the real agent does.
fn kill(inner: &Inner, books: &mut Books, fw: &FrameworkId, task_id: &mpiswarm_mesos::TaskId, reason: Option<Reason>) {
    let key = (fw.value.clone(), task_id.value.clone());
    match books.tasks.get(&key) {
        None => {
            let mut s = TaskStatus::new(task_id.clone(), TaskState::Lost);
            s.agent_id = books.agent_id.clone();
            s.source = Some(Source::SourceExecutor);
            s.reason = Some(Reason::ReasonTaskUnknown);
            s.message = Some(format!("task '{task_id}' is not known on this agent"));
            s.uuid = Some(Bytes::random_uuid());
            s.timestamp = now();
            let _ = inner.outbox.send(Outgoing { framework_id: fw.clone(), status: s });
        }
        Some(t) if t.status.state.is_terminal() => {
            let _ = inner.outbox.send(Outgoing { framework_id: fw.clone(), status: t.status.clone() });
        }
        Some(_) => {
            let step = Step::to(TaskState::Killed, "test agent: killed");
            let step = match reason {
                Some(r) => step.because(r),
                None => step,
            };
            inner.transition(books, &key, step);
        }
    }
}

fn handle(event: &agent_api::Event, inner: &Arc<Inner>) {
    {
        let Ok(mut b) = inner.books.lock() else { return };
        let b = &mut *b;
        match event.kind {
            EventType::Launch => {
                if let Some(l) = &event.launch {
                    launch(inner, b, &l.framework_id, std::slice::from_ref(&l.task_info), None);
                }
            }
            EventType::LaunchGroup => {
                if let Some(g) = &event.launch_group {
                    launch(inner, b, &g.framework_id, &g.task_group.tasks, Some(&g.executor_info));
                }
            }
            EventType::Kill => {
                if let Some(k) = &event.kill {
                    kill(inner, b, &k.framework_id, &k.task_id, None);
                }
            }
            EventType::Shutdown => {
                if let Some(s) = &event.shutdown {
                    let victims: Vec<_> = b
                        .tasks
                        .values()
                        .filter(|t| {
                            t.framework_id == s.framework_id
                                && !t.status.state.is_terminal()
                                && s.executor_id
                                    .as_ref()
                                    .is_none_or(|e| t.executor.as_ref().is_some_and(|x| x.executor_id == *e))
                        })
                        .map(|t| t.info.task_id.clone())
                        .collect();
                    for task_id in victims {
                        kill(inner, b, &s.framework_id, &task_id, Some(Reason::ReasonFrameworkRemoved));
                    }
                }
            }
            EventType::Acknowledged => {
                if let Some(a) = &event.acknowledged {
                    let key = (a.framework_id.value.clone(), a.task_id.value.clone());
                    let forget = b.tasks.get_mut(&key).is_some_and(|t| {
                        if t.status.uuid.as_ref() == Some(&a.uuid) {
                            t.acknowledged = true;
                        }
                        t.acknowledged && t.status.state.is_terminal()
                    });
                    if forget {
                        b.tasks.remove(&key);
                    }
                }
            }
            _ => {}
        }
    }
    inner.changed();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::DEADLINE;
    use mpiswarm_mesos::agent_api::{Event, Kill, Launch, LaunchGroup};
    use mpiswarm_mesos::{CommandInfo, FrameworkInfo, TaskGroupInfo, TaskId};
    use std::time::Duration;

    /// The agent's books without a connection: events in, statuses out.
    fn offline() -> (Arc<Inner>, mpsc::UnboundedReceiver<Outgoing>) {
        let (outbox, rx) = mpsc::unbounded_channel();
        let info = AgentInfo {
            hostname: "node1".into(),
            id: Some(AgentId::new("a1")),
            resources: vec![],
            attributes: vec![],
            port: None,
        };
        (Arc::new(Inner::new(info, outbox, Arc::new(watch::channel(0).0))), rx)
    }

    fn fw() -> FrameworkId {
        FrameworkId::new("fw")
    }

    fn task(id: &str, command: &str) -> TaskInfo {
        let mut t = TaskInfo::new(id, id, &AgentId::new("a1"));
        t.command = Some(CommandInfo::shell(command));
        t
    }

    fn launch_one(inner: &Arc<Inner>, t: TaskInfo) {
        let info = FrameworkInfo::new("root", "fw", &["mpi"]);
        handle(&Event::launch(Launch { framework_id: fw(), framework_info: info, task_info: t }), inner);
    }

    fn drain(rx: &mut mpsc::UnboundedReceiver<Outgoing>) -> Vec<TaskStatus> {
        std::iter::from_fn(|| rx.try_recv().ok()).map(|o| o.status).collect()
    }

    fn summary(statuses: &[TaskStatus]) -> Vec<(String, TaskState, Option<Reason>, Option<String>)> {
        statuses
            .iter()
            .map(|s| {
                let code = s.labels.as_ref().and_then(|l| l.get(EXIT_CODE_LABEL)).map(str::to_owned);
                (s.task_id.value.clone(), s.state, s.reason, code)
            })
            .collect()
    }

    #[tokio::test]
    async fn a_launcher_ends_by_its_program_with_the_exit_code_label() {
        let (inner, mut rx) = offline();
        let line = "sh /etc/mpiswarm/rank launcher mpirun --hostfile /etc/mpi/hostfile -np 4";
        launch_one(&inner, task("ok", &format!("{line} true")));
        launch_one(&inner, task("no", &format!("{line} false")));
        launch_one(&inner, task("e7", &format!("{line} exit 7")));
        launch_one(&inner, task("e0", "exit 0"));
        let statuses = drain(&mut rx);
        let running = |id: &str| (id.to_owned(), TaskState::Running, None, None);
        let failed = |id: &str, code: &str| {
            (id.to_owned(), TaskState::Failed, Some(Reason::ReasonCommandExecutorFailed), Some(code.to_owned()))
        };
        assert_eq!(
            summary(&statuses),
            vec![
                running("ok"),
                ("ok".to_owned(), TaskState::Finished, None, Some("0".to_owned())),
                running("no"),
                failed("no", "1"),
                running("e7"),
                failed("e7", "7"),
                running("e0"),
                ("e0".to_owned(), TaskState::Finished, None, Some("0".to_owned())),
            ]
        );
        assert!(statuses.iter().all(|s| s.uuid.is_some() && s.agent_id == Some(AgentId::new("a1"))));
        assert_eq!(statuses[5].message.as_deref(), Some("test agent: the program exited with code 7"));
    }

    /// Real time, bounded below only: a slow machine delays the status, it
    /// never makes it early.
    #[tokio::test]
    async fn sleep_finishes_after_its_seconds_and_not_before() {
        let (inner, mut rx) = offline();
        let launched = std::time::Instant::now();
        launch_one(&inner, task("s", "sh /etc/mpiswarm/rank launcher mpirun -np 2 sleep 0.3"));
        assert_eq!(summary(&drain(&mut rx)), vec![("s".to_owned(), TaskState::Running, None, None)]);
        let Outgoing { status: finished, .. } = tokio::time::timeout(DEADLINE, rx.recv()).await.unwrap().unwrap();
        assert!(launched.elapsed() >= Duration::from_millis(300), "finished after {:?}", launched.elapsed());
        assert_eq!(
            (finished.state, finished.labels.as_ref().and_then(|l| l.get(EXIT_CODE_LABEL))),
            (TaskState::Finished, Some("0"))
        );
        assert!(inner.books.lock().unwrap().timers.is_empty());
    }

    #[tokio::test]
    async fn a_killed_sleeper_does_not_finish_later_and_workers_run_until_killed() {
        let (inner, mut rx) = offline();
        launch_one(&inner, task("s", "sleep 0.2"));
        launch_one(&inner, task("w", "sh /etc/mpiswarm/rank worker"));
        for id in ["s", "w"] {
            handle(&Event::kill(Kill { framework_id: fw(), task_id: TaskId::new(id), kill_policy: None }), &inner);
        }
        // Well past the sleeper's time: a timer the KILL did not stop has fired by now.
        tokio::time::sleep(Duration::from_millis(600)).await;
        let states: Vec<_> = summary(&drain(&mut rx)).into_iter().map(|(id, st, ..)| (id, st)).collect();
        assert_eq!(
            states,
            vec![
                ("s".to_owned(), TaskState::Running),
                ("w".to_owned(), TaskState::Running),
                ("s".to_owned(), TaskState::Killed),
                ("w".to_owned(), TaskState::Killed),
            ]
        );
        assert!(inner.books.lock().unwrap().timers.is_empty(), "the KILL stopped the timer");
    }

    #[tokio::test]
    async fn a_task_labelled_to_fail_fails_its_whole_group_and_nothing_runs() {
        let (inner, mut rx) = offline();
        let mut bad = task("w1", "sh /etc/mpiswarm/rank worker");
        bad.labels = Some(Labels::from_pairs([(program::FAIL_LAUNCH_LABEL, "true")]));
        let group = LaunchGroup {
            framework_id: fw(),
            framework_info: FrameworkInfo::new("root", "fw", &["mpi"]),
            executor_info: serde_json::from_value(serde_json::json!({"executor_id": {"value": "ex"}})).unwrap(),
            task_group: TaskGroupInfo { tasks: vec![task("launcher", "true"), bad] },
        };
        handle(&Event::launch_group(group), &inner);
        assert_eq!(
            summary(&drain(&mut rx)),
            vec![
                ("launcher".to_owned(), TaskState::Killed, Some(Reason::ReasonTaskKilledDuringLaunch), None),
                ("w1".to_owned(), TaskState::Failed, Some(Reason::ReasonContainerLaunchFailed), None),
            ]
        );
        let b = inner.books.lock().unwrap();
        assert!(b.tasks.values().all(|t| !t.is_running()), "nothing of the group runs");
    }

    #[tokio::test]
    async fn kill_of_an_unknown_task_is_lost_and_of_an_ended_one_repeats_its_end() {
        let (inner, mut rx) = offline();
        launch_one(&inner, task("t", "true"));
        let ended = drain(&mut rx).pop().unwrap();
        for id in ["t", "ghost"] {
            handle(&Event::kill(Kill { framework_id: fw(), task_id: TaskId::new(id), kill_policy: None }), &inner);
        }
        let answers = drain(&mut rx);
        assert_eq!(answers[0], ended);
        assert_eq!((answers[1].state, answers[1].reason), (TaskState::Lost, Some(Reason::ReasonTaskUnknown)));
    }
}
