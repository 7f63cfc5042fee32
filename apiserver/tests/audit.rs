//! `--audit-log`: every request, kubectl's included, is one JSON line in
//! the shape of a Kubernetes audit event at the Metadata level -- user,
//! user agent, verb, resource and subresource, namespace, name, code --
//! and a request without the token is logged as anonymous.

mod common;

use common::{Server, http};
use mpiswarm_apiserver::audit::Event;

fn audited(s: &Server) -> std::path::PathBuf {
    s.dir.path().join("audit.jsonl")
}

async fn events(s: &Server) -> Vec<Event> {
    let log = s.running.audit.as_ref().expect("the server keeps an audit log");
    log.flush().await;
    assert_eq!(log.dropped(), 0);
    let text = std::fs::read_to_string(audited(s)).expect("the audit log");
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_requests_are_logged_with_user_verb_resource_and_code() {
    let s = Server::start_with(|a| a.audit_log = Some(a.data_dir.join("audit.jsonl"))).await;
    s.kubectl_ok(&["create", "configmap", "audited", "--from-literal=k=v"]);
    s.kubectl_ok(&["get", "configmap", "audited", "-o", "name"]);
    let missing = s.kubectl(&["get", "secret", "nope"]);
    assert!(!missing.status.success());
    let anonymous = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .expect("client")
        .get(format!("{}/api/v1/namespaces/default/secrets", s.running.url))
        .send()
        .await
        .expect("request");
    assert_eq!(anonymous.status(), 401);
    let status = http(&s)
        .get(format!("{}/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1", s.running.url))
        .send()
        .await
        .expect("watch");
    assert_eq!(status.status(), 200);

    let all = events(&s).await;
    let kubectl: Vec<&Event> = all.iter().filter(|e| e.user_agent.starts_with("kubectl/")).collect();
    let create = kubectl
        .iter()
        .find(|e| e.verb == "create")
        .unwrap_or_else(|| panic!("kubectl's create is logged: {kubectl:#?}"));
    let o = create.object_ref.as_ref().expect("a resource request names its object");
    assert_eq!((o.resource.as_str(), o.namespace.as_str(), o.api_group.as_str()), ("configmaps", "default", ""));
    assert_eq!(create.response_status.code, 201);
    assert_eq!(create.user.username, "mpiswarm-admin");
    assert_eq!(
        (create.kind.as_str(), create.api_version.as_str(), create.level.as_str()),
        ("Event", "audit.k8s.io/v1", "Metadata")
    );
    assert!(create.source_ips.iter().any(|ip| ip == "127.0.0.1"), "{create:?}");
    assert!(kubectl.iter().any(|e| e.verb == "get"
        && e.object_ref.as_ref().is_some_and(|o| o.name == "audited")
        && e.response_status.code == 200));
    assert!(kubectl.iter().any(|e| e.verb == "get"
        && e.object_ref.as_ref().is_some_and(|o| o.resource == "secrets" && o.name == "nope")
        && e.response_status.code == 404));
    assert!(
        kubectl.iter().any(|e| e.object_ref.is_none() && e.request_uri.starts_with("/api")),
        "discovery is logged without an object: {:#?}",
        all.iter().filter(|e| e.object_ref.is_none()).collect::<Vec<_>>()
    );
    let anon = all.iter().find(|e| e.response_status.code == 401).expect("the 401 is logged");
    assert_eq!(anon.user.username, "system:anonymous");
    assert_eq!(anon.request_uri, "/api/v1/namespaces/default/secrets");
    let watch = all.iter().find(|e| e.verb == "watch").expect("the watch is logged");
    assert_eq!(watch.stage, "ResponseStarted");
}
