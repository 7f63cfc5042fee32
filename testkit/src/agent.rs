//! [`TestAgent`]: an in-process agent that keeps no containers. It speaks
//! the real agent API over HTTP (so the offer layer sees it as it sees
//! `mpiswarm agent`) through the same subscribe / re-subscribe / UPDATE loop
//! (`mpiswarm_mesos::agent_session`), and "runs" tasks by bookkeeping alone
//! ([`crate::books`]), ending each by its command's last words
//! ([`crate::program`]). [`TestAgents`] starts several and lists what each runs.
//!
//! It is not a stand-in for the real agent's Docker work, and never runs anything.

use crate::books::{Inner, Side, TestTask};
use crate::spec::AgentSpec;
use mpiswarm_mesos::agent_api::AgentInfo;
use mpiswarm_mesos::agent_session::{self, SessionConfig};
use mpiswarm_mesos::client::{AgentClient, Backoff};
use mpiswarm_mesos::{AgentId, Resource};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// How long the waits of this crate wait before they fail the test.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A running test agent; dropping it stops it.
pub struct TestAgent {
    hostname: String,
    inner: Arc<Inner>,
    subscribed: watch::Receiver<u64>,
    changed: watch::Receiver<u64>,
    session: tokio::task::JoinHandle<()>,
}

impl AgentSpec {
    /// Starts an agent of this spec against the offer layer at `master`.
    pub fn start(&self, master: &str) -> TestAgent {
        TestAgent::start_with(master, self.info())
    }
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
        Self::start_sharing(AgentClient::new(master, None), info, Arc::new(watch::channel(0).0))
    }

    /// Starts an agent that talks through `client` (credentials, a CA to trust).
    pub fn start_with_client(client: AgentClient, info: AgentInfo) -> Self {
        Self::start_sharing(client, info, Arc::new(watch::channel(0).0))
    }

    fn start_sharing(client: AgentClient, info: AgentInfo, changed: Arc<watch::Sender<u64>>) -> Self {
        let (outbox, outbox_rx) = mpsc::unbounded_channel();
        let hostname = info.hostname.clone();
        let inner = Arc::new(Inner::new(info, outbox, Arc::clone(&changed)));
        let config = SessionConfig {
            subscribe_backoff: Backoff { initial: Duration::from_millis(50), max: Duration::from_secs(1) },
            update_backoff: Backoff { initial: Duration::from_millis(50), max: Duration::from_secs(1) },
            ..SessionConfig::default()
        };
        let side = Arc::new(Side(Arc::clone(&inner)));
        let session = tokio::spawn(agent_session::run(client, side, outbox_rx, config));
        Self { hostname, subscribed: inner.subscriptions(), inner, changed: changed.subscribe(), session }
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
        self.session.abort();
        self.inner.stop_timers();
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
        Self::start_through(|| AgentClient::new(master, None), specs)
    }

    /// Starts one agent per spec, each with its own client from `client`
    /// (credentials, a CA to trust).
    pub fn start_through(client: impl Fn() -> AgentClient, specs: impl IntoIterator<Item = AgentSpec>) -> Self {
        let changed = Arc::new(watch::channel(0).0);
        let agents =
            specs.into_iter().map(|s| TestAgent::start_sharing(client(), s.info(), Arc::clone(&changed))).collect();
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
