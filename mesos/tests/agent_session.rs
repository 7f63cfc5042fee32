//! The agent loop against a scripted offer layer on loopback: SUBSCRIBE
//! refused (503), a SUBSCRIBE that never gets SUBSCRIBED (overall deadline),
//! a stream that falls silent, and a good stream; UPDATEs delivered in order
//! through 503s, a 400 dropped; a withdrawal posts WITHDRAW on its stream.

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use mpiswarm_mesos::agent_api::{self, AgentInfo, Call, CallType, Event, ReportedTask};
use mpiswarm_mesos::agent_session::{AgentSide, Outgoing, SessionConfig, run};
use mpiswarm_mesos::client::{AgentClient, Backoff};
use mpiswarm_mesos::recordio;
use mpiswarm_mesos::{AgentId, FrameworkId, TaskId, TaskState, TaskStatus};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

const DEADLINE: Duration = Duration::from_secs(30);

/// What the scripted server answers to the n-th SUBSCRIBE.
#[derive(Clone, Copy, Debug)]
enum Answer {
    Unavailable,
    NeverSubscribed,
    SubscribedThenSilent,
    SubscribedThenMessages,
}

#[derive(Default)]
struct Script {
    subscribes: Vec<Answer>,
    /// The SUBSCRIBE calls as received.
    seen_subscribes: Vec<agent_api::Subscribe>,
    /// UPDATEs to answer 503 before accepting any.
    unavailable_updates: usize,
    /// Task ids of accepted UPDATEs, in order.
    accepted: Vec<String>,
    /// WITHDRAW calls: their stream id, agent id and the task ids they list.
    withdrawals: Vec<(Option<String>, Option<AgentId>, Vec<String>)>,
}

type Server = Arc<Mutex<Script>>;

async fn api(State(script): State<Server>, headers: HeaderMap, body: Bytes) -> Response {
    let call: Call = serde_json::from_slice(&body).unwrap();
    match call.kind {
        CallType::Subscribe => {
            let answer = {
                let mut s = script.lock().unwrap();
                s.seen_subscribes.push(call.subscribe.unwrap());
                let n = s.seen_subscribes.len() - 1;
                s.subscribes.get(n).copied().unwrap_or(Answer::SubscribedThenMessages)
            };
            let subscribed = recordio::encode_json(&Event::subscribed(AgentId::new("agent-1"), 0.05)).unwrap();
            let message = recordio::encode_json(&Event::heartbeat()).unwrap();
            let body = match answer {
                Answer::Unavailable => return (StatusCode::SERVICE_UNAVAILABLE, "recovering").into_response(),
                Answer::NeverSubscribed => {
                    Body::from_stream(futures::stream::pending::<Result<Bytes, std::io::Error>>())
                }
                Answer::SubscribedThenSilent => Body::from_stream(
                    futures::stream::iter([Ok::<_, std::io::Error>(subscribed)]).chain(futures::stream::pending()),
                ),
                Answer::SubscribedThenMessages => {
                    let beats = futures::stream::unfold((), move |()| {
                        let m = message.clone();
                        async move {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            Some((Ok::<_, std::io::Error>(m), ()))
                        }
                    });
                    Body::from_stream(futures::stream::iter([Ok(subscribed)]).chain(beats))
                }
            };
            ([("Mesos-Stream-Id", "stream-1")], body).into_response()
        }
        CallType::Update => {
            assert_eq!(headers.get("Mesos-Stream-Id").and_then(|v| v.to_str().ok()), Some("stream-1"));
            let task = call.update.unwrap().status.task_id.value;
            let mut s = script.lock().unwrap();
            if task == "refused" {
                return (StatusCode::BAD_REQUEST, "no such framework").into_response();
            }
            if s.unavailable_updates > 0 {
                s.unavailable_updates -= 1;
                return (StatusCode::SERVICE_UNAVAILABLE, "later").into_response();
            }
            s.accepted.push(task);
            StatusCode::ACCEPTED.into_response()
        }
        CallType::Withdraw => {
            let stream = headers.get("Mesos-Stream-Id").and_then(|v| v.to_str().ok()).map(str::to_owned);
            let tasks = call.withdraw.unwrap().tasks.into_iter().map(|t| t.task_info.task_id.value).collect();
            script.lock().unwrap().withdrawals.push((stream, call.agent_id, tasks));
            StatusCode::ACCEPTED.into_response()
        }
    }
}

