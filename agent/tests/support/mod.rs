//! Shared harness of the real-engine tests: an [`Agent`] over the machine's
//! Docker engine (made a single-node swarm if needed) with a unique agent id,
//! so parallel tests never see each other's objects, and a guard that removes
//! everything labelled with that id when the test ends, even by panic.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use mpiswarm_agent::agent::{Agent, AgentConfig, Outgoing};
use mpiswarm_agent::node;
use mpiswarm_agent::store::Store;
use mpiswarm_agent::swarm::DockerSwarm;
use mpiswarm_mesos::task::{CommandInfo, ContainerInfo};
use mpiswarm_mesos::{AgentId, FrameworkId, FrameworkInfo, Resource, TaskId, TaskInfo, TaskState};
use tokio::sync::mpsc;

/// The rank image `ensure_rank_image` builds: `mpiswarm_stack::images::RANK_IMAGE`
/// (the agent cannot depend on the stack crate, which runs it).
pub const RANK_IMAGE: &str = concat!("mpiswarm/openmpi:", env!("CARGO_PKG_VERSION"));

/// Generous: a container start on this small shared machine takes seconds.
pub const STATUS_DEADLINE: Duration = Duration::from_secs(120);

pub struct Harness {
    pub agent: Arc<Agent<DockerSwarm>>,
    pub statuses: mpsc::UnboundedReceiver<Outgoing>,
    pub docker: bollard::Docker,
    pub agent_id: String,
    pub framework_id: FrameworkId,
    pub data_dir: tempfile::TempDir,
    /// Statuses of other tasks read while waiting for one task.
    stash: std::collections::VecDeque<Outgoing>,
    cleanup: Option<Cleanup>,
    _supervisor: mpiswarm_agent::run::Supervisor,
    /// The agent's watchdog report, once one of its tasks panicked.
    panicked: tokio::sync::watch::Receiver<Option<String>>,
}

/// Fails (never skips) when there is no engine or no rank image: these
/// tests are the agent's proof against the real thing.
pub async fn harness(test: &str) -> Harness {
    harness_with(test, |_| {}).await
}

