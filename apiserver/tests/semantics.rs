//! API semantics over HTTP that clients depend on: pagination, selectors,
//! generateName, dryRun, generation rules, the status subresource, no-op
//! writes, server-side apply ownership, watch bookmarks and streaming lists,
//! deletecollection, the two event views and Table output.

mod common;

use std::pin::Pin;

use bytes::Bytes;
use common::{Server, fixture, http};
use futures::{Stream, StreamExt};
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const WIDGETS: &str = "/apis/test.mpiswarm.io/v1/namespaces/default/widgets";

struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    async fn send(&self, method: reqwest::Method, path: &str, content_type: &str, body: Value) -> (u16, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if !body.is_null() {
            req = req.header("Content-Type", content_type).body(body.to_string());
        }
        let resp = req.send().await.expect("request");
        let code = resp.status().as_u16();
        (code, resp.json().await.expect("json body"))
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.send(reqwest::Method::GET, path, "", Value::Null).await
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.send(reqwest::Method::POST, path, "application/json", body).await
    }

    async fn merge(&self, path: &str, body: Value) -> (u16, Value) {
        self.send(reqwest::Method::PATCH, path, "application/merge-patch+json", body).await
    }

    async fn apply(&self, path: &str, body: Value) -> (u16, Value) {
        self.send(reqwest::Method::PATCH, path, "application/apply-patch+yaml", body).await
    }

    async fn watch(&self, path: &str) -> Events {
        let resp = self.http.get(format!("{}{path}", self.base)).send().await.expect("watch");
        assert_eq!(resp.status(), 200);
        Events { body: Box::pin(resp.bytes_stream()), buf: vec![] }
    }
}

struct Events {
    body: Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>,
    buf: Vec<u8>,
}

impl Events {
    async fn next(&mut self) -> Value {
        loop {
            if let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                return serde_json::from_slice(&line).expect("event json");
            }
            let chunk = tokio::time::timeout(std::time::Duration::from_secs(30), self.body.next())
                .await
                .expect("event in time");
            self.buf.extend_from_slice(&chunk.expect("stream open").expect("chunk"));
        }
    }
}

fn cm(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {"k": name}})
}

fn rv(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"].as_str().and_then(|s| s.parse().ok()).expect("rv")
}

