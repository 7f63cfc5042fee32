//! The offer layer as a process (`mpiswarm offers`), with test agents and a
//! framework in this process. Master failover: `kill -9` of it while
//! tasks run, a restart from the same data directory (on the address the
//! first process was given by the system), and then nothing that was running
//! is killed, reconciliation reports every task, and frameworks are let in
//! at once even when a registered agent never comes back. Also: SIGTERM ends
//! the process cleanly.

use mpiswarm_mesos::client::{Backoff, SchedulerClient};
use mpiswarm_mesos::scheduler::{Call, EventType, ReconcileTask};
use mpiswarm_mesos::{AgentId, FrameworkInfo, Offer, Reason, Resource, TaskState};
use mpiswarm_testkit::DEADLINE;
use mpiswarm_testkit::TestAgent;
use mpiswarm_testkit::scheduler::{Framework, healthy, task, within};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The offer layer as a real process; killed if the test fails half-way.
struct Master {
    child: std::process::Child,
    /// Where it listens, as it printed it.
    addr: std::net::SocketAddr,
}

impl Master {
    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `kill -9`, and waits for the process to be gone.
    fn kill_9(&mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("the killed process is reaped");
    }
}

impl Drop for Master {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `mpiswarm offers` on a port the system picks
/// (`127.0.0.1:0`, so no port is guessed) with `extra` flags.
fn spawn_binary(dir: &std::path::Path, extra: &[&str]) -> Master {
    spawn_binary_on("127.0.0.1:0", dir, extra)
}

/// Starts the binary on `listen` (a restart on the address a killed one had)
/// and reads the address it prints. Defaults to `--agent-reregister-timeout
/// 60` unless `extra` sets it.
fn spawn_binary_on(listen: &str, dir: &std::path::Path, extra: &[&str]) -> Master {
    use std::io::BufRead;
    let mut cmd = std::process::Command::new(mpiswarm_e2e::binary::mpiswarm());
    cmd.args(["offers", "--listen", listen, "--data-dir"]).arg(dir).args([
        "--allocation-interval",
        "0.05",
        "--heartbeat-interval",
        "0.2",
    ]);
    if !extra.contains(&"--agent-reregister-timeout") {
        cmd.args(["--agent-reregister-timeout", "60"]);
    }
    let mut child = cmd
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("mpiswarm offers starts");
    let stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    // Passes the log through to the test's output, and the address on.
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("{line}");
            if let Some(addr) = line.split("listening on http://").nth(1) {
                let _ = tx.send(addr.trim().to_owned());
            }
        }
    });
    let addr = rx
        .recv_timeout(DEADLINE)
        .unwrap_or_else(|e| panic!("mpiswarm offers printed no 'listening on' line within {DEADLINE:?}: {e}"));
    Master { child, addr: addr.parse().expect("a socket address") }
}

fn node(url: &str, hostname: &str) -> TestAgent {
    TestAgent::start(url, hostname, vec![Resource::scalar("cpus", 4.0), Resource::scalar("mem", 4096.0)])
}

/// Subscribes `info` again after a restart, retrying while the process comes up.
async fn resubscribe(url: &str, info: &FrameworkInfo) -> Framework {
    let client = SchedulerClient::new(url, None);
    let sub =
        within("SUBSCRIBED after the restart", client.subscribe_with_backoff(info.clone(), Backoff::default(), 200))
            .await
            .expect("subscribed");
    assert_eq!(Some(&sub.subscribed.framework_id), info.id.as_ref(), "the framework id survived");
    Framework { client, subscribed: sub.subscribed, events: sub.events, info: info.clone() }
}

#[tokio::test]
async fn kill_9_of_the_offer_layer_kills_no_task_and_reconciliation_reports_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let mut master = spawn_binary(dir.path(), &[]);
    let url = master.url();
    healthy(&url).await;
    let mut agent = node(&url, "node1");
    let agent_id = within("agent subscription", agent.subscribed(1)).await;

    let mut info = FrameworkInfo::new("root", "mpi", &["mpi"]);
    info.failover_timeout = Some(3600.0);
    let mut f = Framework::subscribe(&url, info).await;
    let offer = f.offers().await.remove(0);
    let tasks = vec![task("r0", &offer, 1.0, 256.0, "sleep 1000"), task("r1", &offer, 1.0, 256.0, "sleep 1000")];
    f.launch(&offer, tasks).await;
    for _ in 0..2 {
        let s = f.expect(EventType::Update).await.update.unwrap().status;
        assert_eq!(s.state, TaskState::Running);
        f.ack(&s).await;
    }
    let info = f.info.clone();
    drop(f);

    master.kill_9();
    let _master = spawn_binary_on(&master.addr.to_string(), dir.path(), &[]);

    // The agent comes back on its own (same id), and the framework too.
    assert_eq!(within("agent re-subscription", agent.subscribed(2)).await, agent_id);
    let mut f = resubscribe(&url, &info).await;
    f.client.call(&Call::reconcile(f.id(), vec![])).await.unwrap();
    let mut reported = BTreeMap::new();
    within("both tasks reconciled", async {
        while reported.len() < 2 {
            let s = f.expect(EventType::Update).await.update.unwrap().status;
            reported.insert(s.task_id.value.clone(), s.state);
        }
    })
    .await;
    assert_eq!(reported, BTreeMap::from([("r0".into(), TaskState::Running), ("r1".into(), TaskState::Running)]));
    assert!(
        agent.tasks().iter().all(|t| t.status.state == TaskState::Running),
        "nothing was killed: {:?}",
        agent.tasks()
    );
    let state: serde_json::Value = reqwest::get(format!("{url}/master/state")).await.unwrap().json().await.unwrap();
    assert_eq!(state["slaves"][0]["used_resources"]["cpus"], 2.0, "used resources were rebuilt from the agent");
}

