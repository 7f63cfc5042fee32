//! The agent as a process (`mpiswarm agent`) off loopback: it sends its principal and secret (here
//! from environment variables, as a Swarm stack sets them) on SUBSCRIBE and
//! UPDATE to a TLS offer layer that requires them, trusting the CA it was
//! given, and runs a task in the rank image; without credentials it is
//! refused with 401 and never registers; beyond loopback it does not start
//! without TLS, its credential and the readers of its endpoints
//! (`--http-credentials`); with a certificate it serves HTTPS.

// The agent's own test support (one home: agent/tests/support), which
// these tests of the agent as a process share with its in-process tests.
#[path = "../../agent/tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures::StreamExt;
use mpiswarm_mesos::client::SchedulerClient;
use mpiswarm_mesos::scheduler::{Call, EventType};
use mpiswarm_mesos::tls::CaFile;
use mpiswarm_mesos::{CommandInfo, ContainerInfo, FrameworkInfo, Operation, Resource, TaskInfo, TaskState};
use mpiswarm_testkit::{TestPki, output_within};

const DEADLINE: Duration = Duration::from_secs(120);

async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(DEADLINE, fut).await.unwrap_or_else(|_| panic!("no {what} within {DEADLINE:?}"))
}

/// The offer layer in-process on loopback, serving TLS and requiring the
/// credentials of `pki`.
async fn secure_offer_layer(pki: &TestPki, dir: &Path) -> mpiswarm_offers::Running {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: mpiswarm_offers::OffersArgs,
    }
    let creds = pki.credentials_file("agent", "s3cret");
    let args = Cli::parse_from([
        "offers".as_ref(),
        "--data-dir".as_ref(),
        dir.as_os_str(),
        "--listen".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--allocation-interval".as_ref(),
        "0.05".as_ref(),
        "--credentials".as_ref(),
        creds.as_os_str(),
        "--tls-cert".as_ref(),
        pki.cert_file.as_os_str(),
        "--tls-key".as_ref(),
        pki.key_file.as_os_str(),
    ])
    .args;
    mpiswarm_offers::start(args).await.expect("the offer layer starts")
}

/// The agent binary, configured through the environment only.
struct AgentProcess {
    child: Child,
    /// Where its own endpoints are served.
    listen: String,
    log: std::path::PathBuf,
    _data_dir: tempfile::TempDir,
}

