//! [`TestAgent`]: an in-process agent that keeps no containers. It speaks
//! the real agent API over HTTP (so the offer layer sees it as it sees
//! `mpiswarm agent`) and "runs" tasks by bookkeeping alone, ending each by
//! its command's last words ([`crate::program`]). [`TestAgents`] starts
//! several and lists what each runs.
//!
//! It re-subscribes with backoff when its stream ends, reporting its tasks,
//! exactly as a real agent must. It is not a stand-in for the real agent's
//! Docker work, and never runs anything.

use crate::program::{self, Outcome};
use futures::StreamExt;
use mpiswarm_mesos::agent_api::{self, AgentInfo, EXIT_CODE_LABEL, EventType, ReportedTask};
use mpiswarm_mesos::client::{AgentClient, Backoff};
use mpiswarm_mesos::{
    AgentId, Attribute, Bytes, ExecutorInfo, FrameworkId, Labels, Reason, Resource, Source, TaskInfo, TaskState,
    TaskStatus,
};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, watch};
use tokio::task::AbortHandle;

/// How long the waits of this crate wait before they fail the test.
pub const DEADLINE: Duration = Duration::from_secs(30);

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

/// What a test agent is: hostname, resources, attributes (and an id to
/// re-register as a known agent). Build with [`AgentSpec::new`] and the
/// chainable setters.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSpec {
    pub hostname: String,
    pub resources: Vec<Resource>,
    pub attributes: Vec<Attribute>,
    pub id: Option<AgentId>,
}

impl AgentSpec {
    /// An agent called `hostname` with no resources yet.
    pub fn new(hostname: &str) -> Self {
        Self { hostname: hostname.to_owned(), resources: Vec::new(), attributes: Vec::new(), id: None }
    }

    pub fn cpus(self, cpus: f64) -> Self {
        self.resource(Resource::scalar("cpus", cpus))
    }

    /// Memory in MiB.
    pub fn mem(self, mib: f64) -> Self {
        self.resource(Resource::scalar("mem", mib))
    }

    pub fn resource(mut self, resource: Resource) -> Self {
        self.resources.push(resource);
        self
    }

    /// A TEXT attribute, e.g. `("rack", "r1")`.
    pub fn attribute(mut self, name: &str, value: &str) -> Self {
        self.attributes.push(Attribute::text(name, value));
        self
    }

    pub fn with_attribute(mut self, attribute: Attribute) -> Self {
        self.attributes.push(attribute);
        self
    }

    /// Re-register as the agent `id` (as a restarted agent does).
    pub fn id(mut self, id: AgentId) -> Self {
        self.id = Some(id);
        self
    }

    pub fn info(&self) -> AgentInfo {
        AgentInfo {
            hostname: self.hostname.clone(),
            id: self.id.clone(),
            resources: self.resources.clone(),
            attributes: self.attributes.clone(),
            port: None,
        }
    }

    /// Starts an agent of this spec against the offer layer at `master`.
    pub fn start(&self, master: &str) -> TestAgent {
        TestAgent::start_with(master, self.info())
    }
}

type Key = (String, String);

#[derive(Debug, Default)]
struct Books {
    agent_id: Option<AgentId>,
    tasks: BTreeMap<Key, TestTask>,
    /// `sleep N` tasks waiting to finish.
    timers: BTreeMap<Key, AbortHandle>,
    subscriptions: u64,
}

/// A status on its way to the offer layer.
type Outgoing = (FrameworkId, TaskStatus);

/// What the agent's tasks (event handling, timers) share.
struct Inner {
    /// This agent's hostname (a fail-launch label may name it).
    hostname: String,
    books: Mutex<Books>,
    outbox: mpsc::UnboundedSender<Outgoing>,
    /// Bumped whenever the books change, so tests await changes instead of polling.
    changed: Arc<watch::Sender<u64>>,
}

