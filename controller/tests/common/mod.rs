//! The whole control plane in one test process, with no containers: the
//! embedded API server, the offer layer, test agents (mpiswarm-testkit) and
//! the controller, each on its own loopback port. Jobs are applied with the
//! real kubectl; waits are watches with an overall deadline. The API server
//! keeps an audit log (`Stack::audit_events`), and the controller has a
//! client of its own whose User-Agent tells its requests apart there.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use clap::Parser;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::await_condition;
use mpiswarm_controller::{Options, Settings};
use mpiswarm_crds::{ConditionType, MpiJob, Phase};
use mpiswarm_testkit::{AgentSpec, TestAgents, output_within};

/// Generous on a small shared machine; nothing waits this long when it works.
pub const DEADLINE: Duration = Duration::from_secs(120);
/// One kubectl or docker command.
pub const COMMAND_DEADLINE: Duration = Duration::from_secs(120);

#[derive(Parser)]
struct ControllerCli {
    #[command(flatten)]
    args: mpiswarm_controller::ControllerArgs,
}

#[derive(Parser)]
struct OffersCli {
    #[command(flatten)]
    args: mpiswarm_offers::OffersArgs,
}

/// Which agents serve the stack.
pub enum Agents {
    /// In-process test agents: no containers.
    Test(Vec<AgentSpec>),
    /// One real `mpiswarm agent` on this machine's Docker engine (single-node swarm).
    Docker,
    /// As `Docker`, with these extra `mpiswarm agent` flags (credentials, TLS).
    DockerWith(Vec<String>),
    /// In-process test agents whose clients (credentials, CA) come from the
    /// function, given the offer layer's URL.
    Through(Vec<AgentSpec>, Box<dyn Fn(&str) -> mpiswarm_mesos::client::AgentClient>),
}

pub struct Stack {
    pub api: mpiswarm_apiserver::Running,
    pub offers: mpiswarm_offers::Running,
    pub agents: TestAgents,
    /// The real agent's task and data dir, with `Agents::Docker`.
    pub docker_agent: Option<tokio::task::JoinHandle<()>>,
    /// The in-process controller (none when a test runs controller processes).
    pub controller: Option<mpiswarm_controller::Running>,
    pub client: kube::Client,
    pub round_log: PathBuf,
    pub dir: tempfile::TempDir,
}

pub async fn client(kubeconfig: &Path) -> kube::Client {
    mpiswarm_controller::client(Some(kubeconfig)).await.expect("a kube client for the test API server")
}

/// A client as the controller makes its own (its User-Agent is the controller's).
pub async fn controller_client(kubeconfig: &Path) -> kube::Client {
    mpiswarm_controller::controller_client(Some(kubeconfig)).await.expect("the controller's kube client")
}

pub async fn install_crd(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = serde_json::to_value(mpiswarm_crds::crd()).expect("CRD as JSON");
    crd["apiVersion"] = "apiextensions.k8s.io/v1".into();
    crd["kind"] = "CustomResourceDefinition".into();
    crds.patch("mpijobs.mpiswarm.io", &PatchParams::apply("test").force(), &Patch::Apply(&crd))
        .await
        .expect("the MpiJob CRD is accepted");
}

/// Every event of `api`'s audit log so far (complete: none dropped).
pub async fn audit_events(api: &mpiswarm_apiserver::Running) -> Vec<mpiswarm_apiserver::audit::Event> {
    let log = api.audit.as_ref().expect("the test API server keeps an audit log");
    log.flush().await;
    assert_eq!(log.dropped(), 0, "the audit log dropped events: it is incomplete");
    let text = std::fs::read_to_string(log.path()).expect("the audit log");
    text.lines().map(|l| serde_json::from_str(l).expect("an audit event")).collect()
}

