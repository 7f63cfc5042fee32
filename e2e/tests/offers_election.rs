//! Offer-layer replicas elected with a Lease (`mpiswarm offers --lease-name`),
//! as processes, against `mpiswarm apiserver` as a process; a test agent and
//! frameworks in this process, each given every replica's address.
//!
//! One replica leads and the other redirects to it. A leader stopped with
//! SIGSTOP (alive, silent) loses the Lease to the standby, which then offers;
//! continued, the old leader offers nothing on the streams it still holds,
//! and exits, as a Mesos master that loses leadership does. A restarted
//! replica stands by; `kill -9` of the leader hands the Lease to it, and it
//! offers too. The task launched before the first change runs through both
//! changes and is reconciled as running by each new leader. The replicas
//! keep their registry in the API server (an `OfferRegistry`), which each
//! new leader claims: it names the leader and holds the framework and agent.
//!
//! A real Mesos client library, mesoshttp (PyPI), given only a standby,
//! subscribes through it (its HTTP library follows the 307 to the leader),
//! takes offers, and after the leader is killed subscribes again with its
//! framework id (known to the new leader from the shared registry) and
//! takes offers from the new leader.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use mpiswarm_mesos::client::{Backoff, SchedulerClient};
use mpiswarm_mesos::scheduler::{Call, EventType};
use mpiswarm_mesos::{FrameworkInfo, Resource, TaskState};
use mpiswarm_offers::registry_api::OfferRegistry;
use mpiswarm_testkit::scheduler::{Framework, healthy, task, within};
use mpiswarm_testkit::{DEADLINE, TestAgent};
use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The lease of the test: a standby takes over 3 to 3.4 s after the
/// leader's last renewal; the leader stops acting 2 s after it.
const LEASE_SECONDS: &str = "3";
const ANY_PORT: &str = "127.0.0.1:0";

