//! Bad input gets the Status code and reason Kubernetes gives, names what was
//! wrong, changes nothing, and the server keeps serving.

mod common;

use common::{Server, fixture, http};
use serde_json::{Value, json};

struct Case {
    what: &'static str,
    method: reqwest::Method,
    path: String,
    content_type: &'static str,
    body: Vec<u8>,
    code: u16,
    reason: &'static str,
    mentions: &'static str,
}

/// `expect` is (HTTP code, Status reason, text the message must contain).
fn case(
    what: &'static str,
    method: reqwest::Method,
    path: &str,
    content_type: &'static str,
    body: impl Into<Vec<u8>>,
    expect: (u16, &'static str, &'static str),
) -> Case {
    let (code, reason, mentions) = expect;
    Case { what, method, path: path.into(), content_type, body: body.into(), code, reason, mentions }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_bad_request_gets_the_right_status_and_the_server_keeps_serving() {
    let s = Server::start_with(|a| a.max_body_bytes = 64 * 1024).await;
    s.kubectl_ok(&["apply", "-f", fixture("widget-crd.yaml").to_str().expect("utf8")]);
    let client = http(&s);
    let base = s.running.url.clone();
    let cms = "/api/v1/namespaces/default/configmaps";
    let widgets = "/apis/test.mpiswarm.io/v1/namespaces/default/widgets";
    let cm = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}).to_string()
    };
    let resp = client
        .post(format!("{base}{cms}"))
        .header("Content-Type", "application/json")
        .body(cm("keep"))
        .send()
        .await
        .expect("create");
    assert_eq!(resp.status(), 201);
    let kept: Value = resp.json().await.expect("json");
    let widget =
        json!({"apiVersion": "test.mpiswarm.io/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}})
            .to_string();
    assert_eq!(
        client
            .post(format!("{base}{widgets}"))
            .header("Content-Type", "application/json")
            .body(widget.clone())
            .send()
            .await
            .expect("w")
            .status(),
        201
    );
    let stale = kept["metadata"]["resourceVersion"].as_str().expect("rv").to_string();
    client
        .patch(format!("{base}{cms}/keep"))
        .header("Content-Type", "application/merge-patch+json")
        .body(r#"{"data":{"k":"v2"}}"#)
        .send()
        .await
        .expect("bump");
    let rv_before = s.running.api.store.current_rv();

    use reqwest::Method as M;
    let json = "application/json";
    let cases = vec![
        case("malformed JSON", M::POST, cms, json, "{\"apiVersion\": \"v1\", ", (400, "BadRequest", "could not be decoded as JSON")),
        case("a JSON array as object", M::POST, cms, json, "[1,2]", (400, "BadRequest", "must be a JSON object")),
        case("wrong apiVersion", M::POST, cms, json, r#"{"apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"x"}}"#, (400, "BadRequest", "apps/v1")),
        case("wrong kind", M::POST, widgets, json, r#"{"apiVersion":"test.mpiswarm.io/v1","kind":"Gadget","metadata":{"name":"x"},"spec":{"size":1}}"#, (400, "BadRequest", "Gadget")),
        case("oversized body", M::POST, cms, json, vec![b' '; 100 * 1024], (413, "RequestEntityTooLarge", "limit is 65536")),
        case("unknown group", M::GET, "/apis/nope.example.com/v1/things", json, "", (404, "NotFound", "could not find the requested resource")),
        case("unknown resource", M::GET, "/api/v1/namespaces/default/gizmos", json, "", (404, "NotFound", "could not find the requested resource")),
        case("missing object", M::GET, &format!("{widgets}/ghost"), json, "", (404, "NotFound", "widgets.test.mpiswarm.io \"ghost\" not found")),
        case("missing namespace", M::POST, "/api/v1/namespaces/nowhere/configmaps", json, cm("x"), (404, "NotFound", "namespaces \"nowhere\" not found")),
        case("bad label selector", M::GET, &format!("{cms}?labelSelector=a%20in%20(b"), json, "", (400, "BadRequest", "a in (b")),
        case("bad field selector", M::GET, &format!("{cms}?fieldSelector=spec.size%3D1"), json, "", (400, "BadRequest", "spec.size")),
        case("bad boolean", M::GET, &format!("{cms}?watch=maybe"), json, "", (400, "BadRequest", "maybe")),
        case("JSON patch on a missing path", M::PATCH, &format!("{cms}/keep"), "application/json-patch+json", r#"[{"op":"remove","path":"/data/missing"}]"#, (422, "Invalid", "patch")),
        case("22 self-doubling copies (918 bytes that once took 1 GB)", M::PATCH, &format!("{cms}/keep"), "application/json-patch+json", serde_json::to_string(&(0..22).map(|i| json!({"op": "copy", "from": "/data", "path": format!("/data/c{i}")})).collect::<Vec<_>>()).expect("ops"), (422, "Invalid", "exceeding the limit 3145728")),
        case("failed JSON patch test", M::PATCH, &format!("{cms}/keep"), "application/json-patch+json", r#"[{"op":"test","path":"/data/k","value":"other"},{"op":"add","path":"/data/z","value":"1"}]"#, (422, "Invalid", "patch")),
        case("strategic merge on a custom resource", M::PATCH, &format!("{widgets}/w"), "application/strategic-merge-patch+json", "{}", (415, "UnsupportedMediaType", "application/merge-patch+json")),
        case("unknown patch type", M::PATCH, &format!("{cms}/keep"), "text/plain", "{}", (415, "UnsupportedMediaType", "text/plain")),
        case("apply without fieldManager", M::PATCH, &format!("{cms}/keep"), "application/apply-patch+yaml", cm("keep"), (400, "BadRequest", "fieldManager")),
        case("stale resourceVersion", M::PUT, &format!("{cms}/keep"), json, json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"keep","resourceVersion":stale},"data":{"k":"x"}}).to_string(), (409, "Conflict", "the object has been modified")),
        case("duplicate create", M::POST, cms, json, cm("keep"), (409, "AlreadyExists", "configmaps \"keep\" already exists")),
        case("invalid name", M::POST, cms, json, cm("Not_A_Name"), (422, "Invalid", "metadata.name")),
        case("schema violation", M::POST, widgets, json, r#"{"apiVersion":"test.mpiswarm.io/v1","kind":"Widget","metadata":{"name":"big"},"spec":{"size":1000,"color":"purple"}}"#, (422, "Invalid", "spec.color: Unsupported value: \"purple\"")),
        case("strict unknown field", M::POST, &format!("{widgets}?fieldValidation=Strict"), json, r#"{"apiVersion":"test.mpiswarm.io/v1","kind":"Widget","metadata":{"name":"odd"},"spec":{"size":1,"shape":"round"}}"#, (400, "BadRequest", "unknown field \"spec.shape\"")),
        case("status of a kind without one", M::GET, &format!("{cms}/keep/status"), json, "", (404, "NotFound", "could not find")),
        case("method not allowed", M::POST, &format!("{cms}/keep"), json, cm("keep"), (405, "MethodNotAllowed", "POST")),
    ];
    for c in cases {
        let resp = client
            .request(c.method.clone(), format!("{base}{}", c.path))
            .header("Content-Type", c.content_type)
            .body(c.body.clone())
            .send()
            .await
            .expect("request");
        let code = resp.status().as_u16();
        let status: Value = resp.json().await.unwrap_or_else(|e| panic!("{}: body is not a Status: {e}", c.what));
        assert_eq!((code, status["reason"].as_str().unwrap_or_default()), (c.code, c.reason), "{}: {status}", c.what);
        assert_eq!(status["kind"], "Status", "{}", c.what);
        assert_eq!(status["code"], c.code, "{}", c.what);
        let msg = status["message"].as_str().unwrap_or_default();
        assert!(msg.contains(c.mentions), "{}: message {msg:?} should mention {:?}", c.what, c.mentions);
        let health = client.get(format!("{base}/healthz")).send().await.expect("healthz");
        assert_eq!(health.status(), 200, "server unhealthy after {}", c.what);
    }
    assert_eq!(s.running.api.store.current_rv(), rv_before, "a rejected request changed stored state");

    // 422 carries one cause per offending field.
    let resp = client
        .post(format!("{base}{widgets}"))
        .header("Content-Type", json)
        .body(r#"{"apiVersion":"test.mpiswarm.io/v1","kind":"Widget","metadata":{"name":"big"},"spec":{"size":1000,"color":"purple"}}"#)
        .send()
        .await
        .expect("invalid");
    let status: Value = resp.json().await.expect("status");
    let mut fields: Vec<&str> =
        status["details"]["causes"].as_array().expect("causes").iter().filter_map(|c| c["field"].as_str()).collect();
    fields.sort_unstable();
    assert_eq!(fields, ["spec.color", "spec.size"], "{status}");

    let unauth = reqwest::Client::builder()
        .add_root_certificate(
            reqwest::Certificate::from_pem(&std::fs::read(s.dir.path().join("ca.crt")).expect("ca")).expect("pem"),
        )
        .build()
        .expect("client");
    let resp = unauth.get(format!("{base}{cms}")).send().await.expect("unauth");
    assert_eq!(resp.status(), 401);
    let mut near = s.running.token.clone();
    let last = if near.ends_with('0') { "1" } else { "0" };
    near.replace_range(near.len() - 1.., last);
    let resp = unauth.get(format!("{base}{cms}")).bearer_auth(&near).send().await.expect("near token");
    assert_eq!(resp.status(), 401, "a token of the right length but one character off");

    let resp = client
        .post(format!("{base}{cms}"))
        .header("Content-Type", json)
        .body(cm("after"))
        .send()
        .await
        .expect("create after");
    assert_eq!(resp.status(), 201, "the server stopped accepting good writes");
}
