//! The shipped stack file runs the agents: on `mpiswarm up --nodes 3` (used
//! for its nodes; its own one-process stack is stopped), an API server, an
//! offer layer and a controller run on this machine, the offer layer
//! listening on the nodes' bridge gateway with TLS and credentials (a test
//! PKI); `docker stack deploy` of `manifests/swarm/agents-stack.yaml` inside
//! the manager node, with the PKI's files as Docker secrets, runs one agent
//! per node as a Swarm service; they register over TLS, and an MpiJob spread
//! over the three nodes runs through them to `Succeeded`.
//! Needs the images of `make images` (rank and node); builds
//! mpiswarm/mpiswarm:<version> from this very binary (cached).

mod cluster;

use std::process::{Command, Stdio};
use std::time::Duration;

use cluster::{Cluster, docker, kubectl, mpiswarm, ok, placed_on, repo};
use mpiswarm_testkit::TestPki;

const PRINCIPAL: &str = "mpiswarm-agent";
const SECRET: &str = "stack-test-secret";

/// A free port on `ip` (bound and released; the offer layer takes it next).
fn free_port(ip: &str) -> u16 {
    let l = std::net::TcpListener::bind((ip, 0)).expect("a free port on the gateway address");
    l.local_addr().expect("bound").port()
}

const JOB: &str = "apiVersion: mpiswarm.io/v1alpha1
kind: MpiJob
metadata:
  name: pi-stack
