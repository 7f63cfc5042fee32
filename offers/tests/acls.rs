//! Authorization in the offer layer, through its HTTP API with the Rust
//! Mesos client and plain HTTP: `--acls` (Mesos' ACL JSON) and the binding
//! of framework and agent ids to the principals that registered them. Every
//! refusal is a 403 that names its rule, and refusing a caller leaves the
//! framework or agent it aimed at as it was.

mod common;

use common::{Cluster, DEADLINE, Framework};
use mpiswarm_mesos::agent_api::{AgentInfo, ReportedTask};
use mpiswarm_mesos::client::{AgentClient, ClientError, SchedulerClient};
use mpiswarm_mesos::{AgentId, FrameworkId, FrameworkInfo, Resource, TaskId, TaskInfo, TaskState, TaskStatus};

const CREDENTIALS: &str = r#"{"credentials": [
    {"principal": "controller", "secret": "c-secret"},
    {"principal": "team-a", "secret": "a-secret"},
    {"principal": "ops", "secret": "o-secret"},
    {"principal": "agent", "secret": "g-secret"},
    {"principal": "agent-2", "secret": "g2-secret"}]}"#;

const ACLS: &str = r#"{
    "permissive": false,
    "register_frameworks": [
        {"principals": {"values": ["controller"]}, "roles": {"type": "ANY"}},
        {"principals": {"values": ["team-a"]}, "roles": {"values": ["team-a"]}},
        {"principals": {"type": "ANY"}, "roles": {"type": "NONE"}}
    ],
    "teardown_frameworks": [{"principals": {"values": ["ops"]}, "framework_principals": {"type": "ANY"}}],
    "register_agents": [{"principals": {"values": ["agent", "agent-2"]}, "agents": {"type": "ANY"}}],
    "get_endpoints": [{"principals": {"values": ["ops"]}, "paths": {"type": "ANY"}}]
}"#;

fn secret(principal: &str) -> String {
    let secrets = [("controller", "c-secret"), ("team-a", "a-secret"), ("ops", "o-secret"), ("agent", "g-secret")];
    let found = secrets.iter().find(|(p, _)| *p == principal).map(|(_, s)| *s);
    found.unwrap_or("g2-secret").to_owned()
}

fn creds(principal: &str) -> Option<(String, String)> {
    Some((principal.to_owned(), secret(principal)))
}

/// An offer layer with the credentials and ACLs above, in `dir`.
async fn start_in(dir: &std::path::Path) -> mpiswarm_offers::Running {
    std::fs::write(dir.join("credentials.json"), CREDENTIALS).unwrap();
    std::fs::write(dir.join("acls.json"), ACLS).unwrap();
    let mut args = common::args(&dir.join("registry"));
    args.credentials = Some(dir.join("credentials.json"));
    args.acls = Some(dir.join("acls.json"));
    mpiswarm_offers::start(args).await.unwrap()
}

fn info(principal: &str, roles: &[&str]) -> FrameworkInfo {
    let mut info = FrameworkInfo::new("root", principal, roles);
    info.principal = Some(principal.to_owned());
    info
}

async fn subscribe_as(url: &str, principal: &str, info: FrameworkInfo) -> Result<Framework, ClientError> {
    let client = SchedulerClient::new(url, creds(principal));
    let sub = tokio::time::timeout(DEADLINE, client.subscribe(info.clone())).await.expect("an answer in time")?;
    let mut info = info;
    info.id = Some(sub.subscribed.framework_id.clone());
    Ok(Framework { client, subscribed: sub.subscribed, events: sub.events, info })
}

/// The 403 `result` must be, with a message containing `says`.
fn refused<T>(result: Result<T, ClientError>, says: &str) {
    match result {
        Err(ClientError::Status { status: 403, body, .. }) => {
            assert!(body.contains(says), "403 '{body}' lacks '{says}'")
        }
        Err(other) => panic!("expected 403 naming '{says}', got {other}"),
        Ok(_) => panic!("expected 403 naming '{says}', it was allowed"),
    }
}