/// A replica of the offer layer on a free loopback port, electing its
/// leader with Lease `lease` in `namespace` and keeping its registry there,
/// through `kubeconfig`; a Lease of 2 s, so a standby takes over quickly.
pub fn replica_args(kubeconfig: &Path, namespace: &str, lease: &str) -> mpiswarm_offers::OffersArgs {
    let kubeconfig = kubeconfig.to_str().expect("utf-8 kubeconfig path");
    OffersCli::parse_from([
        "offers",
        "--listen",
        "127.0.0.1:0",
        "--lease-name",
        lease,
        "--lease-namespace",
        namespace,
        "--lease-seconds",
        "2",
        "--kubeconfig",
        kubeconfig,
        "--allocation-interval",
        "0.05",
    ])
    .args
}

pub fn offers_args(dir: &Path) -> mpiswarm_offers::OffersArgs {
    let dir = dir.to_str().expect("utf-8 temp dir");
    OffersCli::parse_from(["offers", "--listen", "127.0.0.1:0", "--data-dir", dir, "--allocation-interval", "0.05"])
        .args
}

/// Test settings: short timeouts so failures show quickly.
pub fn settings(round_log: &Path) -> Settings {
    Settings { launch_timeout: 30, round_log: Some(round_log.to_owned()), ..Settings::default() }
}

/// The log endpoint on a free loopback port, plain HTTP.
pub fn loopback_logs() -> mpiswarm_controller::logs::LogsOptions {
    mpiswarm_controller::logs::LogsOptions { listen: "127.0.0.1:0".parse().expect("address"), url: None, tls: None }
}

pub fn options(offers_url: &str, settings: Settings, identity: &str) -> Options {
    Options {
        master: offers_url.to_owned(),
        credentials: None,
        namespace: None,
        lease_namespace: "default".to_owned(),
        identity: identity.to_owned(),
        lease_seconds: 4,
        listen: "127.0.0.1:0".parse().expect("address"),
        logs: None,
        settings,
    }
}

impl Stack {
    pub async fn start(agents: Vec<AgentSpec>) -> Self {
        Self::start_with(Agents::Test(agents), |_| {}).await
    }

    pub async fn start_with(agents: Agents, tweak: impl FnOnce(&mut Settings)) -> Self {
        Self::start_full(agents, tweak, true).await
    }

    /// As [`Self::start`], with the offer layer's flags changed by
    /// `tweak_offers` (e.g. its `--quota`).
    pub async fn start_with_offers(
        agents: Vec<AgentSpec>,
        tweak_offers: impl FnOnce(&mut mpiswarm_offers::OffersArgs),
    ) -> Self {
        Self::start_tweaked(Agents::Test(agents), |_| {}, true, tweak_offers, |_| {}, |_| {}).await
    }

    /// The API server, the offer layer and the agents, but no controller.
    pub async fn without_controller(agents: Vec<AgentSpec>) -> Self {
        Self::start_full(Agents::Test(agents), |_| {}, false).await
    }

    async fn start_full(agents: Agents, tweak: impl FnOnce(&mut Settings), with_controller: bool) -> Self {
        Self::start_tweaked(agents, tweak, with_controller, |_| {}, |_| {}, |_| {}).await
    }

    /// As [`Self::start_with`], with the API server's flags changed by
    /// `tweak_api` (e.g. its `--token-auth-file`) and the controller's
    /// options by `tweak_options` (e.g. its log endpoint and credential).
    pub async fn start_custom(
        agents: Agents,
        tweak_api: impl FnOnce(&mut mpiswarm_apiserver::ApiserverArgs),
        tweak_options: impl FnOnce(&mut Options),
    ) -> Self {
        Self::start_tweaked(agents, |_| {}, true, |_| {}, tweak_api, tweak_options).await
    }

    /// The stack as it runs off loopback: the offer layer serves TLS and
    /// requires credentials; the test agents send them and trust its CA;
    /// the controller is configured from its command-line flags
    /// (`--master-credentials`, `--ca-file`) and serves its log endpoint
    /// over TLS with the same certificate (`--logs-tls-cert`).
    pub async fn start_secure(agents: Vec<AgentSpec>, pki: &mpiswarm_testkit::TestPki) -> Self {
        let ca = mpiswarm_mesos::tls::CaFile::read(&pki.ca_file).expect("the test CA");
        let through = Agents::Through(
            agents,
            Box::new(move |url| {
                mpiswarm_mesos::client::AgentClient::new(url, Some(("mpiswarm".into(), "s3cret".into())))
                    .trusting(Some(&ca))
            }),
        );
        Self::start_secure_with(through, pki).await
    }

