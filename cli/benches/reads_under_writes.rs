//! Do reads wait behind writes? Get and list latency (p50, p99) of a server
//! process while 8 clients write, against the same reads when it is idle.
//! Several `mpiswarm` binaries (e.g. two revisions, built by
//! `cli/benches/compare-apiserver.sh`), each run as `mpiswarm apiserver`, are measured in turn, round after round,
//! so that both see the same machine load; each round starts a fresh server.
//!
//! `MPISWARM_BENCH_SERVERS=base=/path/a,head=/path/b cargo bench -p
//! mpiswarm --bench reads_under_writes` (without the variable it measures
//! this revision's own `mpiswarm apiserver`). `MPISWARM_BENCH_ROUNDS`
//! (default 3) and `MPISWARM_BENCH_SECONDS` (per phase, default 5) size it.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

const WRITERS: usize = 8;
const PRELOAD: usize = 100;
const JOBS: &str = "/apis/mpiswarm.io/v1alpha1/namespaces/default/mpijobs";
const LOAD_JOBS: &str = "/apis/mpiswarm.io/v1alpha1/namespaces/kube-public/mpijobs";

fn repo(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("root").join(path)
}

fn yaml(path: &str) -> Value {
    serde_yaml::from_str(&std::fs::read_to_string(repo(path)).expect("read")).expect("yaml")
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

struct Server {
    child: Child,
    base: String,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start(binary: &str) -> Server {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(binary)
        .args(["apiserver", "--listen", "127.0.0.1:0", "--insecure-http", "--data-dir"])
        .arg(dir.path())
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{binary} starts: {e}"));
    let stderr = tokio::process::ChildStderr::from_std(child.stderr.take().expect("stderr")).expect("async stderr");
    let mut lines = BufReader::new(stderr).lines();
    let started = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let line = lines.next_line().await.expect("read stderr").expect("server printed its address");
            if let Some(rest) = line.split("listening on ").nth(1) {
                break rest.split(';').next().expect("url").trim().to_string();
            }
        }
    });
    let base = started.await.expect("the server starts within 60 s");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let token = std::fs::read_to_string(dir.path().join("token")).expect("token");
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {}", token.trim()).parse().expect("header"));
    let http = reqwest::Client::builder().default_headers(headers).build().expect("client");
    Server { child, base, http, _dir: dir }
}

async fn post(s: &Server, path: &str, body: &Value) -> u16 {
    s.http.post(format!("{}{path}", s.base)).json(body).send().await.map(|r| r.status().as_u16()).unwrap_or(0)
}

fn job(name: &str) -> Value {
    let mut j = yaml("examples/pi.yaml");
    j["metadata"] = json!({"name": name});
    j
}

async fn prepare(s: &Server) {
    assert_eq!(
        post(s, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &yaml("crds/mpijob.yaml")).await,
        201
    );
    for i in 0..PRELOAD {
        assert_eq!(post(s, JOBS, &job(&format!("pre-{i:03}"))).await, 201, "preload");
    }
}

/// Latencies in microseconds.
#[derive(Default, Clone)]
struct Samples {
    get: Vec<u64>,
    list: Vec<u64>,
}

impl Samples {
    fn extend(&mut self, other: Samples) {
        self.get.extend(other.get);
        self.list.extend(other.list);
    }
}

/// Reads for `secs` on a runtime of its own (one thread), so the writers'
/// client work does not delay the reader's own polling: nine gets, then one
/// list of the 100 preloaded jobs, over and over.
fn read_for(base: String, http: reqwest::Client, secs: u64) -> Samples {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("reader runtime");
        rt.block_on(async {
            let mut out = Samples::default();
            let until = Instant::now() + Duration::from_secs(secs);
            let mut n = 0u64;
            while Instant::now() < until {
                let list = n % 10 == 9;
                let url = if list { format!("{base}{JOBS}") } else { format!("{base}{JOBS}/pre-{:03}", n % 100) };
                let t = Instant::now();
                let resp = http.get(url).send().await.expect("read");
                assert_eq!(resp.status(), 200);
                resp.bytes().await.expect("body");
                let us = t.elapsed().as_micros() as u64;
                if list {
                    out.list.push(us)
                } else {
                    out.get.push(us)
                }
                n += 1;
            }
            out
        })
    })
    .join()
    .expect("reader thread")
}

