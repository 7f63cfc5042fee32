//! The shipped stack file runs the agents. On `mpiswarm up --nodes 3`, used
//! for its nodes (its own one-process stack is stopped once ready), an API
//! server (on the same data dir, so kubectl works as before), an offer layer
//! and a controller run on this machine, the offer layer listening on the
//! nodes' bridge gateway with TLS and credentials (a test PKI). `docker stack
//! deploy` of `manifests/swarm/agents-stack.yaml` inside the manager node,
//! with the PKI's files as Docker secrets, runs one agent per node as a Swarm
//! service; they register over TLS, and an MpiJob spread over the three nodes
//! runs through them to `Succeeded`. The agents are the image of this very
//! binary (`images build --mpiswarm`, cached), which `up` loads into every
//! node. Needs the images of `make images` (rank and node).
//!
//!   cargo test -p mpiswarm-e2e --features mpiswarm-testkit/engine --test stack

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mpiswarm_e2e::{Cluster, Job, images, runner, wait};
use mpiswarm_testkit::TestPki;

const PRINCIPAL: &str = "mpiswarm-agent";
const SECRET: &str = "stack-test-secret";
/// The name the stack is deployed under (its service is `mpiswarm_agent`).
const STACK: &str = "mpiswarm";
/// The external secrets the stack file names.
const SECRETS: [&str; 5] = [
    "mpiswarm-ca.crt",
    "mpiswarm-agent-secret",
    "mpiswarm-agent-tls.crt",
    "mpiswarm-agent-tls.key",
    "mpiswarm-agent-readers.json",
];

fn main() {
    runner::run(
        "stack",
        || {
            images::build_mpiswarm();
            // The stack deployment runs mpiswarm's own image on the nodes.
            let mut cluster = Cluster::up(3, 2.0, &["--node-images", "all"]);
            cluster.stop_up();
            cluster
        },
        &[("the_shipped_stack_file_runs_the_agents_over_tls_and_a_job_runs_through_them", stack_file_runs_the_agents)],
    )
}

/// The components this test runs on this machine, each logging to
/// DATA/<name>.log; killed (and reaped) when dropped, also on failure.
struct Components<'a> {
    dir: &'a Path,
    running: Vec<(String, Child)>,
}

impl Components<'_> {
    fn spawn(&mut self, name: &str, args: &[&str]) {
        let log = std::fs::File::create(self.dir.join(format!("{name}.log"))).expect("a log file");
        let child = Command::new(mpiswarm_e2e::binary::mpiswarm())
            .args(args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("mpiswarm {name} starts: {e}"));
        self.running.push((name.to_owned(), child));
    }

    /// Fails naming a component that exited, with the end of its log.
    fn alive(&mut self) {
        for (name, child) in &mut self.running {
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(self.dir.join(format!("{name}.log"))).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(20).collect();
                panic!("mpiswarm {name} exited ({status}):\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
            }
        }
    }
}

impl Drop for Components<'_> {
    fn drop(&mut self) {
        for (_, child) in &mut self.running {
            let _killed = child.kill();
            let _reaped = child.wait();
        }
    }
}

