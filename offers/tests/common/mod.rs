//! Test fixtures: an in-process offer layer on a loopback port the system
//! picks, the offer layer as a process, test agents (`mpiswarm-testkit`), and
//! helpers that await events under one overall deadline each, never a sleep.
#![allow(dead_code)]

use futures::StreamExt;
use mpiswarm_mesos::client::{EventStream, SchedulerClient, Subscription};
use mpiswarm_mesos::scheduler::{Event, EventType, Subscribed};
use mpiswarm_mesos::{FrameworkInfo, Resource};
use mpiswarm_offers::{OffersArgs, Running};
use std::time::Duration;

/// Generous: the machine is small and shared; nothing waits this long when it works.
pub const DEADLINE: Duration = Duration::from_secs(30);

pub fn args(data_dir: &std::path::Path) -> OffersArgs {
    OffersArgs {
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: data_dir.to_owned(),
        weights: Default::default(),
        allocation_interval: 0.05,
        offer_timeout: None,
        heartbeat_interval: 15.0,
        agent_reregister_timeout: 75.0,
        status_update_retry_interval: 10.0,
        credentials: None,
        tls_cert: None,
        tls_key: None,
        max_body_bytes: 4 * 1024 * 1024,
        redirect_to: None,
        advertise_host: None,
    }
}

pub struct Cluster {
    pub server: Running,
    pub dir: tempfile::TempDir,
}

impl Cluster {
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    pub async fn start_with(tweak: impl FnOnce(&mut OffersArgs)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut a = args(dir.path());
        tweak(&mut a);
        let server = mpiswarm_offers::start(a).await.unwrap();
        Self { server, dir }
    }

    pub fn url(&self) -> String {
        self.server.url()
    }

    pub fn agent(&self, hostname: &str, cpus: f64, mem: f64) -> mpiswarm_testkit::TestAgent {
        mpiswarm_testkit::TestAgent::start(
            &self.url(),
            hostname,
            vec![Resource::scalar("cpus", cpus), Resource::scalar("mem", mem)],
        )
    }

    pub async fn framework(&self, name: &str, roles: &[&str]) -> Framework {
        Framework::subscribe(&self.url(), FrameworkInfo::new("root", name, roles)).await
    }

    pub async fn state(&self) -> serde_json::Value {
        reqwest::get(format!("{}/master/state", self.url())).await.unwrap().json().await.unwrap()
    }
}

pub struct Framework {
    pub client: SchedulerClient,
    pub subscribed: Subscribed,
    pub events: EventStream<Event>,
    pub info: FrameworkInfo,
}

impl Framework {
    pub async fn subscribe(url: &str, info: FrameworkInfo) -> Self {
        Self::subscribe_with(SchedulerClient::new(url, None), info).await
    }

    /// Subscribes through `client` (credentials, a CA to trust).
    pub async fn subscribe_with(client: SchedulerClient, info: FrameworkInfo) -> Self {
        let Subscription { subscribed, events, .. } = client.subscribe(info.clone()).await.unwrap();
        let mut info = info;
        info.id = Some(subscribed.framework_id.clone());
        Self { client, subscribed, events, info }
    }

    pub fn id(&self) -> &mpiswarm_mesos::FrameworkId {
        &self.subscribed.framework_id
    }

    /// The next event that is not a heartbeat.
    pub async fn next(&mut self) -> Event {
        next_event(&mut self.events).await
    }

    /// Skips events until one of `kind` arrives, within one overall
    /// deadline (heartbeats and other events do not extend it).
    pub async fn expect(&mut self, kind: EventType) -> Event {
        let wait = async {
            loop {
                let e = self.next().await;
                if e.kind == kind {
                    return e;
                }
            }
        };
        tokio::time::timeout(DEADLINE, wait).await.unwrap_or_else(|_| panic!("no {kind:?} event within {DEADLINE:?}"))
    }

    pub async fn offers(&mut self) -> Vec<mpiswarm_mesos::Offer> {
        self.expect(EventType::Offers).await.offers.unwrap().offers
    }

    /// The next UPDATE for `task` (skipping other events), within one
    /// overall deadline.
    pub async fn update_of(&mut self, task: &str) -> mpiswarm_mesos::TaskStatus {
        let wait = async {
            loop {
                let e = self.expect(EventType::Update).await;
                let s = e.update.unwrap().status;
                if s.task_id.value == task {
                    return s;
                }
            }
        };
        tokio::time::timeout(DEADLINE, wait)
            .await
            .unwrap_or_else(|_| panic!("no update of task {task} within {DEADLINE:?}"))
    }