use futures::StreamExt;

async fn serve(script: Script) -> (String, Server) {
    let state = Arc::new(Mutex::new(script));
    let app = Router::new().route(agent_api::PATH, post(api)).with_state(Arc::clone(&state));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, state)
}

/// An agent that records what the loop tells it.
#[derive(Default)]
struct Recorder {
    id: Mutex<Option<AgentId>>,
    heartbeats: Mutex<usize>,
    delivered: Mutex<Vec<String>>,
    settled: Mutex<Vec<String>>,
    /// How often the stream went down.
    disconnects: Mutex<usize>,
    /// What `serving` hands the loop (none: always serving).
    serving: Mutex<Option<watch::Receiver<bool>>>,
    /// What `reported_tasks` answers.
    reported: Mutex<Vec<ReportedTask>>,
    /// Bumped on every call, so the test awaits changes.
    changed: Mutex<Option<watch::Sender<u64>>>,
}

impl Recorder {
    fn bump(&self) {
        if let Some(tx) = self.changed.lock().unwrap().as_ref() {
            tx.send_modify(|n| *n += 1);
        }
    }
}

impl AgentSide for Recorder {
    fn agent_info(&self) -> AgentInfo {
        AgentInfo {
            hostname: "node1".into(),
            id: self.agent_id(),
            resources: vec![],
            attributes: vec![],
            port: Some(5051),
        }
    }
    fn agent_id(&self) -> Option<AgentId> {
        self.id.lock().unwrap().clone()
    }
    fn reported_tasks(&self) -> Vec<ReportedTask> {
        self.reported.lock().unwrap().clone()
    }
    fn subscribed(&self, agent_id: &AgentId) {
        *self.id.lock().unwrap() = Some(agent_id.clone());
        self.bump();
    }
    fn handle(&self, _event: Event) {
        *self.heartbeats.lock().unwrap() += 1;
        self.bump();
    }
    fn delivered(&self, update: &Outgoing) {
        self.delivered.lock().unwrap().push(update.status.task_id.value.clone());
        self.bump();
    }
    fn settled(&self, update: &Outgoing) {
        self.settled.lock().unwrap().push(update.status.task_id.value.clone());
        self.bump();
    }
    fn connected(&self, up: bool) {
        if !up {
            *self.disconnects.lock().unwrap() += 1;
            self.bump();
        }
    }
    fn serving(&self) -> Option<watch::Receiver<bool>> {
        self.serving.lock().unwrap().clone()
    }
}

fn fast() -> SessionConfig {
    let quick = Backoff { initial: Duration::from_millis(10), max: Duration::from_millis(50) };
    SessionConfig {
        subscribe_backoff: quick,
        update_backoff: quick,
        subscribe_timeout: Duration::from_millis(300),
        update_timeout: Duration::from_secs(5),
        silent_heartbeats: 3.0,
        min_silence: Duration::from_millis(300),
        leader_check: Duration::from_millis(100),
    }
}

async fn until(side: &Recorder, rx: &mut watch::Receiver<u64>, what: &str, pred: impl Fn(&Recorder) -> bool) {
    let wait = async {
        while !pred(side) {
            rx.changed().await.unwrap();
        }
    };
    tokio::time::timeout(DEADLINE, wait).await.unwrap_or_else(|_| panic!("{what} did not happen within {DEADLINE:?}"));
}

#[tokio::test]
async fn the_loop_outlasts_a_refusal_a_subscribe_without_subscribed_and_a_silent_stream() {
    use Answer::*;
    let script = Script {
        subscribes: vec![Unavailable, NeverSubscribed, SubscribedThenSilent, SubscribedThenMessages],
        ..Script::default()
    };
    let (url, state) = serve(script).await;
    let side = Arc::new(Recorder::default());
    let (tx, mut rx) = watch::channel(0);
    *side.changed.lock().unwrap() = Some(tx);
    let (_outbox, outbox_rx) = mpsc::unbounded_channel();
    let session = tokio::spawn(run(AgentClient::new(&url, None), Arc::clone(&side), outbox_rx, fast()));
    until(&side, &mut rx, "events on the fourth stream", |s| *s.heartbeats.lock().unwrap() >= 3).await;
    session.abort();
    let seen = state.lock().unwrap().seen_subscribes.iter().map(|s| s.agent_info.id.clone()).collect::<Vec<_>>();
    let ports = state.lock().unwrap().seen_subscribes.iter().map(|s| s.agent_info.port).collect::<Vec<_>>();
    assert_eq!(ports, vec![Some(5051); 4], "every SUBSCRIBE registers the agent's HTTP port");
    // The first three SUBSCRIBEs carry no id (none was assigned before the
    // silent stream's SUBSCRIBED); the fourth carries the id it assigned.
    assert_eq!(seen, vec![None, None, None, Some(AgentId::new("agent-1"))]);
}