    /// As [`Stack::start_secure`], with the real agent on the Docker engine,
    /// which sends its credential, trusts the CA and serves its own
    /// endpoints (`/files/read` too) over TLS.
    pub async fn start_secure_docker(pki: &mpiswarm_testkit::TestPki) -> Self {
        let credential = pki.secret_file("agent-credential", "mpiswarm s3cret");
        let path = |p: &Path| p.to_str().expect("utf-8 temp path").to_owned();
        let flags = [
            ("--credential", &credential),
            ("--ca-file", &pki.ca_file),
            ("--tls-cert", &pki.cert_file),
            ("--tls-key", &pki.key_file),
        ];
        let args = flags.iter().flat_map(|(flag, p)| [(*flag).to_owned(), path(p)]).collect();
        Self::start_secure_with(Agents::DockerWith(args), pki).await
    }

    async fn start_secure_with(agents: Agents, pki: &mpiswarm_testkit::TestPki) -> Self {
        let creds = pki.credentials_file("mpiswarm", "s3cret");
        let credential = pki.secret_file("controller-credential", "mpiswarm s3cret");
        let mut s = Self::start_tweaked(
            agents,
            |_| {},
            false,
            |a| {
                a.credentials = Some(creds);
                a.tls_cert = Some(pki.cert_file.clone());
                a.tls_key = Some(pki.key_file.clone());
            },
            |_| {},
            |_| {},
        )
        .await;
        let offers_url = s.offers.url();
        let cli = ControllerCli::parse_from([
            "controller".as_ref(),
            "--master".as_ref(),
            offers_url.as_ref(),
            "--master-credentials".as_ref(),
            credential.as_os_str(),
            "--ca-file".as_ref(),
            pki.ca_file.as_os_str(),
            "--listen".as_ref(),
            "127.0.0.1:0".as_ref(),
            "--lease-seconds".as_ref(),
            "4".as_ref(),
            "--launch-timeout-seconds".as_ref(),
            "30".as_ref(),
            "--logs-listen".as_ref(),
            "127.0.0.1:0".as_ref(),
            "--logs-tls-cert".as_ref(),
            pki.cert_file.as_os_str(),
            "--logs-tls-key".as_ref(),
            pki.key_file.as_os_str(),
        ]);
        let options = cli.args.options().expect("the controller's flags are valid");
        let client = controller_client(&s.api.kubeconfig).await;
        s.controller = Some(mpiswarm_controller::start(client, options).await.expect("controller starts"));
        s
    }

    async fn start_tweaked(
        agents: Agents,
        tweak: impl FnOnce(&mut Settings),
        with_controller: bool,
        tweak_offers: impl FnOnce(&mut mpiswarm_offers::OffersArgs),
        tweak_api: impl FnOnce(&mut mpiswarm_apiserver::ApiserverArgs),
        tweak_options: impl FnOnce(&mut Options),
    ) -> Self {
        init_tracing();
        let dir = tempfile::tempdir().expect("tempdir");
        let mut api_args = mpiswarm_apiserver::ApiserverArgs::for_dir(dir.path().join("api"));
        api_args.audit_log = Some(dir.path().join("audit.jsonl"));
        tweak_api(&mut api_args);
        let api = mpiswarm_apiserver::start(api_args).await.expect("API server starts");
        let client = client(&api.kubeconfig).await;
        install_crd(&client).await;
        let offers_dir = dir.path().join("offers");
        std::fs::create_dir_all(&offers_dir).expect("offers dir");
        let mut args = offers_args(&offers_dir);
        tweak_offers(&mut args);
        let offers = mpiswarm_offers::start(args).await.expect("offer layer starts");
        let (mut agents, docker_agent) = match agents {
            Agents::Test(specs) => (TestAgents::start(&offers.url(), specs), None),
            Agents::Through(specs, client) => (TestAgents::start_through(|| client(&offers.url()), specs), None),
            Agents::Docker => (
                TestAgents::start(&offers.url(), []),
                Some(docker_agent(&offers.url(), &dir.path().join("agent"), &[])),
            ),
            Agents::DockerWith(flags) => (
                TestAgents::start(&offers.url(), []),
                Some(docker_agent(&offers.url(), &dir.path().join("agent"), &flags)),
            ),
        };
        agents.subscribed().await;
        let round_log = dir.path().join("rounds.jsonl");
        let mut s = settings(&round_log);
        tweak(&mut s);
        let mut options = options(&offers.url(), s, "test-controller");
        tweak_options(&mut options);
        let controller = match with_controller {
            true => Some(
                mpiswarm_controller::start(controller_client(&api.kubeconfig).await, options)
                    .await
                    .expect("controller starts"),
            ),
            false => None,
        };
        Self { api, offers, agents, docker_agent, controller, client, round_log, dir }
    }

