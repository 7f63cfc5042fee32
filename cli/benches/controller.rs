//! Controller benchmarks (issue 9), run with `cargo bench -p mpiswarm --bench controller`
//! (a release build). Not a test: it prints figures, it asserts nothing.
//!
//! 1. Throughput: `JOBS` MpiJobs (default 1,000) created by 8 concurrent
//!    clients against 100 test agents (no containers); timed from the first
//!    create to the last job's `Scheduled` condition.
//! 2. Memory: the controller's resident set (VmRSS and its peak VmHWM) once it
//!    has reconciled `STORED` MpiJobs (default 10,000) that all wait for
//!    resources (no agent).
//!
//! The API server and the offer layer run in this process; the controller is
//! the real `mpiswarm controller` process, so its memory is its own.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use mpiswarm_crds::{ConditionType, MpiJob};

#[derive(Parser)]
struct OffersCli {
    #[command(flatten)]
    args: mpiswarm_offers::OffersArgs,
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn controller(kubeconfig: &Path, master: &str) -> Process {
    let child = Command::new(env!("CARGO_BIN_EXE_mpiswarm"))
        .args(["controller", "--master", master, "--listen", "127.0.0.1:0", "--identity", "bench"])
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("MPISWARM_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("mpiswarm controller starts");
    Process(child)
}

fn rss_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn job(name: &str) -> MpiJob {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "mpiswarm.io/v1alpha1", "kind": "MpiJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"image": "mpiswarm/openmpi:0.1.0", "command": ["sleep", "3600"], "ranks": 1,
                 "resources": {"cpus": 0.1, "memory": "32Mi"}, "placement": {"policy": "pack"}}
    }))
    .expect("a job")
}

async fn create_all(client: &kube::Client, prefix: &str, n: usize, clients: usize) {
    let jobs: Api<MpiJob> = Api::namespaced(client.clone(), "default");
    futures::stream::iter(0..n)
        .map(|i| {
            let jobs = jobs.clone();
            async move { jobs.create(&PostParams::default(), &job(&format!("{prefix}-{i:05}"))).await.expect("create") }
        })
        .buffer_unordered(clients)
        .for_each(|_| async {})
        .await;
}

async fn count(client: &kube::Client, pred: impl Fn(&MpiJob) -> bool) -> usize {
    let jobs: Api<MpiJob> = Api::namespaced(client.clone(), "default");
    jobs.list(&ListParams::default()).await.expect("list").items.iter().filter(|j| pred(j)).count()
}

async fn until(client: &kube::Client, n: usize, limit: Duration, pred: impl Fn(&MpiJob) -> bool + Copy) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if count(client, pred).await >= n {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    false
}

async fn install_crd(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = serde_json::to_value(mpiswarm_crds::crd()).expect("crd");
    crd["apiVersion"] = "apiextensions.k8s.io/v1".into();
    crd["kind"] = "CustomResourceDefinition".into();
    crds.patch("mpijobs.mpiswarm.io", &PatchParams::apply("bench").force(), &Patch::Apply(&crd)).await.expect("crd");
}

async fn stack(dir: &Path) -> (mpiswarm_apiserver::Running, mpiswarm_offers::Running, kube::Client) {
    let api =
        mpiswarm_apiserver::start(mpiswarm_apiserver::ApiserverArgs::for_dir(dir.join("api"))).await.expect("api");
    let client = mpiswarm_controller::client(Some(&api.kubeconfig)).await.expect("client");
    install_crd(&client).await;
    let offers_dir = dir.join("offers");
    std::fs::create_dir_all(&offers_dir).expect("dir");
    let args = OffersCli::parse_from([
        "offers",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        offers_dir.to_str().expect("utf-8"),
        "--allocation-interval",
        "0.05",
    ])
    .args;
    let offers = mpiswarm_offers::start(args).await.expect("offers");
    (api, offers, client)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let jobs = env_or("MPISWARM_BENCH_JOBS", 1000);
    let stored = env_or("MPISWARM_BENCH_STORED", 10_000);
    let agents = env_or("MPISWARM_BENCH_AGENTS", 100);

    // 1. Throughput.
    let dir = tempfile::tempdir().expect("tempdir");
    let (api, offers, client) = stack(dir.path()).await;
    let mut test_agents = mpiswarm_testkit::TestAgents::uniform(&offers.url(), agents, 4.0, 8192.0);
    test_agents.subscribed().await;
    let ctl = controller(&api.kubeconfig, &offers.url());
    let started = Instant::now();
    create_all(&client, "t", jobs, 8).await;
    let created = started.elapsed();
    let scheduled = |j: &MpiJob| j.status.as_ref().is_some_and(|s| s.is_true(ConditionType::Scheduled));
    let ok = until(&client, jobs, Duration::from_secs(600), scheduled).await;
    let elapsed = started.elapsed();
    println!(
        "throughput: {jobs} MpiJobs by 8 clients on {agents} test agents: created in {:.2} s, all Scheduled after {:.2} s: {:.0} jobs/s{}",
        created.as_secs_f64(),
        elapsed.as_secs_f64(),
        jobs as f64 / elapsed.as_secs_f64(),
        if ok { "" } else { " (NOT all scheduled within 600 s)" }
    );
    let (rss, hwm) = rss_kib(ctl.0.id());
    println!("  controller RSS after it: {} MiB (peak {} MiB)", rss / 1024, hwm / 1024);
    drop(ctl);
    drop(test_agents);
    api.stop();
    drop(offers);

    // 2. Memory with many stored jobs.
    let dir = tempfile::tempdir().expect("tempdir");
    let (api, offers, client) = stack(dir.path()).await;
    let started = Instant::now();
    create_all(&client, "m", stored, 8).await;
    println!("memory: {stored} MpiJobs stored in {:.1} s", started.elapsed().as_secs_f64());
    let ctl = controller(&api.kubeconfig, &offers.url());
    let started = Instant::now();
    let pending = |j: &MpiJob| j.status.as_ref().and_then(|s| s.phase).is_some();
    let ok = until(&client, stored, Duration::from_secs(1200), pending).await;
    let (rss, hwm) = rss_kib(ctl.0.id());
    println!(
        "  controller reconciled them in {:.1} s{}; RSS {} MiB (peak {} MiB)",
        started.elapsed().as_secs_f64(),
        if ok { "" } else { " (NOT all within 1200 s)" },
        rss / 1024,
        hwm / 1024
    );
    drop(ctl);
    api.stop();
    drop(offers);
}
