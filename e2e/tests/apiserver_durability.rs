//! Durability of the API server as a process (`mpiswarm apiserver`): 8
//! concurrent clients write 1,000 times to it; it is killed with SIGKILL at a
//! random moment, then restarted on the same data
//! directory. Every acknowledged write must be there, resourceVersions must
//! not go backwards, and a watch resumed from the last RV seen before the
//! crash must deliver every later change exactly once.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

const CLIENTS: usize = 8;
const WRITES: usize = 1_000;
const OBJECTS_PER_CLIENT: usize = 20;

struct Proc {
    child: Child,
    base: String,
    http: reqwest::Client,
}

/// Start `mpiswarm apiserver` and read its URL from the line it prints.
async fn spawn(dir: &Path) -> Proc {
    let mut child = Command::new(mpiswarm_e2e::binary::mpiswarm())
        .args(["apiserver", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("server binary starts");
    let stderr = tokio::process::ChildStderr::from_std(child.stderr.take().expect("stderr")).expect("async stderr");
    let mut lines = BufReader::new(stderr).lines();
    let started = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        loop {
            let line =
                lines.next_line().await.expect("read stderr").expect("server printed its address before exiting");
            if let Some(rest) = line.split("listening on ").nth(1) {
                break rest.split(';').next().expect("url").trim().to_string();
            }
        }
    });
    let base = started.await.expect("the server printed its address within 60 s");
    // Keep draining stderr so the server never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = reqwest::Certificate::from_pem(&std::fs::read(dir.join("ca.crt")).expect("ca.crt")).expect("ca pem");
    let token = std::fs::read_to_string(dir.join("token")).expect("token");
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {}", token.trim()).parse().expect("header"));
    let http = reqwest::Client::builder().add_root_certificate(ca).default_headers(headers).build().expect("client");
    Proc { child, base, http }
}

fn rv_of(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"].as_str().and_then(|s| s.parse().ok()).expect("resourceVersion")
}

/// The kill point's seed: `MPISWARM_DURABILITY_SEED` replays a failed run,
/// otherwise a fresh random one. Printed either way.
fn seed() -> u64 {
    let seed = std::env::var("MPISWARM_DURABILITY_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        let b = uuid::Uuid::new_v4().into_bytes();
        u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    });
    eprintln!("durability: kill seed {seed} (replay with MPISWARM_DURABILITY_SEED={seed})");
    seed
}

/// Every wait of this test ends by this long after it starts.
const DEADLINE: std::time::Duration = std::time::Duration::from_secs(240);

#[derive(Default)]
struct Acked {
    /// configmap name -> highest acknowledged value of data.i
    latest: BTreeMap<String, u64>,
    rvs: BTreeSet<u64>,
    count: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_writes_survive_kill_9_and_watches_resume_exactly_once() {
    tokio::time::timeout(DEADLINE, kill_and_resume()).await.expect("the durability test finishes within its deadline");
}

async fn kill_and_resume() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = spawn(dir.path()).await;
    let cms = format!("{}/api/v1/namespaces/default/configmaps", server.base);

