//! Test fixtures (compiled for tests only): chainable MpiJob builders
//! (`MpiJob::test().finalized().deleting()`), gangs in the books, and an
//! [`ApiServerVerifier`] that plays the API server for one reconcile: it
//! answers each request the reconcile makes, asserts it is exactly the one
//! expected next (method, path, query, content type, body), and fails if an
//! expected request never came or an unexpected one did.

use std::sync::{Arc, Weak};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use kube::client::Body;
use kube::runtime::reflector::ObjectRef;
use mpiswarm_crds::{ConditionType as C, FINALIZER, MpiJob, MpiJobStatus, Phase};
use mpiswarm_mesos::{TaskId, TaskState, TaskStatus};
use mpiswarm_policy::{AgentCapacity, FreeResources, JobDemand, Policy, Resources, place};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::context::{Command, Context, FIELD_MANAGER, Settings};
use crate::gang::{GangBook, Stage};
use crate::names::TaskRole;

pub const UID: &str = "0c5e7a1b-93f2-4d1e-8a77-2f0a9d1b3c4e";
pub const NAME: &str = "pi";
pub const NAMESPACE: &str = "default";

/// Chainable MpiJob builders, as `MpiJob::test()...`.
pub trait JobFixture: Sized {
    /// A 4-rank job as the API server returns it: named, namespaced, with a uid and generation 1.
    fn test() -> Self;
    /// Carries the controller's finalizer.
    fn finalized(self) -> Self;
    /// Being deleted (a deletionTimestamp; the finalizer holds it).
    fn deleting(self) -> Self;
    /// Invalid in a way only `validate()` sees: `mpirunArgs` naming `-np`.
    fn invalid(self) -> Self;
    /// A YAML fragment merged into `spec.runPolicy`, e.g. `{ttlSecondsAfterFinished: 60}`.
    fn run_policy(self, yaml: &str) -> Self;
    fn with_status(self, status: MpiJobStatus) -> Self;
}

impl JobFixture for MpiJob {
    fn test() -> Self {
        serde_yaml::from_str(&format!(
            "apiVersion: mpiswarm.io/v1alpha1\nkind: MpiJob\nmetadata: {{name: {NAME}, namespace: {NAMESPACE}, uid: {UID}, generation: 1, creationTimestamp: '2026-01-01T00:00:00Z'}}\nspec:\n  image: img:1\n  command: [pi]\n  ranks: 4\n  resources: {{cpus: 0.5, memory: 64Mi}}\n"
        ))
        .unwrap()
    }

    fn finalized(mut self) -> Self {
        self.metadata.finalizers = Some(vec![FINALIZER.to_owned()]);
        self
    }

    fn deleting(mut self) -> Self {
        self.metadata.deletion_timestamp = Some(time(T0));
        self
    }

    fn invalid(mut self) -> Self {
        self.spec.mpi.mpirun_args = vec!["-np".into(), "8".into()];
        self
    }

    fn run_policy(mut self, yaml: &str) -> Self {
        let mut rp = serde_json::to_value(&self.spec.run_policy).unwrap();
        let extra: Value = serde_yaml::from_str(yaml).unwrap();
        for (k, v) in extra.as_object().unwrap() {
            rp[k] = v.clone();
        }
        self.spec.run_policy = serde_json::from_value(rp).unwrap();
        self
    }

    fn with_status(mut self, status: MpiJobStatus) -> Self {
        self.status = Some(status);
        self
    }
}

/// A fixed moment (Unix seconds) for what fixtures stamp.
pub const T0: i64 = 1_767_225_600;

pub fn time(secs: i64) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap())
}

/// A gang of [`MpiJob::test`] spread over two agents (n1, n2; launcher on n1).
pub fn gang(stage: Stage, generation: u32) -> GangBook {
    let offers = vec![
        AgentCapacity::new("a1", "n1", FreeResources::new(2.0, 4096.0)),
        AgentCapacity::new("a2", "n2", FreeResources::new(2.0, 4096.0)),
    ];
    let d = JobDemand::new(4, Resources::new(0.5, 64.0, 0.0)).with_policy(Policy::Spread);
    let mut g = GangBook::new(UID, generation, "*", place(&d, &offers).unwrap(), stage);
    if stage == Stage::Launched {
        g.launched_at = Some(T0);
    }
    g
}

