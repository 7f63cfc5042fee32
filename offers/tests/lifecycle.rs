//! Task lifecycle over real HTTP: offers, launches on a test agent, status
//! updates and their acknowledgement, filters, suppression, timeouts.

mod common;

use common::{Cluster, task};
use mpiswarm_mesos::scheduler::{Call, EventType};
use mpiswarm_mesos::{Filters, Operation, Reason, TaskState};

#[tokio::test]
async fn a_launched_task_runs_finishes_and_is_acknowledged() {
    let c = Cluster::start().await;
    let _agent = c.agent("node1", 4.0, 4096.0);
    let mut f = c.framework("fw", &["mpi"]).await;
    let offers = f.offers().await;
    let offer = &offers[0];
    assert_eq!(offer.hostname, "node1");
    assert_eq!(offer.allocation_info.as_ref().unwrap().role.as_deref(), Some("mpi"));
    let t = task("t1", offer, 1.0, 128.0, "true");
    f.launch(offer, vec![t]).await;
    let running = f.update_of("t1").await;
    assert_eq!(running.state, TaskState::Running);
    assert_eq!(running.uuid.as_ref().unwrap().as_slice().len(), 16);
    f.ack(&running).await;
    let finished = f.update_of("t1").await;
    assert_eq!(finished.state, TaskState::Finished);
    f.ack(&finished).await;
}

#[tokio::test]
async fn an_unacknowledged_update_is_sent_again_with_the_same_uuid() {
    let c = Cluster::start_with(|a| a.status_update_retry_interval = 0.2).await;
    let _agent = c.agent("node1", 4.0, 4096.0);
    let mut f = c.framework("fw", &["mpi"]).await;
    let offer = f.offers().await.remove(0);
    let t = task("t1", &offer, 1.0, 128.0, "sleep 1000");
    f.launch(&offer, vec![t]).await;
    let first = f.update_of("t1").await;
    let again = f.update_of("t1").await;
    assert_eq!(again.state, TaskState::Running);
    assert_eq!(again.uuid, first.uuid, "the retry carries the same uuid");
    f.ack(&again).await;
    // After the ack, nothing more for t1 but the answer to our KILL.
    f.client.call(&Call::kill(f.id(), "t1".into(), None)).await.unwrap();
    // A retry of the RUNNING update may have been on the stream before the
    // ack reached the master: skip those, they are the same update again.
    let killed = common::within("update of t1 other than the RUNNING retry", async {
        loop {
            let s = f.update_of("t1").await;
            if !(s.state == TaskState::Running && s.uuid == first.uuid) {
                return s;
            }
        }
    })
    .await;
    assert_eq!(killed.state, TaskState::Killed);
}

#[tokio::test]
async fn accepting_a_stale_offer_gives_task_lost_with_reason_invalid_offers() {
    let c = Cluster::start().await;
    let _agent = c.agent("node1", 4.0, 4096.0);
    let mut f = c.framework("fw", &["mpi"]).await;
    let offer = f.offers().await.remove(0);
    f.client.call(&Call::decline(f.id(), vec![offer.id.clone()], Some(Filters::refuse(0.0)))).await.unwrap();
    let t = task("t1", &offer, 1.0, 128.0, "true");
    // 202 all the same: the error comes as a status update.
    f.launch(&offer, vec![t]).await;
    let lost = f.update_of("t1").await;
    assert_eq!(lost.state, TaskState::Lost);
    assert_eq!(lost.reason, Some(Reason::ReasonInvalidOffers));
    assert!(lost.uuid.is_none(), "master-generated updates need no acknowledgement");
}

#[tokio::test]
async fn a_task_asking_for_more_than_offered_gets_task_error_naming_the_resources() {
    let c = Cluster::start().await;
    let _agent = c.agent("node1", 2.0, 1024.0);
    let mut f = c.framework("fw", &["mpi"]).await;
    let offer = f.offers().await.remove(0);
    let t = task("big", &offer, 3.0, 128.0, "true");
    f.launch(&offer, vec![t]).await;
    let err = f.update_of("big").await;
    assert_eq!(err.state, TaskState::Error);
    assert_eq!(err.reason, Some(Reason::ReasonTaskInvalid));
    assert!(err.message.unwrap().contains("cpus:3"), "the message names the resources");
}