    pub fn jobs(&self) -> Api<MpiJob> {
        Api::namespaced(self.client.clone(), "default")
    }

    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig").arg(&self.api.kubeconfig).arg("--cache-dir").arg(self.dir.path().join("kube-cache"));
        cmd.args(args);
        output_within(cmd, stdin, COMMAND_DEADLINE)
    }

    pub fn kubectl_ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.kubectl(args, stdin);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until `cond` holds for job `name`, or fails after [`DEADLINE`].
    pub async fn until(&self, name: &str, what: &str, cond: impl Fn(&MpiJob) -> bool) -> MpiJob {
        let waited = tokio::time::timeout(
            DEADLINE,
            await_condition(self.jobs(), name, move |j: Option<&MpiJob>| j.is_some_and(&cond)),
        )
        .await;
        match waited {
            Ok(Ok(Some(job))) => job,
            other => {
                let now = self.jobs().get_opt(name).await.ok().flatten();
                panic!(
                    "job {name} never became {what} within {DEADLINE:?} ({other:?}); it is: {:#?}",
                    now.map(|j| j.status)
                )
            }
        }
    }

    pub async fn until_phase(&self, name: &str, phase: Phase) -> MpiJob {
        self.until(name, &format!("{phase:?}"), move |j| phase_of(j) == Some(phase)).await
    }

    pub async fn until_gone(&self, name: &str) {
        until_gone_from(self.jobs(), name).await;
    }

    /// Deletes the job and waits until it is gone and Swarm holds nothing of
    /// it. A test whose job's objects are still being removed when its
    /// stack stops leaves them on the engine.
    pub async fn delete_leaving_nothing(&self, namespace: &str, name: &str) {
        let jobs: Api<MpiJob> = Api::namespaced(self.client.clone(), namespace);
        let uid = jobs.get(name).await.unwrap_or_else(|e| panic!("job {namespace}/{name}: {e}")).uid();
        let uid = uid.unwrap_or_else(|| panic!("job {namespace}/{name} has no uid"));
        self.kubectl_ok(&["delete", "mpijob", name, "-n", namespace, "--wait=false"], None);
        until_gone_from(jobs, name).await;
        until_clean(&uid).await;
    }

    /// Every request the API server has answered so far, as its audit log has them.
    pub async fn audit_events(&self) -> Vec<mpiswarm_apiserver::audit::Event> {
        audit_events(&self.api).await
    }

    /// Every round the controller logged.
    pub fn rounds(&self) -> Vec<mpiswarm_controller::round::RoleRound> {
        let text = std::fs::read_to_string(&self.round_log).unwrap_or_default();
        text.lines()
            .flat_map(|l| {
                serde_json::from_str::<Vec<mpiswarm_controller::round::RoleRound>>(l).expect("a logged round")
            })
            .collect()
    }
}

#[derive(Parser)]
struct AgentCli {
    #[command(flatten)]
    args: mpiswarm_agent::AgentArgs,
}