/// A process of the binary, killed if the test fails half-way.
struct Proc {
    child: Child,
    /// What it printed after "listening on ".
    announced: String,
    /// Its log lines, as they come.
    log: std::sync::mpsc::Receiver<String>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    /// Starts `mpiswarm ARGS` and waits for its "listening on" line.
    fn start(name: &str, args: &[&str]) -> Proc {
        let mut child = Command::new(mpiswarm_e2e::binary::mpiswarm())
            .args(args)
            .env("MPISWARM_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("mpiswarm starts");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        let (lines, log) = std::sync::mpsc::channel();
        let name = name.to_owned();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[{name}] {line}");
                if let Some(rest) = line.split("listening on ").nth(1) {
                    let _ = tx.send(rest.trim().to_owned());
                }
                let _ = lines.send(line);
            }
        });
        let announced = rx.recv_timeout(DEADLINE).expect("a 'listening on' line within the deadline");
        Proc { child, announced, log }
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    fn signal(&self, sig: &str) {
        let status = Command::new("kill").args([sig, &self.pid()]).status().expect("kill runs");
        assert!(status.success(), "kill {sig} {}", self.pid());
    }

    /// Waits for the process to exit on its own; its exit status and log.
    fn exits(&mut self, within: Duration) -> (std::process::ExitStatus, Vec<String>) {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                std::thread::sleep(Duration::from_millis(200));
                return (status, self.log.try_iter().collect());
            }
            assert!(start.elapsed() < within, "the process did not exit within {within:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Installs the CRD of the replicas' registry, as `mpiswarm up` and the
/// manifests do (a replica never installs it), and returns a client.
async fn install_registry_crd(kubeconfig: &str) -> kube::Client {
    let _already = rustls::crypto::ring::default_provider().install_default();
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("the API server's kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .expect("a client configuration");
    let client = kube::Client::try_from(config).expect("a client");
    let crds: kube::Api<CustomResourceDefinition> = kube::Api::all(client.clone());
    crds.create(&kube::api::PostParams::default(), &mpiswarm_offers::registry_api::crd())
        .await
        .expect("the OfferRegistry CRD is created");
    client
}

/// The replicas' registry as the API server holds it.
async fn registry(client: &kube::Client) -> OfferRegistry {
    let api: kube::Api<OfferRegistry> = kube::Api::namespaced(client.clone(), "default");
    api.get("mpiswarm-offers").await.expect("the OfferRegistry of the Lease's name")
}

/// A replica listening on `listen` (`127.0.0.1:0`: a port the system picks).
fn replica(dir: &std::path::Path, name: &str, listen: &str, kubeconfig: &str) -> (Proc, String) {
    let data = dir.join(name);
    let data = data.to_str().expect("utf-8 path");
    let args = [
        "offers",
        "--listen",
        listen,
        "--data-dir",
        data,
        "--lease-name",
        "mpiswarm-offers",
        "--lease-seconds",
        LEASE_SECONDS,
        "--kubeconfig",
        kubeconfig,
        "--allocation-interval",
        "0.05",
        "--heartbeat-interval",
        "0.2",
        "--offer-timeout",
        "0.5",
    ];
    let p = Proc::start(name, &args);
    let url = p.announced.clone();
    (p, url)
}

/// The leader `url`'s `/master/redirect` names (`HOST:PORT`), if any.
async fn leader_named_by(url: &str) -> Option<String> {
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().ok()?;
    let resp = client.get(format!("{url}/master/redirect")).timeout(Duration::from_secs(1)).send().await.ok()?;
    let location = resp.headers().get("location")?.to_str().ok()?;
    Some(location.trim_start_matches("//").to_owned())
}

/// Waits until every one of `asked` names the same leader, one of `among`; returns its URL.
async fn agreed_leader(asked: &[&str], among: &[&str]) -> String {
    within("replicas agreeing on a leader", async {
        loop {
            let mut named = Vec::new();
            for url in asked {
                named.push(leader_named_by(url).await);
            }
            if let Some(Some(first)) = named.first()
                && named.iter().all(|n| n.as_ref() == Some(first))
                && let Some(url) = among.iter().find(|u| u.ends_with(first.as_str()))
            {
                return (*url).to_owned();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
}

/// `/metrics/snapshot` of the replica at `url`.
async fn snapshot(url: &str) -> serde_json::Value {
    let resp = reqwest::get(format!("{url}/metrics/snapshot")).await.expect("GET /metrics/snapshot");
    resp.json().await.expect("a JSON snapshot")
}

fn framework_info() -> FrameworkInfo {
    let mut info = FrameworkInfo::new("root", "mpi", &["mpi"]);
    info.failover_timeout = Some(3600.0);
    info
}

/// Subscribes through `masters` (comma-separated) as `info`, following
/// redirects; retries while no replica leads.
async fn subscribe(masters: &str, info: &FrameworkInfo) -> Framework {
    let client = SchedulerClient::new(masters, None);
    let sub = within("SUBSCRIBED", client.subscribe_with_backoff(info.clone(), Backoff::default(), 200))
        .await
        .expect("subscribed");
    let mut info = info.clone();
    info.id = Some(sub.subscribed.framework_id.clone());
    Framework { client, subscribed: sub.subscribed, events: sub.events, info }
}

/// An API server with the registry's CRD, and two replicas agreeing on a leader.
struct Replicas {
    api: Proc,
    kube: kube::Client,
    kubeconfig: String,
    /// Each replica's process and URL.
    replicas: Vec<(Proc, String)>,
    /// The leader's URL, and which of the two leads and which stands by.
    leader: String,
    old: usize,
    standby: usize,
}

async fn two_replicas(dir: &std::path::Path) -> Replicas {
    let _ = tracing_subscriber::fmt().with_max_level(tracing_subscriber::filter::LevelFilter::INFO).try_init();
    let api_dir = dir.join("api");
    let api =
        Proc::start("apiserver", &["apiserver", "--listen", "127.0.0.1:0", "--data-dir", api_dir.to_str().unwrap()]);
    let kubeconfig = api.announced.split("kubeconfig: ").nth(1).expect("the kubeconfig's path").trim().to_owned();
    let kube = install_registry_crd(&kubeconfig).await;
    let replicas = vec![replica(dir, "a", ANY_PORT, &kubeconfig), replica(dir, "b", ANY_PORT, &kubeconfig)];
    for (_, url) in &replicas {
        healthy(url).await;
    }
    let urls: Vec<&str> = replicas.iter().map(|(_, u)| u.as_str()).collect();
    let leader = agreed_leader(&urls, &urls).await;
    let (old, standby) = if leader == urls[0] { (0, 1) } else { (1, 0) };
    Replicas { api, kube, kubeconfig, replicas, leader, old, standby }
}

/// The framework reconciles and the leader answers that `task` runs.
async fn reconciled_running(f: &mut Framework, task: &str) {
    f.client.call(&Call::reconcile(f.id(), vec![])).await.expect("RECONCILE");
    let s = f.update_of(task).await;
    assert_eq!(s.state, TaskState::Running, "{task} after the leader change: {s:?}");
}

#[tokio::test]
async fn a_stopped_leader_is_fenced_and_exits_and_a_killed_one_is_replaced_and_no_task_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let Replicas { api, kube, kubeconfig, mut replicas, leader, old, standby } = two_replicas(dir.path()).await;
    let standby_url = replicas[standby].1.clone();
    // Clients are given every replica, the standby first.
    let masters = format!("{standby_url},{leader}");

    // Agent and framework come in through the standby and are sent on.
    let cpus = vec![Resource::scalar("cpus", 4.0), Resource::scalar("mem", 4096.0)];
    let mut agent = TestAgent::start(&masters, "node1", cpus);
    within("agent subscription", agent.subscribed(1)).await;
    let mut f = subscribe(&masters, &framework_info()).await;
    let offer = f.offers().await.remove(0);
    f.launch(&offer, vec![task("rank0", &offer, 1.0, 256.0, "sleep 1000")]).await;
    let s = f.expect(EventType::Update).await.update.unwrap().status;
    assert_eq!(s.state, TaskState::Running);
    f.ack(&s).await;
    let info = f.info.clone();
    // The leader keeps offering (offers time out after 0.5 s and come back).
    f.offers().await;

    // SIGSTOP: alive and silent. The standby must take over and offer.
    replicas[old].0.signal("-STOP");
    let stopped = Instant::now();
    agreed_leader(&[&standby_url], &[&standby_url]).await;
    eprintln!("election: the standby leads {:.1} s after SIGSTOP of the leader", stopped.elapsed().as_secs_f64());
    within("the agent moving to the new leader", agent.subscribed(2)).await;
    let mut f2 = subscribe(&masters, &info).await;
    reconciled_running(&mut f2, "rank0").await;
    f2.offers().await;
    let offered = stopped.elapsed();
    eprintln!("election: the new leader offered {:.1} s after SIGSTOP of the old one", offered.as_secs_f64());
    assert!(offered < Duration::from_secs(15), "a new leader offers within 15 s: {offered:?}");
    let metrics = snapshot(&standby_url).await;
    assert_eq!(metrics["master/elected"], 1.0, "{metrics}");
    assert_eq!(metrics["master/leader_changes"], 2.0, "the first leader, then itself: {metrics}");
    let first_offer = metrics["master/elected_to_first_offer_seconds"].as_f64().expect("timed");
    assert!((0.0..15.0).contains(&first_offer), "{metrics}");
    // The new leader claimed the registry its predecessor wrote.
    let shared = registry(&kube).await.spec;
    assert_eq!(format!("http://{}", shared.holder), standby_url, "the leader holds the registry");
    assert!(shared.state.frameworks.contains_key(&f.id().value), "the framework is registered: {:?}", shared.state);
    assert_eq!(shared.state.agents.len(), 1, "the agent is registered: {:?}", shared.state);

    // Continued, the old leader sends nothing on the stream it still holds
    // for the first framework (unfenced, it would rescind and re-offer
    // within 0.5 s), closes it, and exits, saying why.
    replicas[old].0.signal("-CONT");
    let mut after = Vec::new();
    let drained = tokio::time::timeout(Duration::from_secs(5), async {
        use futures::StreamExt;
        while let Some(Ok(event)) = f.events.next().await {
            after.push(event.kind);
        }
    })
    .await;
    assert!(drained.is_ok(), "the old leader closes its streams within 5 s of SIGCONT");
    assert!(
        after.iter().all(|k| *k == EventType::Heartbeat),
        "the old leader sent {after:?} after SIGCONT, nothing but heartbeats may come"
    );
    let (status, log) = replicas[old].0.exits(DEADLINE);
    assert!(!status.success(), "a replica that lost the Lease exits with an error: {status}");
    // Which of the two it says depends on what it did first when continued:
    // read the Lease (held by the other) or time out its pending renewal.
    let why = |l: &String| l.contains("lost the Lease") || l.contains("could not renew the Lease");
    assert!(log.iter().any(why), "it says why: {log:?}");

    // Its supervisor starts it again, on its address: a standby. kill -9
    // of the leader hands the Lease to it.
    let address = leader.trim_start_matches("http://").to_owned();
    replicas[old] = replica(dir.path(), "restarted", &address, &kubeconfig);
    let restarted = replicas[old].1.clone();
    healthy(&restarted).await;
    agreed_leader(&[&restarted, &standby_url], &[&standby_url]).await;
    assert_eq!(snapshot(&restarted).await["master/elected"], 0.0, "a standby is not elected");
    let masters = format!("{restarted},{standby_url}");
    replicas[standby].0.child.kill().expect("SIGKILL");
    let killed = Instant::now();
    agreed_leader(&[&restarted], &[&restarted]).await;
    within("the agent moving to the new leader", agent.subscribed(3)).await;
    let mut f3 = subscribe(&masters, &info).await;
    reconciled_running(&mut f3, "rank0").await;
    f3.offers().await;
    let offered = killed.elapsed();
    eprintln!("election: the restarted replica offered {:.1} s after kill -9 of the leader", offered.as_secs_f64());
    assert!(offered < Duration::from_secs(15), "a new leader offers within 15 s: {offered:?}");
    assert!(
        agent.tasks().iter().all(|t| t.status.state == TaskState::Running),
        "no task was killed: {:?}",
        agent.tasks()
    );
    drop(api);
}

/// The next JSON line of the mesoshttp driver, within `deadline`.
async fn next_line(
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    deadline: Duration,
) -> serde_json::Value {
    let line = tokio::time::timeout(deadline, lines.next_line())
        .await
        .expect("the mesoshttp driver said something in time")
        .expect("its stdout reads")
        .expect("it is still running");
    eprintln!("[mesoshttp] {line}");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

#[tokio::test]
async fn mesoshttp_given_a_standby_subscribes_through_it_and_takes_offers_from_each_leader() {
    use tokio::io::AsyncBufReadExt;
    let dir = tempfile::tempdir().unwrap();
    let Replicas { api, mut replicas, leader, old, standby, .. } = two_replicas(dir.path()).await;
    let standby_url = replicas[standby].1.clone();
    let cpus = vec![Resource::scalar("cpus", 4.0), Resource::scalar("mem", 4096.0)];
    let agent = TestAgent::start(&format!("{standby_url},{leader}"), "node1", cpus);

    // mesoshttp is given the standby only.
    let driver = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mesoshttp_failover.py");
    let mut child = tokio::process::Command::new("python3")
        .arg(driver)
        .arg(&standby_url)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python3 runs");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("piped stdout")).lines();
    // mesoshttp calls the standby; the HTTP library under it (requests)
    // follows the 307 to the leader, where the framework is registered.
    let subscribed = next_line(&mut lines, DEADLINE).await;
    assert_eq!(subscribed["subscribed"], standby_url.as_str(), "{subscribed}");
    let framework = subscribed["framework_id"].as_str().expect("a framework id").to_owned();
    let state: serde_json::Value =
        reqwest::get(format!("{leader}/master/state")).await.expect("the leader's state").json().await.expect("JSON");
    let at_leader = state["frameworks"].as_array().into_iter().flatten().any(|f| f["id"] == framework.as_str());
    assert!(at_leader, "the framework is registered with the leader: {state}");
    let first = next_line(&mut lines, DEADLINE).await;
    let first_master = first["offers_from"].as_str().expect("an offer").to_owned();
    assert!(framework.starts_with(&first_master), "offered by the leader that registered it: {first}");
    replicas[old].0.child.kill().expect("SIGKILL");
    let killed = Instant::now();
    let again = next_line(&mut lines, DEADLINE).await;
    assert_eq!(again["framework_id"], framework.as_str(), "subscribed again with its framework id: {again}");
    let second = next_line(&mut lines, DEADLINE).await;
    let second_master = second["offers_from"].as_str().expect("an offer");
    assert_ne!(second_master, first_master, "offers from another master: {second}");
    eprintln!("mesoshttp: offers from the new leader {:.1} s after kill -9 of the old", killed.elapsed().as_secs_f64());
    drop(agent);
    drop(api);
}
