//! The test agent over real HTTP: several agents with their own hostnames,
//! resources and attributes register with an in-process offer layer; a
//! framework launches a gang on them through the v1 scheduler API, and the
//! launcher ends by its program while the workers keep running until killed.

use futures::StreamExt;
use mpiswarm_mesos::client::{EventStream, SchedulerClient};
use mpiswarm_mesos::scheduler::{Call, Event, EventType};
use mpiswarm_mesos::{
    CommandInfo, FrameworkId, FrameworkInfo, Offer, Operation, Resource, TaskInfo, TaskState, TaskStatus,
};
use mpiswarm_testkit::{AgentSpec, DEADLINE, TestAgents};
use std::collections::BTreeMap;

#[derive(clap::Parser)]
struct Cli {
    #[command(flatten)]
    args: mpiswarm_offers::OffersArgs,
}

async fn offer_layer(dir: &std::path::Path) -> mpiswarm_offers::Running {
    use clap::Parser;
    let data_dir = dir.to_str().unwrap();
    let cli =
        Cli::parse_from(["offers", "--listen", "127.0.0.1:0", "--data-dir", data_dir, "--allocation-interval", "0.05"]);
    mpiswarm_offers::start(cli.args).await.unwrap()
}

struct Framework {
    client: SchedulerClient,
    id: FrameworkId,
    events: EventStream<Event>,
}

impl Framework {
    async fn subscribe(url: &str) -> Self {
        let client = SchedulerClient::new(url, None);
        let sub = client.subscribe(FrameworkInfo::new("root", "gangs", &["mpi"])).await.unwrap();
        Self { client, id: sub.subscribed.framework_id, events: sub.events }
    }

    /// The next event of `kind`, within one overall deadline.
    async fn expect(&mut self, kind: EventType) -> Event {
        let wait = async {
            loop {
                let e = self.events.next().await.expect("the stream is open").expect("a decodable event");
                if e.kind == kind {
                    return e;
                }
            }
        };
        tokio::time::timeout(DEADLINE, wait).await.unwrap_or_else(|_| panic!("no {kind:?} within {DEADLINE:?}"))
    }

    async fn ack(&self, s: &TaskStatus) {
        let call = Call::acknowledge(&self.id, s.agent_id.clone().unwrap(), s.task_id.clone(), s.uuid.clone().unwrap());
        self.client.call(&call).await.unwrap();
    }
}

fn task(id: &str, offer: &Offer, command: &str) -> TaskInfo {
    let mut t = TaskInfo::new(id, id, &offer.agent_id);
    t.resources = vec![Resource::scalar("cpus", 1.0), Resource::scalar("mem", 64.0)];
    t.command = Some(CommandInfo::shell(command));
    t
}

