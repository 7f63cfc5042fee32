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
//!
//! Who reads and writes: a server whose `mpiswarm apiserver --help` lists
//! `--token-auth-file` authorizes every request by RBAC, but lets the admin
//! token's user (group `system:masters`) through before any rule is looked
//! at, so the admin token would not measure what RBAC costs. Such a server
//! is started with a token file (0600) holding the tenant user
//! `bench-tenant` (group `mpiswarm:tenants`); with the admin token the bench
//! creates the CRD and, in the two namespaces it uses (`default` for the
//! reads, `kube-public` for the writes), the Role and RoleBinding that
//! `mpiswarm tenant add` gives a tenant (MpiJobs, their status and logs,
//! events), and then preloads, reads and writes with the tenant's token.
//! A server without the flag (a revision before RBAC) has no authorization
//! and runs as before, everything with the admin token.
//! `MPISWARM_BENCH_USER=admin` makes every server run as the admin, and
//! `MPISWARM_BENCH_ADMIN=name,...` the servers of those names (e.g. one
//! binary twice, as `tenant` and as `admin`, to tell RBAC's share from the
//! rest of a revision's cost). The output names the user each server ran as.

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
/// The namespaces of `JOBS` and `LOAD_JOBS`, where the tenant gets its Role.
const NAMESPACES: [&str; 2] = ["default", "kube-public"];
/// The tenant user (and its group) of a server with RBAC.
const TENANT: &str = "bench-tenant";
const TENANT_GROUP: &str = "mpiswarm:tenants";
/// The Role `mpiswarm tenant add` gives a tenant (stack/src/tenant.rs).
const TENANT_ROLE: &str = "mpiswarm-tenant";

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
    /// The admin token's client (group `system:masters`).
    admin: reqwest::Client,
    /// The client the bench reads and writes with: the tenant's where the
    /// server has RBAC (see the header), else the admin's.
    http: reqwest::Client,
    /// Who `http` is: `bench-tenant` or `admin`.
    user: &'static str,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `binary`'s API server takes `--token-auth-file` (and so
/// authorizes requests by RBAC).
fn has_token_auth_file(binary: &str) -> bool {
    let out = Command::new(binary)
        .args(["apiserver", "--help"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{binary} apiserver --help: {e}"));
    String::from_utf8_lossy(&out.stdout).contains("--token-auth-file")
}

/// A random token: 16 bytes of the kernel's randomness, in hex.
fn random_token() -> String {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)).expect("/dev/urandom");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A file only its owner may read, as a token file should be.
fn write_private(path: &Path, text: &str) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).expect("token file");
    f.write_all(text.as_bytes()).expect("write the token file");
}

fn client(token: &str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {}", token.trim()).parse().expect("header"));
    reqwest::Client::builder().default_headers(headers).build().expect("client")
}