spec:
  image: mpiswarm/openmpi:0.1.0
  command: [\"/usr/local/bin/pi\"]
  args: [\"200000\"]
  ranks: 3
  resources:
    cpus: 0.25
    memory: 64Mi
  profile: cpu
  placement:
    policy: spread
    maxRanksPerNode: 1
  runPolicy:
    backoffLimit: 1
    activeDeadlineSeconds: 300
";

#[test]
fn the_shipped_stack_file_runs_the_agents_over_tls_and_a_job_runs_through_them() {
    cluster::require_images(&["mpiswarm/openmpi:0.1.0", "mpiswarm/node:0.1.0"]);
    // The image of this very binary, so the agents run the code under test.
    let mut build = mpiswarm();
    build.args(["images", "build", "--mpiswarm"]);
    assert_eq!(ok(build).trim(), "mpiswarm/mpiswarm:0.1.0");

    // The nodes (`up` loads the rank and mpiswarm images into each); its
    // own one-process stack is not used here and is stopped once ready.
    let mut c = Cluster::new();
    c.up(3, Duration::from_secs(300));
    c.kill("up");
    let dir = c.dir.clone();
    let manager = c.node("node1");
    let network = ok(docker(&["network", "ls", "-q", "--filter", &c.label()])).trim().to_owned();
    let gateway =
        ok(docker(&["network", "inspect", "-f", "{{(index .IPAM.Config 0).Gateway}}", &network])).trim().to_owned();
    assert!(!gateway.is_empty(), "the nodes' network has a gateway");
    let images = ok(docker(&["exec", &manager, "docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}"]));
    assert!(images.lines().any(|l| l == "mpiswarm/mpiswarm:0.1.0"), "up loaded the mpiswarm image: {images}");

    // What the agents talk to, on this machine: the offer layer on the
    // nodes' gateway with TLS and credentials, the controller trusting it.
    let pki = TestPki::for_hosts(&[&gateway]);
    let credentials = pki.credentials_file(PRINCIPAL, SECRET);
    let credential = pki.secret_file("controller-credential", &format!("{PRINCIPAL} {SECRET}"));
    let mut apiserver = mpiswarm();
    apiserver.args(["apiserver", "--listen", "127.0.0.1:0", "--data-dir"]).arg(dir.join("api"));
    c.spawn("apiserver", apiserver);
    let kubeconfig = dir.join("api").join("kubeconfig");
    c.wait_for(Duration::from_secs(60), "the API server's kubeconfig", || kubeconfig.exists().then_some(()));
    let mut crd = mpiswarm();
    crd.arg("crd");
    let crd = ok(crd);
    let applied = kubectl(&kubeconfig, &["apply", "--server-side", "-f", "-"], Some(&crd));
    assert!(applied.status.success(), "installing the CRD: {}", String::from_utf8_lossy(&applied.stderr));

    let port = free_port(&gateway);
    let master = format!("https://{gateway}:{port}");
    let mut offers = mpiswarm();
    offers
        .args(["offers", "--listen", &format!("{gateway}:{port}"), "--data-dir"])
        .arg(dir.join("offers"))
        .arg("--credentials")
        .arg(&credentials)
        .arg("--tls-cert")
        .arg(&pki.cert_file)
        .arg("--tls-key")
        .arg(&pki.key_file);
    c.spawn("offers", offers);
    let mut controller = mpiswarm();
    controller
        .args(["controller", "--master", &master, "--listen", "127.0.0.1:0", "--kubeconfig"])
        .arg(&kubeconfig)
        .arg("--master-credentials")
        .arg(&credential)
        .arg("--ca-file")
        .arg(&pki.ca_file);
    c.spawn("controller", controller);

    // The secrets the stack file names, from the test PKI, in the swarm.
    let agent_secret = pki.secret_file("agent-secret", SECRET);
    for (name, file) in [
        ("mpiswarm-ca.crt", &pki.ca_file),
        ("mpiswarm-agent-secret", &agent_secret),
        ("mpiswarm-agent-tls.crt", &pki.cert_file),
        ("mpiswarm-agent-tls.key", &pki.key_file),
    ] {
        let text = std::fs::read_to_string(file).expect("a PKI file");
        let create = docker(&["exec", "-i", &manager, "docker", "secret", "create", name, "-"]);
        let out = mpiswarm_testkit::output_within(create, Some(&text), Duration::from_secs(60));
        assert!(out.status.success(), "docker secret create {name}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let stack_file = repo().join("manifests/swarm/agents-stack.yaml");
    ok(docker(&["cp", stack_file.to_str().expect("UTF-8 path"), &format!("{manager}:/agents-stack.yaml")]));
    let master_env = format!("MPISWARM_MASTER={master}");
    let deploy = [
        "exec",
        "-e",
        &master_env,
        "-e",
        "MPISWARM_NODES=3",
        &manager,
        "docker",
        "stack",
        "deploy",
        "-c",
        "/agents-stack.yaml",
        "mpiswarm",
    ];
    println!("{}", ok(docker(&deploy)));

    // Three agents, Swarm services on the manager, register over TLS.
    let state = || -> Option<serde_json::Value> {
        let mut curl = Command::new("curl");
        curl.args(["-sf", "--cacert"])
            .arg(&pki.ca_file)
            .args(["-u", &format!("{PRINCIPAL}:{SECRET}"), &format!("{master}/master/state")])
            .stdin(Stdio::null());
        let out = mpiswarm_testkit::output_within(curl, None, Duration::from_secs(30));
        serde_json::from_slice(&out.stdout).ok()
    };
    let agents = c.wait_for(Duration::from_secs(180), "three agents registered", || {
        let mut hosts: Vec<String> = state()?["slaves"]
            .as_array()?
            .iter()
            .filter(|a| a["active"] == true)
            .filter_map(|a| a["hostname"].as_str().map(str::to_owned))
            .collect();
        hosts.sort();
        (hosts.len() == 3).then_some(hosts)
    });
    assert_eq!(agents, ["node1", "node2", "node3"], "one agent per node, each serving its own");
    let tasks = ok(docker(&[
        "exec",
        &manager,
        "docker",
        "service",
        "ps",
        "mpiswarm_agent",
        "--filter",
        "desired-state=running",
        "--format",
        "{{.Name}} {{.Node}} {{.CurrentState}}",
    ]));
    println!("agent tasks:\n{tasks}");
    assert_eq!(tasks.lines().filter(|l| l.contains("Running")).count(), 3, "{tasks}");

    // A job spread over the three nodes runs through the stack's agents.
    let applied = kubectl(&kubeconfig, &["apply", "-f", "-"], Some(JOB));
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    let job = c.wait_for(Duration::from_secs(240), "pi-stack to end", || {
        let j = cluster::job(&kubeconfig, "pi-stack");
        matches!(j["status"]["phase"].as_str(), Some("Succeeded" | "Failed")).then_some(j)
    });
    assert_eq!(job["status"]["phase"], "Succeeded", "{}\n{}", job["status"], c.logs());
    assert_eq!(placed_on(&job), ["node1", "node2", "node3"]);
    let said = job["status"].to_string();
    assert!(said.contains("pi: 3.1"), "the launcher's result reached the status: {said}");
}
