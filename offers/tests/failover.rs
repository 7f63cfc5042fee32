//! Failover inside one process: a framework that leaves and comes back
//! within its failover_timeout, one that does not, and a lost agent.

mod common;

use common::{Cluster, task};
use mpiswarm_mesos::scheduler::{Call, EventType};
use mpiswarm_mesos::{Reason, TaskId, TaskState};

/// A FrameworkInfo `name` in role mpi, PARTITION_AWARE.
fn partition_aware(name: &str) -> mpiswarm_mesos::FrameworkInfo {
    let mut info = mpiswarm_mesos::FrameworkInfo::new("root", name, &["mpi"]);
    info.capabilities.push(mpiswarm_mesos::framework::Capability {
        kind: Some(mpiswarm_mesos::framework::CapabilityType::PartitionAware),
    });
    info
}

async fn launch_sleeper(c: &Cluster, failover_timeout: f64) -> common::Framework {
    let mut info = mpiswarm_mesos::FrameworkInfo::new("root", "fw", &["mpi"]);
    info.failover_timeout = Some(failover_timeout);
    let mut f = common::Framework::subscribe(&c.url(), info).await;
    let offer = f.offers().await.remove(0);
    let t = task("t1", &offer, 1.0, 128.0, "sleep 1000");
    f.launch(&offer, vec![t]).await;
    let running = f.update_of("t1").await;
    assert_eq!(running.state, TaskState::Running);
    f.ack(&running).await;
    f
}

#[tokio::test]
async fn a_framework_that_returns_within_failover_timeout_keeps_its_tasks() {
    let c = Cluster::start_with(|a| a.heartbeat_interval = 0.1).await;
    let agent = c.agent("node1", 4.0, 4096.0);
    let f = launch_sleeper(&c, 3600.0).await;
    let info = f.info.clone();
    drop(f);
    until_disconnected(&c).await;
    let mut back = common::Framework::subscribe(&c.url(), info).await;
    back.client.call(&Call::reconcile(back.id(), vec![])).await.unwrap();
    let status = back.update_of("t1").await;
    assert_eq!(status.state, TaskState::Running);
    assert_eq!(status.reason, Some(Reason::ReasonReconciliation));
    assert!(agent.tasks().iter().all(|t| t.status.state == TaskState::Running), "nothing was killed");
}