async fn get_as(url: &str, path: &str, principal: Option<&str>) -> (u16, String) {
    let mut req = reqwest::Client::new().get(format!("{url}{path}"));
    if let Some(p) = principal {
        req = req.basic_auth(p, Some(secret(p)));
    }
    let resp = tokio::time::timeout(DEADLINE, req.send()).await.expect("an answer in time").unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

async fn state(url: &str) -> serde_json::Value {
    let (status, body) = get_as(url, "/master/state", Some("ops")).await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

#[tokio::test]
async fn a_framework_is_its_callers_principal_in_the_roles_the_acls_allow() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_in(dir.path()).await;
    let url = server.url();
    refused(
        subscribe_as(&url, "team-a", info("controller", &["team-a"])).await,
        "Framework principal 'controller' does not match authenticated principal 'team-a'",
    );
    refused(
        subscribe_as(&url, "team-a", FrameworkInfo::new("root", "anon", &["team-a"])).await,
        "Framework has no principal; it must be the authenticated principal 'team-a'",
    );
    refused(
        subscribe_as(&url, "team-a", info("team-a", &["team-a", "mpi"])).await,
        "principal 'team-a' may not register a framework in role 'mpi': denied by ACL register_frameworks[2]",
    );
    subscribe_as(&url, "team-a", info("team-a", &["team-a"])).await.expect("its own role");
    subscribe_as(&url, "controller", info("controller", &["mpi", "team-a"])).await.expect("any role");
    assert_eq!(state(&url).await["frameworks"].as_array().unwrap().len(), 2, "the refused ones left nothing");
}

#[tokio::test]
async fn a_framework_id_stays_with_the_principal_that_registered_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_in(dir.path()).await;
    let url = server.url();
    let controller = subscribe_as(&url, "controller", info("controller", &["team-a"])).await.unwrap();
    let id = controller.id().clone();
    let mut takeover = info("team-a", &["team-a"]);
    takeover.id = Some(id.clone());
    refused(
        subscribe_as(&url, "team-a", takeover).await,
        &format!("Framework {id} belongs to principal 'controller'; principal 'team-a' may not act as it"),
    );
    // An operator's teardown, as the ACLs say: team-a may not, ops may.
    let teardown = |principal: &str| {
        reqwest::Client::new()
            .post(format!("{url}/master/teardown"))
            .basic_auth(principal, Some(secret(principal)))
            .form(&[("frameworkId", id.value.as_str())])
            .send()
    };
    let resp = tokio::time::timeout(DEADLINE, teardown("team-a")).await.unwrap().unwrap();
    let (status, body) = (resp.status().as_u16(), resp.text().await.unwrap());
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("principal 'team-a' may not tear down a framework of principal 'controller': no rule of the ACL list teardown_frameworks allows it"),
        "{body}"
    );
    let frameworks = state(&url).await["frameworks"].clone();
    assert_eq!(frameworks[0]["id"], id.value.as_str(), "still registered after both refusals");
    assert_eq!(frameworks[0]["active"], true, "and still subscribed on its own stream");
    let resp = tokio::time::timeout(DEADLINE, teardown("ops")).await.unwrap().unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(state(&url).await["frameworks"].as_array().unwrap().len(), 0, "torn down by the operator");
}

fn agent_info(id: Option<&str>) -> AgentInfo {
    AgentInfo {
        hostname: "node1".to_owned(),
        id: id.map(AgentId::new),
        resources: vec![Resource::scalar("cpus", 2.0), Resource::scalar("mem", 1024.0)],
        attributes: vec![],
        port: None,
    }
}

async fn agent_subscribe(
    url: &str,
    principal: &str,
    info: AgentInfo,
    tasks: Vec<ReportedTask>,
) -> Result<AgentId, ClientError> {
    let client = AgentClient::new(url, creds(principal));
    let sub = tokio::time::timeout(DEADLINE, client.subscribe(info, tasks)).await.expect("an answer in time")?;
    Ok(sub.subscribed.agent_id)
}

#[tokio::test]
async fn an_agent_id_stays_with_its_principal_also_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_in(dir.path()).await;
    let url = server.url();
    refused(
        agent_subscribe(&url, "team-a", agent_info(None), vec![]).await,
        "principal 'team-a' may not register an agent: no rule of the ACL list register_agents allows it",
    );
    let id = agent_subscribe(&url, "agent", agent_info(None), vec![]).await.unwrap();
    let says = format!("Agent {id} belongs to principal 'agent'; principal 'agent-2' may not act as it");
    refused(agent_subscribe(&url, "agent-2", agent_info(Some(&id.value)), vec![]).await, &says);
    tokio::time::timeout(DEADLINE, server.stop()).await.expect("stops in time").unwrap();
    let restarted = start_in(dir.path()).await;
    let url = restarted.url();
    refused(agent_subscribe(&url, "agent-2", agent_info(Some(&id.value)), vec![]).await, &says);
    let again = agent_subscribe(&url, "agent", agent_info(Some(&id.value)), vec![]).await.unwrap();
    assert_eq!(again, id, "its own principal re-registers it");
}

