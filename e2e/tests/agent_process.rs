//! Acceptance of the agent as a process: `mpiswarm agent` on
//! the machine's Docker engine, registered with the real offer layer (run
//! in-process), driven by a Mesos framework over the v1 scheduler API.

// The agent's own test support (one home: agent/tests/support), which
// these tests of the agent as a process share with its in-process tests.
#[path = "../../agent/tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures::StreamExt;
use mpiswarm_mesos::client::{EventStream, SchedulerClient};
use mpiswarm_mesos::scheduler::{Call, Event, EventType};
use mpiswarm_mesos::task::{ContainerInfo, NetworkInfo};
use mpiswarm_mesos::{
    CommandInfo, ExecutorInfo, FrameworkInfo, Offer, Operation, Reason, Resource, Source, TaskGroupInfo, TaskId,
    TaskInfo, TaskState, TaskStatus,
};
use support::RANK_IMAGE;

const DEADLINE: Duration = Duration::from_secs(120);

/// The agent binary with its data directory; killed (and everything it
/// labelled removed) when dropped.
struct AgentProcess {
    child: Child,
    master: String,
    /// Where its /healthz, /readyz, /metrics and /state are served.
    listen: String,
    data_dir: tempfile::TempDir,
    cleanup: Option<support::Cleanup>,
}

impl AgentProcess {
    fn spawn(master: &str, data_dir: tempfile::TempDir) -> Self {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let listen = free.local_addr().unwrap().to_string();
        drop(free);
        let child = start_child(master, &listen, data_dir.path());
        Self { child, master: master.to_owned(), listen, data_dir, cleanup: None }
    }