/// Idle reads, then the same reads while 8 clients create MpiJobs; returns
/// (idle, loaded, writes per second).
async fn measure(binary: &str, secs: u64) -> (Samples, Samples, f64) {
    let s = start(binary).await;
    prepare(&s).await;
    let (base, http) = (s.base.clone(), s.http.clone());
    let idle = tokio::task::spawn_blocking(move || read_for(base, http, secs)).await.expect("idle reads");
    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicUsize::new(0));
    let s = Arc::new(s);
    let mut writers = vec![];
    for w in 0..WRITERS {
        let (s, stop, writes) = (s.clone(), stop.clone(), writes.clone());
        writers.push(tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                if post(&s, LOAD_JOBS, &job(&format!("w{w}-{i}"))).await == 201 {
                    writes.fetch_add(1, Ordering::Relaxed);
                }
                i += 1;
            }
        }));
    }
    let started = Instant::now();
    let (base, http) = (s.base.clone(), s.http.clone());
    let loaded = tokio::task::spawn_blocking(move || read_for(base, http, secs)).await.expect("loaded reads");
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.expect("writer");
    }
    let rate = writes.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    (idle, loaded, rate)
}

fn percentile(v: &mut [u64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_unstable();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i] as f64 / 1000.0
}

fn main() {
    // `cargo bench` passes harness flags such as `--bench`; nothing to parse.
    let servers: Vec<(String, String)> = match std::env::var("MPISWARM_BENCH_SERVERS") {
        Ok(list) => {
            list.split(',').filter_map(|p| p.split_once('=')).map(|(n, b)| (n.to_string(), b.to_string())).collect()
        }
        Err(_) => vec![("this".into(), env!("CARGO_BIN_EXE_mpiswarm").into())],
    };
    let rounds = env_number("MPISWARM_BENCH_ROUNDS", 3);
    let secs = env_number("MPISWARM_BENCH_SECONDS", 5);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let mut results: Vec<(Samples, Samples, Vec<f64>)> = servers.iter().map(|_| Default::default()).collect();
    for round in 1..=rounds {
        for (i, (name, binary)) in servers.iter().enumerate() {
            eprintln!("round {round}/{rounds}: {name} ({binary})");
            let (idle, loaded, rate) = rt.block_on(measure(binary, secs));
            results[i].0.extend(idle);
            results[i].1.extend(loaded);
            results[i].2.push(rate);
        }
    }
    println!(
        "\n{WRITERS} writers creating MpiJobs; reads of {PRELOAD} preloaded MpiJobs; {rounds} rounds x {secs} s per phase"
    );
    println!(
        "| server | get p50 idle | get p50 loaded | get p99 idle | get p99 loaded | list p50 idle | list p50 loaded | list p99 idle | list p99 loaded | writes/s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for ((name, _), (mut idle, mut loaded, rates)) in servers.iter().zip(results) {
        let rate = rates.iter().sum::<f64>() / rates.len().max(1) as f64;
        println!(
            "| {name} | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {rate:.0} |",
            percentile(&mut idle.get, 0.5),
            percentile(&mut loaded.get, 0.5),
            percentile(&mut idle.get, 0.99),
            percentile(&mut loaded.get, 0.99),
            percentile(&mut idle.list, 0.5),
            percentile(&mut loaded.list, 0.5),
            percentile(&mut idle.list, 0.99),
            percentile(&mut loaded.list, 0.99),
        );
    }
}
