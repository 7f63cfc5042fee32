//! The shipped examples on the suite's cluster, the way the README tells a
//! user to run them: `mpiswarm run examples/network.yaml` runs Debian's hpcc
//! across the node containers of `up --nodes 3 --node-cpus 2` (packed on 2
//! nodes: 4 ranks of 0.5 cpu and the launcher do not fit one), with HPL,
//! PTRANS, STREAM and ping-pong results in the launcher's output; and
//! `examples/mpich.yaml` runs pi with MPICH's Hydra on the stock Debian MPICH
//! image (loaded into the nodes by the case: the suite's `up` copies the
//! rank image alone), one rank on each of 2 nodes.

use std::time::Duration;

use mpiswarm_e2e::{Cluster, images};

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

/// 2 ranks of pi take seconds; the deadline covers the SSH wait and start-up.
const PI_DEADLINE: Duration = Duration::from_secs(300);

pub fn mpich_yaml_runs_pi_on_2_nodes(cluster: &Cluster) {
    cluster.load_image(images::MPICH);
    let out = cluster.mpiswarm_within(&["run", "examples/mpich.yaml"], PI_DEADLINE);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "mpiswarm run examples/mpich.yaml:\n{stdout}\n{stderr}");
    let logs = cluster.mpiswarm(&["logs", "pi-mpich"]);
    let text = String::from_utf8_lossy(&logs.stdout);
    assert!(logs.status.success(), "mpiswarm logs: {}", String::from_utf8_lossy(&logs.stderr));
    // pi.c's own lines: MPICH started both ranks, each in its worker's container.
    assert!(text.lines().any(|l| l == "ranks: 2"), "2 ranks in the launcher's output: {text}");
    for rank in ["rank 0 on worker-", "rank 1 on worker-"] {
        assert!(text.lines().any(|l| l.starts_with(rank)), "{rank}N in the launcher's output: {text}");
    }
    let pi = text
        .lines()
        .find_map(|l| l.strip_prefix("pi: "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("pi: in the launcher's output: {text}"));
    assert!((pi - std::f64::consts::PI).abs() < 0.01, "pi: {pi} is no estimate of pi (2000000 samples): {text}");
    let status = cluster.job("pi-mpich").expect("the MpiJob pi-mpich");
    assert_eq!(status.phase(), "Succeeded", "{}", status.0["status"]);
    let placement = status.placement();
    assert_eq!(placement.len(), 2, "one rank on each of 2 nodes: {placement:?}");
    assert!(placement.values().all(|&ranks| ranks == 1), "one rank on each of 2 nodes: {placement:?}");
    cluster.delete_jobs(&["pi-mpich"]);
}