    /// The id the offer layer assigned, as the agent persisted it (its
    /// writer thread writes it soon after SUBSCRIBED).
    async fn persisted_id(&self) -> String {
        let path = self.data_dir.path().join("agent_id");
        within("the persisted agent id", async {
            loop {
                if let Ok(id) = std::fs::read_to_string(&path) {
                    return id;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
    }

    /// From now on, everything labelled with `agent_id` is removed when this is dropped.
    fn owns(&mut self, agent_id: &str) {
        self.cleanup.get_or_insert_with(|| support::Cleanup { agent_id: agent_id.to_owned() });
    }

    /// Starts the process again on the same data directory and port (after
    /// the test killed it with `kill -9`: `Child::kill` sends SIGKILL).
    fn restart(&mut self) {
        assert!(self.child.try_wait().unwrap().is_some(), "the previous agent still runs");
        self.child = start_child(&self.master, &self.listen, self.data_dir.path());
    }
}

fn start_child(master: &str, listen: &str, data_dir: &Path) -> Child {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(data_dir.join("agent.log")).unwrap();
    Command::new(mpiswarm_e2e::binary::mpiswarm())
        .args([
            "agent",
            "--master",
            master,
            "--listen",
            listen,
            "--attributes",
            "rack=r1,zone=a",
            "--resync-seconds",
            "0.5",
        ])
        .arg("--data-dir")
        .arg(data_dir)
        .env("MPISWARM_LOG", "mpiswarm_agent=debug")
        .stdout(Stdio::null())
        // The log sits next to the agent's state, for post-mortems.
        .stderr(log)
        .spawn()
        .expect("mpiswarm agent runs")
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct World {
    offers: mpiswarm_offers::Running,
    _offers_dir: tempfile::TempDir,
    agent: AgentProcess,
    client: SchedulerClient,
    framework: FrameworkInfo,
    events: EventStream<Event>,
    /// Events read while looking for another kind.
    backlog: std::collections::VecDeque<Event>,
}

impl World {
    async fn start() -> Self {
        let (offers, offers_dir, agent) = offer_layer_and_agent("2").await;
        let client = SchedulerClient::new(&offers.url(), None);
        let sub = client.subscribe(FrameworkInfo::new("root", "agent-acceptance", &["mpi"])).await.unwrap();
        let mut framework = FrameworkInfo::new("root", "agent-acceptance", &["mpi"]);
        framework.id = Some(sub.subscribed.framework_id.clone());
        Self {
            offers,
            _offers_dir: offers_dir,
            agent,
            client,
            framework,
            events: sub.events,
            backlog: Default::default(),
        }
    }

    fn framework_id(&self) -> &mpiswarm_mesos::FrameworkId {
        self.framework.id.as_ref().unwrap()
    }

    /// The next event that is not a heartbeat. No deadline of its own:
    /// heartbeats would keep extending it; its callers have one overall.
    async fn next_event(&mut self) -> Event {
        loop {
            let e = self.events.next().await.expect("the scheduler stream ended").expect("a decodable event");
            if e.kind != EventType::Heartbeat {
                return e;
            }
        }
    }

    async fn offer(&mut self) -> Offer {
        let wait = async {
            loop {
                let e = self.next_event().await;
                if let Some(offers) = e.offers {
                    return offers.offers.into_iter().next().expect("an offer");
                }
                self.backlog.push_back(e);
            }
        };
        let offer = within("an offer", wait).await;
        self.agent.owns(&offer.agent_id.value);
        offer
    }

    /// The next UPDATE of `task`, acknowledged.
    async fn update(&mut self, task: &TaskId) -> TaskStatus {
        let found = self.backlog.iter().position(|e| e.update.as_ref().is_some_and(|u| &u.status.task_id == task));
        let status = match found {
            Some(i) => self.backlog.remove(i).unwrap().update.unwrap().status,
            None => {
                let wait = async {
                    loop {
                        let e = self.next_event().await;
                        if let Some(u) = e.update.as_ref()
                            && &u.status.task_id == task
                        {
                            break e.update.unwrap().status;
                        }
                        self.backlog.push_back(e);
                    }
                };
                within(&format!("an update of {task}"), wait).await
            }
        };
        if let (Some(agent), Some(uuid)) = (status.agent_id.clone(), status.uuid.clone()) {
            let ack = Call::acknowledge(self.framework_id(), agent, status.task_id.clone(), uuid);
            self.client.call(&ack).await.unwrap();
        }
        status
    }

    async fn until_state(&mut self, task: &TaskId, state: TaskState) -> TaskStatus {
        let wait = async {
            loop {
                let s = self.update(task).await;
                if s.state == state {
                    return s;
                }
                assert!(!s.state.is_terminal(), "{task} ended {:?}: {:?} (waiting for {state:?})", s.state, s.message);
            }
        };
        within(&format!("{task} in {state:?}"), wait).await
    }

    async fn accept(&self, offer: &Offer, operation: Operation) {
        let call = Call::accept(self.framework_id(), vec![offer.id.clone()], vec![operation], None);
        self.client.call(&call).await.unwrap();
    }

    async fn kill(&self, task: &TaskId) {
        self.client.call(&Call::kill(self.framework_id(), task.clone(), None)).await.unwrap();
    }

    async fn state(&self) -> serde_json::Value {
        reqwest::get(format!("{}/master/state", self.offers.url())).await.unwrap().json().await.unwrap()
    }

    fn task(&self, offer: &Offer, name: &str, image: &str, shell: &str) -> TaskInfo {
        let mut t = TaskInfo::new(name, &format!("{name}-{}", uuid::Uuid::new_v4().simple()), &offer.agent_id);
        t.resources = vec![Resource::scalar("cpus", 0.2), Resource::scalar("mem", 128.0)];
        t.command = Some(CommandInfo::shell(shell));
        t.container = Some(ContainerInfo::docker(image));
        t
    }

    fn objects(&self) -> Vec<String> {
        let id = &self.agent.cleanup.as_ref().expect("an offer was received").agent_id;
        support::owned_objects(id)
    }

    async fn wait_until_clean(&mut self) {
        let docker = mpiswarm_agent::node::connect(None).await.unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let left = self.objects();
            if left.is_empty() {
                return;
            }
            assert!(tokio::time::Instant::now() < deadline, "left behind: {left:?}");
            support::wait_for_docker_event(&docker, Duration::from_secs(2)).await;
        }
    }
}

/// `fut`, failing the test if it takes longer than [`DEADLINE`] in all
/// (events and heartbeats on the way do not extend it).
async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(DEADLINE, fut).await.unwrap_or_else(|_| panic!("no {what} within {DEADLINE:?}"))
}

/// The offer layer in-process on a free loopback port, and the agent binary
/// registered with it.
async fn offer_layer_and_agent(heartbeat: &str) -> (mpiswarm_offers::Running, tempfile::TempDir, AgentProcess) {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: mpiswarm_offers::OffersArgs,
    }
    support::ensure_rank_image();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    let args = Cli::parse_from([
        "offers",
        "--data-dir",
        path,
        "--listen",
        "127.0.0.1:0",
        "--allocation-interval",
        "0.05",
        "--heartbeat-interval",
        heartbeat,
    ])
    .args;
    let offers = mpiswarm_offers::start(args).await.expect("the offer layer starts");
    let agent = AgentProcess::spawn(&offers.url(), tempfile::tempdir().unwrap());
    (offers, dir, agent)
}

fn docker_info_cpus_and_mem_mib() -> (f64, f64) {
    let out = Command::new("docker").args(["info", "--format", "{{.NCPU}} {{.MemTotal}}"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut parts = text.split_whitespace();
    let cpus: f64 = parts.next().unwrap().parse().unwrap();
    let mem: f64 = parts.next().unwrap().parse().unwrap();
    (cpus, (mem / (1024.0 * 1024.0)).floor())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_registers_with_docker_resources_and_its_attributes() {
    let mut w = World::start().await;
    let offer = w.offer().await;
    let state = w.state().await;
    let agent = state["slaves"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == offer.agent_id.value.as_str())
        .expect("the agent is in /master/state")
        .clone();
    let (cpus, mem) = docker_info_cpus_and_mem_mib();
    assert_eq!(agent["resources"]["cpus"].as_f64(), Some(cpus), "{agent}");
    assert_eq!(agent["resources"]["mem"].as_f64(), Some(mem), "{agent}");
    assert_eq!(agent["attributes"]["rack"], "r1");
    assert_eq!(agent["attributes"]["zone"], "a");
    assert!(agent["attributes"]["hostname"].as_str().is_some_and(|h| !h.is_empty()), "{agent}");
    assert_eq!(w.agent.persisted_id().await, offer.agent_id.value);
    let base = format!("http://{}", w.agent.listen);
    let get = |path: &str| reqwest::get(format!("{base}{path}"));
    assert_eq!(get("/healthz").await.unwrap().status(), 200);
    assert_eq!(get("/readyz").await.unwrap().status(), 200, "subscribed, so ready");
    let metrics = get("/metrics").await.unwrap().text().await.unwrap();
    assert!(metrics.contains("mpiswarm_agent_subscribed 1"), "{metrics}");
    let state: serde_json::Value = get("/state").await.unwrap().json().await.unwrap();
    assert_eq!(state["agent_id"], offer.agent_id.value.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_framework_runs_sleep_in_the_rank_image_and_sees_running_then_finished() {
    let mut w = World::start().await;
    let offer = w.offer().await;
    let task = w.task(&offer, "sleeper", RANK_IMAGE, "sleep 2");
    let id = task.task_id.clone();
    w.accept(&offer, Operation::launch(vec![task])).await;
    w.until_state(&id, TaskState::Running).await;
    let objects = w.objects();
    assert_eq!(objects.iter().filter(|o| o.starts_with("service ")).count(), 1, "{objects:?}");
    let service = mpiswarm_agent::plan::service_name(w.framework_id(), &id);
    assert_eq!(
        support::service_constraints(&service),
        vec![format!("node.id=={}", support::swarm_node_id())],
        "the service is not pinned to this node"
    );
    w.until_state(&id, TaskState::Finished).await;
    w.wait_until_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_zero_exit_and_a_missing_image_both_fail_with_the_reason() {
    let mut w = World::start().await;
    let offer = w.offer().await;
    let exit = w.task(&offer, "exit7", RANK_IMAGE, "exit 7");
    let missing_image = "mpiswarm/not-built-here:1";
    let missing = w.task(&offer, "missing", missing_image, "true");
    let (exit_id, missing_id) = (exit.task_id.clone(), missing.task_id.clone());
    w.accept(&offer, Operation::launch(vec![exit, missing])).await;
    let failed = w.until_state(&exit_id, TaskState::Failed).await;
    assert!(failed.message.as_deref().unwrap().contains("exited with code 7"), "{:?}", failed.message);
    assert_eq!(failed.labels.unwrap().get("mpiswarm.io/exit-code"), Some("7"));
    let failed = w.until_state(&missing_id, TaskState::Failed).await;
    support::assert_missing_image_failure(&failed, missing_image);
    w.wait_until_clean().await;
}

/// A container the engine cannot start (its memory limit is under
/// Docker's 6 MB minimum, so no program ever runs) is started again by the
/// agent, as a busy engine's transient refusals are, and its failure is
/// reported once, after the third start, naming the attempts and Docker's
/// reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_the_engine_cannot_start_is_started_three_times_then_failed_naming_the_attempts() {
    let mut w = World::start().await;
    let offer = w.offer().await;
    let mut task = w.task(&offer, "nostart", RANK_IMAGE, "true");
    task.resources = vec![Resource::scalar("cpus", 0.2), Resource::scalar("mem", 4.0)];
    let id = task.task_id.clone();
    w.accept(&offer, Operation::launch(vec![task])).await;
    let failed = w.until_state(&id, TaskState::Failed).await;
    let message = failed.message.unwrap_or_default();
    assert_eq!(failed.reason, Some(Reason::ReasonContainerLaunchFailed), "{message}");
    assert!(message.starts_with("after 3 attempts, "), "{message}");
    assert!(message.contains("Minimum memory limit"), "Docker's reason is kept: {message}");
    w.wait_until_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mpi_pi_over_ssh_between_a_launcher_and_a_worker_launched_as_a_group() {
    let mut w = World::start().await;
    let offer = w.offer().await;
    let network = format!("mpiswarm-test-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let key = support::ssh_key();
    let hostfile = b"worker-0 slots=2\nlauncher slots=1\n";
    let mut tasks = Vec::new();
    for (name, command) in [
        ("worker-0", "mpiswarm-rank worker".to_owned()),
        ("launcher", "mpiswarm-rank launcher mpirun --hostfile /etc/mpi/hostfile -np 3 pi 3000000".to_owned()),
    ] {
        let mut t = w.task(&offer, name, RANK_IMAGE, &command);
        let c = t.container.as_mut().unwrap();
        c.network_infos = vec![NetworkInfo { name: Some(network.clone()), ..NetworkInfo::default() }];
        c.volumes = vec![support::secret_volume("/run/secrets/mpiswarm-ssh-key", &key)];
        t.command.as_mut().unwrap().uris = vec![support::config_uri("/etc/mpi/hostfile", hostfile)];
        tasks.push(t);
    }
    let (worker, launcher) = (tasks[0].task_id.clone(), tasks[1].task_id.clone());
    let executor = ExecutorInfo::default_executor(&format!("{network}-exec"));
    w.accept(&offer, Operation::launch_group(executor, TaskGroupInfo { tasks })).await;
    w.until_state(&worker, TaskState::Running).await;
    let objects = w.objects();
    for kind in ["network", "secret", "config"] {
        assert!(objects.iter().any(|o| o.starts_with(kind)), "no {kind} while running: {objects:?}");
    }
    let done = w.until_state(&launcher, TaskState::Finished).await;
    let output = done.message.unwrap();
    assert!(output.contains("ranks: 3"), "{output}");
    assert!(output.contains("on worker-0") && output.contains("on launcher"), "{output}");
    let pi: f64 = output.lines().find_map(|l| l.trim().strip_prefix("pi: ")).expect("a pi line").parse().unwrap();
    assert!((pi - std::f64::consts::PI).abs() < 0.01, "pi = {pi}");
    w.kill(&worker).await;
    w.until_state(&worker, TaskState::Killed).await;
    w.wait_until_clean().await;
}

/// The current state of a service's Swarm task, as `docker service ps` words it.
fn swarm_task_state(service: &str) -> String {
    let out =
        Command::new("docker").args(["service", "ps", service, "--format", "{{.CurrentState}}"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A shell command that runs until `docker exec ... touch /tmp/go`, then exits 0:
/// the test, not the clock, decides when the task finishes.
const UNTIL_TOLD: &str = "until [ -e /tmp/go ]; do sleep 0.2; done";

fn tell_to_finish(container: &str) {
    let ok = Command::new("docker").args(["exec", container, "touch", "/tmp/go"]).status().unwrap().success();
    assert!(ok, "cannot signal container {container}");
}

/// A task's PID 1 is Docker's init, not the `/bin/sh -c` its command runs
/// under: a shell as PID 1 ignores SIGTERM, so a KILL (a service removal)
/// waited out the whole stop grace period before SIGKILL. The shell, no
/// longer PID 1, ends at SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_pid_1_is_an_init_so_its_shell_ends_at_sigterm() {
    let mut w = World::start().await;
    let offer = w.offer().await;
    let task = w.task(&offer, "init", RANK_IMAGE, UNTIL_TOLD);
    let id = task.task_id.clone();
    w.accept(&offer, Operation::launch(vec![task])).await;
    w.until_state(&id, TaskState::Running).await;
    let containers = support::running_containers(&id.value);
    assert_eq!(containers.len(), 1, "{containers:?}");
    let comm = |pid: &str| {
        let out = Command::new("docker").args(["exec", &containers[0], "cat", &format!("/proc/{pid}/comm")]).output();
        String::from_utf8_lossy(&out.unwrap().stdout).trim().to_owned()
    };
    assert_eq!(comm("1"), "docker-init");
    // SIGTERM to the shell (the init's one child), as the init passes it
    // on: the task ends by it. Detached (`-d`): the container may stop
    // before the exec'd shell has exited, which ends an attached exec with
    // a failure although the kill was sent; whether it was is what the
    // task's end below shows.
    let kill = "kill -TERM $(cat /proc/1/task/1/children)";
    let out = Command::new("docker").args(["exec", "-d", &containers[0], "sh", "-c", kill]).output().unwrap();
    assert!(out.status.success(), "{kill}: {}", String::from_utf8_lossy(&out.stderr));
    let ended = within("the task's end", async {
        loop {
            let s = w.update(&id).await;
            if s.state.is_terminal() {
                return s;
            }
        }
    })
    .await;
    assert_eq!(ended.state, TaskState::Failed, "{:?}", ended.message);
    let code = ended.labels.as_ref().and_then(|l| l.get("mpiswarm.io/exit-code"));
    assert_eq!(code, Some("143"), "ended by SIGTERM (128 + 15): {:?}", ended.message);
    w.wait_until_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_kill_9_and_restart_the_task_keeps_running_is_re_reported_and_finishes() {
    let mut w = World::start().await;
    let offer = w.offer().await;
    let agent_id = offer.agent_id.value.clone();
    let survivor = w.task(&offer, "survivor", RANK_IMAGE, UNTIL_TOLD);
    // Ends while no agent is watching; the new agent must find out from Docker.
    let brief = w.task(&offer, "brief", RANK_IMAGE, UNTIL_TOLD);
    let (id, brief_id) = (survivor.task_id.clone(), brief.task_id.clone());
    w.accept(&offer, Operation::launch(vec![survivor, brief])).await;
    w.until_state(&id, TaskState::Running).await;
    w.until_state(&brief_id, TaskState::Running).await;
    let before = support::running_containers(&id.value);
    assert_eq!(before.len(), 1, "{before:?}");
    let brief_container = support::running_containers(&brief_id.value);
    assert_eq!(brief_container.len(), 1, "{brief_container:?}");

    w.agent.child.kill().unwrap();
    w.agent.child.wait().unwrap();
    tell_to_finish(&brief_container[0]);
    // Swarm records the exit a little after the container stops; the new
    // agent is started once Swarm, which it asks, knows.
    let docker = mpiswarm_agent::node::connect(None).await.unwrap();
    let brief_service = mpiswarm_agent::plan::service_name(w.framework_id(), &brief_id);
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !swarm_task_state(&brief_service).starts_with("Complete") {
        assert!(tokio::time::Instant::now() < deadline, "the brief task did not complete");
        support::wait_for_docker_event(&docker, Duration::from_secs(1)).await;
    }
    w.agent.restart();

    // The NEW process is subscribed (its own /readyz; the old one is dead).
    let base = format!("http://{}", w.agent.listen);
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Ok(r) = reqwest::get(format!("{base}/readyz")).await
            && r.status() == 200
        {
            break;
        }
        assert!(w.agent.child.try_wait().unwrap().is_none(), "the restarted agent exited");
        assert!(tokio::time::Instant::now() < deadline, "the restarted agent never became ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let metrics = reqwest::get(format!("{base}/metrics")).await.unwrap().text().await.unwrap();
    let resyncs: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("mpiswarm_agent_resyncs_total "))
        .unwrap_or_else(|| panic!("no resync counter: {metrics}"))
        .parse()
        .unwrap();
    assert!(resyncs >= 1.0, "the new process never compared with Swarm: {metrics}");
    // Its view after the startup resync: the survivor RUNNING, the brief
    // task FINISHED (its record said RUNNING; only Docker knows it ended).
    let own: serde_json::Value = reqwest::get(format!("{base}/state")).await.unwrap().json().await.unwrap();
    assert_eq!(own["agent_id"], agent_id.as_str(), "{own}");
    let state_of = |task: &TaskId| {
        own["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["task_id"] == task.value.as_str())
            .map(|t| t["state"].clone())
    };
    assert_eq!(state_of(&id), Some("TASK_RUNNING".into()), "{own}");
    assert_eq!(state_of(&brief_id), Some("TASK_FINISHED".into()), "{own}");
    // Re-registered under the old id: one agent, not a second one.
    let master = w.state().await;
    let slaves = master["slaves"].as_array().unwrap();
    assert_eq!(slaves.len(), 1, "{master}");
    assert_eq!(slaves[0]["id"], agent_id.as_str(), "{master}");
    assert_eq!(slaves[0]["active"], true, "{master}");
    assert_eq!(w.agent.persisted_id().await, agent_id);
    assert_eq!(support::running_containers(&id.value), before, "the container was not touched");

    let brief_done = w.until_state(&brief_id, TaskState::Finished).await;
    assert_eq!(brief_done.agent_id.map(|a| a.value), Some(agent_id.clone()));
    tell_to_finish(&before[0]);
    let done = w.until_state(&id, TaskState::Finished).await;
    assert_eq!(done.agent_id.map(|a| a.value), Some(agent_id.clone()), "finished on the old agent id");
    w.wait_until_clean().await;
}

/// Two refusals come from the agent (no container, unknown network driver);
/// the negative resource never reaches it: the offer layer refuses it while
/// validating the ACCEPT (the agent's own refusal of a negative resource is
/// in `engine.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_task_infos_are_refused_by_the_agent_or_the_offer_layer_and_the_agent_keeps_serving() {
    let mut w = World::start().await;
    let offer = w.offer().await;
    let mut no_container = w.task(&offer, "nocontainer", RANK_IMAGE, "true");
    no_container.container = None;
    let mut driver = w.task(&offer, "driver", RANK_IMAGE, "true");
    driver.container.as_mut().unwrap().network_infos = vec![NetworkInfo {
        name: Some("mpiswarm-test-bad".into()),
        labels: Some(mpiswarm_mesos::Labels::from_pairs([("mpiswarm.io/network-driver", "weave")])),
        ..NetworkInfo::default()
    }];
    let mut negative = w.task(&offer, "negative", RANK_IMAGE, "true");
    negative.resources = vec![Resource::scalar("cpus", -1.0), Resource::scalar("mem", 64.0)];
    let good = w.task(&offer, "good", RANK_IMAGE, "true");
    let ids: Vec<TaskId> = [&no_container, &driver, &negative, &good].iter().map(|t| t.task_id.clone()).collect();
    w.accept(&offer, Operation::launch(vec![no_container, driver, negative, good])).await;
    let negative_message = format!("Task '{}' has invalid resource cpus: -1", ids[2]);
    for (id, expected, source) in [
        (&ids[0], "has no container", Source::SourceExecutor),
        (&ids[1], "unknown network driver 'weave'", Source::SourceExecutor),
        (&ids[2], negative_message.as_str(), Source::SourceMaster),
    ] {
        let s = w.update(id).await;
        assert_eq!(s.state, TaskState::Error, "{id}: {:?}", s.message);
        assert_eq!(s.reason, Some(Reason::ReasonTaskInvalid), "{id}: {:?}", s.message);
        assert_eq!(s.source, Some(source), "{id}: refused by the wrong party: {:?}", s.message);
        let message = s.message.unwrap_or_default();
        assert!(message.contains(expected), "{id}: expected '{expected}' in: {message}");
    }
    // The good task of the same ACCEPT still runs to completion.
    w.until_state(&ids[3], TaskState::Finished).await;
    // The agent never heard of the task the offer layer refused.
    let own: serde_json::Value =
        reqwest::get(format!("http://{}/state", w.agent.listen)).await.unwrap().json().await.unwrap();
    let known: Vec<&str> = own["tasks"].as_array().unwrap().iter().filter_map(|t| t["task_id"].as_str()).collect();
    assert!(!known.contains(&ids[2].value.as_str()), "{own}");
    w.wait_until_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_framework_written_with_mesoshttp_runs_sleep_5_in_a_docker_container() {
    // mesoshttp handles a record when the next one's header arrives, so
    // short heartbeats keep it moving.
    let (offers, _dir, mut agent) = offer_layer_and_agent("0.2").await;
    let driver = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mesoshttp_docker.py");
    let task_id = format!("py-sleep-{}", uuid::Uuid::new_v4().simple());
    let out = tokio::process::Command::new("python3")
        .args([driver, &offers.url(), RANK_IMAGE, &task_id])
        .output()
        .await
        .expect("python3 is installed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let result: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!("driver output is not JSON ({e}): {stdout}\nstderr: {}", String::from_utf8_lossy(&out.stderr))
    });
    agent.owns(result["agent_id"].as_str().expect("the framework got an offer from the agent"));
    assert!(out.status.success(), "{result}");
    let states: Vec<&str> = result["states"].as_array().unwrap().iter().filter_map(|s| s.as_str()).collect();
    let running = states.iter().position(|s| *s == "TASK_RUNNING").unwrap_or_else(|| panic!("no RUNNING: {result}"));
    assert_eq!(states.last(), Some(&"TASK_FINISHED"), "{result}");
    assert!(running < states.len() - 1);
    assert_eq!(result["errors"], serde_json::json!([]));
    // The service is gone once the task finished.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let docker = mpiswarm_agent::node::connect(None).await.unwrap();
    while !support::owned_objects(result["agent_id"].as_str().unwrap()).is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "the service outlived its task");
        support::wait_for_docker_event(&docker, Duration::from_secs(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_framework_teardown_shuts_its_tasks_down_and_leaves_nothing() {
    let mut w = World::start().await;
    let offer = w.offer().await;
    let task = w.task(&offer, "long", RANK_IMAGE, "sleep 300");
    let id = task.task_id.clone();
    w.accept(&offer, Operation::launch(vec![task])).await;
    w.until_state(&id, TaskState::Running).await;
    assert!(!w.objects().is_empty());
    // TEARDOWN makes the offer layer send the agent SHUTDOWN for the framework.
    w.client.call(&Call::teardown(w.framework_id())).await.unwrap();
    w.wait_until_clean().await;
}

#[test]
fn bad_flags_stop_the_agent_with_a_message_naming_the_value() {
    for (flag, value, expected) in [
        ("--resources", "cpus:-2", "cpus: -2 must be a finite number >= 0"),
        ("--resources", "cpus=4", "'cpus=4' is not name:value"),
        ("--attributes", "rack", "'rack' is not name=value"),
        ("--resync-seconds", "0", "--resync-seconds must be a positive number of seconds, got 0"),
        ("--node-down-seconds", "-1", "--node-down-seconds must be a number of seconds, 0 or more, got -1"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(mpiswarm_e2e::binary::mpiswarm())
            .args(["agent", "--master", "http://127.0.0.1:9", "--listen", "127.0.0.1:0", flag, value])
            .arg("--data-dir")
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{flag} {value} was accepted");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{flag} {value}: expected '{expected}' in: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_agent_cleanly_and_it_comes_back_as_the_same_agent() {
    let mut w = World::start().await;
    let offer = w.offer().await;
    // The master offers the agent's resources as soon as it registers it,
    // which can be before the agent has read its SUBSCRIBED: wait until the
    // agent knows (and has kept) its id, or the restart has nothing to reuse.
    assert_eq!(w.agent.persisted_id().await, offer.agent_id.value);
    let pid = w.agent.child.id().to_string();
    let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(sent.success(), "kill -TERM {pid}");
    let exited = within("the agent's exit after SIGTERM", async {
        loop {
            if let Some(status) = w.agent.child.try_wait().unwrap() {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(exited.success(), "SIGTERM is a clean stop, not a failure: {exited:?}");
    let log = std::fs::read_to_string(w.agent.data_dir.path().join("agent.log")).unwrap();
    assert!(log.contains("stopping on a signal"), "{log}");
    w.agent.restart();
    let again = w.offer().await;
    assert_eq!(
        again.agent_id,
        offer.agent_id,
        "the restarted agent re-registered with its persisted id; its log:\n{}",
        std::fs::read_to_string(w.agent.data_dir.path().join("agent.log")).unwrap_or_default()
    );
}
