//! A test agent that keeps no containers. It speaks the real agent API
//! over HTTP (so it exercises the same code paths as the Docker agent) and
//! "runs" tasks by bookkeeping alone:
//! - a task whose command is `true` or `exit 0` goes RUNNING, then FINISHED;
//! - `false` or `exit N` (N > 0) goes RUNNING, then FAILED;
//! - anything else stays RUNNING until KILL or SHUTDOWN.
//!
//! It re-subscribes with backoff when its stream ends, reporting its tasks,
//! exactly as a real agent must. It is not a stand-in for the real agent.

use futures::StreamExt;
use mpiswarm_mesos::agent_api::{self, AgentInfo, EventType, ReportedTask};
use mpiswarm_mesos::client::{AgentClient, Backoff};
use mpiswarm_mesos::{AgentId, Bytes, ExecutorInfo, FrameworkId, Reason, Source, TaskInfo, TaskState, TaskStatus};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, watch};

/// One task as the fake agent knows it.
#[derive(Debug, Clone)]
pub struct FakeTask {
    pub framework_id: FrameworkId,
    pub info: TaskInfo,
    pub executor: Option<ExecutorInfo>,
    pub status: TaskStatus,
    /// The terminal update was acknowledged: the task may be forgotten.
    pub acknowledged: bool,
}

impl FakeTask {
    /// The task as an agent reports it when it (re-)subscribes.
    pub fn reported(&self) -> ReportedTask {
        ReportedTask {
            framework_id: self.framework_id.clone(),
            task_info: self.info.clone(),
            executor_info: self.executor.clone(),
            status: self.status.clone(),
        }
    }
}

#[derive(Debug, Default)]
struct Books {
    agent_id: Option<AgentId>,
    tasks: BTreeMap<(String, String), FakeTask>,
    subscriptions: u64,
}

/// A running fake agent.
pub struct FakeAgent {
    books: Arc<Mutex<Books>>,
    subscribed: watch::Receiver<u64>,
    /// Bumped whenever the books change, so tests await changes instead of polling.
    changed: watch::Receiver<u64>,
    task: tokio::task::JoinHandle<()>,
}

fn what_happens(info: &TaskInfo) -> Option<(TaskState, Reason)> {
    let command = info.command.as_ref().and_then(|c| c.value.as_deref()).unwrap_or("").trim();
    match command {
        "true" | "exit 0" => Some((TaskState::Finished, Reason::ReasonCommandExecutorFailed)),
        "false" => Some((TaskState::Failed, Reason::ReasonCommandExecutorFailed)),
        c if c.strip_prefix("exit ").is_some_and(|n| n.trim().parse::<u32>().is_ok_and(|n| n > 0)) => {
            Some((TaskState::Failed, Reason::ReasonCommandExecutorFailed))
        }
        _ => None,
    }
}

impl FakeAgent {
    /// Starts an agent named `hostname` with `resources` against the offer
    /// layer at `master` (e.g. `http://127.0.0.1:5050`).
    pub fn start(master: &str, hostname: &str, resources: Vec<mpiswarm_mesos::Resource>) -> Self {
        Self::start_with(
            master,
            AgentInfo { hostname: hostname.to_owned(), id: None, resources, attributes: Vec::new(), port: None },
        )
    }

    /// Starts an agent with a full `AgentInfo` (set `id` to re-register as a known agent).
    pub fn start_with(master: &str, info: AgentInfo) -> Self {
        let books = Arc::new(Mutex::new(Books { agent_id: info.id.clone(), ..Books::default() }));
        let (subscribed_tx, subscribed) = watch::channel(0);
        let (changed_tx, changed) = watch::channel(0);
        let client = AgentClient::new(master, None);
        let task = tokio::spawn(run(client, info, books.clone(), subscribed_tx, changed_tx));
        Self { books, subscribed, changed, task }
    }

    /// Waits until the agent has subscribed at least `n` times in total.
    pub async fn subscribed(&mut self, n: u64) -> AgentId {
        let _ = self.subscribed.wait_for(|count| *count >= n).await;
        self.agent_id().expect("subscribed agents have an id")
    }

    pub fn agent_id(&self) -> Option<AgentId> {
        self.books.lock().ok().and_then(|b| b.agent_id.clone())
    }

    /// The tasks the agent holds.
    pub fn tasks(&self) -> Vec<FakeTask> {
        self.books.lock().map(|b| b.tasks.values().cloned().collect()).unwrap_or_default()
    }

    /// Waits until `pred` holds for the agent's tasks (checked after every
    /// change); false if the agent stopped before it did.
    pub async fn wait_for_tasks(&mut self, mut pred: impl FnMut(&[FakeTask]) -> bool) -> bool {
        loop {
            if pred(&self.tasks()) {
                return true;
            }
            if self.changed.changed().await.is_err() {
                return false;
            }
        }
    }

    /// Kills the agent process-like: its connection closes, its tasks are gone.
    pub fn crash(self) {
        self.task.abort();
    }
}

