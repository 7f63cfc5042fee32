//! The framework side of a test: a subscribed [`Framework`] with helpers
//! that await its events under one overall deadline each (never a sleep),
//! plus [`task`] and [`healthy`]. Used by the offer layer's own tests and by
//! the end-to-end tests that drive it as a process.

use futures::StreamExt;
use mpiswarm_mesos::client::{EventStream, SchedulerClient, Subscription};
use mpiswarm_mesos::scheduler::{Event, EventType, Subscribed};
use mpiswarm_mesos::{FrameworkInfo, Resource};

use crate::DEADLINE;

pub struct Framework {
    pub client: SchedulerClient,
    pub subscribed: Subscribed,
    pub events: EventStream<Event>,
    pub info: FrameworkInfo,
}

impl Framework {
    pub async fn subscribe(url: &str, info: FrameworkInfo) -> Self {
        Self::subscribe_with(SchedulerClient::new(url, None), info).await
    }

    /// Subscribes through `client` (credentials, a CA to trust).
    pub async fn subscribe_with(client: SchedulerClient, info: FrameworkInfo) -> Self {
        let Subscription { subscribed, events, .. } = client.subscribe(info.clone()).await.unwrap();
        let mut info = info;
        info.id = Some(subscribed.framework_id.clone());
        Self { client, subscribed, events, info }
    }

    pub fn id(&self) -> &mpiswarm_mesos::FrameworkId {
        &self.subscribed.framework_id
    }

    /// The next event that is not a heartbeat.
    pub async fn next(&mut self) -> Event {
        next_event(&mut self.events).await
    }

    /// Skips events until one of `kind` arrives, within one overall
    /// deadline (heartbeats and other events do not extend it).
    pub async fn expect(&mut self, kind: EventType) -> Event {
        let wait = async {
            loop {
                let e = self.next().await;
                if e.kind == kind {
                    return e;
                }
            }
        };
        tokio::time::timeout(DEADLINE, wait).await.unwrap_or_else(|_| panic!("no {kind:?} event within {DEADLINE:?}"))
    }

    pub async fn offers(&mut self) -> Vec<mpiswarm_mesos::Offer> {
        self.expect(EventType::Offers).await.offers.unwrap().offers
    }

    /// The next UPDATE for `task` (skipping other events), within one
    /// overall deadline.
    pub async fn update_of(&mut self, task: &str) -> mpiswarm_mesos::TaskStatus {
        let wait = async {
            loop {
                let e = self.expect(EventType::Update).await;
                let s = e.update.unwrap().status;
                if s.task_id.value == task {
                    return s;
                }
            }
        };
        tokio::time::timeout(DEADLINE, wait)
            .await
            .unwrap_or_else(|_| panic!("no update of task {task} within {DEADLINE:?}"))
    }

    /// ACCEPTs `offer` with one LAUNCH of `tasks` (no filter options).
    pub async fn launch(&self, offer: &mpiswarm_mesos::Offer, tasks: Vec<mpiswarm_mesos::TaskInfo>) {
        let call = mpiswarm_mesos::scheduler::Call::accept(
            self.id(),
            vec![offer.id.clone()],
            vec![mpiswarm_mesos::Operation::launch(tasks)],
            None,
        );
        self.client.call(&call).await.unwrap();
    }

    pub async fn ack(&self, status: &mpiswarm_mesos::TaskStatus) {
        let call = mpiswarm_mesos::scheduler::Call::acknowledge(
            self.id(),
            status.agent_id.clone().unwrap(),
            status.task_id.clone(),
            status.uuid.clone().unwrap(),
        );
        self.client.call(&call).await.unwrap();
    }
}

/// The next event that is not a heartbeat, within one overall deadline
/// (heartbeats do not extend it).
pub async fn next_event(events: &mut EventStream<Event>) -> Event {
    within("an event other than a heartbeat", async {
        loop {
            let e = events.next().await.expect("the event stream ended").expect("a decodable event");
            if e.kind != EventType::Heartbeat {
                return e;
            }
        }
    })
    .await
}

/// Awaits `fut` within [`DEADLINE`] in all, failing the test with `what` otherwise:
/// for every loop that waits for several events, so no event can keep it waiting.
pub async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(DEADLINE, fut).await.unwrap_or_else(|_| panic!("no {what} within {DEADLINE:?}"))
}

/// A shell task using `cpus` and `mem` on the offer's agent.
pub fn task(id: &str, offer: &mpiswarm_mesos::Offer, cpus: f64, mem: f64, command: &str) -> mpiswarm_mesos::TaskInfo {
    let mut t = mpiswarm_mesos::TaskInfo::new(id, id, &offer.agent_id);
    t.resources = vec![Resource::scalar("cpus", cpus), Resource::scalar("mem", mem)];
    t.command = Some(mpiswarm_mesos::CommandInfo::shell(command));
    t
}

/// Waits (with backoff) until the offer layer at `url` answers /health.
pub async fn healthy(url: &str) {
    let probe = || async {
        reqwest::get(format!("{url}/health"))
            .await
            .map_err(|source| mpiswarm_mesos::client::ClientError::Http { url: url.to_owned(), source })
    };
    mpiswarm_mesos::client::with_backoff(mpiswarm_mesos::client::Backoff::default(), 100, probe)
        .await
        .expect("the offer layer answers");
}