fn reported(task: &str, agent: &str, cpus: f64) -> ReportedTask {
    let mut info = TaskInfo::new(task, task, &AgentId::new(agent));
    info.resources = vec![Resource::scalar("cpus", cpus)];
    ReportedTask {
        framework_id: FrameworkId::new("fw-1"),
        task_info: info,
        executor_info: None,
        status: TaskStatus::new(TaskId::new(task), TaskState::Running),
    }
}

#[tokio::test]
async fn an_agent_reports_only_its_own_tasks_with_valid_resources() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_in(dir.path()).await;
    let url = server.url();
    let other = agent_subscribe(&url, "agent", agent_info(None), vec![]).await.unwrap();
    let bad = agent_subscribe(&url, "agent-2", agent_info(Some("B-1")), vec![reported("t-neg", "B-1", -1.0)]).await;
    match bad {
        Err(ClientError::Status { status: 400, body, .. }) => {
            assert!(body.contains("task 't-neg' reports a resource 'cpus' has invalid value -1"), "{body}")
        }
        other => panic!("expected 400 for a negative resource, got {:?}", other.map(|id| id.value)),
    }
    // Its own task; one it reports for another agent; one that names no
    // agent; and one that would make its tasks hold more than its 2 cpus.
    let tasks = vec![
        reported("t-own", "B-1", 0.5),
        reported("t-foreign", &other.value, 0.5),
        reported("t-nameless", "", 0.5),
        reported("t-too-big", "B-1", 1.75),
    ];
    agent_subscribe(&url, "agent-2", agent_info(Some("B-1")), tasks).await.unwrap();
    let snapshot: serde_json::Value =
        serde_json::from_str(&get_as(&url, "/metrics/snapshot", Some("ops")).await.1).unwrap();
    assert_eq!(snapshot["master/tasks_running"], 1.0, "only t-own was adopted: {snapshot}");
}

#[tokio::test]
async fn a_reported_task_keeps_to_its_frameworks_roles() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_in(dir.path()).await;
    let url = server.url();
    let fw = subscribe_as(&url, "controller", info("controller", &["mpi"])).await.expect("registers");
    let in_role = |task: &str, role: &str| {
        let mut t = reported(task, "B-2", 0.25);
        t.framework_id = fw.subscribed.framework_id.clone();
        t.task_info.resources = vec![Resource::scalar("cpus", 0.25).allocated_to(role)];
        t
    };
    // Its framework's role; another team's role; a name no role may have.
    let tasks = vec![in_role("t-mpi", "mpi"), in_role("t-team-b", "team-b"), in_role("t-dotdot", "..")];
    agent_subscribe(&url, "agent", agent_info(Some("B-2")), tasks).await.unwrap();
    let state = state(&url).await;
    let adopted: Vec<&str> =
        state["frameworks"][0]["tasks"].as_array().unwrap().iter().filter_map(|t| t["id"].as_str()).collect();
    assert_eq!(adopted, ["t-mpi"], "only the task in its framework's role: {state}");
}

#[tokio::test]
async fn operator_endpoints_answer_operators_only() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_in(dir.path()).await;
    let url = server.url();
    for path in ["/master/state", "/state", "/metrics/snapshot", "/metrics"] {
        assert_eq!(get_as(&url, path, Some("ops")).await.0, 200, "{path} for ops");
        let (status, body) = get_as(&url, path, Some("team-a")).await;
        assert_eq!(status, 403, "{path}: {body}");
        assert_eq!(
            body,
            format!(
                "principal 'team-a' may not read {path}: no rule of the ACL list get_endpoints allows it, and the ACLs are not permissive"
            )
        );
        assert_eq!(get_as(&url, path, None).await.0, 401, "{path} unauthenticated");
    }
    for path in ["/health", "/healthz", "/version"] {
        assert_eq!(get_as(&url, path, None).await.0, 200, "{path} needs no principal");
    }
}

#[tokio::test]
async fn without_acls_everything_is_allowed_but_ids_stay_bound() {
    let c = Cluster::start_with(|a| {
        let dir = a.data_dir.clone().expect("a data dir");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("credentials.json"), CREDENTIALS).unwrap();
        a.credentials = Some(dir.join("credentials.json"));
    })
    .await;
    let url = c.url();
    let f = subscribe_as(&url, "team-a", info("team-a", &["mpi"])).await.expect("no ACLs: any role");
    let mut takeover = info("controller", &["mpi"]);
    takeover.id = Some(f.id().clone());
    refused(subscribe_as(&url, "controller", takeover).await, "belongs to principal 'team-a'");
    assert_eq!(get_as(&url, "/master/state", Some("team-a")).await.0, 200, "no ACLs: any principal reads");
}