fn status(task: &str) -> Outgoing {
    Outgoing { framework_id: FrameworkId::new("fw"), status: TaskStatus::new(TaskId::new(task), TaskState::Running) }
}

#[tokio::test]
async fn updates_are_delivered_in_order_through_503s_and_a_400_is_dropped() {
    let (url, state) = serve(Script { unavailable_updates: 3, ..Script::default() }).await;
    let side = Arc::new(Recorder::default());
    let (tx, mut rx) = watch::channel(0);
    *side.changed.lock().unwrap() = Some(tx);
    let (outbox, outbox_rx) = mpsc::unbounded_channel();
    // Queued before the agent has an id: they wait for SUBSCRIBED.
    for task in ["t1", "refused", "t2", "t3"] {
        outbox.send(status(task)).unwrap();
    }
    let session = tokio::spawn(run(AgentClient::new(&url, None), Arc::clone(&side), outbox_rx, fast()));
    until(&side, &mut rx, "three deliveries", |s| s.delivered.lock().unwrap().len() >= 3).await;
    session.abort();
    assert_eq!(*side.delivered.lock().unwrap(), vec!["t1", "t2", "t3"]);
    assert_eq!(*side.settled.lock().unwrap(), vec!["t1", "refused", "t2", "t3"], "a refused update is settled too");
    assert_eq!(state.lock().unwrap().accepted, vec!["t1", "t2", "t3"]);
}

#[tokio::test]
async fn an_agent_that_cannot_serve_withdraws_on_its_stream_holds_no_subscription_and_subscribes_again() {
    let (url, state) = serve(Script::default()).await;
    let side = Arc::new(Recorder::default());
    let (tx, mut rx) = watch::channel(0);
    *side.changed.lock().unwrap() = Some(tx);
    let (serving, serving_rx) = watch::channel(false);
    *side.serving.lock().unwrap() = Some(serving_rx);
    let (_outbox, outbox_rx) = mpsc::unbounded_channel();
    let session = tokio::spawn(run(AgentClient::new(&url, None), Arc::clone(&side), outbox_rx, fast()));
    // Not serving from the start: no SUBSCRIBE at all (the fast config
    // would have subscribed several times over in this time).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(state.lock().unwrap().seen_subscribes.is_empty(), "no SUBSCRIBE while not serving");
    serving.send_replace(true);
    until(&side, &mut rx, "a subscription", |s| s.agent_id().is_some()).await;
    until(&side, &mut rx, "events", |s| *s.heartbeats.lock().unwrap() >= 1).await;
    let known: ReportedTask = serde_json::from_value(serde_json::json!({
        "framework_id": {"value": "F-1"},
        "task_info": {"name": "rank0", "task_id": {"value": "t-known"}, "agent_id": {"value": "agent-1"}},
        "status": {"task_id": {"value": "t-known"}, "state": "TASK_LOST"}
    }))
    .unwrap();
    *side.reported.lock().unwrap() = vec![known];
    serving.send_replace(false);
    until(&side, &mut rx, "the stream dropped", |s| *s.disconnects.lock().unwrap() >= 1).await;
    // It said so on its stream, with the tasks it knows, before it dropped it.
    let withdrawals = state.lock().unwrap().withdrawals.clone();
    let expected = (Some("stream-1".to_owned()), Some(AgentId::new("agent-1")), vec!["t-known".to_owned()]);
    assert_eq!(withdrawals, vec![expected], "one WITHDRAW on the stream, listing the known task");
    let subscribes = state.lock().unwrap().seen_subscribes.len();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(state.lock().unwrap().seen_subscribes.len(), subscribes, "no re-subscribe while withdrawn");
    serving.send_replace(true);
    let again = || state.lock().unwrap().seen_subscribes.len() > subscribes;
    let waited = tokio::time::timeout(DEADLINE, async {
        while !again() {
            rx.changed().await.unwrap();
        }
    })
    .await;
    assert!(waited.is_ok(), "subscribed again once serving");
    session.abort();
}