/// Offers until there is one of each agent in `agents`.
async fn offers_of(f: &mut Framework, agents: &[&AgentId]) -> Vec<Offer> {
    let mut offers: Vec<Offer> = Vec::new();
    within("an offer of each agent", async {
        while !agents.iter().all(|a| offers.iter().any(|o| o.agent_id == **a)) {
            offers.extend(f.offers().await);
        }
    })
    .await;
    agents.iter().map(|a| offers.iter().find(|o| o.agent_id == **a).cloned().expect("offered")).collect()
}

#[tokio::test]
async fn after_a_restart_a_framework_is_let_in_within_5_s_although_a_registered_agent_never_returns() {
    let dir = tempfile::tempdir().unwrap();
    let mut master = spawn_binary(dir.path(), &[]);
    let url = master.url();
    healthy(&url).await;
    let mut stays = node(&url, "node1");
    let mut dies = node(&url, "node2");
    let stays_id = within("node1 subscription", stays.subscribed(1)).await;
    let dies_id = within("node2 subscription", dies.subscribed(1)).await;

    let mut info = FrameworkInfo::new("root", "mpi", &["mpi"]);
    info.failover_timeout = Some(3600.0);
    info.capabilities.push(mpiswarm_mesos::framework::Capability {
        kind: Some(mpiswarm_mesos::framework::CapabilityType::PartitionAware),
    });
    let mut f = Framework::subscribe(&url, info).await;
    let offers = offers_of(&mut f, &[&stays_id, &dies_id]).await;
    f.launch(&offers[0], vec![task("on-node1", &offers[0], 1.0, 256.0, "sleep 1000")]).await;
    f.launch(&offers[1], vec![task("on-node2", &offers[1], 1.0, 256.0, "sleep 1000")]).await;
    for name in ["on-node1", "on-node2"] {
        let s = f.update_of(name).await;
        assert_eq!(s.state, TaskState::Running);
        f.ack(&s).await;
    }
    let info = f.info.clone();
    drop(f);

    // The offer layer dies, and node2 with it, for good.
    master.kill_9();
    dies.crash();
    let timeout = Duration::from_secs(8);
    let restarted = Instant::now();
    let _master = spawn_binary_on(
        &master.addr.to_string(),
        dir.path(),
        &["--agent-reregister-timeout", &timeout.as_secs().to_string()],
    );
    let mut f = resubscribe(&url, &info).await;
    let waited = restarted.elapsed();
    // Before, SUBSCRIBE answered 503 until node2 was back or the timeout passed.
    assert!(waited < Duration::from_secs(5), "the framework waited {waited:?} after the restart (must be < 5 s)");
    assert!(waited < timeout, "so it did not wait for the agent timeout ({timeout:?})");

    // node1's task is reported as soon as node1 is back; node2's waits.
    assert_eq!(within("node1 re-subscription", stays.subscribed(2)).await, stays_id);
    let reconcile_both = Call::reconcile(
        f.id(),
        vec![
            ReconcileTask { task_id: "on-node1".into(), agent_id: Some(stays_id.clone()) },
            ReconcileTask { task_id: "on-node2".into(), agent_id: Some(dies_id.clone()) },
        ],
    );
    f.client.call(&reconcile_both).await.unwrap();
    let on_node1 = f.update_of("on-node1").await;
    assert_eq!((on_node1.state, on_node1.reason), (TaskState::Running, Some(Reason::ReasonReconciliation)));

    // Once the agent timeout passes, node2 is marked unreachable: FAILURE,
    // and nothing was said about its task before that.
    let failure = within("FAILURE for node2", async {
        loop {
            let e = f.next().await;
            if let Some(u) = &e.update {
                assert_ne!(u.status.task_id.value, "on-node2", "answered before node2's timeout: {e:?}");
            }
            if e.kind == EventType::Failure {
                return e.failure.unwrap();
            }
        }
    })
    .await;
    assert_eq!(failure.agent_id, Some(dies_id.clone()));
    assert!(restarted.elapsed() >= timeout, "not before the agent timeout");
    f.client.call(&reconcile_both).await.unwrap();
    let on_node2 = f.update_of("on-node2").await;
    assert_eq!((on_node2.state, on_node2.reason), (TaskState::Unreachable, Some(Reason::ReasonReconciliation)));
    assert!(stays.tasks().iter().all(|t| t.status.state == TaskState::Running), "node1's task still runs");
}

#[tokio::test]
async fn sigterm_stops_the_offer_layer_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut master = spawn_binary(dir.path(), &[]);
    healthy(&master.url()).await;
    let pid = master.child.id().to_string();
    let sent = std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill runs");
    assert!(sent.success());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = master.child.try_wait().expect("the process can be waited for") {
            break status;
        }
        assert!(started.elapsed() < DEADLINE, "still running {:?} after SIGTERM", DEADLINE);
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.success(), "a SIGTERM is a clean stop, not a failure: {status}");
}
