//! Shared set-up for the integration tests: a server started in-process on
//! 127.0.0.1:0 with its own data directory, kubectl runs against it, and
//! waiting on the server's own commit notifications instead of sleeping.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use mpiswarm_apiserver::{ApiserverArgs, Running, start};
use serde_json::Value;

pub struct Server {
    pub running: Running,
    pub dir: tempfile::TempDir,
}

impl Server {
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    pub async fn start_with(tweak: impl FnOnce(&mut ApiserverArgs)) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut args = ApiserverArgs::for_dir(dir.path());
        tweak(&mut args);
        let running = start(args).await.expect("server starts");
        Self { running, dir }
    }

    pub fn kubeconfig(&self) -> &Path {
        &self.running.kubeconfig
    }

    /// Run kubectl with this server's kubeconfig and a private discovery
    /// cache; it must finish within `COMMAND_DEADLINE`.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        let mut cmd = kubectl_cmd(self.kubeconfig(), &self.dir.path().join("kube-cache"));
        cmd.args(args);
        output_within(cmd, COMMAND_DEADLINE)
    }

    /// kubectl that must succeed; returns stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn kubectl_cmd(&self) -> Command {
        kubectl_cmd(self.kubeconfig(), &self.dir.path().join("kube-cache"))
    }

    /// The stored object under a storage key, read directly (no HTTP).
    pub fn stored(&self, key: &str) -> Option<Arc<Value>> {
        self.running.api.store.get(key)
    }

    /// Wait until `cond` holds, re-checking on every commit.
    pub async fn until(&self, what: &str, cond: impl Fn(&Self) -> bool) {
        let mut rx = self.running.api.store.subscribe();
        let wait = async {
            while !cond(self) {
                rx.changed().await.expect("store alive");
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(60), wait)
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
    }
}

/// How long one kubectl or python command of a test may take.
pub const COMMAND_DEADLINE: Duration = Duration::from_secs(120);

/// Run `cmd` to completion, or kill it and fail the test after `deadline`
/// (with whatever it printed), so that a hung client fails instead of hanging.
pub fn output_within(cmd: Command, deadline: Duration) -> Output {
    mpiswarm_testkit::output_within(cmd, None, deadline)
}

pub fn kubectl_cmd(kubeconfig: &Path, cache: &Path) -> Command {
    let mut c = Command::new("kubectl");
    c.arg("--kubeconfig").arg(kubeconfig).arg("--cache-dir").arg(cache);
    c
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A reqwest client that trusts the server's CA and sends its token.
pub fn http(s: &Server) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = s.dir.path();
    let ca = reqwest::Certificate::from_pem(&std::fs::read(dir.join("ca.crt")).expect("ca.crt")).expect("ca pem");
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {}", s.running.token).parse().expect("header"));
    reqwest::Client::builder().add_root_certificate(ca).default_headers(headers).build().expect("client")
}
