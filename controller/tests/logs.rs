//! The tenants' log endpoint with real parts and real clients: the embedded
//! API server with two token-file users (team-a and team-b, each bound to
//! a Role in its own namespace that grants `get mpijobs/log`), the offer
//! layer, the real node agent on the Docker engine serving `/files` only
//! to the controller's principal, and the controller serving `/logs`.
//! team-a reads its own job's output through the endpoint; team-b is
//! refused it with a 403 that names user, verb, resource and namespace,
//! whether the job exists or not; an unknown token and no token get 401;
//! the agent refuses anyone without the controller's credential; and the
//! framework ConfigMap records where the endpoint is. Needs the rank
//! image of `make images`; fails (never skips) without it.

mod common;

use std::time::Duration;

use common::{Agents, DEADLINE, Stack, job_yaml, loopback_logs, program, require_image};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::runtime::wait::await_condition;
use mpiswarm_crds::{MpiJob, Phase};
use mpiswarm_testkit::TestPki;
use serde_json::Value;

const TEAM_A: &str = "team-a-token-4b1f0e3c-2a9d-4e8f-b7c6-1d2e3f4a5b6c";
const TEAM_B: &str = "team-b-token-9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b";
const CONTROLLER_SECRET: &str = "controller-s3cret";

/// Per tenant: its namespace, a Role that may manage MpiJobs and read
/// their logs there, and a RoleBinding of it to the tenant's user.
fn tenant_rbac(team: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Namespace
metadata: {{name: {team}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: mpiswarm-tenant, namespace: {team}}}
rules:
- apiGroups: ["mpiswarm.io"]
  resources: ["mpijobs"]
  verbs: ["get", "list", "watch", "create", "delete"]
- apiGroups: ["mpiswarm.io"]
  resources: ["mpijobs/log", "mpijobs/status"]
  verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: mpiswarm-tenant-{team}, namespace: {team}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: mpiswarm-tenant}}
subjects:
- {{apiGroup: rbac.authorization.k8s.io, kind: User, name: {team}}}
"#
    )
}

/// One GET of the endpoint: the status and the JSON body.
async fn get(base: &str, path: &str, token: Option<&str>) -> (u16, Value) {
    let mut req = reqwest::Client::new().get(format!("{base}{path}")).timeout(Duration::from_secs(60));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.unwrap_or_else(|e| panic!("GET {path}: {e}"));
    let status = resp.status().as_u16();
    let body = resp.json().await.unwrap_or(Value::Null);
    (status, body)
}

