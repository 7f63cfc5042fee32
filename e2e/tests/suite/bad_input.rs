//! Bad input from outside, each beside a job that runs throughout: a job
//! whose image is missing on one node, one whose command exits 3, malformed
//! YAML and a schema violation. Each fails alone, precisely, and the job
//! beside it keeps its one gang and succeeds.

use std::time::Duration;

use mpiswarm_e2e::{Cluster, Job, images};

const JOB_DEADLINE: Duration = Duration::from_secs(300);
const RANK_CPUS: f64 = 0.45;
/// The rank image under a name only node1 and node2 have.
const PARTIAL: &str = "mpiswarm/e2e-partial:0.1.0";
const JOBS: &str = "/apis/mpiswarm.io/v1alpha1/namespaces/default/mpijobs";

pub fn none_disturbs_a_job_beside(cluster: &Cluster) {
    let beside = Job::held("e2e-beside", 2, RANK_CPUS, 2_000_000).policy("pack");
    let beside_uid = cluster.submit(&beside);
    let running = cluster.wait_job(&beside.name, JOB_DEADLINE, "Running", |s| s.phase() == "Running");
    let gang: Vec<String> = {
        let mut ids: Vec<String> = cluster
            .swarm()
            .job_tasks(&beside_uid)
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .map(|t| t.id)
            .collect();
        ids.sort();
        ids
    };

    image_missing_on_one_node(cluster);
    command_exits_3(cluster);
    malformed_yaml_is_refused(cluster);
    schema_violation_is_refused(cluster);

    // The job beside kept its gang: the same Swarm tasks, still running, no restart.
    let mut now: Vec<String> = cluster
        .swarm()
        .job_tasks(&beside_uid)
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .filter(|t| t.state == "running")
        .map(|t| t.id)
        .collect();
    now.sort();
    assert_eq!(now, gang, "the job beside runs the same tasks as before the bad input");
    cluster.release(&beside_uid);
    let w = cluster.watch_job(&beside.name, &beside_uid, JOB_DEADLINE);
    assert_eq!(w.status.phase(), "Succeeded", "{}", w.status.0["status"]);
    assert_eq!(w.status.0["status"]["restarts"], 0, "{}", w.status.0["status"]);
    assert_eq!(w.status.placement(), running.placement(), "placement unchanged");
    cluster.delete_jobs(&[&beside.name, "e2e-partial-image", "e2e-exit-3"]);
}

/// Spread one rank per node, so node3 (without the image) gets one.
fn image_missing_on_one_node(cluster: &Cluster) {
    for node in &cluster.nodes()[..2] {
        cluster.node_docker(node, &["tag", images::RANK, PARTIAL]);
    }
    let job = Job::pi("e2e-partial-image", 3, RANK_CPUS, 2_000_000)
        .image(PARTIAL)
        .policy("spread")
        .max_ranks_per_node(1)
        .backoff_limit(0);
    cluster.submit(&job);
    let status = cluster.wait_job(&job.name, JOB_DEADLINE, "Failed", |s| s.is_finished());
    for node in &cluster.nodes()[..2] {
        cluster.node_docker(node, &["rmi", PARTIAL]);
    }
    assert_eq!(status.phase(), "Failed", "{}", status.0["status"]);
    let (_, reason, message) = status.condition("Failed").unwrap_or_default();
    assert!(
        message.contains(PARTIAL) && status.message().contains(PARTIAL),
        "the failure names the image: {reason}: {message}; {}",
        status.message()
    );
    eprintln!("image missing on node3: {reason}: {message}");
}

fn command_exits_3(cluster: &Cluster) {
    let job = Job::pi("e2e-exit-3", 2, RANK_CPUS, 0).command(&["sh", "-c", "exit 3"]).backoff_limit(0);
    cluster.submit(&job);
    let status = cluster.wait_job(&job.name, JOB_DEADLINE, "Failed", |s| s.is_finished());
    assert_eq!(status.phase(), "Failed", "{}", status.0["status"]);
    assert_eq!(status.launcher_exit_code(), Some(3), "status.launcher: {}", status.0["status"]["launcher"]);
    eprintln!("exit 3: {}", status.message());
}

fn malformed_yaml_is_refused(cluster: &Cluster) {
    let yaml = "apiVersion: mpiswarm.io/v1alpha1\nkind: MpiJob\nmetadata: {name: e2e-malformed\nspec: [ranks: 2\n";
    let out = cluster.kubectl_with(&["apply", "-f", "-"], Some(yaml));
    assert!(!out.status.success(), "kubectl apply took malformed YAML");
    eprintln!("malformed YAML, kubectl apply: {}", String::from_utf8_lossy(&out.stderr).trim());
    // kubectl parses YAML itself; the API server must refuse the raw bytes too.
    let out = cluster.kubectl_with(&["create", "--raw", JOBS, "-f", "-"], Some(yaml));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the API server took malformed YAML");
    assert!(err.contains("BadRequest") || err.contains("400"), "refused as a bad request: {err}");
    eprintln!("malformed YAML, API server: {}", err.trim());
    assert!(cluster.job("e2e-malformed").is_none(), "nothing was stored");
}

fn schema_violation_is_refused(cluster: &Cluster) {
    let bad = Job::pi("e2e-schema", 2, -1.0, 2_000_000).set("ranks", "many".into());
    let out = cluster.kubectl_with(&["apply", "-f", "-"], Some(&bad.manifest()));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the API server took a schema violation");
    assert!(err.contains("spec.ranks"), "the field is named: {err}");
    eprintln!("schema violation: {}", err.trim());
    assert!(cluster.job("e2e-schema").is_none(), "nothing was stored");
}