/// [`harness`] with its agent's configuration changed by `tweak`.
pub async fn harness_with(test: &str, tweak: impl FnOnce(&mut AgentConfig)) -> Harness {
    let data_dir = tempfile::tempdir().unwrap();
    let agent_id = format!("test-{test}-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    Store::open(data_dir.path()).unwrap().save_agent_id(&AgentId::new(&agent_id)).unwrap();
    restart_with(data_dir, tweak).await
}

/// A fresh agent whose id is `agent_id` (as if the offer layer had assigned it).
pub async fn start(agent_id: &str, data_dir: tempfile::TempDir) -> Harness {
    Store::open(data_dir.path()).unwrap().save_agent_id(&AgentId::new(agent_id)).unwrap();
    restart(data_dir).await
}

/// An agent on an existing data directory: its id and tasks are whatever the
/// previous incarnation left there, nothing is seeded.
pub async fn restart(data_dir: tempfile::TempDir) -> Harness {
    restart_with(data_dir, |_| {}).await
}

async fn restart_with(data_dir: tempfile::TempDir, tweak: impl FnOnce(&mut AgentConfig)) -> Harness {
    let _ = tracing_subscriber::fmt().with_env_filter("mpiswarm_agent=debug").with_test_writer().try_init();
    let docker = node::connect(None).await.expect("a Docker engine must answer on the local socket");
    let node_id = node::ensure_swarm(&docker).await.expect("the engine must be (or become) a swarm manager");
    ensure_rank_image();
    assert!(docker.inspect_image(RANK_IMAGE).await.is_ok(), "the rank image {RANK_IMAGE} is missing after the build");
    let store = Store::open(data_dir.path()).unwrap();
    let agent_id = store.agent_id().unwrap().expect("the data directory holds an agent id").value;
    let agent_id = agent_id.as_str();
    let mut config = AgentConfig { orphan_grace: Duration::from_secs(3), ..AgentConfig::default() };
    tweak(&mut config);
    // A panic in the agent's work fails the test at its next wait for a status.
    let (spawner, failures) = mpiswarm_agent::watchdog::watchdog();
    let (panicked_tx, panicked) = tokio::sync::watch::channel(None);
    tokio::spawn(async move { panicked_tx.send_replace(Some(failures.first().await.to_string())) });
    let (agent, statuses) = Agent::new(
        DockerSwarm { docker: docker.clone(), node_engine: Some(docker.clone()) },
        node_id,
        store,
        config,
        spawner.clone(),
    )
    .unwrap();
    let supervisor =
        mpiswarm_agent::run::supervise(Arc::clone(&agent), docker.clone(), Duration::from_millis(500), &spawner);
    Harness {
        agent,
        statuses,
        docker,
        agent_id: agent_id.to_owned(),
        framework_id: FrameworkId::new(format!("fw-{agent_id}")),
        data_dir,
        stash: std::collections::VecDeque::new(),
        cleanup: Some(Cleanup { agent_id: agent_id.to_owned() }),
        _supervisor: supervisor,
        panicked,
    }
}

/// Makes sure the rank image matches `stack/images/` once per test process: a
/// no-op in well under a second after `mpiswarm images build`, a rebuild from
/// the cached rootfs when `stack/images/` changed. Offline: tests never reach the
/// Debian mirror, so without the cache this fails and says what to run.
pub fn ensure_rank_image() {
    static BUILT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let result = BUILT.get_or_init(|| {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../stack/images/build.sh");
        let status = std::process::Command::new("bash")
            .args([script, env!("CARGO_PKG_VERSION")])
            .env("MPISWARM_IMAGES_OFFLINE", "1")
            .stdout(std::process::Stdio::null())
            .status()
            .map_err(|e| format!("cannot run {script}: {e}"))?;
        if status.success() { Ok(()) } else { Err(format!("{script} failed with {status}")) }
    });
    if let Err(e) = result {
        panic!("the rank image {RANK_IMAGE} cannot be built: {e}");
    }
}

impl Harness {
    /// Stops this agent as `kill -9` would (no cleanup of its services) and
    /// hands back its data directory for the next incarnation.
    pub async fn crash(mut self) -> (String, tempfile::TempDir) {
        // What the agent recorded before the "crash" is on disk, as it would
        // be after a real one (the writer fsyncs each record).
        self.agent.flush().await;
        // Disarm without running the guard: the services must outlive this agent.
        std::mem::forget(self.cleanup.take());
        let agent_id = self.agent_id.clone();
        let dir = std::mem::replace(&mut self.data_dir, tempfile::tempdir().unwrap());
        (agent_id, dir)
    }

    /// Hands the agent the framework's acknowledgement of `status`.
    pub fn acknowledge(&self, status: &mpiswarm_mesos::TaskStatus) {
        let ack = mpiswarm_mesos::agent_api::Acknowledged {
            framework_id: self.framework_id.clone(),
            task_id: status.task_id.clone(),
            uuid: status.uuid.clone().expect("agent statuses carry a uuid"),
        };
        self.agent.handle(mpiswarm_mesos::agent_api::Event::acknowledged(ack));
    }

    /// Serves the agent's HTTP endpoints on a free loopback port; its base URL.
    pub async fn serve_http(&self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let app = mpiswarm_agent::http::router(Arc::clone(&self.agent), Arc::default(), None);
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        url
    }

    pub fn framework_info(&self) -> FrameworkInfo {
        FrameworkInfo::new("root", "agent-tests", &["mpi"])
    }

    /// A DOCKER task in `image` running `shell` with 0.1 cpus and 64 MiB.
    pub fn task(&self, name: &str, image: &str, shell: &str) -> TaskInfo {
        let mut t = TaskInfo::new(name, &format!("{}-{name}", self.agent_id), &AgentId::new(&self.agent_id));
        t.resources = vec![Resource::scalar("cpus", 0.1), Resource::scalar("mem", 64.0)];
        t.command = Some(CommandInfo::shell(shell));
        t.container = Some(ContainerInfo::docker(image));
        t
    }

    pub async fn launch(&self, tasks: Vec<TaskInfo>) {
        self.agent.launch(self.framework_id.clone(), &self.framework_info(), None, tasks).await;
    }

    pub async fn launch_group(&self, executor: &str, tasks: Vec<TaskInfo>) {
        let executor = mpiswarm_mesos::ExecutorInfo::default_executor(executor);
        self.agent.launch(self.framework_id.clone(), &self.framework_info(), Some(executor), tasks).await;
    }

    /// The next status of `task`, skipping other tasks' statuses, within
    /// one overall deadline (other tasks' statuses do not extend it).
    pub async fn next_status(&mut self, task: &TaskId) -> mpiswarm_mesos::TaskStatus {
        if let Some(i) = self.stash.iter().position(|o| &o.status.task_id == task) {
            return self.stash.remove(i).expect("position is in range").status;
        }
        let wait = async {
            loop {
                let item = tokio::select! {
                    item = self.statuses.recv() => item.expect("agent outbox closed"),
                    report = self.panicked.wait_for(Option::is_some) => {
                        panic!("{}", report.map(|r| r.clone().unwrap_or_default()).unwrap_or_default())
                    }
                };
                if &item.status.task_id == task {
                    return item.status;
                }
                self.stash.push_back(item);
            }
        };
        tokio::time::timeout(STATUS_DEADLINE, wait)
            .await
            .unwrap_or_else(|_| panic!("no status for {task} within {STATUS_DEADLINE:?}"))
    }

    /// Statuses of `task` until one in `state` (returned), asserting that
    /// none is terminal before it; one overall deadline.
    pub async fn wait_for(&mut self, task: &TaskId, state: TaskState) -> mpiswarm_mesos::TaskStatus {
        let wait = async {
            loop {
                let s = self.next_status(task).await;
                if s.state == state {
                    return s;
                }
                assert!(
                    !s.state.is_terminal(),
                    "{task} ended {:?} ({:?}) while waiting for {state:?}",
                    s.state,
                    s.message
                );
            }
        };
        tokio::time::timeout(STATUS_DEADLINE, wait)
            .await
            .unwrap_or_else(|_| panic!("{task} not {state:?} within {STATUS_DEADLINE:?}"))
    }

    /// Names of this agent's services, networks, secrets and configs, by CLI.
    pub fn objects(&self) -> Vec<String> {
        owned_objects(&self.agent_id)
    }

    /// Waits (on Docker events) until this agent owns no object at all.
    pub async fn wait_until_clean(&self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let left = self.objects();
            if left.is_empty() {
                return;
            }
            assert!(tokio::time::Instant::now() < deadline, "left behind after 60 s: {left:?}");
            // Removal of a network waits for its last container to go; each
            // container event is a chance that it went.
            wait_for_docker_event(&self.docker, Duration::from_secs(2)).await;
        }
    }
}

