//! kube-rs 5 against the server: a Controller using the finalizer helper,
//! the event Recorder and server-side-apply status reaches a steady state and
//! cleans up on delete; two kube-lease-manager contenders share one Lease and
//! exactly one holds it.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{Server, fixture};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::watcher;
use kube::{Client, CustomResource, Resource, ResourceExt};
use kube_lease_manager::LeaseManagerBuilder;
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "test.mpiswarm.io",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    schema = "disabled"
)]
pub struct WidgetSpec {
    size: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    color: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct WidgetStatus {
    #[serde(default)]
    phase: Option<String>,
    #[serde(default)]
    observed_generation: Option<i64>,
}

async fn client(s: &Server) -> Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kc = Kubeconfig::read_from(s.kubeconfig()).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.expect("config");
    Client::try_from(config).expect("client")
}

async fn install_crd(client: &Client) {
    let crd: CustomResourceDefinition =
        serde_yaml::from_str(&std::fs::read_to_string(fixture("widget-crd.yaml")).expect("fixture")).expect("crd yaml");
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.patch("widgets.test.mpiswarm.io", &PatchParams::apply("test").force(), &Patch::Apply(&crd))
        .await
        .expect("crd applied");
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ReconcileError(#[from] kube::Error);

struct Ctx {
    client: Client,
    recorder: Recorder,
    reconciles: AtomicUsize,
    cleanups: AtomicUsize,
}

const FINALIZER: &str = "test.mpiswarm.io/cleanup";

async fn reconcile(w: Arc<Widget>, ctx: Arc<Ctx>) -> Result<Action, kube::runtime::finalizer::Error<ReconcileError>> {
    ctx.reconciles.fetch_add(1, Ordering::SeqCst);
    let ns = w.namespace().unwrap_or_else(|| "default".into());
    let api: Api<Widget> = Api::namespaced(ctx.client.clone(), &ns);
    let c = ctx.clone();
    let status_api = api.clone();
    finalizer(&api, FINALIZER, w, |event| async move {
        match event {
            Finalizer::Apply(w) => {
                let generation = w.metadata.generation;
                if w.status.as_ref().and_then(|s| s.observed_generation) != generation {
                    let status = json!({"apiVersion": "test.mpiswarm.io/v1", "kind": "Widget",
                        "status": {"phase": "Ready", "observedGeneration": generation}});
                    status_api
                        .patch_status(
                            &w.name_any(),
                            &PatchParams::apply("widget-controller").force(),
                            &Patch::Apply(&status),
                        )
                        .await?;
                    let ev = KubeEvent {
                        type_: EventType::Normal,
                        reason: "Ready".into(),
                        note: Some(format!("size {}", w.spec.size)),
                        action: "Reconcile".into(),
                        secondary: None,
                    };
                    c.recorder.publish(&ev, &w.object_ref(&())).await?;
                }
                Ok(Action::await_change())
            }
            Finalizer::Cleanup(w) => {
                c.cleanups.fetch_add(1, Ordering::SeqCst);
                let ev = KubeEvent {
                    type_: EventType::Normal,
                    reason: "Deleted".into(),
                    note: None,
                    action: "Cleanup".into(),
                    secondary: None,
                };
                c.recorder.publish(&ev, &w.object_ref(&())).await?;
                Ok(Action::await_change())
            }
        }
    })
    .await
}

fn error_policy(_: Arc<Widget>, _: &kube::runtime::finalizer::Error<ReconcileError>, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_millis(200))
}

fn widget(name: &str, size: i64) -> Widget {
    Widget::new(name, WidgetSpec { size, color: None })
}

fn ready(s: &Server, name: &str, generation: i64) -> bool {
    s.stored(&format!("test.mpiswarm.io/widgets/default/{name}")).is_some_and(|o| {
        o["status"]["phase"] == "Ready"
            && o["status"]["observedGeneration"] == generation
            && o["metadata"]["finalizers"][0] == FINALIZER
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_controller_with_finalizer_recorder_and_ssa_status_reaches_a_steady_state() {
    let s = Server::start().await;
    let client = client(&s).await;
    install_crd(&client).await;
    let widgets: Api<Widget> = Api::namespaced(client.clone(), "default");
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        recorder: Recorder::new(
            client.clone(),
            Reporter { controller: "widget-controller".into(), instance: Some("test".into()) },
        ),
        reconciles: AtomicUsize::new(0),
        cleanups: AtomicUsize::new(0),
    });
    let controller = tokio::spawn(
        Controller::new(widgets.clone(), watcher::Config::default())
            .run(reconcile, error_policy, ctx.clone())
            .for_each(|_| async {}),
    );

    let created = widgets.create(&PostParams::default(), &widget("one", 3)).await.expect("create");
    assert_eq!(created.spec.color.as_deref(), Some("blue"), "the schema default was applied");
    s.until("widget one ready", |s| ready(s, "one", 1)).await;
    let settled_rv =
        s.stored("test.mpiswarm.io/widgets/default/one").expect("one")["metadata"]["resourceVersion"].clone();

    // A spec change bumps the generation and is reconciled again.
    widgets.patch("one", &PatchParams::default(), &Patch::Merge(json!({"spec": {"size": 5}}))).await.expect("patch");
    s.until("widget one observed generation 2", |s| ready(s, "one", 2)).await;

    // Steady state: a second widget settles while the first one is not rewritten.
    let one_rv = s.stored("test.mpiswarm.io/widgets/default/one").expect("one")["metadata"]["resourceVersion"].clone();
    assert_ne!(one_rv, settled_rv);
    widgets.create(&PostParams::default(), &widget("two", 1)).await.expect("create two");
    s.until("widget two ready", |s| ready(s, "two", 1)).await;
    assert_eq!(
        s.stored("test.mpiswarm.io/widgets/default/one").expect("one")["metadata"]["resourceVersion"],
        one_rv,
        "the controller kept rewriting a settled object"
    );

    // The Recorder's events (a repeat becomes a series) read back in the core view.
    let core = s.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=one,reason=Ready",
        "-o",
        "jsonpath={.items[*].message}/{.items[*].count}",
    ]);
    assert_eq!(core, "size 3/2");
    let described = s.kubectl_ok(&["describe", "widget", "one"]);
    assert!(
        described.contains("Ready") && described.contains("size 3") && described.contains("widget-controller"),
        "{described}"
    );

    // Deleting runs the cleanup branch, then the finalizer goes and so does the object.
    widgets.delete("one", &DeleteParams::default()).await.expect("delete");
    s.until("widget one gone", |s| s.stored("test.mpiswarm.io/widgets/default/one").is_none()).await;
    assert_eq!(ctx.cleanups.load(Ordering::SeqCst), 1);
    assert!(ctx.reconciles.load(Ordering::SeqCst) >= 3);

    // Invalid objects are refused with the field named.
    let err = widgets
        .create(&PostParams::default(), &Widget::new("big", WidgetSpec { size: 50, color: Some("red".into()) }))
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(status) => {
            assert_eq!(status.code, 422);
            assert!(
                status.message.contains("spec.size") && status.message.contains("red widgets are at most 10 big"),
                "{}",
                status.message
            );
        }
        other => panic!("expected a 422, got {other}"),
    }
    controller.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_of_two_lease_manager_contenders_holds_the_lease() {
    let s = Server::start().await;
    let client = client(&s).await;
    let manager = |id: &str| {
        LeaseManagerBuilder::new(client.clone(), "leader").with_identity(id).with_duration(4).with_grace(1).build()
    };
    let (mut a, a_task) = manager("a").await.expect("a").watch().await;
    let (mut b, b_task) = manager("b").await.expect("b").watch().await;
    let wait_any = async {
        loop {
            if *a.borrow() || *b.borrow() {
                return;
            }
            tokio::select! {
                r = a.changed() => r.expect("a alive"),
                r = b.changed() => r.expect("b alive"),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), wait_any).await.expect("someone leads");
    let (a_leads, b_leads) = (*a.borrow(), *b.borrow());
    assert!(a_leads ^ b_leads, "exactly one contender must hold the lease (a={a_leads}, b={b_leads})");
    let leader = if a_leads { "a" } else { "b" };
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let lease = leases.get("leader").await.expect("lease");
    assert_eq!(lease.spec.and_then(|s| s.holder_identity).as_deref(), Some(leader));

    // The leader steps down; the other contender takes over.
    let (leader_rx, mut follower, leader_task, _follower_task) =
        if a_leads { (a, b, a_task, b_task) } else { (b, a, b_task, a_task) };
    drop(leader_rx);
    leader_task.await.expect("join").expect("released cleanly");
    tokio::time::timeout(Duration::from_secs(60), async {
        while !*follower.borrow() {
            follower.changed().await.expect("follower alive");
        }
    })
    .await
    .expect("the other contender takes over");
}