/// A running test agent; dropping it stops it.
pub struct TestAgent {
    hostname: String,
    inner: Arc<Inner>,
    subscribed: watch::Receiver<u64>,
    changed: watch::Receiver<u64>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl TestAgent {
    /// Starts an agent named `hostname` with `resources` against the offer
    /// layer at `master` (e.g. `http://127.0.0.1:5050`).
    pub fn start(master: &str, hostname: &str, resources: Vec<Resource>) -> Self {
        Self::start_with(
            master,
            AgentInfo { hostname: hostname.to_owned(), id: None, resources, attributes: Vec::new(), port: None },
        )
    }

    /// Starts an agent with a full `AgentInfo` (set `id` to re-register as a known agent).
    pub fn start_with(master: &str, info: AgentInfo) -> Self {
        Self::start_sharing(master, info, Arc::new(watch::channel(0).0))
    }

    fn start_sharing(master: &str, info: AgentInfo, changed: Arc<watch::Sender<u64>>) -> Self {
        let (outbox, outbox_rx) = mpsc::unbounded_channel();
        let inner = Arc::new(Inner {
            hostname: info.hostname.clone(),
            books: Mutex::new(Books { agent_id: info.id.clone(), ..Books::default() }),
            outbox,
            changed: Arc::clone(&changed),
        });
        let (subscribed_tx, subscribed) = watch::channel(0);
        let client = AgentClient::new(master, None);
        let hostname = info.hostname.clone();
        let tasks = vec![
            tokio::spawn(run(client.clone(), info, Arc::clone(&inner), subscribed_tx)),
            tokio::spawn(send_updates(client, Arc::downgrade(&inner), outbox_rx)),
        ];
        Self { hostname, inner, subscribed, changed: changed.subscribe(), tasks }
    }

    pub fn hostname(&self) -> &str {
        &self.hostname
    }

    /// Waits until the agent has subscribed at least `n` times in total;
    /// panics if that takes longer than [`DEADLINE`].
    pub async fn subscribed(&mut self, n: u64) -> AgentId {
        let waited = tokio::time::timeout(DEADLINE, self.subscribed.wait_for(|count| *count >= n)).await;
        let ok = matches!(waited, Ok(Ok(_)));
        drop(waited);
        assert!(ok, "test agent {} did not subscribe {n} time(s) within {DEADLINE:?}", self.hostname);
        self.agent_id().unwrap_or_else(|| panic!("test agent {} subscribed but has no id", self.hostname))
    }

    pub fn agent_id(&self) -> Option<AgentId> {
        self.inner.books.lock().ok().and_then(|b| b.agent_id.clone())
    }

    /// Every task the agent holds (running, and ended but not yet acknowledged).
    pub fn tasks(&self) -> Vec<TestTask> {
        self.inner.books.lock().map(|b| b.tasks.values().cloned().collect()).unwrap_or_default()
    }

    /// The tasks that have not ended: what would hold containers on a real node.
    pub fn running_tasks(&self) -> Vec<TestTask> {
        self.tasks().into_iter().filter(TestTask::is_running).collect()
    }

    /// Waits until `pred` holds for the agent's tasks (checked after every
    /// change); false if the agent stopped before it did. Panics after
    /// [`DEADLINE`].
    pub async fn wait_for_tasks(&mut self, mut pred: impl FnMut(&[TestTask]) -> bool) -> bool {
        let hostname = self.hostname.clone();
        let wait = async {
            loop {
                if pred(&self.tasks()) {
                    return true;
                }
                if self.changed.changed().await.is_err() {
                    return false;
                }
            }
        };
        tokio::time::timeout(DEADLINE, wait).await.unwrap_or_else(|_| {
            panic!("test agent {hostname}: tasks did not reach the awaited state within {DEADLINE:?}")
        })
    }

    /// Kills the agent process-like: its connection closes, its tasks are gone.
    pub fn crash(self) {}
}

impl Drop for TestAgent {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        if let Ok(b) = self.inner.books.lock() {
            for timer in b.timers.values() {
                timer.abort();
            }
        }
    }
}