    /// ACCEPTs `offer` with one LAUNCH of `tasks` (no filter options).
    pub async fn launch(&self, offer: &mpiswarm_mesos::Offer, tasks: Vec<mpiswarm_mesos::TaskInfo>) {
        let call = mpiswarm_mesos::scheduler::Call::accept(
            self.id(),
            vec![offer.id.clone()],
            vec![mpiswarm_mesos::Operation::launch(tasks)],
            None,
        );
        self.client.call(&call).await.unwrap();
    }

    pub async fn ack(&self, status: &mpiswarm_mesos::TaskStatus) {
        let call = mpiswarm_mesos::scheduler::Call::acknowledge(
            self.id(),
            status.agent_id.clone().unwrap(),
            status.task_id.clone(),
            status.uuid.clone().unwrap(),
        );
        self.client.call(&call).await.unwrap();
    }
}

/// The next event that is not a heartbeat, within one overall deadline
/// (heartbeats do not extend it).
pub async fn next_event(events: &mut EventStream<Event>) -> Event {
    within("an event other than a heartbeat", async {
        loop {
            let e = events.next().await.expect("the event stream ended").expect("a decodable event");
            if e.kind != EventType::Heartbeat {
                return e;
            }
        }
    })
    .await
}

/// Awaits `fut` within [`DEADLINE`] in all, failing the test with `what` otherwise:
/// for every loop that waits for several events, so no event can keep it waiting.
pub async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(DEADLINE, fut).await.unwrap_or_else(|_| panic!("no {what} within {DEADLINE:?}"))
}

/// A shell task using `cpus` and `mem` on the offer's agent.
pub fn task(id: &str, offer: &mpiswarm_mesos::Offer, cpus: f64, mem: f64, command: &str) -> mpiswarm_mesos::TaskInfo {
    let mut t = mpiswarm_mesos::TaskInfo::new(id, id, &offer.agent_id);
    t.resources = vec![Resource::scalar("cpus", cpus), Resource::scalar("mem", mem)];
    t.command = Some(mpiswarm_mesos::CommandInfo::shell(command));
    t
}

/// The offer layer as a real process; killed if the test fails half-way.
pub struct Master {
    pub child: std::process::Child,
    /// Where it listens, as it printed it.
    pub addr: std::net::SocketAddr,
}

impl Master {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `kill -9`, and waits for the process to be gone.
    pub fn kill_9(&mut self) {
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

/// Starts the `mpiswarm-offers` binary on a port the system picks
/// (`127.0.0.1:0`, so no port is guessed) with `extra` flags.
pub fn spawn_binary(dir: &std::path::Path, extra: &[&str]) -> Master {
    spawn_binary_on("127.0.0.1:0", dir, extra)
}

/// Starts the binary on `listen` (a restart on the address a killed one had)
/// and reads the address it prints. Defaults to `--agent-reregister-timeout
/// 60` unless `extra` sets it.
pub fn spawn_binary_on(listen: &str, dir: &std::path::Path, extra: &[&str]) -> Master {
    use std::io::BufRead;
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_mpiswarm-offers"));
    cmd.args(["--listen", listen, "--data-dir"]).arg(dir).args([
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
        .expect("the mpiswarm-offers binary starts");
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
        .unwrap_or_else(|e| panic!("mpiswarm-offers printed no 'listening on' line within {DEADLINE:?}: {e}"));
    Master { child, addr: addr.parse().expect("a socket address") }
}

/// Waits (with backoff) until the offer layer at `url` answers /health.
pub async fn healthy(url: &str) {
    let probe = || async {
        reqwest::get(format!("{url}/health"))
            .await
            .map_err(|source| mpiswarm_mesos::client::ClientError::Http { url: url.to_owned(), source })
    };
    mpiswarm_mesos::client::with_backoff(mpiswarm_mesos::client::Backoff::default(), 100, probe)
        .await
        .expect("the offer layer answers");
}

/// A raw SUBSCRIBE body (MULTI_ROLE, role `mpi`, failover_timeout 60 s).
pub const SUBSCRIBE: &str = r#"{"type":"SUBSCRIBE","subscribe":{"framework_info":{"user":"root","name":"raw","roles":["mpi"],"capabilities":[{"type":"MULTI_ROLE"}],"failover_timeout":60}}}"#;

/// A POST to the scheduler API of the offer layer at `url`.
pub fn post(url: &str) -> reqwest::RequestBuilder {
    reqwest::Client::new().post(format!("{url}/api/v1/scheduler"))
}

/// Sends `req`; its status and body.
pub async fn status_of(req: reqwest::RequestBuilder) -> (u16, String) {
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.text().await.unwrap())
}

/// A JSON POST of `body` to the scheduler API.
pub fn json_post(url: &str, body: impl Into<String>) -> reqwest::RequestBuilder {
    post(url).header("Content-Type", "application/json").body(body.into())
}
