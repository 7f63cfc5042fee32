//! Real kubectl (1.32) and `kind: List`. kubectl validates a List's items on
//! the client, against `/openapi/v2` in the protobuf form client-go asks
//! for, so these pin down: the `get -o yaml` → `apply -f` round trip of
//! MpiJobs and ConfigMaps (also after the objects were deleted), a List
//! applied twice, a List item with a wrong field refused by kubectl itself
//! and one with a wrong value by the server, and `/openapi/v2`'s content
//! negotiation.

mod common;

use common::{Server, http, repo_root, stderr};
use serde_json::Value;

const SELECTOR: &str = "app=listed";

async fn with_crd() -> Server {
    let s = Server::start().await;
    s.kubectl_ok(&["apply", "-f", &repo_root().join("crds/mpijob.yaml").display().to_string()]);
    s
}

fn mpijob(name: &str, ranks: u32, extra: &str) -> String {
    format!(
        "- apiVersion: mpiswarm.io/v1alpha1\n  kind: MpiJob\n  metadata:\n    name: {name}\n    labels:\n      app: listed\n  spec:\n    image: mpiswarm/openmpi:0.1.0\n    command: [\"/usr/local/bin/pi\"]\n    ranks: {ranks}\n{extra}"
    )
}

fn configmap(name: &str, value: &str) -> String {
    format!(
        "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: {name}\n    labels:\n      app: listed\n  data:\n    setting: {value}\n"
    )
}

/// A `kind: List` manifest of the given items, written to `file` in the test's directory.
fn list(s: &Server, file: &str, items: &[String]) -> String {
    let path = s.dir.path().join(file);
    std::fs::write(&path, format!("apiVersion: v1\nkind: List\nitems:\n{}", items.concat())).expect("write list");
    path.display().to_string()
}

/// name, spec or data, uid and resourceVersion of every labelled MpiJob and ConfigMap.
fn listed(s: &Server) -> Vec<(String, String, String, String)> {
    let json: Value =
        serde_json::from_str(&s.kubectl_ok(&["get", "mpij,cm", "-l", SELECTOR, "-o", "json"])).expect("json list");
    let items = json["items"].as_array().cloned().unwrap_or_default();
    items
        .iter()
        .map(|o| {
            let m = &o["metadata"];
            let content = if o["kind"] == "ConfigMap" { &o["data"] } else { &o["spec"] };
            let field = |k: &str| m[k].as_str().unwrap_or_default().to_owned();
            (
                format!("{}/{}", o["kind"].as_str().unwrap_or_default(), field("name")),
                content.to_string(),
                field("uid"),
                field("resourceVersion"),
            )
        })
        .collect()
}

fn assert_each(out: &str, objects: &[&str], what: &str) {
    for object in objects {
        let line = format!("{object} {what}");
        assert!(out.contains(&line), "{line}: {out}");
    }
}

const OBJECTS: &[&str] = &["mpijob.mpiswarm.io/one", "mpijob.mpiswarm.io/two", "configmap/settings", "configmap/hosts"];