/// The Swarm node id of the local engine, as `docker info` reports it (not
/// as the agent thinks it is).
pub fn swarm_node_id() -> String {
    let out = std::process::Command::new("docker")
        .args(["info", "--format", "{{.Swarm.NodeID}}"])
        .output()
        .expect("docker CLI");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(!id.is_empty(), "the engine is not a swarm node");
    id
}

/// Ids of the running containers of a task, by the docker CLI.
pub fn running_containers(task_id: &str) -> Vec<String> {
    docker_lines(&["ps", "-q", "--filter", &format!("label=mpiswarm.io/task-id={task_id}")])
}

/// The placement constraints of a service, by the docker CLI.
pub fn service_constraints(service: &str) -> Vec<String> {
    let out = std::process::Command::new("docker")
        .args(["service", "inspect", service, "--format", "{{json .Spec.TaskTemplate.Placement.Constraints}}"])
        .output()
        .expect("docker CLI");
    assert!(out.status.success(), "no service {service}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice::<Option<Vec<String>>>(&out.stdout).unwrap().unwrap_or_default()
}

/// Asserts the missing-image failure Swarm 20.10 produces: a REJECTED task
/// ("No such image: ...") that the agent reports as launch failed, naming
/// the image.
pub fn assert_missing_image_failure(status: &mpiswarm_mesos::TaskStatus, image: &str) {
    assert_eq!(status.state, TaskState::Failed, "{:?}", status.message);
    assert_eq!(status.reason, Some(mpiswarm_mesos::Reason::ReasonContainerLaunchFailed), "{:?}", status.message);
    let message = status.message.as_deref().unwrap_or_default();
    let expected = format!("image '{image}' is not present on this node and cannot be pulled");
    assert!(message.contains(&expected), "expected '{expected}' in: {message}");
    assert!(message.contains(&format!("No such image: {image}")), "Docker's own words are missing: {message}");
}

pub async fn wait_for_docker_event(docker: &bollard::Docker, at_most: Duration) {
    use futures::StreamExt;
    let mut events = docker.events(None::<bollard::query_parameters::EventsOptions>);
    let _ = tokio::time::timeout(at_most, events.next()).await;
}

fn docker_lines(args: &[&str]) -> Vec<String> {
    let out = std::process::Command::new("docker").args(args).output().expect("docker CLI");
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.trim().is_empty()).map(str::to_owned).collect()
}