#[tokio::test]
async fn a_declined_offer_comes_back_after_refuse_seconds_and_at_once_after_revive() {
    let c = Cluster::start().await;
    let _agent = c.agent("node1", 2.0, 1024.0);
    let mut f = c.framework("fw", &["mpi"]).await;
    let offer = f.offers().await.remove(0);
    f.client.call(&Call::decline(f.id(), vec![offer.id.clone()], Some(Filters::refuse(0.3)))).await.unwrap();
    let again = f.offers().await.remove(0);
    assert_eq!(again.agent_id, offer.agent_id);
    assert_ne!(again.id, offer.id);
    f.client.call(&Call::decline(f.id(), vec![again.id.clone()], Some(Filters::refuse(3600.0)))).await.unwrap();
    f.client.call(&Call::revive(f.id(), vec![])).await.unwrap();
    let revived = f.offers().await.remove(0);
    assert_eq!(revived.agent_id, offer.agent_id);
}

#[tokio::test]
async fn unanswered_offers_are_rescinded_after_the_offer_timeout() {
    let c = Cluster::start_with(|a| a.offer_timeout = Some(0.2)).await;
    let _agent = c.agent("node1", 2.0, 1024.0);
    let mut f = c.framework("fw", &["mpi"]).await;
    let offer = f.offers().await.remove(0);
    let rescind = f.expect(EventType::Rescind).await;
    assert_eq!(rescind.rescind.unwrap().offer_id, offer.id);
}

#[tokio::test]
async fn a_suppressed_framework_gets_no_offers_and_revive_brings_them_back() {
    let c = Cluster::start().await;
    let mut f = c.framework("fw", &["mpi"]).await;
    f.client.call(&Call::suppress(f.id(), vec![])).await.unwrap();
    let _agent = c.agent("node1", 2.0, 1024.0);
    // Another framework proves offers are being made.
    let mut other = c.framework("other", &["mpi"]).await;
    let o = other.offers().await.remove(0);
    other.client.call(&Call::decline(other.id(), vec![o.id], Some(Filters::refuse(3600.0)))).await.unwrap();
    let state = c.state().await;
    let fw = state["frameworks"].as_array().unwrap().iter().find(|x| x["name"] == "fw").unwrap().clone();
    assert_eq!(fw["offers"].as_array().unwrap().len(), 0);
    assert_eq!(fw["suppressed_roles"], serde_json::json!(["mpi"]));
    f.client.call(&Call::revive(f.id(), vec!["mpi".into()])).await.unwrap();
    assert_eq!(f.offers().await.len(), 1);
}

#[tokio::test]
async fn launch_group_starts_every_task_of_the_group() {
    let c = Cluster::start().await;
    let agent = c.agent("node1", 4.0, 4096.0);
    let mut f = c.framework("fw", &["mpi"]).await;
    let offer = f.offers().await.remove(0);
    let mut executor = mpiswarm_mesos::ExecutorInfo::default_executor("job-1-node1");
    executor.resources =
        vec![mpiswarm_mesos::Resource::scalar("cpus", 0.1), mpiswarm_mesos::Resource::scalar("mem", 32.0)];
    let mut w0 = task("w0", &offer, 1.0, 256.0, "");
    let mut w1 = task("w1", &offer, 1.0, 256.0, "");
    w0.command = None;
    w1.command = None;
    let group = mpiswarm_mesos::TaskGroupInfo { tasks: vec![w0, w1] };
    let call = Call::accept(f.id(), vec![offer.id.clone()], vec![Operation::launch_group(executor, group)], None);
    f.client.call(&call).await.unwrap();
    let mut running = std::collections::BTreeSet::new();
    common::within("RUNNING of both tasks of the group", async {
        while running.len() < 2 {
            let s = f.expect(EventType::Update).await.update.unwrap().status;
            assert_eq!(s.state, TaskState::Running, "{s:?}");
            assert_eq!(s.executor_id.as_ref().unwrap().value, "job-1-node1");
            f.ack(&s).await;
            running.insert(s.task_id.value);
        }
    })
    .await;
    assert_eq!(agent.tasks().len(), 2);
    let state = c.state().await;
    assert_eq!(state["slaves"][0]["used_resources"]["cpus"], 2.1);
}