/// The real node agent on the local engine, in this process.
fn docker_agent(master: &str, data_dir: &Path, flags: &[String]) -> tokio::task::JoinHandle<()> {
    let data_dir = data_dir.to_str().expect("utf-8 temp dir");
    let base = ["agent", "--master", master, "--data-dir", data_dir, "--listen", "127.0.0.1:0"];
    let args = AgentCli::parse_from(base.into_iter().chain(flags.iter().map(String::as_str))).args;
    tokio::spawn(async move {
        if let Err(e) = mpiswarm_agent::run(args).await {
            panic!("the node agent stopped: {e}");
        }
    })
}

/// Fails with the command to run if a locally built image is missing.
pub fn require_image(image: &str) {
    let mut cmd = Command::new("docker");
    cmd.args(["image", "inspect", image]);
    let ok = output_within(cmd, None, COMMAND_DEADLINE).status.success();
    assert!(ok, "image {image} is not on this engine: run `make images` (mpiswarm images build) first");
}

async fn until_gone_from(jobs: Api<MpiJob>, name: &str) {
    let gone = tokio::time::timeout(DEADLINE, await_condition(jobs, name, |j: Option<&MpiJob>| j.is_none())).await;
    assert!(matches!(gone, Ok(Ok(_))), "job {name} was not deleted within {DEADLINE:?}");
}

/// Waits until Swarm holds nothing of the job `uid` ([`swarm_leftovers`]).
pub async fn until_clean(uid: &str) {
    let network = mpiswarm_controller::names::network_prefix(uid);
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let left = swarm_leftovers(uid, &network);
        if left.is_empty() {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "left on the swarm after delete: {left:?}");
        tokio::time::sleep(Duration::from_millis(500)).await; // Swarm removes asynchronously; nothing to await
    }
}

/// Swarm objects left by a job or an agent: services and networks of the job,
/// secrets and configs of the agent.
pub fn swarm_leftovers(job_uid: &str, network_prefix: &str) -> Vec<String> {
    let lines = |args: &[&str]| -> Vec<String> {
        let mut cmd = Command::new("docker");
        cmd.args(args);
        let out = output_within(cmd, None, COMMAND_DEADLINE);
        String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.is_empty()).map(str::to_owned).collect()
    };
    let mut left = Vec::new();
    let label = format!("label=mpiswarm.io/job-uid={job_uid}");
    left.extend(lines(&["service", "ls", "-q", "--filter", &label]).into_iter().map(|s| format!("service {s}")));
    left.extend(
        lines(&["network", "ls", "-q", "--filter", &format!("name=^{network_prefix}")])
            .into_iter()
            .map(|n| format!("network {n}")),
    );
    left.extend(lines(&["ps", "-q", "--filter", &label]).into_iter().map(|c| format!("container {c}")));
    left
}

/// Logs of the components under test, filtered by `MPISWARM_LOG` (off by default).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MPISWARM_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off"));
    let _already = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
}

pub fn phase_of(job: &MpiJob) -> Option<Phase> {
    job.status.as_ref().and_then(|s| s.phase)
}

pub fn condition(job: &MpiJob, t: ConditionType) -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    job.status.as_ref().and_then(|s| s.condition(t).cloned())
}

/// An MpiJob manifest.
pub fn job_yaml(name: &str, ranks: u32, cpus: f64, program: &str, extra: &str) -> String {
    format!(
        "apiVersion: mpiswarm.io/v1alpha1\nkind: MpiJob\nmetadata:\n  name: {name}\nspec:\n  image: mpiswarm/openmpi:0.1.0\n  command: [{program}]\n  ranks: {ranks}\n  resources: {{cpus: {cpus}, memory: 64Mi}}\n  placement: {{policy: pack}}\n{extra}"
    )
}

/// Program words as a YAML flow list body, e.g. `sleep 1` -> `sleep, "1"`.
pub fn program(words: &str) -> String {
    words.split_whitespace().map(|w| format!("\"{w}\"")).collect::<Vec<_>>().join(", ")
}