/// Several test agents against one offer layer, for tests that look at the
/// whole cluster (e.g. that no part of a gang keeps running).
pub struct TestAgents {
    agents: Vec<TestAgent>,
    changed: watch::Receiver<u64>,
}

impl TestAgents {
    /// Starts one agent per spec against the offer layer at `master`.
    pub fn start(master: &str, specs: impl IntoIterator<Item = AgentSpec>) -> Self {
        let changed = Arc::new(watch::channel(0).0);
        let agents =
            specs.into_iter().map(|s| TestAgent::start_sharing(master, s.info(), Arc::clone(&changed))).collect();
        Self { agents, changed: changed.subscribe() }
    }

    /// `n` agents `node1`..`nodeN`, each with `cpus` and `mem` (MiB).
    pub fn uniform(master: &str, n: usize, cpus: f64, mem: f64) -> Self {
        Self::start(master, (1..=n).map(|i| AgentSpec::new(&format!("node{i}")).cpus(cpus).mem(mem)))
    }

    /// Waits until every agent has subscribed once (panics after [`DEADLINE`]);
    /// their ids, in start order.
    pub async fn subscribed(&mut self) -> Vec<AgentId> {
        let mut ids = Vec::with_capacity(self.agents.len());
        let all = async {
            for a in &mut self.agents {
                ids.push(a.subscribed(1).await);
            }
        };
        tokio::time::timeout(DEADLINE, all)
            .await
            .unwrap_or_else(|_| panic!("test agents did not all subscribe within {DEADLINE:?}"));
        ids
    }

    pub fn agents(&self) -> &[TestAgent] {
        &self.agents
    }

    pub fn get(&self, hostname: &str) -> Option<&TestAgent> {
        self.agents.iter().find(|a| a.hostname == hostname)
    }

    /// Stops the agent `hostname` as if its process died; false if there is none.
    pub fn crash(&mut self, hostname: &str) -> bool {
        let before = self.agents.len();
        self.agents.retain(|a| a.hostname != hostname);
        self.agents.len() != before
    }

    /// Tasks that have not ended, by agent hostname (agents without any are left out).
    pub fn running_tasks(&self) -> BTreeMap<String, Vec<TestTask>> {
        self.agents
            .iter()
            .map(|a| (a.hostname.clone(), a.running_tasks()))
            .filter(|(_, tasks)| !tasks.is_empty())
            .collect()
    }

    /// Waits until `pred` holds for [`Self::running_tasks`] (checked after
    /// every change on any agent); panics after [`DEADLINE`].
    pub async fn wait_for_running(&mut self, mut pred: impl FnMut(&BTreeMap<String, Vec<TestTask>>) -> bool) {
        let wait = async {
            loop {
                if pred(&self.running_tasks()) {
                    return;
                }
                if self.changed.changed().await.is_err() {
                    return;
                }
            }
        };
        tokio::time::timeout(DEADLINE, wait).await.unwrap_or_else(|_| {
            panic!("the test agents' running tasks did not reach the awaited state within {DEADLINE:?}")
        });
    }
}

fn reported(books: &Books) -> Vec<ReportedTask> {
    books.tasks.values().filter(|t| !(t.status.state.is_terminal() && t.acknowledged)).map(TestTask::reported).collect()
}

async fn run(client: AgentClient, mut info: AgentInfo, inner: Arc<Inner>, subscribed: watch::Sender<u64>) {
    let backoff = Backoff { initial: Duration::from_millis(50), max: Duration::from_secs(1) };
    let mut attempt = 0;
    loop {
        let tasks = inner.books.lock().map(|b| reported(&b)).unwrap_or_default();
        info.id = inner.books.lock().ok().and_then(|b| b.agent_id.clone());
        let sub = match client.subscribe(info.clone(), tasks).await {
            Ok(sub) => sub,
            Err(e) => {
                tracing::debug!(error = %e, "test agent: subscribe failed; retrying");
                tokio::time::sleep(backoff.delay(attempt)).await;
                attempt += 1;
                continue;
            }
        };
        attempt = 0;
        if let Ok(mut b) = inner.books.lock() {
            b.agent_id = Some(sub.subscribed.agent_id.clone());
            b.subscriptions += 1;
            subscribed.send_replace(b.subscriptions);
        }
        let mut events = sub.events;
        while let Some(Ok(event)) = events.next().await {
            handle(&event, &inner);
            if event.kind == EventType::Error {
                break;
            }
        }
        tokio::time::sleep(backoff.delay(0)).await;
    }
}