/// A free port on `ip` (bound and released; the offer layer takes it next).
fn free_port(ip: &str) -> u16 {
    let l = std::net::TcpListener::bind((ip, 0)).expect("a free port on the gateway address");
    l.local_addr().expect("bound").port()
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

fn stack_file_runs_the_agents(cluster: &Cluster) {
    let dir: PathBuf = cluster.dir().to_owned();
    let manager = cluster.manager();
    let images = cluster.node_docker(manager, &["image", "ls", "--format", "{{.Repository}}:{{.Tag}}"]);
    assert!(images.lines().any(|l| l == images::MPISWARM), "up loaded {} into the nodes: {images}", images::MPISWARM);

    // What the agents talk to, on this machine: the offer layer on the
    // nodes' gateway with TLS and credentials, the controller trusting it.
    let gateway = cluster.gateway();
    let pki = TestPki::for_hosts(&[&gateway]);
    let credentials = pki.credentials_file(PRINCIPAL, SECRET);
    let credential = pki.secret_file("controller-credential", &format!("{PRINCIPAL} {SECRET}"));
    let mut components = Components { dir: &dir, running: Vec::new() };
    // The API server of `up`'s data dir again: its store holds the CRD and
    // it writes DATA/kubeconfig anew, so the cluster's kubectl reaches it.
    let kubeconfig = cluster.kubeconfig();
    std::fs::remove_file(&kubeconfig).expect("up's kubeconfig");
    components.spawn("apiserver", &["apiserver", "--listen", "127.0.0.1:0", "--data-dir", path(&dir)]);
    wait::until(Duration::from_secs(60), "the API server serves MpiJobs", || {
        components.alive();
        let out = cluster.kubectl_with(&["get", "mpijobs"], None);
        if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
    });
    let port = free_port(&gateway);
    let master = format!("https://{gateway}:{port}");
    let offers_dir = dir.join("stack-offers");
    let listen = format!("{gateway}:{port}");
    components.spawn(
        "offers",
        &[
            "offers",
            "--listen",
            &listen,
            "--data-dir",
            path(&offers_dir),
            "--credentials",
            path(&credentials),
            "--tls-cert",
            path(&pki.cert_file),
            "--tls-key",
            path(&pki.key_file),
        ],
    );
    components.spawn(
        "controller",
        &[
            "controller",
            "--master",
            &master,
            "--listen",
            "127.0.0.1:0",
            "--kubeconfig",
            path(&kubeconfig),
            "--master-credentials",
            path(&credential),
            "--ca-file",
            path(&pki.ca_file),
        ],
    );

    // The secrets the stack file names, from the test PKI, in the swarm;
    // the controller's principal (the agents' own here) reads the agents'
    // /state and /files.
    let agent_secret = pki.secret_file("agent-secret", SECRET);
    let files = [&pki.ca_file, &agent_secret, &pki.cert_file, &pki.key_file, &credentials];
    for (name, file) in SECRETS.iter().zip(files) {
        let text = std::fs::read_to_string(file).expect("a PKI file");
        let out = cluster.exec_with(manager, &[], &["docker", "secret", "create", name, "-"], Some(&text));
        assert!(out.status.success(), "docker secret create {name}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let stack_file = std::fs::read_to_string(mpiswarm_e2e::repo().join("manifests/swarm/agents-stack.yaml"))
        .expect("manifests/swarm/agents-stack.yaml");
    let copied = cluster.exec_with(manager, &[], &["sh", "-c", "cat > /agents-stack.yaml"], Some(&stack_file));
    assert!(
        copied.status.success(),
        "the stack file into {}: {}",
        manager.container,
        String::from_utf8_lossy(&copied.stderr)
    );
    let master_env = format!("MPISWARM_MASTER={master}");
    let deploy = ["docker", "stack", "deploy", "-c", "/agents-stack.yaml", STACK];
    let deployed = cluster.exec_with(manager, &[&master_env, "MPISWARM_NODES=3"], &deploy, None);
    assert!(deployed.status.success(), "docker stack deploy: {}", String::from_utf8_lossy(&deployed.stderr));
    let removed = RemoveStack { cluster };

    // Three agents, Swarm services on the manager, register over TLS.
    let state = || -> Result<serde_json::Value, String> {
        let mut curl = Command::new("curl");
        curl.args(["-sf", "--cacert", path(&pki.ca_file), "-u", &format!("{PRINCIPAL}:{SECRET}")])
            .arg(format!("{master}/master/state"))
            .stdin(Stdio::null());
        let out = mpiswarm_testkit::output_within(curl, None, Duration::from_secs(30));
        serde_json::from_slice(&out.stdout).map_err(|e| format!("/master/state over TLS ({}): {e}", out.status))
    };
    let agents = wait::until(Duration::from_secs(180), "three agents registered", || {
        components.alive();
        let state = state()?;
        let mut hosts: Vec<String> = state["slaves"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["active"] == true)
            .filter_map(|a| a["hostname"].as_str().map(str::to_owned))
            .collect();
        hosts.sort();
        if hosts.len() == 3 { Ok(hosts) } else { Err(format!("agents: {}", state["slaves"])) }
    });
    assert_eq!(agents, ["node1", "node2", "node3"], "one agent per node, each serving its own");
    let service = format!("{STACK}_agent");
    let format = "{{.Name}} {{.Node}} {{.CurrentState}}";
    let tasks = cluster
        .node_docker(manager, &["service", "ps", &service, "--filter", "desired-state=running", "--format", format]);
    println!("stack: agent tasks:\n{tasks}");
    assert_eq!(tasks.lines().filter(|l| l.contains("Running")).count(), 3, "{tasks}");

    // A job spread over the three nodes runs through the stack's agents.
    let job =
        Job::pi("pi-stack", 3, 0.25, 200_000).profile("cpu").policy("spread").max_ranks_per_node(1).backoff_limit(1);
    let uid = cluster.submit(&job);
    let watched = cluster.watch_job(&job.name, &uid, Duration::from_secs(240));
    let st = &watched.status;
    assert_eq!(st.phase(), "Succeeded", "{}", st.0["status"]);
    watched.assert_placement(0.25, &[1, 1, 1]);
    assert!(
        st.0["status"].to_string().contains("pi: 3.1"),
        "the launcher's result reached the status: {}",
        st.0["status"]
    );
    cluster.delete_jobs(&[&job.name]);
    components.alive();
    drop(removed);
}

/// `docker stack rm` and the stack's secrets removed, also when the case
/// fails: nothing but what `up` made may be left for the runner's check.
struct RemoveStack<'a> {
    cluster: &'a Cluster,
}

impl Drop for RemoveStack<'_> {
    fn drop(&mut self) {
        let manager = self.cluster.manager();
        let out = self.cluster.exec(manager, &["docker", "stack", "rm", STACK]);
        if !out.status.success() {
            eprintln!("stack: docker stack rm: {}", String::from_utf8_lossy(&out.stderr));
        }
        // A secret is in use until the service's containers are gone; this
        // may run while a failed case unwinds, so it must not panic.
        let gone = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            wait::until(Duration::from_secs(60), "the stack's secrets removed", || {
                let mut rm = vec!["docker", "secret", "rm"];
                rm.extend(SECRETS);
                let _removed = self.cluster.exec(manager, &rm);
                let listed = self.cluster.exec(manager, &["docker", "secret", "ls", "--format", "{{.Name}}"]);
                let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
                let left: Vec<&str> = listed.lines().filter(|n| SECRETS.contains(n)).collect();
                if left.is_empty() { Ok(()) } else { Err(format!("{left:?}")) }
            })
        }));
        if gone.is_err() {
            eprintln!("stack: the stack's secrets could not be removed");
        }
    }
}