pub fn owned_objects(agent_id: &str) -> Vec<String> {
    let filter = format!("label=mpiswarm.io/agent-id={agent_id}");
    let mut out = Vec::new();
    for kind in ["service", "network", "secret", "config"] {
        for name in docker_lines(&[kind, "ls", "--filter", &filter, "--format", "{{.Name}}"]) {
            out.push(format!("{kind} {name}"));
        }
    }
    out
}

/// Removes everything labelled with the agent id, whatever the test did.
pub struct Cleanup {
    pub agent_id: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let filter = format!("label=mpiswarm.io/agent-id={}", self.agent_id);
        for kind in ["service", "secret", "config", "network"] {
            let ids = docker_lines(&[kind, "ls", "-q", "--filter", &filter]);
            if ids.is_empty() {
                continue;
            }
            // Networks go only once their containers have stopped; retry briefly.
            for _ in 0..30 {
                let mut args = vec![kind, "rm"];
                args.extend(ids.iter().map(String::as_str));
                let ok = std::process::Command::new("docker")
                    .args(&args)
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success());
                if ok || kind != "network" {
                    break;
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    }
}

/// A fresh ed25519 private key (the per-job SSH key of an MPI job).
pub fn ssh_key() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("id");
    let ok = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&path)
        .status()
        .expect("ssh-keygen (openssh-client) must be installed")
        .success();
    assert!(ok);
    std::fs::read(path).unwrap()
}

/// A Mesos file-based secret at `path` (becomes a Swarm secret).
pub fn secret_volume(path: &str, data: &[u8]) -> mpiswarm_mesos::task::Volume {
    use base64::Engine as _;
    mpiswarm_mesos::task::Volume {
        mode: mpiswarm_mesos::task::VolumeMode::Ro,
        container_path: path.to_owned(),
        host_path: None,
        source: Some(serde_json::json!({
            "type": "SECRET",
            "secret": {"type": "VALUE", "value": {"data": base64::engine::general_purpose::STANDARD.encode(data)}}
        })),
    }
}

/// A plain file at `path` as an inline data: URI (becomes a Swarm config).
pub fn config_uri(path: &str, data: &[u8]) -> mpiswarm_mesos::task::CommandUri {
    use base64::Engine as _;
    mpiswarm_mesos::task::CommandUri {
        value: format!("data:text/plain;base64,{}", base64::engine::general_purpose::STANDARD.encode(data)),
        executable: None,
        extract: None,
        cache: None,
        output_file: Some(path.to_owned()),
    }
}

/// The id of the running container of `service` (on this engine).
pub fn container_of(service: &str) -> String {
    let out = std::process::Command::new("docker")
        .args(["ps", "-q", "--filter", &format!("label=com.docker.swarm.service.name={service}")])
        .output()
        .unwrap();
    let id = String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or_default().trim().to_owned();
    assert!(!id.is_empty(), "service {service} has no running container");
    id
}