#[tokio::test]
async fn agents_register_as_specified_and_a_launcher_ends_by_its_program_while_workers_run_until_killed() {
    let dir = tempfile::tempdir().unwrap();
    let server = offer_layer(dir.path()).await;
    let mut agents = TestAgents::start(
        &server.url(),
        [
            AgentSpec::new("node1").cpus(2.0).mem(1024.0).attribute("rack", "r1"),
            AgentSpec::new("node2").cpus(2.0).mem(1024.0).attribute("rack", "r2"),
        ],
    );
    agents.subscribed().await;
    let mut f = Framework::subscribe(&server.url()).await;

    // One offer per agent, with the spec's hostname, resources and attributes.
    let mut offers: BTreeMap<String, Offer> = BTreeMap::new();
    while offers.len() < 2 {
        for o in f.expect(EventType::Offers).await.offers.unwrap().offers {
            offers.insert(o.hostname.clone(), o);
        }
    }
    let rack =
        |o: &Offer| o.attributes.iter().find(|a| a.name == "rack").and_then(|a| a.text_value().map(str::to_owned));
    assert_eq!(rack(&offers["node1"]).as_deref(), Some("r1"));
    assert_eq!(rack(&offers["node2"]).as_deref(), Some("r2"));
    assert_eq!(mpiswarm_mesos::resources::scalar_sum(&offers["node2"].resources, "cpus"), 2.0);

    // The gang: a launcher (sleep, so the workers are seen running first) and two workers.
    let launcher = "sh /etc/mpiswarm/rank launcher mpirun --hostfile /etc/mpi/hostfile -np 2 sleep 0.3";
    let worker = "sh /etc/mpiswarm/rank worker";
    let n1 = &offers["node1"];
    let n2 = &offers["node2"];
    for (offer, tasks) in
        [(n1, vec![task("launcher", n1, launcher), task("w0", n1, worker)]), (n2, vec![task("w1", n2, worker)])]
    {
        let call = Call::accept(&f.id, vec![offer.id.clone()], vec![Operation::launch(tasks)], None);
        f.client.call(&call).await.unwrap();
    }
    agents
        .wait_for_running(|r| r.get("node1").map(Vec::len) == Some(2) && r.get("node2").map(Vec::len) == Some(1))
        .await;

    let mut seen: BTreeMap<String, Vec<TaskStatus>> = BTreeMap::new();
    while seen.get("launcher").is_none_or(|s| !s.last().is_some_and(|s| s.state.is_terminal())) {
        let s = f.expect(EventType::Update).await.update.unwrap().status;
        f.ack(&s).await;
        seen.entry(s.task_id.value.clone()).or_default().push(s);
    }
    let launcher_states: Vec<_> = seen["launcher"].iter().map(|s| s.state).collect();
    assert_eq!(launcher_states, vec![TaskState::Running, TaskState::Finished]);
    let finished = &seen["launcher"][1];
    assert_eq!(finished.labels.as_ref().and_then(|l| l.get(mpiswarm_mesos::agent_api::EXIT_CODE_LABEL)), Some("0"));
    let (started, ended) = (seen["launcher"][0].timestamp.unwrap(), finished.timestamp.unwrap());
    // Timestamps are f64 seconds since 1970: allow for their rounding.
    assert!(ended - started >= 0.299, "sleep 0.3 finished after {:.3} s", ended - started);

    // The workers still run; KILL ends them and the agents hold nothing running.
    let running: Vec<(String, Vec<String>)> = agents
        .running_tasks()
        .into_iter()
        .map(|(host, ts)| (host, ts.into_iter().map(|t| t.info.task_id.value).collect()))
        .collect();
    assert_eq!(running, vec![("node1".to_owned(), vec!["w0".to_owned()]), ("node2".to_owned(), vec!["w1".to_owned()])]);
    for (id, offer) in [("w0", n1), ("w1", n2)] {
        let call = Call::kill(&f.id, mpiswarm_mesos::TaskId::new(id), Some(offer.agent_id.clone()));
        f.client.call(&call).await.unwrap();
    }
    agents.wait_for_running(BTreeMap::is_empty).await;
    server.stop().await.unwrap();
}

#[tokio::test]
async fn a_group_with_a_task_labelled_to_fail_is_refused_whole_and_leaves_nothing_running() {
    let dir = tempfile::tempdir().unwrap();
    let server = offer_layer(dir.path()).await;
    let mut agents = TestAgents::uniform(&server.url(), 1, 4.0, 1024.0);
    agents.subscribed().await;
    let mut f = Framework::subscribe(&server.url()).await;
    let offer = f.expect(EventType::Offers).await.offers.unwrap().offers.remove(0);
    let mut bad = task("w1", &offer, "sh /etc/mpiswarm/rank worker");
    bad.labels = Some(mpiswarm_mesos::Labels::from_pairs([(mpiswarm_testkit::FAIL_LAUNCH_LABEL, "true")]));
    let group = mpiswarm_mesos::TaskGroupInfo { tasks: vec![task("w0", &offer, "sh /etc/mpiswarm/rank worker"), bad] };
    let executor: mpiswarm_mesos::ExecutorInfo =
        serde_json::from_value(serde_json::json!({"type": "DEFAULT", "executor_id": {"value": "gang"}})).unwrap();
    let call = Call::accept(&f.id, vec![offer.id.clone()], vec![Operation::launch_group(executor, group)], None);
    f.client.call(&call).await.unwrap();
    let mut ends = BTreeMap::new();
    while ends.len() < 2 {
        let s = f.expect(EventType::Update).await.update.unwrap().status;
        assert!(s.state.is_terminal(), "no task of a failed group runs: {s:?}");
        f.ack(&s).await;
        ends.insert(s.task_id.value.clone(), (s.state, s.reason));
    }
    use mpiswarm_mesos::Reason::{ReasonContainerLaunchFailed, ReasonTaskKilledDuringLaunch};
    assert_eq!(
        ends,
        BTreeMap::from([
            ("w0".to_owned(), (TaskState::Killed, Some(ReasonTaskKilledDuringLaunch))),
            ("w1".to_owned(), (TaskState::Failed, Some(ReasonContainerLaunchFailed))),
        ])
    );
    assert!(agents.running_tasks().is_empty());
    server.stop().await.unwrap();
}