/// Starts `binary` as `mpiswarm apiserver`; with `tenant`, also with a
/// token file holding the tenant user (see the header).
async fn start(binary: &str, tenant: bool) -> Server {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(binary);
    cmd.args(["apiserver", "--listen", "127.0.0.1:0", "--insecure-http", "--data-dir"]).arg(dir.path());
    let tenant_token = tenant.then(|| {
        let token = random_token();
        let file = dir.path().join("tokens.csv");
        write_private(&file, &format!("{token},{TENANT},{TENANT},\"{TENANT_GROUP}\"\n"));
        cmd.arg("--token-auth-file").arg(&file);
        token
    });
    let mut child =
        cmd.stderr(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap_or_else(|e| panic!("{binary} starts: {e}"));
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
    let admin = client(&token);
    let (http, user) = match &tenant_token {
        Some(t) => (client(t), TENANT),
        None => (admin.clone(), "admin"),
    };
    Server { child, base, admin, http, user, _dir: dir }
}

async fn post(s: &Server, path: &str, body: &Value) -> u16 {
    post_as(&s.http, s, path, body).await
}

async fn post_as(http: &reqwest::Client, s: &Server, path: &str, body: &Value) -> u16 {
    http.post(format!("{}{path}", s.base)).json(body).send().await.map(|r| r.status().as_u16()).unwrap_or(0)
}

fn job(name: &str) -> Value {
    let mut j = yaml("examples/pi.yaml");
    j["metadata"] = json!({"name": name});
    j
}

/// The CRD (with the admin token); on a server with RBAC, the tenant's Role
/// and RoleBinding in each namespace the bench uses, as `mpiswarm tenant
/// add` makes them; then the preloaded jobs, as the bench's user.
async fn prepare(s: &Server) {
    assert_eq!(
        post_as(&s.admin, s, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &yaml("crds/mpijob.yaml"))
            .await,
        201
    );
    if s.user == TENANT {
        for ns in NAMESPACES {
            let rbac = format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}");
            let rule = |groups: &[&str], resources: &[&str], verbs: &[&str]| json!({"apiGroups": groups, "resources": resources, "verbs": verbs});
            let role = json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": TENANT_ROLE, "namespace": ns},
                "rules": [
                    rule(&["mpiswarm.io"], &["mpijobs"],
                        &["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]),
                    rule(&["mpiswarm.io"], &["mpijobs/status", "mpijobs/log"], &["get"]),
                    rule(&["", "events.k8s.io"], &["events"], &["get", "list", "watch"]),
                ]
            });
            assert_eq!(post_as(&s.admin, s, &format!("{rbac}/roles"), &role).await, 201, "the tenant's Role in {ns}");
            let binding = json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": format!("{TENANT_ROLE}-{TENANT}"), "namespace": ns},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": TENANT_ROLE},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": TENANT}]
            });
            assert_eq!(
                post_as(&s.admin, s, &format!("{rbac}/rolebindings"), &binding).await,
                201,
                "the tenant's RoleBinding in {ns}"
            );
        }
        // The tenant may read its jobs and nothing cluster-wide.
        let listed = s.http.get(format!("{}{JOBS}", s.base)).send().await.expect("list").status().as_u16();
        assert_eq!(listed, 200, "{TENANT} lists MpiJobs in default");
        let all = s.http.get(format!("{}/apis/mpiswarm.io/v1alpha1/mpijobs", s.base)).send().await.expect("list");
        assert_eq!(all.status().as_u16(), 403, "{TENANT} may not list MpiJobs of every namespace");
    }
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
async fn measure(binary: &str, tenant: bool, secs: u64) -> (Samples, Samples, f64) {
    let s = start(binary, tenant).await;
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
    let as_admin = match std::env::var("MPISWARM_BENCH_USER").as_deref() {
        Ok("admin") => true,
        Ok("tenant") | Err(_) => false,
        Ok(other) => panic!("MPISWARM_BENCH_USER={other:?}: give tenant (the default) or admin"),
    };
    // Each server's user: the tenant where it has RBAC (see the header).
    let admins = std::env::var("MPISWARM_BENCH_ADMIN").unwrap_or_default();
    let admin = |name: &str| as_admin || admins.split(',').any(|n| n == name);
    let tenant: Vec<bool> = servers.iter().map(|(n, b)| !admin(n) && has_token_auth_file(b)).collect();
    let user = |i: usize| {
        if tenant[i] {
            format!("{TENANT} (group {TENANT_GROUP}; RBAC: Role {TENANT_ROLE} by RoleBinding)")
        } else if admin(&servers[i].0) {
            "admin (group system:masters; MPISWARM_BENCH_USER or MPISWARM_BENCH_ADMIN)".to_string()
        } else {
            "admin (no --token-auth-file: no RBAC)".to_string()
        }
    };
    for (i, (name, binary)) in servers.iter().enumerate() {
        eprintln!("{name} ({binary}) runs as {}", user(i));
    }
    let rounds = env_number("MPISWARM_BENCH_ROUNDS", 3);
    let secs = env_number("MPISWARM_BENCH_SECONDS", 5);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let mut results: Vec<(Samples, Samples, Vec<f64>)> = servers.iter().map(|_| Default::default()).collect();
    for round in 1..=rounds {
        for (i, (name, binary)) in servers.iter().enumerate() {
            eprintln!("round {round}/{rounds}: {name} ({binary})");
            let (idle, loaded, rate) = rt.block_on(measure(binary, tenant[i], secs));
            results[i].0.extend(idle);
            results[i].1.extend(loaded);
            results[i].2.push(rate);
        }
    }
    println!(
        "\n{WRITERS} writers creating MpiJobs; reads of {PRELOAD} preloaded MpiJobs; {rounds} rounds x {secs} s per phase"
    );
    for (i, (name, _)) in servers.iter().enumerate() {
        println!("{name} ran as {}", user(i));
    }
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