/// Records `state` (and an exit code) for the gang's tasks that `pick` selects.
pub fn set_tasks(g: &mut GangBook, pick: impl Fn(TaskRole) -> bool, state: TaskState, exit: Option<&str>) {
    let ids: Vec<String> = g.tasks.iter().filter(|(_, t)| pick(t.role)).map(|(id, _)| id.clone()).collect();
    for id in ids {
        let mut s = TaskStatus::new(TaskId::new(&id), state);
        s.labels = exit.map(|c| mpiswarm_mesos::Labels::from_pairs([("mpiswarm.io/exit-code", c)]));
        g.record(&s, T0);
    }
}

/// What the fake framework driver does with a KILL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnKill {
    /// Nothing (the tasks never end).
    Ignore,
    /// Every killed task reports TASK_KILLED at once.
    Killed,
}

/// A Context whose client talks to the verifier and whose commands go to a
/// fake driver; dropping the Context ends both.
pub struct Harness {
    pub ctx: Arc<Context>,
    verifier: tokio::task::JoinHandle<()>,
    driver: tokio::task::JoinHandle<Vec<Command>>,
    _trigger: futures::channel::mpsc::UnboundedReceiver<ObjectRef<MpiJob>>,
}

impl Harness {
    /// Starts the verifier with the requests expected in order, for `job`.
    pub fn with_settings(job: &MpiJob, expected: Vec<Expect>, on_kill: OnKill, settings: Settings) -> Self {
        let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = kube::Client::new(service, NAMESPACE);
        let (commands_tx, commands_rx) = mpsc::unbounded_channel();
        let (trigger_tx, trigger) = futures::channel::mpsc::unbounded();
        let events = crate::events::Publisher::new(client.clone(), FIELD_MANAGER, "test-replica");
        let ctx = Arc::new(Context::new(client, events, settings, commands_tx, trigger_tx));
        let verifier = tokio::spawn(ApiServerVerifier { handle, job: job.clone() }.run(expected));
        let driver = tokio::spawn(fake_driver(Arc::downgrade(&ctx), commands_rx, on_kill));
        Self { ctx, verifier, driver, _trigger: trigger }
    }