impl Drop for FakeAgent {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn reported(books: &Books) -> Vec<ReportedTask> {
    books.tasks.values().filter(|t| !(t.status.state.is_terminal() && t.acknowledged)).map(FakeTask::reported).collect()
}

async fn run(
    client: AgentClient,
    mut info: AgentInfo,
    books: Arc<Mutex<Books>>,
    subscribed: watch::Sender<u64>,
    changed: watch::Sender<u64>,
) {
    let backoff = Backoff { initial: std::time::Duration::from_millis(50), max: std::time::Duration::from_secs(1) };
    let mut attempt = 0;
    loop {
        let tasks = books.lock().map(|b| reported(&b)).unwrap_or_default();
        info.id = books.lock().ok().and_then(|b| b.agent_id.clone());
        let sub = match client.subscribe(info.clone(), tasks).await {
            Ok(sub) => sub,
            Err(e) => {
                tracing::debug!(error = %e, "fake agent: subscribe failed; retrying");
                tokio::time::sleep(backoff.delay(attempt)).await;
                attempt += 1;
                continue;
            }
        };
        attempt = 0;
        let agent_id = sub.subscribed.agent_id.clone();
        if let Ok(mut b) = books.lock() {
            b.agent_id = Some(agent_id.clone());
            b.subscriptions += 1;
            subscribed.send_replace(b.subscriptions);
        }
        let (updates_tx, updates_rx) = mpsc::unbounded_channel();
        let sender = tokio::spawn(send_updates(client.clone(), agent_id.clone(), updates_rx));
        let mut events = sub.events;
        while let Some(Ok(event)) = events.next().await {
            handle(&event, &agent_id, &books, &updates_tx);
            changed.send_modify(|n| *n += 1);
            if event.kind == EventType::Error {
                break;
            }
        }
        sender.abort();
        tokio::time::sleep(backoff.delay(0)).await;
    }
}

async fn send_updates(
    client: AgentClient,
    agent_id: AgentId,
    mut updates: mpsc::UnboundedReceiver<(FrameworkId, TaskStatus)>,
) {
    while let Some((fw, status)) = updates.recv().await {
        // If this fails the stream is gone too; the state is re-reported on re-subscribe.
        if let Err(e) = client.update(&agent_id, &fw, status).await {
            tracing::debug!(error = %e, "fake agent: update not delivered");
        }
    }
}

fn new_status(task: &TaskInfo, agent: &AgentId, state: TaskState, executor: Option<&ExecutorInfo>) -> TaskStatus {
    let mut s = TaskStatus::new(task.task_id.clone(), state);
    s.agent_id = Some(agent.clone());
    s.source = Some(Source::SourceExecutor);
    s.uuid = Some(Bytes::random_uuid());
    s.executor_id = executor.map(|e| e.executor_id.clone());
    s
}

type Updates = mpsc::UnboundedSender<(FrameworkId, TaskStatus)>;

fn transition(
    books: &mut Books,
    key: &(String, String),
    state: TaskState,
    reason: Option<Reason>,
    agent: &AgentId,
    updates: &Updates,
) {
    let Some(t) = books.tasks.get_mut(key) else { return };
    if t.status.state.is_terminal() {
        return;
    }
    let mut s = new_status(&t.info, agent, state, t.executor.as_ref());
    s.reason = reason;
    t.status = s.clone();
    t.acknowledged = false;
    let _ = updates.send((t.framework_id.clone(), s));
}

fn launch(
    books: &mut Books,
    fw: &FrameworkId,
    info: &TaskInfo,
    executor: Option<&ExecutorInfo>,
    agent: &AgentId,
    updates: &Updates,
) {
    let key = (fw.value.clone(), info.task_id.value.clone());
    let status = new_status(info, agent, TaskState::Staging, executor);
    books.tasks.insert(
        key.clone(),
        FakeTask {
            framework_id: fw.clone(),
            info: info.clone(),
            executor: executor.cloned(),
            status,
            acknowledged: false,
        },
    );
    transition(books, &key, TaskState::Running, None, agent, updates);
    if let Some((end, reason)) = what_happens(info) {
        let reason = (end != TaskState::Finished).then_some(reason);
        transition(books, &key, end, reason, agent, updates);
    }
}

fn handle(event: &agent_api::Event, agent: &AgentId, books: &Mutex<Books>, updates: &Updates) {
    let Ok(mut b) = books.lock() else { return };
    match event.kind {
        EventType::Launch => {
            if let Some(l) = &event.launch {
                launch(&mut b, &l.framework_id, &l.task_info, None, agent, updates);
            }
        }
        EventType::LaunchGroup => {
            if let Some(g) = &event.launch_group {
                for t in &g.task_group.tasks {
                    launch(&mut b, &g.framework_id, t, Some(&g.executor_info), agent, updates);
                }
            }
        }
        EventType::Kill => {
            if let Some(k) = &event.kill {
                let key = (k.framework_id.value.clone(), k.task_id.value.clone());
                transition(&mut b, &key, TaskState::Killed, None, agent, updates);
            }
        }
        EventType::Shutdown => {
            if let Some(s) = &event.shutdown {
                let keys: Vec<_> = b
                    .tasks
                    .iter()
                    .filter(|((fw, _), t)| {
                        *fw == s.framework_id.value
                            && s.executor_id
                                .as_ref()
                                .is_none_or(|e| t.executor.as_ref().is_some_and(|x| x.executor_id == *e))
                    })
                    .map(|(k, _)| k.clone())
                    .collect();
                for key in keys {
                    transition(&mut b, &key, TaskState::Killed, Some(Reason::ReasonFrameworkRemoved), agent, updates);
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