impl AgentProcess {
    fn spawn(env: &[(&str, &Path)], master: &str) -> Self {
        let data_dir = tempfile::tempdir().unwrap();
        let log = data_dir.path().join("agent.log");
        let file = std::fs::File::create(&log).unwrap();
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let listen = free.local_addr().unwrap().to_string();
        drop(free);
        let mut cmd = Command::new(mpiswarm_e2e::binary::mpiswarm());
        cmd.arg("agent")
            .env("MPISWARM_MASTER", master)
            .env("MPISWARM_AGENT_LISTEN", &listen)
            .env("MPISWARM_AGENT_DATA_DIR", data_dir.path())
            .env("MPISWARM_AGENT_RESYNC_SECONDS", "0.5")
            .env("MPISWARM_LOG", "mpiswarm_agent=debug,mpiswarm_mesos=debug");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.stdout(Stdio::null()).stderr(file).spawn().expect("mpiswarm agent runs");
        Self { child, listen, log, _data_dir: data_dir }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits (polling the log file: the agent has no event to await) until it logged `needle`.
    async fn logged(&self, needle: &str) {
        within(&format!("'{needle}' in the agent's log"), async {
            while !self.log().contains(needle) {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await;
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn registered_agents(offers: &mpiswarm_offers::Running, ca: &CaFile) -> usize {
    let http = ca.trust(reqwest::Client::builder()).build().unwrap();
    let state: serde_json::Value = http
        .get(format!("{}/master/state", offers.url()))
        .basic_auth("agent", Some("s3cret"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    state["slaves"].as_array().map_or(0, Vec::len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_credentials_from_the_environment_the_agent_registers_over_tls_and_runs_a_task() {
    support::ensure_rank_image();
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let offers = secure_offer_layer(&pki, dir.path()).await;
    let ca = CaFile::read(&pki.ca_file).unwrap();

    let anonymous = AgentProcess::spawn(&[("MPISWARM_AGENT_CA_FILE", &pki.ca_file)], &offers.url());
    anonymous.logged("401").await;
    assert_eq!(registered_agents(&offers, &ca).await, 0, "an agent without credentials registered");
    drop(anonymous);

    let secret = pki.secret_file("agent-secret", "s3cret");
    let agent = AgentProcess::spawn(
        &[
            ("MPISWARM_AGENT_CA_FILE", &pki.ca_file),
            ("MPISWARM_AGENT_PRINCIPAL", Path::new("agent")),
            ("MPISWARM_AGENT_SECRET_FILE", &secret),
            ("MPISWARM_AGENT_TLS_CERT", &pki.cert_file),
            ("MPISWARM_AGENT_TLS_KEY", &pki.key_file),
        ],
        &offers.url(),
    );
    let client = SchedulerClient::new(&offers.url(), Some(("agent".into(), "s3cret".into()))).trusting(Some(&ca));
    let mut info = FrameworkInfo::new("root", "secure", &["mpi"]);
    info.principal = Some("agent".into()); // an authenticated framework is its caller
    let sub = client.subscribe(info).await.unwrap();
    let framework_id = sub.subscribed.framework_id.clone();
    let mut events = sub.events;
    let offer = within("an offer from the authenticated agent", async {
        loop {
            let e = events.next().await.expect("the stream ended").expect("an event");
            if let Some(o) = e.offers {
                return o.offers.into_iter().next().expect("an offer");
            }
        }
    })
    .await;
    let _cleanup = support::Cleanup { agent_id: offer.agent_id.value.clone() };
    let mut task = TaskInfo::new("secure", &format!("secure-{}", uuid::Uuid::new_v4().simple()), &offer.agent_id);
    task.resources = vec![Resource::scalar("cpus", 0.2), Resource::scalar("mem", 128.0)];
    task.command = Some(CommandInfo::shell("sleep 1"));
    task.container = Some(ContainerInfo::docker(support::RANK_IMAGE));
    let id = task.task_id.clone();
    let accept = Call::accept(&framework_id, vec![offer.id.clone()], vec![Operation::launch(vec![task])], None);
    client.call(&accept).await.unwrap();
    // Each status came through the agent's authenticated UPDATE.
    let mut seen = Vec::new();
    within("the task to finish", async {
        loop {
            let e = events.next().await.expect("the stream ended").expect("an event");
            if e.kind != EventType::Update {
                continue;
            }
            let status = e.update.expect("an update").status;
            if status.task_id != id {
                continue;
            }
            if let (Some(a), Some(uuid)) = (status.agent_id.clone(), status.uuid.clone()) {
                client.call(&Call::acknowledge(&framework_id, a, id.clone(), uuid)).await.unwrap();
            }
            seen.push(status.state);
            assert!(!matches!(status.state, TaskState::Failed | TaskState::Lost), "{status:?}\n{}", agent.log());
            if status.state == TaskState::Finished {
                return;
            }
        }
    })
    .await;
    assert!(seen.contains(&TaskState::Running), "{seen:?}");

    // Its own endpoints (/files among them) are served over HTTPS only.
    let http = ca.trust(reqwest::Client::builder()).build().unwrap();
    let healthz = http.get(format!("https://{}/healthz", agent.listen)).send().await.unwrap();
    assert_eq!(healthz.status(), 200);
    let plain = reqwest::get(format!("http://{}/healthz", agent.listen)).await;
    assert!(plain.map(|r| !r.status().is_success()).unwrap_or(true), "plain HTTP was served");
}

#[test]
fn beyond_loopback_the_agent_does_not_start_without_tls_and_credentials() {
    let pki = TestPki::new();
    let mut cmd = Command::new(mpiswarm_e2e::binary::mpiswarm());
    cmd.args(["agent", "--listen", "0.0.0.0:0", "--master", "http://127.0.0.1:9"]);
    let out = output_within(cmd, None, DEADLINE);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("refusing to listen on 0.0.0.0:0 without TLS and without credentials"), "{err}");
    assert!(
        err.contains("--tls-cert")
            && err.contains("--secret-file")
            && err.contains("--credential")
            && err.contains("--http-credentials"),
        "{err}"
    );

    let secret = pki.secret_file("s", "x");
    let readers = pki.credentials_file("ops", "y");
    let mut cmd = Command::new(mpiswarm_e2e::binary::mpiswarm());
    cmd.args(["agent", "--listen", "0.0.0.0:0", "--master", "http://127.0.0.1:9", "--principal", "p", "--secret-file"])
        .arg(&secret)
        .arg("--http-credentials")
        .arg(&readers);
    let out = output_within(cmd, None, DEADLINE);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("without TLS:"), "{err}");

    // TLS and its own credential, but nobody named to read its task output.
    let mut cmd = Command::new(mpiswarm_e2e::binary::mpiswarm());
    cmd.args(["agent", "--listen", "0.0.0.0:0", "--master", "http://127.0.0.1:9", "--principal", "p", "--secret-file"])
        .arg(&secret)
        .arg("--tls-cert")
        .arg(&pki.cert_file)
        .arg("--tls-key")
        .arg(&pki.key_file);
    let out = output_within(cmd, None, DEADLINE);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("without credentials") && err.contains("--http-credentials"),
        "{err}"
    );

    let mut cmd = Command::new(mpiswarm_e2e::binary::mpiswarm());
    cmd.args(["agent", "--principal", "p"]);
    let out = output_within(cmd, None, DEADLINE);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("a principal was given without a secret file"), "{err}");
}
