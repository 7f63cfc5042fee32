//! Master failover with a real process: `kill -9` of the offer layer while
//! tasks run, a restart from the same data directory, and then nothing
//! that was running is killed and reconciliation reports every task.

mod common;

use common::{DEADLINE, free_port, healthy, spawn_binary, task};
use mpiswarm_mesos::client::{Backoff, SchedulerClient};
use mpiswarm_mesos::scheduler::Call;
use mpiswarm_mesos::{FrameworkInfo, Resource, TaskState};
use mpiswarm_testkit::TestAgent;
use std::collections::BTreeMap;

#[tokio::test]
async fn kill_9_of_the_offer_layer_kills_no_task_and_reconciliation_reports_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let mut master = spawn_binary(port, dir.path(), &[]);
    healthy(&url).await;
    let mut agent =
        TestAgent::start(&url, "node1", vec![Resource::scalar("cpus", 4.0), Resource::scalar("mem", 4096.0)]);
    let agent_id = agent.subscribed(1).await;

    let mut info = FrameworkInfo::new("root", "mpi", &["mpi"]);
    info.failover_timeout = Some(3600.0);
    let mut f = common::Framework::subscribe(&url, info).await;
    let offer = f.offers().await.remove(0);
    let tasks = vec![task("r0", &offer, 1.0, 256.0, "sleep 1000"), task("r1", &offer, 1.0, 256.0, "sleep 1000")];
    f.launch(&offer, tasks).await;
    for _ in 0..2 {
        let s = f.expect(mpiswarm_mesos::scheduler::EventType::Update).await.update.unwrap().status;
        assert_eq!(s.state, TaskState::Running);
        f.ack(&s).await;
    }
    let info = f.info.clone();
    drop(f);

    master.0.kill().expect("SIGKILL");
    master.0.wait().unwrap();
    let _master = spawn_binary(port, dir.path(), &[]);
    healthy(&url).await;

    // The agent comes back on its own (same id), then the framework can.
    assert_eq!(agent.subscribed(2).await, agent_id);
    let client = SchedulerClient::new(&url, None);
    let sub = tokio::time::timeout(DEADLINE, client.subscribe_with_backoff(info.clone(), Backoff::default(), 200))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(Some(&sub.subscribed.framework_id), info.id.as_ref(), "the framework id survived");
    let mut f = common::Framework { client, subscribed: sub.subscribed, events: sub.events, info };
    f.client.call(&Call::reconcile(f.id(), vec![])).await.unwrap();
    let mut reported = BTreeMap::new();
    while reported.len() < 2 {
        let s = f.expect(mpiswarm_mesos::scheduler::EventType::Update).await.update.unwrap().status;
        reported.insert(s.task_id.value.clone(), s.state);
    }
    assert_eq!(reported, BTreeMap::from([("r0".into(), TaskState::Running), ("r1".into(), TaskState::Running)]));
    assert!(
        agent.tasks().iter().all(|t| t.status.state == TaskState::Running),
        "nothing was killed: {:?}",
        agent.tasks()
    );
    let state: serde_json::Value = reqwest::get(format!("{url}/master/state")).await.unwrap().json().await.unwrap();
    assert_eq!(state["slaves"][0]["used_resources"]["cpus"], 2.0, "used resources were rebuilt from the agent");
}