    /// Drops the Context (and with it every client), then waits for the
    /// verifier to see the end of the requests; returns the commands the
    /// fake driver received. Panics with the verifier's complaint, if any.
    pub async fn finish(self) -> Vec<Command> {
        let Self { ctx, verifier, driver, _trigger } = self;
        drop(ctx);
        match tokio::time::timeout(Duration::from_secs(10), verifier).await {
            Err(_) => panic!("the verifier did not finish within 10 s (a client still alive?)"),
            Ok(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Ok(r) => r.unwrap(),
        }
        tokio::time::timeout(Duration::from_secs(10), driver).await.unwrap().unwrap()
    }
}

/// Collects commands; answers a KILL with TASK_KILLED when asked to.
async fn fake_driver(ctx: Weak<Context>, mut rx: mpsc::UnboundedReceiver<Command>, on_kill: OnKill) -> Vec<Command> {
    let mut seen = Vec::new();
    while let Some(command) = rx.recv().await {
        if let (Command::Kill(tasks), OnKill::Killed, Some(ctx)) = (&command, on_kill, ctx.upgrade()) {
            for (task, _agent) in tasks {
                ctx.books.record(&TaskStatus::new(TaskId::new(task), TaskState::Killed), T0);
            }
            ctx.task_changed.notify_waiters();
        }
        seen.push(command);
    }
    seen
}

/// One request the reconcile is expected to make, and how it is answered.
#[derive(Debug, Clone)]
pub enum Expect {
    /// The finalizer helper's JSON patch adding our finalizer.
    AddFinalizer,
    /// The finalizer helper's JSON patch removing it.
    RemoveFinalizer,
    /// A server-side apply of the status subresource, as field manager
    /// `mpiswarm-controller` with force, carrying this phase and exactly
    /// these conditions (type, status, reason) in this order.
    Status { phase: Phase, conditions: Vec<(C, &'static str, &'static str)> },
    /// An `events.k8s.io/v1` Event about the job.
    Event { type_: &'static str, reason: &'static str },
    /// A GET of the job's SSH key Secret, answered 404 or with a key.
    GetSecret { exists: bool },
    /// The creation of the job's SSH key Secret, owned by the job.
    CreateSecret,
    /// DELETE of the MpiJob (TTL).
    DeleteJob,
}

pub struct ApiServerVerifier {
    handle: tower_test::mock::Handle<Request<Body>, Response<Body>>,
    job: MpiJob,
}

const JOB_PATH: &str = "/apis/mpiswarm.io/v1alpha1/namespaces/default/mpijobs/pi";

impl ApiServerVerifier {
    async fn run(mut self, expected: Vec<Expect>) {
        for (i, want) in expected.iter().enumerate() {
            let next = tokio::time::timeout(Duration::from_secs(10), self.handle.next_request()).await;
            let Ok(Some((request, respond))) = next else {
                panic!("request {i} ({want:?}) never came (the reconcile made only {i} of {})", expected.len());
            };
            let (parts, body) = request.into_parts();
            let body = body.collect_bytes().await.unwrap();
            let what = format!("request {i} ({} {})", parts.method, parts.uri);
            let response = self.check(want, &parts, &body, &what);
            respond.send_response(response);
        }
        // Once the test drops every client, the stream of requests ends; anything before that is unexpected.
        if let Ok(Some((request, _))) = tokio::time::timeout(Duration::from_secs(10), self.handle.next_request()).await
        {
            panic!(
                "unexpected request {} {} after the {} expected ones",
                request.method(),
                request.uri(),
                expected.len()
            );
        }
    }

