//! Controller benchmarks (issue 9), run with `cargo bench -p mpiswarm --bench controller`
//! (a release build). Not a test: it prints figures, it asserts nothing.
//!
//! 1. Throughput: `JOBS` MpiJobs (default 1,000) created by 8 concurrent
//!    clients against 100 test agents (no containers) with room for twice
//!    the jobs; timed from the first create to the last job's `Scheduled`
//!    condition.
//! 2. Memory: the controller's resident set (VmRSS and its peak VmHWM) once it
//!    has reconciled `STORED` MpiJobs (default 10,000) that all wait for
//!    resources (no agent).
//!
//! The API server and the offer layer run in this process; the controller is
//! the real `mpiswarm controller` process, so its memory is its own.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use mpiswarm_crds::{ConditionType, MpiJob, Phase};

/// The allocator of the `mpiswarm` binary (src/main.rs), for the API
/// server and the offer layer this process runs as `mpiswarm up` does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
        // The whole process group: a profiler's wrapper and the controller under it.
        let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", self.0.id())]).status();
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The controller process; `MPISWARM_BENCH_WRAP` (for example `heaptrack` or
/// `perf record -g --`) runs it under a profiler, split at whitespace.
fn controller(kubeconfig: &Path, master: &str) -> Process {
    let wrap = std::env::var("MPISWARM_BENCH_WRAP").unwrap_or_default();
    let mut words = wrap.split_whitespace().chain(std::iter::once(env!("CARGO_BIN_EXE_mpiswarm")));
    let program = words.next().unwrap_or(env!("CARGO_BIN_EXE_mpiswarm"));
    let child = Command::new(program)
        .args(words)
        .args(["controller", "--master", master, "--listen", "127.0.0.1:0", "--identity", "bench"])
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("MPISWARM_LOG", "warn")
        .stdout(Stdio::null())
        .process_group(0)
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

/// What one benchmark job holds: its rank (0.1 cpu, 32 MiB) and its
/// launcher (the policy's default, 0.1 cpu and 64 MiB).
const JOB_CPUS: f64 = 0.2;
const JOB_MEM_MIB: f64 = 96.0;

/// Each of `agents` test agents' capacity (cpus, MiB): room for twice `jobs`
/// spread evenly, and never less than 4 cpus and 8 GiB. With fixed agents
/// the cluster would hold a fixed number of jobs (2,000 at 100 x 4 cpus), and
/// beyond it the benchmark would time the wait for capacity that never comes.
fn agent_size(jobs: usize, agents: usize) -> (f64, f64) {
    let per_agent = 2.0 * jobs as f64 / agents.max(1) as f64;
    ((per_agent * JOB_CPUS).ceil().max(4.0), (per_agent * JOB_MEM_MIB).ceil().max(8192.0))
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

/// Counts the jobs that satisfy `pred` from a watch that starts before the
/// first create, and returns once `n` do (or `limit` passed): a list of
/// every job four times a second cost the benchmark's process (the API
/// server and the offer layer under test) more CPU than the controller
/// itself at a few thousand jobs.
fn watch_until(
    client: &kube::Client,
    n: usize,
    limit: Duration,
    pred: impl Fn(&MpiJob) -> bool + Copy + Send + Sync + 'static,
) -> tokio::task::JoinHandle<bool> {
    use kube::api::{WatchEvent, WatchParams};
    let jobs: Api<MpiJob> = Api::namespaced(client.clone(), "default");
    tokio::spawn(async move {
        let counting = async {
            // Those that already satisfy `pred` count; the watch goes on from the list.
            let listed = jobs.list(&ListParams::default()).await.expect("list");
            let mut rv = listed.metadata.resource_version.unwrap_or_default();
            let mut done: std::collections::HashSet<_> =
                listed.items.iter().filter(|j| pred(j)).map(|j| j.metadata.uid.clone().unwrap_or_default()).collect();
            while done.len() < n {
                // A watch ends when the server times it out; the next starts where it stopped.
                let mut stream = std::pin::pin!(jobs.watch(&WatchParams::default(), &rv).await.expect("watch"));
                while let Some(event) = stream.next().await {
                    let job = match event.expect("watch event") {
                        WatchEvent::Added(j) | WatchEvent::Modified(j) => j,
                        WatchEvent::Bookmark(b) => {
                            rv = b.metadata.resource_version;
                            continue;
                        }
                        WatchEvent::Deleted(_) => continue,
                        // The server no longer holds the changes since `rv`
                        // (410 Gone): count from a fresh list, as a
                        // reflector does, and watch on from its version.
                        WatchEvent::Error(e) if e.code == 410 => {
                            let listed = jobs.list(&ListParams::default()).await.expect("re-list after 410 Gone");
                            for job in listed.items.iter().filter(|j| pred(j)) {
                                done.insert(job.metadata.uid.clone().unwrap_or_default());
                            }
                            rv = listed.metadata.resource_version.unwrap_or_default();
                            break;
                        }
                        WatchEvent::Error(e) => panic!("watch: {e:?}"),
                    };
                    rv = job.metadata.resource_version.clone().unwrap_or_default();
                    if pred(&job) {
                        done.insert(job.metadata.uid.clone().unwrap_or_default());
                    }
                    if done.len() >= n {
                        break;
                    }
                }
            }
        };
        tokio::time::timeout(limit, counting).await.is_ok()
    })
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
    let (agent_cpus, agent_mem) = agent_size(jobs, agents);
    let mut test_agents = mpiswarm_testkit::TestAgents::uniform(&offers.url(), agents, agent_cpus, agent_mem);
    test_agents.subscribed().await;
    let ctl = controller(&api.kubeconfig, &offers.url());
    let scheduled = |j: &MpiJob| j.status.as_ref().is_some_and(|s| s.is_true(ConditionType::Scheduled));
    let all_scheduled = watch_until(&client, jobs, Duration::from_secs(600), scheduled);
    let started = Instant::now();
    create_all(&client, "t", jobs, 8).await;
    let created = started.elapsed();
    let ok = all_scheduled.await.expect("the watch task");
    let elapsed = started.elapsed();
    let not_all = if ok {
        String::new()
    } else {
        format!(" (NOT all scheduled within 600 s: {} were)", count(&client, scheduled).await)
    };
    println!(
        "throughput: {jobs} MpiJobs by 8 clients on {agents} test agents of {agent_cpus} cpus and {agent_mem} MiB: \
         created in {:.2} s, all Scheduled after {:.2} s: {:.0} jobs/s{not_all}",
        created.as_secs_f64(),
        elapsed.as_secs_f64(),
        jobs as f64 / elapsed.as_secs_f64(),
    );
    // The memory of running gangs: once every job's tasks run (the test
    // agents report them RUNNING) and the controller has written `Running`.
    let running = |j: &MpiJob| j.status.as_ref().and_then(|s| s.phase) == Some(Phase::Running);
    let started = Instant::now();
    let ok = watch_until(&client, jobs, Duration::from_secs(600), running).await.expect("the watch task");
    let (rss, hwm) = rss_kib(ctl.0.id());
    println!(
        "  {jobs} running {:.1} s later{}: controller RSS {} MiB (peak {} MiB)",
        started.elapsed().as_secs_f64(),
        if ok { "" } else { " (NOT all within 600 s)" },
        rss / 1024,
        hwm / 1024
    );
    if let Some(hold) = std::env::var("MPISWARM_BENCH_HOLD").ok().and_then(|v| v.parse().ok()) {
        println!(
            "  holding {hold} s (MPISWARM_BENCH_HOLD): controller pid {}, kubeconfig {}",
            ctl.0.id(),
            api.kubeconfig.display()
        );
        tokio::time::sleep(Duration::from_secs(hold)).await;
    }
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
    let pending = |j: &MpiJob| j.status.as_ref().and_then(|s| s.phase).is_some();
    let all_reconciled = watch_until(&client, stored, Duration::from_secs(1200), pending);
    let ctl = controller(&api.kubeconfig, &offers.url());
    let started = Instant::now();
    let ok = all_reconciled.await.expect("the watch task");
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