async fn until_succeeded(s: &Stack, namespace: &str, name: &str) {
    let jobs: Api<MpiJob> = Api::namespaced(s.client.clone(), namespace);
    let done = |j: Option<&MpiJob>| j.and_then(|j| j.status.as_ref()).and_then(|st| st.phase) == Some(Phase::Succeeded);
    let waited = tokio::time::timeout(DEADLINE, await_condition(jobs.clone(), name, done)).await;
    let now = jobs.get_opt(name).await.ok().flatten().and_then(|j| j.status);
    assert!(matches!(waited, Ok(Ok(Some(_)))), "{namespace}/{name} did not succeed within {DEADLINE:?}: {now:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tenant_reads_its_own_jobs_output_through_the_controller_and_is_refused_the_others() {
    require_image("mpiswarm/openmpi:0.1.0");
    let pki = TestPki::new();
    let tokens = pki.secret_file(
        "tokens.csv",
        &format!("{TEAM_A},team-a,team-a-uid,\"mpiswarm:tenants\"\n{TEAM_B},team-b,team-b-uid,\"mpiswarm:tenants\""),
    );
    let readers = pki.credentials_file("mpiswarm-controller", CONTROLLER_SECRET);
    let readers = readers.to_str().expect("utf-8 temp path").to_owned();
    let s = Stack::start_custom(
        Agents::DockerWith(vec!["--http-credentials".into(), readers]),
        |api| api.token_auth_file = Some(tokens),
        |o| {
            o.credentials = Some(("mpiswarm-controller".into(), CONTROLLER_SECRET.into()));
            o.logs = Some(loopback_logs());
        },
    )
    .await;
    let (_, url) = s.controller.as_ref().and_then(|c| c.logs.clone()).expect("the controller serves /logs");
    s.kubectl_ok(&["apply", "-f", "-"], Some(&[tenant_rbac("team-a"), tenant_rbac("team-b")].join("---\n")));
    let job = job_yaml("pi", 1, 0.25, &program("echo output-of-team-a"), "")
        .replace("name: pi", "name: pi\n  namespace: team-a");
    s.kubectl_ok(&["apply", "-f", "-"], Some(&job));
    until_succeeded(&s, "team-a", "pi").await;

    // team-a reads its launcher's output; a finished task's output is all there.
    let (code, body) = get(&url, "/logs/team-a/pi?offset=0", Some(TEAM_A)).await;
    assert_eq!(code, 200, "{body}");
    let data = body["data"].as_str().unwrap_or_default();
    assert!(data.contains("output-of-team-a"), "{body}");
    assert_eq!(body["offset"], 0, "{body}");
    let (code, size) = get(&url, "/logs/team-a/pi?offset=-1", Some(TEAM_A)).await;
    assert_eq!((code, size["offset"].as_u64()), (200, Some(data.len() as u64)), "offset=-1 is the size: {size}");
    let (code, body) = get(&url, "/logs/team-a/pi?worker=0&stream=stderr", Some(TEAM_A)).await;
    assert!(code == 200 || code == 404, "a worker's stderr: {code} {body}");
    let (code, body) = get(&url, "/logs/team-a/pi?worker=3", Some(TEAM_A)).await;
    assert_eq!(code, 404, "{body}");
    assert!(body["message"].as_str().unwrap_or_default().contains("no worker 3"), "{body}");
    let (code, body) = get(&url, "/logs/team-a/nothing-here", Some(TEAM_A)).await;
    assert_eq!((code, body["reason"].as_str()), (404, Some("NotFound")), "{body}");

    // team-b is refused team-a's job, and an unknown job of team-a's namespace alike.
    for job in ["pi", "nothing-here"] {
        let (code, body) = get(&url, &format!("/logs/team-a/{job}"), Some(TEAM_B)).await;
        assert_eq!((code, body["reason"].as_str()), (403, Some("Forbidden")), "{body}");
        let message = body["message"].as_str().unwrap_or_default();
        for part in ["User \"team-b\"", "cannot get", "\"mpijobs/log\"", "\"mpiswarm.io\"", "namespace \"team-a\""] {
            assert!(message.contains(part), "{part} is not in {message}");
        }
    }
    // Asked again, the cached denial answers the same.
    let (code, _) = get(&url, "/logs/team-a/pi", Some(TEAM_B)).await;
    assert_eq!(code, 403);

    for token in [Some("not-a-token"), None] {
        let (code, body) = get(&url, "/logs/team-a/pi", token).await;
        assert_eq!((code, body["reason"].as_str()), (401, Some("Unauthorized")), "{token:?}: {body}");
    }
    let (code, body) = get(&url, "/logs/team-a/pi?stream=stdin", Some(TEAM_A)).await;
    assert_eq!(code, 400, "{body}");

    // The agent serves /files only to the controller's principal.
    let operator = mpiswarm_mesos::client::Endpoint::new(&s.offers.url(), "/master/state", None);
    let state: Value = operator.get_json(Duration::from_secs(10)).await.expect("the master's state");
    let pid = state["slaves"][0]["pid"].as_str().expect("the agent's pid").to_owned();
    let agent = format!("http://{}", pid.rsplit_once('@').map_or(pid.as_str(), |(_, a)| a));
    let anonymous = reqwest::Client::new()
        .get(format!("{agent}/files/browse?path=/tasks"))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .expect("the agent answers");
    assert_eq!(anonymous.status().as_u16(), 401, "the agent's /files answered without credentials");

    // Where the endpoint is, for `mpiswarm logs`.
    let cms: Api<ConfigMap> = Api::namespaced(s.client.clone(), "default");
    let cm = cms.get(mpiswarm_controller::framework_id::CONFIG_MAP).await.expect("the framework ConfigMap");
    let recorded = cm.data.unwrap_or_default().get(mpiswarm_controller::framework_id::LOGS_URL_KEY).cloned();
    assert_eq!(recorded.as_deref(), Some(url.as_str()));
    s.delete_leaving_nothing("team-a", "pi").await;
}