/// POSTs each status once; if that fails the stream is gone too and the
/// state is re-reported on re-subscribe.
async fn send_updates(client: AgentClient, inner: Weak<Inner>, mut updates: mpsc::UnboundedReceiver<Outgoing>) {
    while let Some((fw, status)) = updates.recv().await {
        let Some(agent_id) = inner.upgrade().and_then(|i| i.books.lock().ok().and_then(|b| b.agent_id.clone())) else {
            continue;
        };
        if let Err(e) = client.update(&agent_id, &fw, status).await {
            tracing::debug!(error = %e, "test agent: update not delivered");
        }
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
        let _ = self.outbox.send((t.framework_id.clone(), s));
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
            let _ = inner.outbox.send((fw.clone(), s));
        }
        return;
    }
    let culprit = infos.iter().find(|i| program::fails_launch(i, &inner.hostname)).map(|i| i.task_id.value.clone());
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
            let _ = inner.outbox.send((fw.clone(), s));
        }
        Some(t) if t.status.state.is_terminal() => {
            let _ = inner.outbox.send((fw.clone(), t.status.clone()));
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
    use mpiswarm_mesos::agent_api::{Event, Kill, Launch, LaunchGroup};
    use mpiswarm_mesos::{CommandInfo, FrameworkInfo, TaskGroupInfo, TaskId};

    /// The agent's books without a connection: events in, statuses out.
    fn offline() -> (Arc<Inner>, mpsc::UnboundedReceiver<Outgoing>) {
        let (outbox, rx) = mpsc::unbounded_channel();
        let books = Books { agent_id: Some(AgentId::new("a1")), ..Books::default() };
        (
            Arc::new(Inner {
                hostname: "node1".into(),
                books: Mutex::new(books),
                outbox,
                changed: Arc::new(watch::channel(0).0),
            }),
            rx,
        )
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
        std::iter::from_fn(|| rx.try_recv().ok()).map(|(_, s)| s).collect()
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

    #[tokio::test(start_paused = true)]
    async fn sleep_finishes_after_its_seconds_of_tokio_time() {
        let (inner, mut rx) = offline();
        launch_one(&inner, task("s", "sh /etc/mpiswarm/rank launcher mpirun -np 2 sleep 2.5"));
        assert_eq!(summary(&drain(&mut rx)), vec![("s".to_owned(), TaskState::Running, None, None)]);
        tokio::time::sleep(Duration::from_millis(2400)).await;
        assert!(drain(&mut rx).is_empty(), "nothing before 2.5 s");
        let (_, finished) = tokio::time::timeout(DEADLINE, rx.recv()).await.unwrap().unwrap();
        assert_eq!(
            (finished.state, finished.labels.as_ref().and_then(|l| l.get(EXIT_CODE_LABEL))),
            (TaskState::Finished, Some("0"))
        );
        assert!(inner.books.lock().unwrap().timers.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_killed_sleeper_does_not_finish_later_and_workers_run_until_killed() {
        let (inner, mut rx) = offline();
        launch_one(&inner, task("s", "sleep 5"));
        launch_one(&inner, task("w", "sh /etc/mpiswarm/rank worker"));
        for id in ["s", "w"] {
            handle(&Event::kill(Kill { framework_id: fw(), task_id: TaskId::new(id), kill_policy: None }), &inner);
        }
        tokio::time::sleep(Duration::from_secs(10)).await;
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
