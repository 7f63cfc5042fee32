//! Benchmarks of the embedded API server over real HTTP on loopback, with the
//! project's MpiJob CRD (schema defaults and CEL rules run on every write):
//! - list of 10,000 MpiJobs (JSON and kubectl's Table form);
//! - create throughput, one client and 8 concurrent clients;
//! - watch fan-out: one write delivered to 100 concurrent watchers.
//!
//! Run: `cargo bench -p mpiswarm-apiserver --bench apiserver`

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt;
use mpiswarm_apiserver::api::{Target, WriteOpts};
use mpiswarm_apiserver::query::Query;
use mpiswarm_apiserver::{ApiserverArgs, Running, start};
use serde_json::{Value, json};

const JOBS: &str = "/apis/mpiswarm.io/v1alpha1/namespaces/default/mpijobs";

fn repo(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("root").join(path)
}

fn yaml(path: &str) -> Value {
    serde_yaml::from_str(&std::fs::read_to_string(repo(path)).expect("read")).expect("yaml")
}

struct Bench {
    rt: tokio::runtime::Runtime,
    running: Running,
    http: reqwest::Client,
    base: String,
    job: Value,
    _dir: tempfile::TempDir,
}

fn setup(preload: usize) -> Bench {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut args = ApiserverArgs::for_dir(dir.path());
    args.insecure_http = true;
    let running = rt.block_on(start(args)).expect("server");
    let api = running.api.clone();
    let q = Query::default();
    let opts = WriteOpts::new(&q, "bench");
    let crd_rt = api.registry.find("apiextensions.k8s.io", "v1", "customresourcedefinitions").expect("crd type");
    rt.block_on(api.create(
        &Target { rt: crd_rt, namespace: None, name: None, status: false },
        yaml("crds/mpijob.yaml"),
        &opts,
    ))
    .expect("crd");
    let jobs = api.registry.find("mpiswarm.io", "v1alpha1", "mpijobs").expect("mpijobs served");
    let job = yaml("examples/pi.yaml");
    let target = Target { rt: jobs, namespace: Some("default".into()), name: None, status: false };
    for i in 0..preload {
        let mut j = job.clone();
        j["metadata"]["name"] = json!(format!("pre-{i:05}"));
        rt.block_on(api.create(&target, j, &opts)).expect("preload");
    }
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {}", running.token).parse().expect("header"));
    let http = reqwest::Client::builder().default_headers(headers).build().expect("client");
    let base = running.url.clone();
    Bench { rt, running, http, base, job, _dir: dir }
}

fn list(c: &mut Criterion) {
    let b = setup(10_000);
    let mut g = c.benchmark_group("list_10000_mpijobs");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Elements(10_000));
    for (name, accept) in [("json", "application/json"), ("table", "application/json;as=Table;v=v1;g=meta.k8s.io")] {
        g.bench_function(name, |bench| {
            bench.iter(|| {
                b.rt.block_on(async {
                    let body = b
                        .http
                        .get(format!("{}{JOBS}", b.base))
                        .header("Accept", accept)
                        .send()
                        .await
                        .expect("list")
                        .bytes()
                        .await
                        .expect("body");
                    assert!(body.len() > 1_000_000);
                })
            })
        });
    }
    g.finish();
    drop(b.running);
}

fn create(c: &mut Criterion) {
    let b = setup(0);
    let counter = Arc::new(AtomicUsize::new(0));
    let mut g = c.benchmark_group("create_mpijob");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    for clients in [1usize, 8] {
        g.throughput(Throughput::Elements(clients as u64));
        g.bench_function(format!("{clients}_clients"), |bench| {
            bench.iter(|| {
                b.rt.block_on(async {
                    let mut tasks = vec![];
                    for _ in 0..clients {
                        let (http, url, mut job) = (b.http.clone(), format!("{}{JOBS}", b.base), b.job.clone());
                        job["metadata"]["name"] = json!(format!("job-{}", counter.fetch_add(1, Ordering::Relaxed)));
                        tasks.push(tokio::spawn(async move {
                            let r = http.post(url).json(&job).send().await.expect("create");
                            assert_eq!(r.status(), 201);
                        }));
                    }
                    for t in tasks {
                        t.await.expect("task");
                    }
                })
            })
        });
    }
    g.finish();
}

fn watch_fan_out(c: &mut Criterion) {
    const WATCHERS: usize = 100;
    let b = setup(1);
    let received = Arc::new(AtomicUsize::new(0));
    let notify = Arc::new(tokio::sync::Notify::new());
    let rv = b.running.api.store.current_rv();
    for _ in 0..WATCHERS {
        let (http, url, received, notify) = (
            b.http.clone(),
            format!("{}{JOBS}?watch=true&resourceVersion={rv}", b.base),
            received.clone(),
            notify.clone(),
        );
        b.rt.spawn(async move {
            let mut body = http.get(url).send().await.expect("watch").bytes_stream();
            while let Some(Ok(chunk)) = body.next().await {
                let events = chunk.iter().filter(|b| **b == b'\n').count();
                if received.fetch_add(events, Ordering::SeqCst) + events >= WATCHERS {
                    notify.notify_one();
                }
            }
        });
    }
    let mut g = c.benchmark_group("watch_fan_out");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Elements(WATCHERS as u64));
    let n = AtomicUsize::new(0);
    g.bench_function("1_write_to_100_watchers", |bench| {
        bench.iter_custom(|iters| {
            b.rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    received.store(0, Ordering::SeqCst);
                    let size = 1 + n.fetch_add(1, Ordering::Relaxed) % 50;
                    let started = Instant::now();
                    let r = b
                        .http
                        .patch(format!("{}{JOBS}/pre-00000", b.base))
                        .header("Content-Type", "application/merge-patch+json")
                        .body(json!({"metadata": {"labels": {"n": size.to_string()}}}).to_string())
                        .send()
                        .await
                        .expect("patch");
                    assert_eq!(r.status(), 200);
                    while received.load(Ordering::SeqCst) < WATCHERS {
                        notify.notified().await;
                    }
                    total += started.elapsed();
                }
                total
            })
        })
    });
    g.finish();
}

criterion_group!(benches, list, create, watch_fan_out);
criterion_main!(benches);