async fn until_disconnected(c: &Cluster) {
    let url = c.url();
    tokio::time::timeout(common::DEADLINE, async {
        loop {
            let state: serde_json::Value =
                reqwest::get(format!("{url}/master/state")).await.unwrap().json().await.unwrap();
            if state["frameworks"][0]["connected"] == false {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the master noticed the disconnect");
}

#[tokio::test]
async fn a_framework_that_stays_away_past_failover_timeout_loses_its_tasks() {
    let c = Cluster::start_with(|a| a.heartbeat_interval = 0.1).await;
    let mut agent = c.agent("node1", 4.0, 4096.0);
    let f = launch_sleeper(&c, 0.2).await;
    drop(f);
    let killed = agent.wait_for_tasks(|ts| ts.iter().all(|t| t.status.state == TaskState::Killed));
    assert!(tokio::time::timeout(common::DEADLINE, killed).await.expect("in time"), "the agent killed the tasks");
    let state = c.state().await;
    assert_eq!(state["frameworks"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn a_lost_agent_turns_its_tasks_lost_and_frameworks_get_failure() {
    let c = Cluster::start_with(|a| a.agent_reregister_timeout = 0.2).await;
    let agent = c.agent("node1", 4.0, 4096.0);
    let mut f = launch_sleeper(&c, 3600.0).await;
    let agent_id = agent.agent_id().unwrap();
    agent.crash();
    let lost = tokio::time::timeout(common::DEADLINE, f.update_of("t1")).await.expect("an update for t1");
    assert_eq!(lost.state, TaskState::Lost);
    assert_eq!(lost.reason, Some(Reason::ReasonAgentRemoved));
    let failure = f.expect(EventType::Failure).await.failure.unwrap();
    assert_eq!(failure.agent_id, Some(agent_id));
    assert!(failure.executor_id.is_none());
}

#[tokio::test]
async fn an_agent_that_reconnects_in_time_keeps_its_tasks() {
    let c = Cluster::start().await;
    let mut agent = c.agent("node1", 4.0, 4096.0);
    let mut f = launch_sleeper(&c, 3600.0).await;
    let id = common::within("agent subscription", agent.subscribed(1)).await;
    // A second stream for the same agent replaces the first (a reconnect).
    let info = mpiswarm_mesos::agent_api::AgentInfo {
        hostname: "node1".into(),
        id: Some(id.clone()),
        resources: vec![mpiswarm_mesos::Resource::scalar("cpus", 4.0), mpiswarm_mesos::Resource::scalar("mem", 4096.0)],
        attributes: vec![],
        port: None,
    };
    let tasks: Vec<_> = agent.tasks().into_iter().map(|t| t.reported()).collect();
    let client = mpiswarm_mesos::client::AgentClient::new(&c.url(), None);
    let sub = client.subscribe(info, tasks).await.unwrap();
    assert_eq!(sub.subscribed.agent_id, id);
    f.client.call(&Call::reconcile(f.id(), vec![])).await.unwrap();
    assert_eq!(f.update_of("t1").await.state, TaskState::Running);
}

/// Launches `sleep` tasks t1 and t2 on one agent, crashes the agent, and
/// re-registers it under the same id reporting t2 only.
/// Returns the framework and the new agent stream (dropping it is a disconnect).
async fn reregister_without_t1(c: &Cluster, mut f: common::Framework) -> (common::Framework, impl Sized) {
    let mut agent = c.agent("node1", 4.0, 4096.0);
    let offer = f.offers().await.remove(0);
    f.launch(&offer, vec![task("t1", &offer, 1.0, 128.0, "sleep 1000"), task("t2", &offer, 1.0, 128.0, "sleep 1000")])
        .await;
    for _ in 0..2 {
        let e = f.expect(EventType::Update).await.update.unwrap().status;
        assert_eq!(e.state, TaskState::Running);
        f.ack(&e).await;
    }
    let id = common::within("agent subscription", agent.subscribed(1)).await;
    assert!(common::within("two tasks on the agent", agent.wait_for_tasks(|ts| ts.len() == 2)).await);
    let t2: Vec<_> = agent.tasks().into_iter().filter(|t| t.info.task_id.value == "t2").map(|t| t.reported()).collect();
    agent.crash();
    let info = mpiswarm_mesos::agent_api::AgentInfo {
        hostname: "node1".into(),
        id: Some(id.clone()),
        resources: vec![mpiswarm_mesos::Resource::scalar("cpus", 4.0), mpiswarm_mesos::Resource::scalar("mem", 4096.0)],
        attributes: vec![],
        port: None,
    };
    let client = mpiswarm_mesos::client::AgentClient::new(&c.url(), None);
    let sub = client.subscribe(info, t2).await.unwrap();
    assert_eq!(sub.subscribed.agent_id, id);
    (f, sub)
}

#[tokio::test]
async fn a_task_the_reregistering_agent_does_not_report_is_lost_with_reason_reconciliation() {
    let c = Cluster::start().await;
    let f = c.framework("fw", &["mpi"]).await;
    let (mut f, _agent_stream) = reregister_without_t1(&c, f).await;
    let lost = tokio::time::timeout(common::DEADLINE, f.update_of("t1")).await.expect("an update for t1");
    assert_eq!(lost.state, TaskState::Lost);
    assert_eq!(lost.reason, Some(Reason::ReasonReconciliation));
    assert_eq!(lost.source, Some(mpiswarm_mesos::Source::SourceMaster));
    assert_eq!(lost.message.as_deref(), Some("Task is unknown to the agent"));
    // The task it did report stays RUNNING, and only its resources stay used.
    f.client.call(&Call::reconcile(f.id(), vec![])).await.unwrap();
    let t2 = f.update_of("t2").await;
    assert_eq!(t2.state, TaskState::Running);
    let state = c.state().await;
    assert_eq!(state["slaves"][0]["used_resources"]["cpus"], 1.0);
    let running: Vec<_> = state["frameworks"][0]["tasks"].as_array().unwrap().iter().map(|t| t["id"].clone()).collect();
    assert_eq!(running, vec![serde_json::json!("t2")]);
}

#[tokio::test]
async fn a_partition_aware_framework_sees_gone_for_a_task_the_agent_does_not_report() {
    let c = Cluster::start().await;
    let info = partition_aware("pa");
    let f = common::Framework::subscribe(&c.url(), info).await;
    let (mut f, _agent_stream) = reregister_without_t1(&c, f).await;
    let gone = tokio::time::timeout(common::DEADLINE, f.update_of("t1")).await.expect("an update for t1");
    assert_eq!(gone.state, TaskState::Gone);
    assert_eq!(gone.reason, Some(Reason::ReasonReconciliation));
}

#[tokio::test]
async fn a_disconnected_agent_has_its_offers_rescinded() {
    let c = Cluster::start().await;
    let agent = c.agent("node1", 4.0, 4096.0);
    let mut f = c.framework("fw", &["mpi"]).await;
    let offer = f.offers().await.remove(0);
    agent.crash();
    let rescind = f.expect(EventType::Rescind).await.rescind.unwrap();
    assert_eq!(rescind.offer_id, offer.id);
}

#[tokio::test]
async fn a_partition_aware_framework_sees_unreachable_instead_of_lost() {
    let c = Cluster::start_with(|a| a.agent_reregister_timeout = 0.2).await;
    let agent = c.agent("node1", 4.0, 4096.0);
    let info = partition_aware("pa");
    let mut f = common::Framework::subscribe(&c.url(), info).await;
    let offer = f.offers().await.remove(0);
    let t = task("t1", &offer, 1.0, 128.0, "sleep 1000");
    f.launch(&offer, vec![t]).await;
    assert_eq!(f.update_of("t1").await.state, TaskState::Running);
    agent.crash();
    let status = f.update_of("t1").await;
    assert_eq!(status.state, TaskState::Unreachable);
    assert_eq!(status.reason, Some(Reason::ReasonAgentRemoved));
}

#[tokio::test]
async fn stopping_the_server_ends_open_streams() {
    let c = Cluster::start().await;
    let mut f = c.framework("fw", &["mpi"]).await;
    let Cluster { server, dir: _dir } = c;
    tokio::time::timeout(common::DEADLINE, server.stop()).await.expect("stop does not hang").unwrap();
    use futures::StreamExt;
    let end = tokio::time::timeout(common::DEADLINE, async { while let Some(Ok(_)) = f.events.next().await {} }).await;
    assert!(end.is_ok(), "the framework's stream ended");
}

/// An agent that withdraws (its node is down) has stopped reading its
/// stream: a LAUNCH still on it never reached the agent. The WITHDRAW lists
/// what the agent knows; the task it lacks ends at once as TASK_DROPPED
/// (REASON_AGENT_DRAINING, nothing started) instead of being held as
/// staging until the agent is declared lost and then reported lost as if it
/// had run. A task it lists stays; the agent is disconnected (its offers
/// rescinded, its UPDATEs refused until it subscribes again).
#[tokio::test]
async fn a_launch_the_withdrawing_agent_never_read_is_dropped_at_once() {
    let c = Cluster::start().await;
    let info = partition_aware("pa");
    let mut f = common::Framework::subscribe(&c.url(), info).await;
    let agent_info = mpiswarm_mesos::agent_api::AgentInfo {
        hostname: "node1".into(),
        id: None,
        resources: vec![mpiswarm_mesos::Resource::scalar("cpus", 4.0), mpiswarm_mesos::Resource::scalar("mem", 4096.0)],
        attributes: vec![],
        port: None,
    };
    let client = mpiswarm_mesos::client::AgentClient::new(&c.url(), None);
    // Subscribed, and never reads its stream from here on.
    let sub = common::within("agent SUBSCRIBE", client.subscribe(agent_info, vec![])).await.unwrap();
    let id = sub.subscribed.agent_id.clone();
    let offer = f.offers().await.remove(0);
    let (t1, t2) = (task("t1", &offer, 1.0, 128.0, "sleep 1000"), task("t2", &offer, 1.0, 128.0, "sleep 1000"));
    let known = mpiswarm_mesos::agent_api::ReportedTask {
        framework_id: f.id().clone(),
        task_info: t2.clone(),
        executor_info: None,
        status: mpiswarm_mesos::TaskStatus::new(t2.task_id.clone(), TaskState::Starting),
    };
    f.launch(&offer, vec![t1, t2]).await;
    assert_eq!(c.state().await["slaves"][0]["used_resources"]["cpus"], 2.0, "both launched on the agent");
    common::within("WITHDRAW", client.withdraw(&id, vec![known])).await.unwrap();
    let dropped = common::within("an update for t1", f.update_of("t1")).await;
    assert_eq!((dropped.state, dropped.reason), (TaskState::Dropped, Some(Reason::ReasonAgentDraining)));
    assert_eq!(dropped.source, Some(mpiswarm_mesos::Source::SourceMaster));
    let message = dropped.message.unwrap_or_default();
    assert!(message.contains("withdrew") && message.contains("nothing was started"), "{message}");
    let state = c.state().await;
    assert_eq!(state["slaves"][0]["active"], false, "disconnected: {}", state["slaves"][0]);
    assert_eq!(state["slaves"][0]["used_resources"]["cpus"], 1.0, "t2, which the agent listed, keeps its resources");
    let update = client.update(&id, f.id(), mpiswarm_mesos::TaskStatus::new(TaskId::new("t2"), TaskState::Running));
    let refused = common::within("an UPDATE after WITHDRAW", update).await.expect_err("not subscribed any more");
    assert!(refused.to_string().contains("403"), "{refused}");
    drop(sub);
}