    fn check(&self, want: &Expect, parts: &http::request::Parts, body: &[u8], what: &str) -> Response<Body> {
        let method = parts.method.as_str();
        let path = parts.uri.path();
        let query = query(&parts.uri);
        let content_type = parts.headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
        let json: Value = if body.is_empty() { Value::Null } else { serde_json::from_slice(body).unwrap() };
        let secret_name = crate::names::ssh_secret(NAME, UID);
        match want {
            Expect::AddFinalizer | Expect::RemoveFinalizer => {
                assert_eq!((method, path), ("PATCH", JOB_PATH), "{what}: expected {want:?}");
                assert_eq!(content_type, "application/json-patch+json", "{what}");
                let ops = if matches!(want, Expect::AddFinalizer) {
                    json!([
                        {"op": "test", "path": "/metadata/finalizers", "value": null},
                        {"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]},
                    ])
                } else {
                    json!([
                        {"op": "test", "path": "/metadata/finalizers/0", "value": FINALIZER},
                        {"op": "remove", "path": "/metadata/finalizers/0"},
                    ])
                };
                assert_eq!(json, ops, "{what}");
                let mut job = self.job.clone();
                job.metadata.finalizers = matches!(want, Expect::AddFinalizer).then(|| vec![FINALIZER.to_owned()]);
                ok(&job)
            }
            Expect::Status { phase, conditions } => {
                assert_eq!((method, path), ("PATCH", &*format!("{JOB_PATH}/status")), "{what}: expected {want:?}");
                assert_eq!(content_type, "application/apply-patch+yaml", "{what}: server-side apply");
                assert_eq!(query, [("fieldManager", FIELD_MANAGER), ("force", "true")].map(owned), "{what}");
                let keys: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
                assert_eq!(keys, ["apiVersion", "kind", "status"], "{what}: the patch carries the status only");
                assert_eq!((&json["apiVersion"], &json["kind"]), (&json!("mpiswarm.io/v1alpha1"), &json!("MpiJob")));
                let status: MpiJobStatus = serde_json::from_value(json["status"].clone()).unwrap();
                assert_eq!(status.phase, Some(*phase), "{what}: phase");
                assert_eq!(status.observed_generation, Some(1), "{what}: observedGeneration");
                let got: Vec<(String, String, String)> =
                    status.conditions.iter().map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone())).collect();
                let want_conditions: Vec<(String, String, String)> =
                    conditions.iter().map(|(t, s, r)| (t.to_string(), (*s).to_owned(), (*r).to_owned())).collect();
                assert_eq!(got, want_conditions, "{what}: conditions (type, status, reason)");
                ok(&self.job.clone().with_status(status))
            }
            Expect::Event { type_, reason } => {
                assert_eq!(
                    (method, path),
                    ("POST", "/apis/events.k8s.io/v1/namespaces/default/events"),
                    "{what}: expected {want:?}"
                );
                assert_eq!(
                    (json["type"].as_str(), json["reason"].as_str()),
                    (Some(*type_), Some(*reason)),
                    "{what}: Event type and reason"
                );
                assert_eq!(json["regarding"]["kind"], "MpiJob", "{what}");
                assert_eq!(
                    (json["regarding"]["name"].as_str(), json["regarding"]["uid"].as_str()),
                    (Some(NAME), Some(UID))
                );
                assert_eq!(json["reportingController"], FIELD_MANAGER, "{what}");
                response(StatusCode::CREATED, json)
            }
            Expect::GetSecret { exists } => {
                assert_eq!(
                    (method, path),
                    ("GET", &*format!("/api/v1/namespaces/default/secrets/{secret_name}")),
                    "{what}: expected {want:?}"
                );
                if *exists {
                    let (private, _) = crate::keys::generate().unwrap();
                    let secret = json!({"apiVersion": "v1", "kind": "Secret",
                        "metadata": {"name": secret_name, "namespace": NAMESPACE},
                        "data": {"id_ed25519": base64(&private)}});
                    response(StatusCode::OK, secret)
                } else {
                    response(
                        StatusCode::NOT_FOUND,
                        json!({"apiVersion": "v1", "kind": "Status", "status": "Failure",
                        "reason": "NotFound", "code": 404, "message": format!("secrets \"{secret_name}\" not found")}),
                    )
                }
            }
            Expect::CreateSecret => {
                assert_eq!((method, path), ("POST", "/api/v1/namespaces/default/secrets"), "{what}: expected {want:?}");
                assert_eq!(json["metadata"]["name"], secret_name, "{what}");
                assert_eq!(json["type"], "kubernetes.io/ssh-auth", "{what}");
                let owner = &json["metadata"]["ownerReferences"][0];
                assert_eq!((owner["uid"].as_str(), owner["controller"].as_bool()), (Some(UID), Some(true)), "{what}");
                let key = json["data"]["id_ed25519"].as_str().unwrap_or_default();
                assert!(key.starts_with(&base64(b"-----BEGIN OPENSSH")[..20]), "{what}: an OpenSSH key: {key}");
                response(StatusCode::CREATED, json)
            }
            Expect::DeleteJob => {
                assert_eq!((method, path), ("DELETE", JOB_PATH), "{what}: expected {want:?}");
                ok(&self.job)
            }
        }
    }
}

fn owned((k, v): (&str, &str)) -> (String, String) {
    (k.to_owned(), v.to_owned())
}

/// The query pairs, sorted (kube's order of parameters is not part of the contract).
fn query(uri: &http::Uri) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_owned(), v.to_owned())
        })
        .collect();
    pairs.sort();
    pairs
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn ok(job: &MpiJob) -> Response<Body> {
    response(StatusCode::OK, serde_json::to_value(job).unwrap())
}

fn response(code: StatusCode, body: Value) -> Response<Body> {
    Response::builder().status(code).body(Body::from(serde_json::to_vec(&body).unwrap())).unwrap()
}
