//! The shipped examples on the suite's cluster, the way the README tells a
//! user to run them: `mpiswarm run examples/network.yaml` runs Debian's hpcc
//! across the node containers of `up --nodes 3 --node-cpus 2` (packed on 2
//! nodes: 4 ranks of 0.5 cpu and the launcher do not fit one), with HPL,
//! PTRANS, STREAM and ping-pong results in the launcher's output.

use std::time::Duration;

use mpiswarm_e2e::Cluster;

/// hpcc on 0.5-cpu ranks of two cores takes minutes.
const HPCC_DEADLINE: Duration = Duration::from_secs(900);

pub fn network_yaml_runs_hpcc_across_the_nodes(cluster: &Cluster) {
    // The swarm is formed inside the node containers: one manager, two workers, all Ready.
    let swarm = cluster.node_docker(cluster.manager(), &["node", "ls", "--format", "{{.Hostname}} {{.Status}}"]);
    let mut seen: Vec<&str> = swarm.lines().collect();
    seen.sort_unstable();
    assert_eq!(seen, ["node1 Ready", "node2 Ready", "node3 Ready"], "{swarm}");
    // `up --node-images rank` (the e2e clusters' default) copied the rank image alone.
    let images = cluster.node_docker(cluster.manager(), &["images", "--format", "{{.Repository}}:{{.Tag}}"]);
    let images: Vec<&str> = images.lines().filter(|l| !l.starts_with("<none>")).collect();
    assert_eq!(images, [mpiswarm_e2e::images::RANK], "the node's images");

    let out = cluster.mpiswarm_within(&["run", "examples/network.yaml"], HPCC_DEADLINE);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "mpiswarm run examples/network.yaml:\n{stdout}\n{stderr}");
    assert!(stderr.contains("pack on node"), "the placement is shown: {stderr}");
    // `run` ends with the launcher's last lines; the whole output is kept by its agent.
    let logs = cluster.mpiswarm(&["logs", "hpcc-network"]);
    let text = String::from_utf8_lossy(&logs.stdout);
    assert!(logs.status.success(), "mpiswarm logs: {}", String::from_utf8_lossy(&logs.stderr));
    for result in
        ["HPL_Tflops=", "PTRANS_GBs=", "StarSTREAM_Triad=", "AvgPingPongLatency_usec=", "AvgPingPongBandwidth_GBytes="]
    {
        let value = text
            .lines()
            .find_map(|l| l.strip_prefix(result))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or_else(|| panic!("{result} in the launcher's output: {text}"));
        assert!(value > 0.0, "{result}{value}: hpcc ran that test");
    }
    let status = cluster.job("hpcc-network").expect("the MpiJob hpcc-network");
    assert_eq!(status.phase(), "Succeeded", "{}", status.0["status"]);
    assert_eq!(status.placement().len(), 2, "packed on 2 nodes: {:?}", status.placement());
    cluster.delete_jobs(&["hpcc-network"]);
}