fn four_objects(s: &Server, file: &str) -> String {
    list(s, file, &[mpijob("one", 2, ""), mpijob("two", 4, ""), configmap("settings", "a"), configmap("hosts", "b")])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_exported_list_applies_back_and_recreates_deleted_objects() {
    let s = with_crd().await;
    s.kubectl_ok(&["apply", "-f", &four_objects(&s, "objects.yaml")]);
    let exported = s.dir.path().join("all.yaml");
    let export = |s: &Server| {
        let yaml = s.kubectl_ok(&["get", "mpij,cm", "-l", SELECTOR, "-o", "yaml"]);
        assert!(yaml.contains("\nkind: List\n"), "kubectl get of several objects prints a List: {yaml}");
        std::fs::write(&exported, yaml).expect("write export");
        exported.display().to_string()
    };

    // The pipeline of the issue: `get -o yaml > all.yaml && apply -f all.yaml`.
    let out = s.kubectl_ok(&["apply", "-f", &export(&s)]);
    assert_each(&out, OBJECTS, "configured");

    let before = listed(&s);
    assert_eq!(before.len(), 4, "{before:?}");
    let file = export(&s);
    s.kubectl_ok(&["delete", "mpij,cm", "-l", SELECTOR]);
    assert!(listed(&s).is_empty(), "the objects are gone");

    let out = s.kubectl_ok(&["apply", "-f", &file]);
    assert_each(&out, OBJECTS, "created");
    let after = listed(&s);
    assert_eq!(after.len(), 4, "{after:?}");
    for ((name, content, uid, _), (name2, content2, uid2, _)) in before.iter().zip(&after) {
        assert_eq!((name, content), (name2, content2), "{name} is back with its spec or data");
        assert_ne!(uid, uid2, "{name} is a new object, with a uid of its own");
    }

    // The export still carries the deleted objects' resourceVersions, so
    // applying it again is refused as kube-apiserver's optimistic lock
    // refuses it (409), and nothing changes.
    let again = s.kubectl(&["apply", "-f", &file]);
    assert!(!again.status.success());
    let err = stderr(&again);
    assert!(err.contains("Conflict") && err.contains("the object has been modified"), "{err}");
    assert_eq!(listed(&s), after);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_list_applied_twice_changes_nothing_the_second_time() {
    let s = with_crd().await;
    let file = four_objects(&s, "objects.yaml");
    assert_each(&s.kubectl_ok(&["apply", "-f", &file]), OBJECTS, "created");
    let first = listed(&s);
    assert_eq!(first.len(), 4, "{first:?}");
    assert_each(&s.kubectl_ok(&["apply", "-f", &file]), OBJECTS, "unchanged");
    assert_eq!(listed(&s), first, "no object was written again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn list_items_are_validated_by_kubectl_and_by_the_server() {
    let s = with_crd().await;
    // kubectl checks every item against /openapi/v2 before it sends anything.
    let unknown = list(&s, "unknown.yaml", &[configmap("settings", "a"), mpijob("one", 2, "    bogus: 1\n")]);
    let out = s.kubectl(&["apply", "-f", &unknown]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains(r#"unknown field "bogus" in io.mpiswarm.v1alpha1.MpiJob.spec"#), "{err}");
    let typed = list(&s, "typed.yaml", &[mpijob("one", 2, "    runPolicy:\n      backoffLimit: many\n")]);
    let err = stderr(&s.kubectl(&["apply", "-f", &typed]));
    assert!(err.contains(r#"got "string", expected "integer""#), "{err}");
    assert!(listed(&s).is_empty(), "nothing was sent: {:?}", listed(&s));

    // What only the server checks (bounds, CEL) is still its 422, per item.
    let zero = list(&s, "zero.yaml", &[configmap("settings", "a"), mpijob("one", 0, "")]);
    let out = s.kubectl(&["apply", "-f", &zero]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("is invalid") && err.contains("spec.ranks: Invalid value: 0"), "{err}");
    assert_eq!(listed(&s).len(), 1, "the valid item was applied: {:?}", listed(&s));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn openapi_v2_is_served_as_json_or_protobuf_and_follows_the_crds() {
    let s = Server::start().await;
    let client = http(&s);
    let base = s.running.url.clone();
    let get = |accept: &'static str| client.get(format!("{base}/openapi/v2")).header("Accept", accept).send();
    let mpijob = "io.mpiswarm.v1alpha1.MpiJob";

    let r = get("application/json").await.expect("GET /openapi/v2");
    assert_eq!(r.status(), 200);
    let etag = r.headers().get("etag").cloned().expect("an ETag");
    let doc: Value = r.json().await.expect("json");
    assert_eq!(doc["swagger"], "2.0");
    assert!(doc["definitions"]["io.k8s.api.core.v1.ConfigMap"].is_object());
    assert!(doc["definitions"].get(mpijob).is_none(), "no CRD yet");

    let r = get("application/com.github.proto-openapi.spec.v2@v1.0+protobuf").await.expect("protobuf");
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/com.github.proto-openapi.spec.v2.v1.0+protobuf");
    let body = r.bytes().await.expect("body");
    assert!(body.starts_with(b"\x0a\x032.0"), "gnostic Document.swagger (field 1) comes first");

    let r = client.get(format!("{base}/openapi/v2")).header("If-None-Match", etag.clone()).send().await.expect("304");
    assert_eq!(r.status(), 304);
    let r = get("application/yaml").await.expect("406");
    assert_eq!(r.status(), 406);
    let status: Value = r.json().await.expect("a Status");
    assert_eq!(status["reason"], "NotAcceptable");

    // Applying a CRD changes what is served, and so the document.
    s.kubectl_ok(&["apply", "-f", &repo_root().join("crds/mpijob.yaml").display().to_string()]);
    let r = get("application/json").await.expect("GET /openapi/v2");
    assert_ne!(r.headers().get("etag"), Some(&etag));
    let doc: Value = r.json().await.expect("json");
    let kind = &doc["definitions"][mpijob];
    assert_eq!(kind["x-kubernetes-group-version-kind"][0]["kind"], "MpiJob");
    assert_eq!(kind["properties"]["metadata"]["$ref"], "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta");
    let patch = &doc["paths"]["/apis/mpiswarm.io/v1alpha1/namespaces/{namespace}/mpijobs/{name}"]["patch"];
    assert!(patch["parameters"].as_array().is_some_and(|p| p.iter().any(|p| p["name"] == "fieldValidation")));
}
