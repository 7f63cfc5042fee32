//! Test fixtures: an in-process offer layer on a loopback port the system
//! picks, test agents, and the framework side (`mpiswarm-testkit`'s
//! [`scheduler`](mpiswarm_testkit::scheduler): helpers that await events
//! under one overall deadline each, never a sleep). The offer layer as a
//! process (kill -9, restart) is tested end to end in
//! `e2e/tests/offers_process.rs`.
#![allow(dead_code)]

use mpiswarm_mesos::{FrameworkInfo, Resource};
use mpiswarm_offers::{OffersArgs, Running};

/// Generous: the machine is small and shared; nothing waits this long when it works.
#[allow(unused_imports)] // each test binary uses its own part
pub use mpiswarm_testkit::DEADLINE;

pub fn args(data_dir: &std::path::Path) -> OffersArgs {
    OffersArgs {
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: Some(data_dir.to_owned()),
        weights: Default::default(),
        quota: Default::default(),
        allocation_interval: 0.05,
        agent_launch_backlog: mpiswarm_offers::master::DEFAULT_LAUNCH_BACKLOG,
        offer_timeout: None,
        heartbeat_interval: 15.0,
        agent_reregister_timeout: 75.0,
        status_update_retry_interval: 10.0,
        credentials: None,
        acls: None,
        tls_cert: None,
        tls_key: None,
        max_body_bytes: 4 * 1024 * 1024,
        redirect_to: None,
        advertise_host: None,
        lease_name: None,
        lease_namespace: "default".into(),
        lease_seconds: 8.0,
        kubeconfig: None,
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

    /// The offer layer started from command-line flags, as `mpiswarm
    /// offers FLAGS` parses them (on a loopback port the system picks, in a
    /// fresh data directory, allocating every 50 ms).
    pub async fn from_flags(flags: &[&str]) -> Self {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: OffersArgs,
        }
        let dir = tempfile::tempdir().unwrap();
        let data_dir = dir.path().to_str().expect("a UTF-8 temp dir").to_owned();
        let argv = ["offers", "--listen", "127.0.0.1:0", "--data-dir", &data_dir, "--allocation-interval", "0.05"];
        let cli = <Cli as clap::Parser>::try_parse_from(argv.iter().chain(flags)).unwrap_or_else(|e| panic!("{e}"));
        let server = mpiswarm_offers::start(cli.args).await.unwrap();
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

#[allow(unused_imports)] // each test binary uses its own part
pub use mpiswarm_testkit::scheduler::{Framework, healthy, next_event, task, within};

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
