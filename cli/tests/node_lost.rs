//! A lost node is noticed within 10 s: on `mpiswarm up --nodes 3`, a job
//! spread over the three nodes runs; node2's container is killed (`docker
//! kill`, a crash: nothing inside gets to say goodbye); the agent serving
//! node2 sees the manager mark it down and reports its tasks TASK_LOST, the
//! controller records `NodeLost` naming node2 and restarts the gang on the
//! two nodes left, and it runs to the end there. node2 is started again: its
//! agent serves it again (subscribed, offering), and a job that needs all
//! three nodes runs. Prints the seconds from the kill to `NodeLost` in the
//! job's status. Needs the images of `make images` (rank and node).

mod cluster;

use std::time::{Duration, Instant};

use cluster::{Cluster, docker, job, kubectl, ok, placed_on};

/// What the issue allows between a node's death and TASK_LOST.
const NOTICE_WITHIN: Duration = Duration::from_secs(10);

/// The MpiJob `name` spreading `ranks` ranks of `sleep SECONDS`.
fn spread_job(name: &str, ranks: u32, max_per_node: Option<u32>, seconds: u32) -> String {
    let max = max_per_node.map(|m| format!("\n    maxRanksPerNode: {m}")).unwrap_or_default();
    format!(
        "apiVersion: mpiswarm.io/v1alpha1
kind: MpiJob
metadata:
  name: {name}
spec:
  image: mpiswarm/openmpi:0.1.0
  command: [\"sleep\"]
  args: [\"{seconds}\"]
  ranks: {ranks}
  resources:
    cpus: 0.25
    memory: 64Mi
  profile: cpu
  placement:
    policy: spread{max}
  runPolicy:
    backoffLimit: 2
    activeDeadlineSeconds: 500
"
    )
}

/// node2's agent as the offer layer sees it (`/master/state`).
fn agent_of(offers: &str, hostname: &str) -> Option<serde_json::Value> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let state: serde_json::Value = rt.block_on(async {
        let resp = reqwest::get(format!("{offers}/master/state")).await.ok()?;
        resp.json().await.ok()
    })?;
    state["slaves"].as_array()?.iter().find(|a| a["hostname"] == hostname).cloned()
}

#[test]
fn a_killed_node_is_lost_within_10_s_its_job_restarts_elsewhere_and_the_node_serves_again() {
    cluster::require_images(&["mpiswarm/openmpi:0.1.0", "mpiswarm/node:0.1.0"]);
    let mut c = Cluster::new();
    c.up(3, Duration::from_secs(300));
    let dir = c.dir.clone();
    let kubeconfig = dir.join("kubeconfig");
    let stack: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("stack.json")).expect("stack.json")).expect("stack file");
    let offers = stack["offers"].as_str().expect("the offer layer's URL").to_owned();
    let (node2, manager) = (c.node("node2"), c.node("node1"));

    // A job on all three nodes (spread: one rank each), long enough to be
    // running when node2 dies and to finish after the restart.
    let applied = kubectl(&kubeconfig, &["apply", "-f", "-"], Some(&spread_job("survivor", 3, None, 40)));
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    c.wait_for(Duration::from_secs(120), "the job running on node1..node3", || {
        let j = job(&kubeconfig, "survivor");
        (j["status"]["phase"] == "Running" && placed_on(&j) == ["node1", "node2", "node3"]).then_some(())
    });

    let killed_at = Instant::now();
    ok(docker(&["kill", &node2]));
    let (seconds, message) = c.wait_for(Duration::from_secs(60), "NodeLost in the job's status", || {
        let j = job(&kubeconfig, "survivor");
        let lost = j["status"]["conditions"].as_array()?.iter().find(|c| c["reason"] == "NodeLost")?.clone();
        Some((killed_at.elapsed().as_secs_f64(), lost["message"].as_str().unwrap_or_default().to_owned()))
    });
    println!("node2 killed -> NodeLost in the MpiJob status: {seconds:.1} s ({message})");
    assert!(message.contains("node2"), "the condition names the lost node: {message}");
    assert!(message.contains("is down"), "and says why (Swarm marked it down): {message}");
    assert!(
        seconds <= NOTICE_WITHIN.as_secs_f64(),
        "a lost node must be noticed within {NOTICE_WITHIN:?}; took {seconds:.1} s\n{}",
        c.logs()
    );
    // The agent withdrew: the offer layer has node2's agent disconnected, so
    // nothing of node2 is offered while it is down.
    let withdrawn = c.wait_for(Duration::from_secs(10), "node2's agent withdrawn", || {
        agent_of(&offers, "node2").filter(|a| a["active"] == false)
    });
    assert_eq!(withdrawn["offered_resources"]["cpus"].as_f64().unwrap_or(0.0), 0.0, "{withdrawn}");

    // The gang restarts on the two nodes left.
    c.wait_for(Duration::from_secs(120), "the gang restarted on node1 and node3", || {
        let j = job(&kubeconfig, "survivor");
        (j["status"]["restarts"].as_i64() == Some(1) && placed_on(&j) == ["node1", "node3"]).then_some(())
    });

    // node2 comes back: Swarm has it ready, its agent serves it again.
    ok(docker(&["start", &node2]));
    c.wait_for(Duration::from_secs(120), "node2 ready in Swarm", || {
        let ls = ok(docker(&["exec", &manager, "docker", "node", "ls", "--format", "{{.Hostname}} {{.Status}}"]));
        ls.lines().any(|l| l == "node2 Ready").then_some(())
    });
    c.wait_for(Duration::from_secs(30), "node2's agent subscribed again", || {
        agent_of(&offers, "node2").filter(|a| a["active"] == true)
    });
    let done = c.wait_for(Duration::from_secs(180), "the restarted job to end", || {
        let j = job(&kubeconfig, "survivor");
        matches!(j["status"]["phase"].as_str(), Some("Succeeded" | "Failed")).then_some(j)
    });
    assert_eq!(done["status"]["phase"], "Succeeded", "{}", done["status"]);
    assert_eq!(placed_on(&done), ["node1", "node3"], "it ran where it was restarted");
    // The lost tasks stay lost: nothing of the first gang runs on node2.
    c.wait_for(Duration::from_secs(30), "the first gang's containers gone from node2", || {
        ok(docker(&["exec", &node2, "docker", "ps", "-q", "--filter", "label=mpiswarm.io/managed-by=mpiswarm-agent"]))
            .trim()
            .is_empty()
            .then_some(())
    });

    // A job that needs all three nodes runs: node2 is served again.
    let applied = kubectl(&kubeconfig, &["apply", "-f", "-"], Some(&spread_job("everywhere", 3, Some(1), 1)));
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    let done = c.wait_for(Duration::from_secs(120), "the three-node job to end", || {
        let j = job(&kubeconfig, "everywhere");
        matches!(j["status"]["phase"].as_str(), Some("Succeeded" | "Failed")).then_some(j)
    });
    assert_eq!(done["status"]["phase"], "Succeeded", "{}", done["status"]);
    assert_eq!(placed_on(&done), ["node1", "node2", "node3"]);
    assert_eq!(done["status"]["restarts"].as_i64(), Some(0));
}