    let start_rv = rv_of(&server.http.get(&cms).send().await.expect("list").json::<Value>().await.expect("json"));
    // A watcher from the start, recording what it saw before the crash.
    let seen: Arc<Mutex<Vec<(u64, String)>>> = Arc::default();
    let watch = {
        // Connected before any client writes, so the kill cannot come first.
        let resp = server.http.get(format!("{cms}?watch=true&resourceVersion={start_rv}")).send().await.expect("watch");
        assert_eq!(resp.status(), 200);
        let seen = seen.clone();
        tokio::spawn(async move {
            let mut body = resp.bytes_stream();
            let mut buf = Vec::new();
            while let Some(Ok(chunk)) = body.next().await {
                buf.extend_from_slice(&chunk);
                while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=pos).collect();
                    let ev: Value = serde_json::from_slice(&line).expect("event json");
                    seen.lock()
                        .expect("lock")
                        .push((rv_of(&ev["object"]), ev["type"].as_str().unwrap_or_default().to_string()));
                }
            }
        })
    };

    let acked: Arc<Mutex<Acked>> = Arc::default();
    let progress = Arc::new(tokio::sync::Notify::new());
    // Before the kill every write must succeed; after it, failures are expected.
    let killed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let pre_kill_errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let kill_after = 100 + (seed() % 800) as usize;
    let mut clients = vec![];
    for c in 0..CLIENTS {
        let (http, cms, acked, progress) = (server.http.clone(), cms.clone(), acked.clone(), progress.clone());
        let (killed, pre_kill_errors) = (killed.clone(), pre_kill_errors.clone());
        clients.push(tokio::spawn(async move {
            let fail = |what: String| {
                if !killed.load(std::sync::atomic::Ordering::SeqCst) {
                    pre_kill_errors.lock().expect("lock").push(what);
                }
                progress.notify_one();
            };
            for i in 0..WRITES / CLIENTS {
                let name = format!("c{c}-{}", i % OBJECTS_PER_CLIENT);
                let resp = if i < OBJECTS_PER_CLIENT {
                    http.post(&cms).json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"i": i.to_string()}})).send().await
                } else {
                    http.patch(format!("{cms}/{name}"))
                        .header("Content-Type", "application/merge-patch+json")
                        .body(json!({"data": {"i": i.to_string()}}).to_string())
                        .send()
                        .await
                };
                let resp = match resp {
                    Ok(resp) => resp,
                    Err(e) => return fail(format!("{name}: {e}")),
                };
                if !resp.status().is_success() {
                    return fail(format!("{name}: HTTP {}", resp.status()));
                }
                let Ok(obj) = resp.json::<Value>().await else { return fail(format!("{name}: unreadable body")) };
                let mut a = acked.lock().expect("lock");
                a.latest.insert(name, i as u64);
                a.rvs.insert(rv_of(&obj));
                a.count += 1;
                drop(a);
                progress.notify_one();
            }
        }));
    }
    let reached = tokio::time::timeout(std::time::Duration::from_secs(120), async {
        while acked.lock().expect("lock").count < kill_after && pre_kill_errors.lock().expect("lock").is_empty() {
            progress.notified().await;
        }
    })
    .await;
    killed.store(true, std::sync::atomic::Ordering::SeqCst);
    server.child.kill().expect("SIGKILL");
    let errors = std::mem::take(&mut *pre_kill_errors.lock().expect("lock"));
    assert!(errors.is_empty(), "writes failed before the kill: {errors:?}");
    assert!(reached.is_ok(), "{kill_after} writes were not acknowledged within 120 s");
    server.child.wait().expect("reaped");
    for c in clients {
        c.await.expect("client task");
    }
    watch.await.expect("watch task");

    let acked = std::mem::take(&mut *acked.lock().expect("lock"));
    let seen = std::mem::take(&mut *seen.lock().expect("lock"));
    assert!(acked.count >= kill_after, "acked {} before the kill at {kill_after}", acked.count);

    let server = spawn(dir.path()).await;
    let cms = format!("{}/api/v1/namespaces/default/configmaps", server.base);
    let list: Value = server.http.get(&cms).send().await.expect("list").json().await.expect("json");
    let list_rv = rv_of(&list);
    let max_acked = *acked.rvs.iter().max().expect("some writes");
    assert!(list_rv >= max_acked, "resourceVersion went backwards: {list_rv} < {max_acked}");
    let stored: BTreeMap<String, u64> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().expect("name").to_string(),
                o["data"]["i"].as_str().expect("i").parse().expect("n"),
            )
        })
        .collect();
    for (name, i) in &acked.latest {
        let got = stored.get(name).unwrap_or_else(|| panic!("acknowledged object {name} lost"));
        assert!(got >= i, "{name}: acknowledged data.i={i} but stored {got}");
    }

    // Seen before the crash: strictly increasing, all after the start.
    let rvs: Vec<u64> = seen.iter().map(|(rv, _)| *rv).collect();
    assert!(rvs.windows(2).all(|w| w[0] < w[1]), "watch events out of order");
    let last_seen = rvs.last().copied().unwrap_or(start_rv);

    // A marker write after the restart has a higher RV than anything before.
    let marker: Value = server
        .http
        .post(&cms)
        .json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "marker"}}))
        .send()
        .await
        .expect("marker")
        .json()
        .await
        .expect("json");
    let marker_rv = rv_of(&marker);
    assert!(marker_rv > list_rv.max(max_acked));

    // Resume from the last RV seen: everything after it, once, up to the marker.
    let resp = server.http.get(format!("{cms}?watch=true&resourceVersion={last_seen}")).send().await.expect("resume");
    let mut body = resp.bytes_stream();
    let mut buf = Vec::new();
    let mut resumed = vec![];
    'outer: while let Some(chunk) = body.next().await {
        buf.extend_from_slice(&chunk.expect("chunk"));
        while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=pos).collect();
            let ev: Value = serde_json::from_slice(&line).expect("event");
            assert_ne!(ev["type"], "ERROR", "resume failed: {ev}");
            let rv = rv_of(&ev["object"]);
            resumed.push(rv);
            if rv == marker_rv {
                break 'outer;
            }
        }
    }
    assert!(resumed.windows(2).all(|w| w[0] < w[1]), "resumed events out of order or duplicated");
    assert!(resumed.first().is_none_or(|r| *r > last_seen), "resumed watch repeated an event seen before the crash");
    // Nothing missed: RVs are dense (one per committed write), so the seen
    // and resumed events together are exactly start_rv+1 ..= marker_rv.
    let all: Vec<u64> = rvs.iter().chain(resumed.iter()).copied().collect();
    let expected: Vec<u64> = (start_rv + 1..=marker_rv).collect();
    assert_eq!(all, expected, "the watch missed or duplicated changes across the crash");
    for rv in &acked.rvs {
        assert!(all.contains(rv), "acknowledged write at RV {rv} never reached a watcher");
    }
    drop(server);
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
