//! A real Mesos framework library from PyPI (`mesoshttp`, see
//! .ci/requirements.txt) against the offer layer: subscribe, receive an
//! offer, launch on the test agent, see TASK_RUNNING and TASK_FINISHED,
//! acknowledge. Fails (never skips) if python3 or mesoshttp is missing.

mod common;

use common::{Cluster, DEADLINE};
use tokio::process::Command;

#[tokio::test]
async fn mesoshttp_subscribes_launches_sees_running_and_finished_and_acknowledges() {
    // mesoshttp reads events line by line: a record is handled when the next
    // one's header arrives, so short heartbeats keep it moving.
    let c = Cluster::start_with(|a| a.heartbeat_interval = 0.2).await;
    let mut agent = c.agent("node1", 2.0, 1024.0);
    let driver = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mesoshttp_driver.py");
    let out = tokio::time::timeout(DEADLINE * 3, Command::new("python3").arg(driver).arg(c.url()).output())
        .await
        .expect("the mesoshttp driver finished in time")
        .expect("python3 is installed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "mesoshttp driver failed\nstdout: {stdout}\nstderr: {stderr}");
    let result: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(result["states"], serde_json::json!(["TASK_RUNNING", "TASK_FINISHED"]), "{result}");
    assert_eq!(result["offer_hostname"], "node1");
    assert_eq!(result["offer_cpus"], 2.0);
    assert_eq!(result["master_version"], "1.11.0");
    assert_eq!(result["errors"], serde_json::json!([]));
    // The acknowledgement of TASK_FINISHED reached the agent, which forgot the task.
    let forgotten = tokio::time::timeout(DEADLINE, agent.wait_for_tasks(<[_]>::is_empty)).await.expect("in time");
    assert!(forgotten, "the agent forgot the acknowledged task");
    let state = c.state().await;
    let completed = state["completed_tasks"].as_array().unwrap();
    assert!(completed.iter().any(|t| t["task_id"]["value"] == "py-task-1" && t["state"] == "TASK_FINISHED"), "{state}");
}