async fn setup() -> (Server, Client) {
    let s = Server::start_with(|a| a.bookmark_seconds = 1).await;
    s.kubectl_ok(&["apply", "-f", fixture("widget-crd.yaml").to_str().expect("utf8")]);
    let c = Client { http: http(&s), base: s.running.url.clone() };
    (s, c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lists_paginate_and_filter() {
    let (_s, c) = setup().await;
    for i in 0..25 {
        let tier = if i % 2 == 0 { "even" } else { "odd" };
        assert_eq!(c.post(CMS, cm(&format!("cm-{i:02}"), json!({"tier": tier}))).await.0, 201);
    }
    let mut names = vec![];
    let mut path = format!("{CMS}?limit=10");
    let mut pages = 0;
    loop {
        let (code, page) = c.get(&path).await;
        assert_eq!(code, 200);
        pages += 1;
        names.extend(
            page["items"]
                .as_array()
                .expect("items")
                .iter()
                .map(|i| i["metadata"]["name"].as_str().expect("name").to_string()),
        );
        match page["metadata"]["continue"].as_str() {
            Some(token) => path = format!("{CMS}?limit=10&continue={token}"),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert!(names.len() == 25);
    assert_eq!(names, (0..25).map(|i| format!("cm-{i:02}")).collect::<Vec<_>>());

    let (_, odd) = c.get(&format!("{CMS}?labelSelector=tier%3Dodd")).await;
    assert_eq!(odd["items"].as_array().expect("items").len(), 12);
    let (_, one) = c.get(&format!("{CMS}?fieldSelector=metadata.name%3Dcm-07")).await;
    assert_eq!(one["items"].as_array().expect("items").len(), 1);
    let (_, not_one) =
        c.get(&format!("{CMS}?fieldSelector=metadata.name!%3Dcm-07&labelSelector=tier%20in%20(odd)")).await;
    assert_eq!(not_one["items"].as_array().expect("items").len(), 11);

    let (code, deleted) =
        c.send(reqwest::Method::DELETE, &format!("{CMS}?labelSelector=tier%3Deven"), "", Value::Null).await;
    assert_eq!(code, 200);
    assert_eq!(deleted["items"].as_array().expect("items").len(), 13);
    let (_, rest) = c.get(CMS).await;
    assert!(rest["items"].as_array().expect("items").iter().all(|i| i["metadata"]["labels"]["tier"] == "odd"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn generate_name_dry_run_and_no_op_writes() {
    let (s, c) = setup().await;
    let (code, made) =
        c.post(CMS, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}})).await;
    assert_eq!(code, 201);
    let name = made["metadata"]["name"].as_str().expect("name");
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");

    let before = s.running.api.store.current_rv();
    let (code, dry) = c.post(&format!("{CMS}?dryRun=All"), cm("dry", json!({}))).await;
    assert_eq!(code, 201);
    assert_eq!(dry["metadata"]["name"], "dry");
    assert_eq!(c.get(&format!("{CMS}/dry")).await.0, 404);
    assert_eq!(s.running.api.store.current_rv(), before, "a dry run was persisted");

    let (_, same) = c.merge(&format!("{CMS}/{name}"), json!({"metadata": {"labels": null}})).await;
    assert_eq!(rv(&same), rv(&made), "a no-op patch bumped the resourceVersion");
    assert_eq!(s.running.api.store.current_rv(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn generation_and_the_status_subresource() {
    let (_s, c) = setup().await;
    let w = json!({"apiVersion": "test.mpiswarm.io/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 2}, "status": {"phase": "Forged"}});
    let (code, created) = c.post(WIDGETS, w).await;
    assert_eq!(code, 201);
    assert_eq!(created["metadata"]["generation"], 1);
    assert!(created.get("status").is_none(), "create must drop status when there is a status subresource");

    let (_, labelled) = c
        .merge(&format!("{WIDGETS}/w"), json!({"metadata": {"labels": {"a": "b"}}, "status": {"phase": "Ignored"}}))
        .await;
    assert_eq!(labelled["metadata"]["generation"], 1);
    assert!(labelled.get("status").is_none());

    let (_, status) =
        c.merge(&format!("{WIDGETS}/w/status"), json!({"spec": {"size": 99}, "status": {"phase": "Ready"}})).await;
    assert_eq!(
        (
            status["status"]["phase"].as_str(),
            status["spec"]["size"].as_i64(),
            status["metadata"]["generation"].as_i64()
        ),
        (Some("Ready"), Some(2), Some(1))
    );

    let (_, bumped) = c.merge(&format!("{WIDGETS}/w"), json!({"spec": {"size": 3}})).await;
    assert_eq!(bumped["metadata"]["generation"], 2);
    assert_eq!(bumped["status"]["phase"], "Ready", "a spec write must keep the status");

    let (code, conflict) = c
        .send(reqwest::Method::PUT, &format!("{WIDGETS}/w"), "application/json", {
            let mut stale = created.clone();
            stale["spec"]["size"] = json!(4);
            stale
        })
        .await;
    assert_eq!((code, conflict["reason"].as_str()), (409, Some("Conflict")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn server_side_apply_owns_removes_and_conflicts() {
    let (_s, c) = setup().await;
    let path = format!("{CMS}/ssa");
    let applied =
        |labels: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa", "labels": labels}});
    let (code, first) = c.apply(&format!("{path}?fieldManager=alice"), applied(json!({"x": "1", "y": "2"}))).await;
    assert_eq!(code, 201);
    assert_eq!(
        first["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:x": {}, "f:y": {}}}})
    );

    let (code, again) = c.apply(&format!("{path}?fieldManager=alice"), applied(json!({"x": "1", "y": "2"}))).await;
    assert_eq!((code, rv(&again)), (200, rv(&first)), "a repeated apply must be a no-op");

    let (_, dropped) = c.apply(&format!("{path}?fieldManager=alice"), applied(json!({"x": "1"}))).await;
    assert_eq!(dropped["metadata"]["labels"], json!({"x": "1"}), "omitting an owned field removes it");

    let (code, conflict) = c.apply(&format!("{path}?fieldManager=bob"), applied(json!({"x": "2"}))).await;
    assert_eq!((code, conflict["reason"].as_str()), (409, Some("Conflict")));
    assert_eq!(conflict["message"], "Apply failed with 1 conflict: conflict with \"alice\": .metadata.labels.x");
    assert_eq!(conflict["details"]["causes"][0]["reason"], "FieldManagerConflict");

    let (code, forced) = c.apply(&format!("{path}?fieldManager=bob&force=true"), applied(json!({"x": "2"}))).await;
    assert_eq!((code, forced["metadata"]["labels"]["x"].as_str()), (200, Some("2")));
    let managers: Vec<&str> = forced["metadata"]["managedFields"]
        .as_array()
        .expect("mf")
        .iter()
        .filter_map(|e| e["manager"].as_str())
        .collect();
    assert_eq!(managers, ["bob"], "force moves ownership");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn watches_stream_initial_events_bookmarks_and_selector_transitions() {
    let (_s, c) = setup().await;
    c.post(CMS, cm("a", json!({"team": "x"}))).await;
    c.post(CMS, cm("b", json!({"team": "y"}))).await;

    let mut initial = c
        .watch(&format!(
            "{CMS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
        ))
        .await;
    let names: Vec<Value> = vec![initial.next().await, initial.next().await];
    assert!(names.iter().all(|e| e["type"] == "ADDED"));
    let end = initial.next().await;
    assert_eq!(end["type"], "BOOKMARK");
    assert_eq!(end["object"]["kind"], "ConfigMap");
    assert_eq!(end["object"]["apiVersion"], "v1");
    assert_eq!(end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");

    let mut selected = c.watch(&format!("{CMS}?watch=true&labelSelector=team%3Dx&allowWatchBookmarks=true")).await;
    let first = selected.next().await;
    assert_eq!((first["type"].as_str(), first["object"]["metadata"]["name"].as_str()), (Some("ADDED"), Some("a")));
    c.merge(&format!("{CMS}/a"), json!({"metadata": {"labels": {"team": "z"}}})).await;
    let left = selected.next().await;
    assert_eq!(
        (left["type"].as_str(), left["object"]["metadata"]["name"].as_str()),
        (Some("DELETED"), Some("a")),
        "leaving the selector is a DELETED"
    );
    c.merge(&format!("{CMS}/b"), json!({"metadata": {"labels": {"team": "x"}}})).await;
    let joined = selected.next().await;
    assert_eq!((joined["type"].as_str(), joined["object"]["metadata"]["name"].as_str()), (Some("ADDED"), Some("b")));
    let mut named = c.watch(&format!("{CMS}/b?watch=true")).await;
    let only_b = named.next().await;
    assert_eq!((only_b["type"].as_str(), only_b["object"]["metadata"]["name"].as_str()), (Some("ADDED"), Some("b")));

    let bookmark = selected.next().await;
    assert_eq!(bookmark["type"], "BOOKMARK");
    assert_eq!(rv(&bookmark["object"]), rv(&joined["object"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn events_have_one_store_and_two_views_and_tables_use_printer_columns() {
    let (_s, c) = setup().await;
    let core_event = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "w.1"},
        "involvedObject": {"kind": "Widget", "name": "w", "namespace": "default", "uid": "u1"},
        "reason": "Made", "message": "made it", "type": "Normal", "source": {"component": "tester"}});
    assert_eq!(c.post("/api/v1/namespaces/default/events", core_event).await.0, 201);
    let (_, v1) = c.get("/apis/events.k8s.io/v1/namespaces/default/events/w.1").await;
    assert_eq!(
        (v1["regarding"]["name"].as_str(), v1["note"].as_str(), v1["reportingController"].as_str()),
        (Some("w"), Some("made it"), Some("tester"))
    );
    let (_, listed) = c
        .get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dw%2CinvolvedObject.uid%3Du1")
        .await;
    assert_eq!(listed["kind"], "EventList");
    assert_eq!(listed["items"][0]["message"], "made it");

    c.post(
        WIDGETS,
        json!({"apiVersion": "test.mpiswarm.io/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 7}}),
    )
    .await;
    let resp = c
        .http
        .get(format!("{}{WIDGETS}", c.base))
        .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
        .send()
        .await
        .expect("table");
    assert_eq!(resp.headers()["content-type"], "application/json;as=Table;v=v1;g=meta.k8s.io");
    let table: Value = resp.json().await.expect("json");
    let cols: Vec<&str> =
        table["columnDefinitions"].as_array().expect("cols").iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(cols, ["Name", "Size", "Phase"]);
    assert_eq!(table["rows"][0]["cells"], json!(["w", 7, null]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_count_requests_and_open_watches() {
    let (s, c) = setup().await;
    // Without the token: the probes answer, the metrics do not.
    let ca = reqwest::Certificate::from_pem(&std::fs::read(s.dir.path().join("ca.crt")).expect("ca.crt")).expect("pem");
    let anonymous = reqwest::Client::builder().add_root_certificate(ca).build().expect("client");
    assert_eq!(anonymous.get(format!("{}/metrics", c.base)).send().await.expect("metrics").status(), 401);
    assert_eq!(anonymous.get(format!("{}/readyz", c.base)).send().await.expect("readyz").status(), 200);
    c.post(CMS, cm("m", json!({}))).await;
    let _watch = c.watch(&format!("{CMS}?watch=true")).await;
    let resp = c.http.get(format!("{}/metrics", c.base)).send().await.expect("metrics");
    assert_eq!(resp.headers()["content-type"], mpiswarm_health::CONTENT_TYPE);
    let text = resp.text().await.expect("text");
    assert!(
        text.contains(r#"apiserver_request_total{verb="create",group="",resource="configmaps",code="201"} 1"#),
        "{text}"
    );
    assert!(text.contains("apiserver_longrunning_requests 1"), "{text}");
    assert!(text.contains("apiserver_storage_resource_version "), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn partial_object_metadata_is_served_for_metadata_watchers() {
    let (_s, c) = setup().await;
    c.post(CMS, cm("meta", json!({"x": "y"}))).await;
    let accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    let resp = c.http.get(format!("{}{CMS}", c.base)).header("Accept", accept).send().await.expect("list");
    let list: Value = resp.json().await.expect("json");
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert_eq!(list["items"][0]["kind"], "PartialObjectMetadata");
    assert_eq!(list["items"][0]["metadata"]["labels"]["x"], "y");
    assert!(list["items"][0].get("data").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn events_expire_after_the_event_ttl() {
    let s = Server::start_with(|a| a.event_ttl_seconds = 1).await;
    let c = Client { http: http(&s), base: s.running.url.clone() };
    let old = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "old.1"},
        "eventTime": "2020-01-01T00:00:00.000000Z", "reason": "Old", "action": "A", "reportingController": "t", "reportingInstance": "t",
        "regarding": {"kind": "ConfigMap", "name": "x", "namespace": "default"}, "type": "Normal"});
    assert_eq!(c.post("/apis/events.k8s.io/v1/namespaces/default/events", old).await.0, 201);
    s.until("the old event expires", |s| s.stored("core/events/default/old.1").is_none()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deleting_an_owner_collects_its_dependents_unless_orphaned() {
    let (s, c) = setup().await;
    let owned_by = |owner: &Value| json!([{"apiVersion": "test.mpiswarm.io/v1", "kind": "Widget", "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}]);
    for name in ["keep", "gc"] {
        let (_, owner) = c.post(WIDGETS, json!({"apiVersion": "test.mpiswarm.io/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {"size": 1}})).await;
        let mut dep = cm(&format!("{name}-dep"), json!({}));
        dep["metadata"]["ownerReferences"] = owned_by(&owner);
        let (_, dep) = c.post(CMS, dep).await;
        let mut grandchild = cm(&format!("{name}-grandchild"), json!({}));
        grandchild["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": dep["metadata"]["name"], "uid": dep["metadata"]["uid"]}]);
        assert_eq!(c.post(CMS, grandchild).await.0, 201);
    }
    let (code, _) = c
        .send(
            reqwest::Method::DELETE,
            &format!("{WIDGETS}/gc"),
            "application/json",
            json!({"propagationPolicy": "Background"}),
        )
        .await;
    assert_eq!(code, 200);
    s.until("dependents collected", |s| {
        s.stored("core/configmaps/default/gc-dep").is_none()
            && s.stored("core/configmaps/default/gc-grandchild").is_none()
    })
    .await;

    let (code, _) = c
        .send(
            reqwest::Method::DELETE,
            &format!("{WIDGETS}/keep"),
            "application/json",
            json!({"propagationPolicy": "Orphan"}),
        )
        .await;
    assert_eq!(code, 200);
    assert!(s.stored("core/configmaps/default/keep-dep").is_some(), "an orphaning delete must leave dependents");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_concurrent_watchers_see_the_same_complete_ordered_stream() {
    const WATCHERS: usize = 50;
    const WRITERS: usize = 4;
    const WRITES: usize = 50;
    let (s, c) = setup().await;
    let from = s.running.api.store.current_rv();
    let mut watchers = vec![];
    for _ in 0..WATCHERS {
        let mut events = c.watch(&format!("{CMS}?watch=true&resourceVersion={from}")).await;
        watchers.push(tokio::spawn(async move {
            let mut seen = vec![];
            while seen.len() < WRITERS * WRITES {
                let e = events.next().await;
                seen.push((rv(&e["object"]), e["type"].as_str().unwrap_or_default().to_string()));
            }
            seen
        }));
    }
    let c = std::sync::Arc::new(c);
    let mut writers = vec![];
    for w in 0..WRITERS {
        let c = c.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..WRITES {
                let name = format!("w{w}");
                let (code, _) = if i == 0 {
                    c.post(CMS, cm(&name, json!({}))).await
                } else {
                    c.merge(&format!("{CMS}/{name}"), json!({"data": {"i": i.to_string()}})).await
                };
                assert!(code == 201 || code == 200, "write failed with {code}");
            }
        }));
    }
    for w in writers {
        w.await.expect("writer");
    }
    let expected: Vec<u64> = (from + 1..=from + (WRITERS * WRITES) as u64).collect();
    let mut first: Option<Vec<(u64, String)>> = None;
    for w in watchers {
        let seen = w.await.expect("watcher");
        assert_eq!(
            seen.iter().map(|(rv, _)| *rv).collect::<Vec<_>>(),
            expected,
            "a watcher missed, repeated or reordered events"
        );
        match &first {
            None => first = Some(seen),
            Some(f) => assert_eq!(&seen, f, "watchers disagree"),
        }
    }
    let first = first.expect("some watcher");
    assert_eq!(first.iter().filter(|(_, t)| t == "ADDED").count(), WRITERS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn later_pages_report_the_first_pages_resource_version_so_watches_lose_nothing() {
    let (_s, c) = setup().await;
    for i in 0..4 {
        c.post(CMS, cm(&format!("p-{i}"), json!({}))).await;
    }
    let (_, first) = c.get(&format!("{CMS}?limit=2")).await;
    let first_rv = rv(&first);
    // Changed after the first page was served: an object already listed.
    c.merge(&format!("{CMS}/p-0"), json!({"data": {"changed": "yes"}})).await;
    let token = first["metadata"]["continue"].as_str().expect("continue");
    let (_, second) = c.get(&format!("{CMS}?limit=2&continue={token}")).await;
    assert_eq!(rv(&second), first_rv);
    let mut w = c.watch(&format!("{CMS}?watch=true&resourceVersion={first_rv}")).await;
    let replayed = w.next().await;
    assert_eq!(
        (replayed["type"].as_str(), replayed["object"]["metadata"]["name"].as_str()),
        (Some("MODIFIED"), Some("p-0"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_watch_asking_for_the_largest_timeout_is_served_not_dropped() {
    let (_s, c) = setup().await;
    let mut events = c.watch(&format!("{CMS}?watch=true&timeoutSeconds=18446744073709551615")).await;
    assert_eq!(c.post(CMS, cm("after-huge-timeout", json!({}))).await.0, 201);
    let added = events.next().await;
    assert_eq!(
        (added["type"].as_str(), added["object"]["metadata"]["name"].as_str()),
        (Some("ADDED"), Some("after-huge-timeout"))
    );
}