#[tokio::test]
async fn an_update_posted_twice_reaches_the_framework_once() {
    let c = Cluster::start().await;
    let mut f = c.framework("fw", &["mpi"]).await;
    // A hand-driven agent, so the test controls every UPDATE.
    let agent = mpiswarm_mesos::client::AgentClient::new(&c.url(), None);
    let info = mpiswarm_mesos::agent_api::AgentInfo {
        hostname: "manual".into(),
        id: None,
        resources: vec![mpiswarm_mesos::Resource::scalar("cpus", 2.0), mpiswarm_mesos::Resource::scalar("mem", 512.0)],
        attributes: vec![],
        port: None,
    };
    let mut sub = agent.subscribe(info, vec![]).await.unwrap();
    let agent_id = sub.subscribed.agent_id.clone();
    let offer = f.offers().await.remove(0);
    let t = task("t1", &offer, 1.0, 128.0, "sleep 1000");
    f.launch(&offer, vec![t]).await;
    use futures::StreamExt;
    let launch = common::within("LAUNCH on the agent's stream", async {
        loop {
            let e = sub.events.next().await.unwrap().unwrap();
            if let Some(l) = e.launch {
                return l;
            }
        }
    })
    .await;
    let mut running = mpiswarm_mesos::TaskStatus::new(launch.task_info.task_id.clone(), TaskState::Running);
    running.uuid = Some(mpiswarm_mesos::Bytes::random_uuid());
    agent.update(&agent_id, f.id(), running.clone()).await.unwrap();
    agent.update(&agent_id, f.id(), running.clone()).await.unwrap();
    let mut finished = mpiswarm_mesos::TaskStatus::new(launch.task_info.task_id.clone(), TaskState::Finished);
    finished.uuid = Some(mpiswarm_mesos::Bytes::random_uuid());
    agent.update(&agent_id, f.id(), finished.clone()).await.unwrap();
    let first = f.update_of("t1").await;
    assert_eq!((first.state, &first.uuid), (TaskState::Running, &running.uuid));
    f.ack(&first).await;
    let next = f.update_of("t1").await;
    assert_eq!((next.state, &next.uuid), (TaskState::Finished, &finished.uuid), "no second RUNNING");
    f.ack(&next).await;
    // The agent hears of both acknowledgements.
    let mut acked = Vec::new();
    common::within("two ACKNOWLEDGED events on the agent's stream", async {
        while acked.len() < 2 {
            let e = sub.events.next().await.unwrap().unwrap();
            if let Some(a) = e.acknowledged {
                acked.push(a.uuid);
            }
        }
    })
    .await;
    assert_eq!(acked, vec![running.uuid.unwrap(), finished.uuid.unwrap()]);
}

#[tokio::test]
async fn a_test_agent_registers_over_http_and_its_resources_are_offered() {
    // The test agent is no part of the offer layer: it registers with it
    // over HTTP, as an agent process would.
    let master = common::Cluster::from_flags(&[]).await;
    let url = master.url();
    let resources = "cpus:3;mem:1024".parse::<mpiswarm_mesos::quantities::Quantities>().unwrap().to_resources(None);
    let mut agent = mpiswarm_testkit::TestAgent::start(&url, "demo", resources);
    tokio::time::timeout(common::DEADLINE, agent.subscribed(1)).await.expect("the agent subscribed in time");
    let mut f = common::Framework::subscribe(&url, mpiswarm_mesos::FrameworkInfo::new("root", "fw", &["mpi"])).await;
    let offer = f.offers().await.remove(0);
    assert_eq!(offer.hostname, "demo");
    assert_eq!(mpiswarm_mesos::resources::scalar_sum(&offer.resources, "cpus"), 3.0);
}
