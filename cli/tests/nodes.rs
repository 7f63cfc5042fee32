//! `mpiswarm up --nodes 3 --node-cpus 2 --racks 2` makes a swarm of three
//! Docker engines in containers on this machine; `mpiswarm run
//! examples/network.yaml` runs Debian's hpcc across them (packed on 2 nodes,
//! HPL, PTRANS, STREAM, ping-pong results in the launcher's output), and
//! `mpiswarm down` leaves no node container, volume or network behind.
//! Needs the images of `make images` (rank and node).

mod up;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use up::Up;

/// hpcc on 0.5-cpu ranks of two cores takes minutes; the whole test has this.
const DEADLINE: Duration = Duration::from_secs(900);

fn run(cmd: Command) -> Output {
    up::run(cmd, DEADLINE)
}

fn mpiswarm(args: &[&str], data: &Path) -> Output {
    up::mpiswarm(args, data, DEADLINE)
}

fn docker(args: &[&str]) -> String {
    let mut cmd = Command::new("docker");
    cmd.args(args);
    String::from_utf8_lossy(&run(cmd).stdout).into_owned()
}

#[test]
fn up_nodes_runs_hpcc_across_node_containers_and_down_leaves_nothing() {
    for image in ["mpiswarm/openmpi:0.1.0", "mpiswarm/node:0.1.0"] {
        assert!(!docker(&["image", "ls", "-q", image]).trim().is_empty(), "{image} is missing: run `make images`");
    }
    let up = Up::start(&["--nodes", "3", "--node-cpus", "2", "--racks", "2"], DEADLINE);
    let dir = up.dir.clone();
    let label = format!("label=mpiswarm.io/data-dir={}", dir.display());
    let nodes = docker(&["ps", "-q", "--filter", &label]);
    assert_eq!(nodes.lines().count(), 3, "three node containers run: {nodes}");
    // The swarm is formed inside the containers: one manager, two workers, all Ready.
    let manager = docker(&["ps", "-q", "--filter", &label, "--filter", "name=node1"]);
    let swarm = docker(&["exec", manager.trim(), "docker", "node", "ls", "--format", "{{.Hostname}} {{.Status}}"]);
    let mut seen: Vec<&str> = swarm.lines().collect();
    seen.sort();
    assert_eq!(seen, ["node1 Ready", "node2 Ready", "node3 Ready"], "{swarm}");

    let out = mpiswarm(&["run", "examples/network.yaml"], &dir);
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}\n{}", up.log());
    assert!(stderr.contains("pack on node"), "the placement is shown: {stderr}");
    // `run` ends with the launcher's last lines; the whole output is kept by its agent.
    let logs = mpiswarm(&["logs", "hpcc-network"], &dir);
    let stdout = String::from_utf8_lossy(&logs.stdout).into_owned();
    assert!(logs.status.success(), "mpiswarm logs: {}", String::from_utf8_lossy(&logs.stderr));
    for result in
        ["HPL_Tflops=", "PTRANS_GBs=", "StarSTREAM_Triad=", "AvgPingPongLatency_usec=", "AvgPingPongBandwidth_GBytes="]
    {
        let value = stdout
            .lines()
            .find_map(|l| l.strip_prefix(result))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or_else(|| panic!("{result} in the launcher's output: {stdout}"));
        assert!(value > 0.0, "{result}{value}: hpcc ran that test");
    }
    // Truth from Swarm: the ranks ran on two of the nodes, as the status says.
    let mut kubectl = Command::new("kubectl");
    kubectl.arg("--kubeconfig").arg(dir.join("kubeconfig")).args([
        "get",
        "mpij",
        "hpcc-network",
        "-o",
        "jsonpath={.status.placement.nodeCount}",
    ]);
    assert_eq!(String::from_utf8_lossy(&run(kubectl).stdout), "2", "packed on 2 nodes");

    let down = mpiswarm(&["down"], &dir);
    assert!(down.status.success(), "{}", String::from_utf8_lossy(&down.stderr));
    let left = [
        docker(&["ps", "-aq", "--filter", &label]),
        docker(&["volume", "ls", "-q", "--filter", &label]),
        docker(&["network", "ls", "-q", "--filter", &label]),
    ];
    assert!(left.iter().all(|l| l.trim().is_empty()), "left behind after down: {left:?}");
    assert!(!dir.join("cluster.json").exists(), "down removes the cluster file");
}
