//! The scheduler API's HTTP contract with raw requests: RecordIO framing,
//! every status code Mesos answers, re-subscription.

mod common;

use common::{Cluster, DEADLINE, SUBSCRIBE, json_post, next_event, post, status_of, within};
use futures::StreamExt;
use mpiswarm_mesos::FrameworkInfo;
use mpiswarm_mesos::client::{ClientError, SchedulerClient, decode_events};
use mpiswarm_mesos::redirect::RedirectRefusal;
use mpiswarm_mesos::scheduler::{Call, EventType};
use serde_json::json;

/// Subscribes with raw HTTP; returns the response (stream still open).
async fn raw_subscribe(url: &str) -> reqwest::Response {
    let resp = json_post(url, SUBSCRIBE).header("Accept", "application/json").send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    resp
}

#[tokio::test]
async fn the_event_stream_is_exact_recordio_over_chunked_json() {
    let c = Cluster::start_with(|a| a.heartbeat_interval = 0.1).await;
    let resp = raw_subscribe(&c.url()).await;
    assert_eq!(resp.headers()["content-type"], "application/json");
    assert_eq!(resp.headers()["transfer-encoding"], "chunked");
    assert!(resp.headers().contains_key("mesos-stream-id"));
    let mut body = resp.bytes_stream();
    let mut wire = Vec::new();
    // SUBSCRIBED and at least two HEARTBEATs.
    common::within("SUBSCRIBED and two HEARTBEATs", async {
        while wire.windows(9).filter(|w| *w == b"HEARTBEAT").count() < 2 {
            wire.extend_from_slice(&body.next().await.unwrap().unwrap());
        }
    })
    .await;
    let mut rest = &wire[..];
    let mut records = Vec::new();
    while !rest.is_empty() {
        let nl = rest.iter().position(|b| *b == b'\n').expect("a length header");
        let len: usize = std::str::from_utf8(&rest[..nl]).unwrap().parse().expect("a decimal length");
        let record = &rest[nl + 1..];
        if record.len() < len {
            break; // the last record may still be arriving
        }
        let json = std::str::from_utf8(&record[..len]).unwrap();
        assert!(!json.contains('\n'), "records are single-line compact JSON");
        records.push(serde_json::from_str::<serde_json::Value>(json).unwrap());
        rest = &record[len..];
    }
    assert_eq!(records[0]["type"], "SUBSCRIBED");
    assert!(records[0]["subscribed"]["framework_id"]["value"].is_string());
    assert_eq!(records[0]["subscribed"]["heartbeat_interval_seconds"], 0.1);
    assert_eq!(records[0]["subscribed"]["master_info"]["version"], "1.11.0");
    assert_eq!(records[1], json!({"type": "HEARTBEAT"}));
    assert!(wire.starts_with(
        format!("{}\n{{\"type\":\"SUBSCRIBED\"", serde_json::to_string(&records[0]).unwrap().len()).as_bytes()
    ));
}

#[tokio::test]
async fn malformed_calls_get_the_status_codes_mesos_answers() {
    let c = Cluster::start().await;
    let url = c.url();
    let (code, body) = status_of(post(&url).body(SUBSCRIBE)).await;
    assert_eq!((code, body.as_str()), (400, "Expecting 'Content-Type' to be present"));
    assert_eq!(status_of(post(&url).header("Content-Type", "text/plain").body(SUBSCRIBE)).await.0, 415);
    assert_eq!(status_of(post(&url).header("Content-Type", "application/x-protobuf").body(SUBSCRIBE)).await.0, 415);
    let (code, body) = status_of(json_post(&url, "{not json")).await;
    assert_eq!(code, 400);
    assert!(body.starts_with("Failed to parse body into JSON"), "{body}");
    assert_eq!(
        status_of(json_post(&url, "{}")).await,
        (400, "Failed to validate scheduler::Call: Expecting 'type' to be present".into())
    );
    let (code, body) =
        status_of(json_post(&url, r#"{"type":"SUBSCRIBE","subscribe":{"framework_info":{"name":"no user"}}}"#)).await;
    assert_eq!(code, 400);
    assert!(body.starts_with("Failed to convert JSON into Call protobuf") && body.contains("user"), "{body}");
    assert_eq!(status_of(json_post(&url, SUBSCRIBE).header("Accept", "text/html")).await.0, 406);
    let (code, body) = status_of(json_post(&url, SUBSCRIBE).header("Mesos-Stream-Id", "x")).await;
    assert_eq!((code, body.as_str()), (400, "Subscribe calls should not include the 'Mesos-Stream-Id' header"));
    let mismatch = r#"{"type":"SUBSCRIBE","framework_id":{"value":"a"},"subscribe":{"framework_info":{"user":"u","name":"n","id":{"value":"b"}}}}"#;
    assert_eq!(status_of(json_post(&url, mismatch)).await.0, 400);
    let (code, body) = status_of(json_post(&url, r#"{"type":"DECLINE","decline":{"offer_ids":[]}}"#)).await;
    assert_eq!(
        (code, body.as_str()),
        (400, "Failed to validate scheduler::Call: Expecting 'framework_id' to be present")
    );
    let (code, body) =
        status_of(json_post(&url, r#"{"type":"DECLINE","framework_id":{"value":"nope"},"decline":{"offer_ids":[]}}"#))
            .await;
    assert_eq!((code, body.as_str()), (400, "Framework cannot be found"));
    assert_eq!(reqwest::get(format!("{url}/api/v1/scheduler")).await.unwrap().status().as_u16(), 405);
}

#[tokio::test]
async fn calls_need_the_current_stream_id_and_well_formed_calls_get_202() {
    let c = Cluster::start().await;
    let url = c.url();
    let resp = raw_subscribe(&url).await;
    let stream_id = resp.headers()["mesos-stream-id"].to_str().unwrap().to_owned();
    let mut events = decode_events::<mpiswarm_mesos::scheduler::Event>(resp);
    let id = next_event(&mut events).await.subscribed.unwrap().framework_id.value;
    let call = |body: serde_json::Value| json_post(&url, body.to_string());
    let decline = json!({"type":"DECLINE","framework_id":{"value":id},"decline":{"offer_ids":[{"value":"stale"}]}});
    let (code, body) = status_of(call(decline.clone())).await;
    assert_eq!((code, body.as_str()), (400, "All non-subscribe calls should include the 'Mesos-Stream-Id' header"));
    assert_eq!(status_of(call(decline.clone()).header("Mesos-Stream-Id", "wrong")).await.0, 400);
    let with_id = |body: serde_json::Value| call(body).header("Mesos-Stream-Id", &stream_id);
    assert_eq!(status_of(with_id(decline)).await.0, 202, "a stale offer is no HTTP error");
    let ack = |uuid: &str| json!({"type":"ACKNOWLEDGE","framework_id":{"value":id},"acknowledge":{"agent_id":{"value":"a"},"task_id":{"value":"t"},"uuid":uuid}});
    assert_eq!(status_of(with_id(ack("AAEC"))).await.0, 400, "a uuid must be 16 bytes");
    assert_eq!(status_of(with_id(ack("AAECAwQFBgcICQoLDA0ODw=="))).await.0, 202, "a stale ack is accepted");
    // The docs' REVIVE example ("role") is valid JSON for the proto: all roles.
    assert_eq!(status_of(with_id(json!({"type":"REVIVE","framework_id":{"value":id},"role":"mpi"}))).await.0, 202);
    // The docs' REQUEST example has no 'request' message: 400, as in Mesos.
    let (code, body) = status_of(with_id(json!({"type":"REQUEST","framework_id":{"value":id},"requests":[]}))).await;
    assert_eq!((code, body.as_str()), (400, "Failed to validate scheduler::Call: Expecting 'request' to be present"));
    assert_eq!(status_of(with_id(json!({"type":"UNKNOWN","framework_id":{"value":id}}))).await.0, 501);
    for kind in ["SUPPRESS", "REVIVE"] {
        assert_eq!(status_of(with_id(json!({"type":kind,"framework_id":{"value":id}}))).await.0, 202);
    }
    let reconcile = json!({"type":"RECONCILE","framework_id":{"value":id},"reconcile":{"tasks":[]}});
    assert_eq!(status_of(with_id(reconcile)).await.0, 202);
    let message = json!({"type":"MESSAGE","framework_id":{"value":id},"message":{"agent_id":{"value":"a"},"executor_id":{"value":"e"},"data":"aGk="}});
    assert_eq!(status_of(with_id(message)).await.0, 202);
    // Disconnected (inside failover_timeout): 403.
    drop(events);
    let teardown = json!({"type":"TEARDOWN","framework_id":{"value":id}});
    // The master notices the closed stream asynchronously; until then TEARDOWN
    // would be accepted, so probe with a harmless call.
    let suppress = json!({"type":"SUPPRESS","framework_id":{"value":id}});
    tokio::time::timeout(DEADLINE, async {
        while status_of(with_id(suppress.clone())).await.0 != 403 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("a disconnected framework is not subscribed: 403");
    let (code, body) = status_of(with_id(teardown)).await;
    assert_eq!((code, body.as_str()), (403, "Framework is not subscribed"));
}

#[tokio::test]
async fn resubscribing_with_the_framework_id_fails_over_the_old_stream() {
    let c = Cluster::start().await;
    let mut first = c.framework("fw", &["mpi"]).await;
    let mut info = first.info.clone();
    info.failover_timeout = Some(60.0);
    let second = common::Framework::subscribe(&c.url(), info.clone()).await;
    assert_eq!(second.id(), first.id(), "the framework keeps its id");
    let error = first.expect(EventType::Error).await;
    let error = error.error.unwrap();
    assert_eq!(error.message, "Framework failed over", "Mesos' own words");
    assert_eq!(error.kind(), mpiswarm_mesos::MasterError::FrameworkFailedOver);
    assert!(first.events.next().await.is_none(), "the old stream is closed");
    // TEARDOWN, then a re-subscribe with the removed id gets ERROR.
    second.client.call(&Call::teardown(second.id())).await.unwrap();
    let client = mpiswarm_mesos::client::SchedulerClient::new(&c.url(), None);
    let err = client.subscribe(info).await.err().unwrap();
    assert!(err.to_string().contains("Framework has been removed"), "{err}");
    assert!(
        matches!(
            err,
            mpiswarm_mesos::client::ClientError::Refused { error: mpiswarm_mesos::MasterError::FrameworkRemoved, .. }
        ),
        "the client reads the refusal as a removed framework: {err:?}"
    );
}

#[tokio::test]
async fn a_subscribe_without_framework_id_gets_a_new_framework() {
    let c = Cluster::start().await;
    let a = c.framework("a", &["mpi"]).await;
    let b = Cluster::framework(&c, "a", &["mpi"]).await;
    assert_ne!(a.id(), b.id());
}

#[tokio::test]
async fn the_deprecated_role_field_is_accepted_and_offers_carry_no_allocation_info() {
    let c = Cluster::start().await;
    let _agent = c.agent("node1", 1.0, 512.0);
    let mut info = FrameworkInfo::new("root", "old", &[]);
    info.capabilities.clear();
    info.role = Some("batch".into());
    let mut f = common::Framework::subscribe(&c.url(), info).await;
    let offer = f.offers().await.remove(0);
    assert!(offer.allocation_info.is_none());
    assert!(offer.resources.iter().all(|r| r.allocation_info.is_none()));
    let state = c.state().await;
    assert_eq!(state["frameworks"][0]["roles"], json!(["batch"]));
}

#[tokio::test]
async fn a_standby_redirects_with_a_protocol_relative_location() {
    let c = Cluster::start_with(|a| a.redirect_to = Some("127.0.0.1:5999".into())).await;
    let no_redirects = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let resp = no_redirects
        .post(format!("{}/api/v1/scheduler", c.url()))
        .header("Content-Type", "application/json")
        .body(SUBSCRIBE)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 307);
    assert_eq!(resp.headers()["location"], "//127.0.0.1:5999/api/v1/scheduler");
}

#[tokio::test]
async fn the_scheduler_client_follows_a_redirect_to_the_leader() {
    let leader = Cluster::start().await;
    let standby = Cluster::start_with(|a| a.redirect_to = Some(leader.server.addr.to_string())).await;
    let client = SchedulerClient::new(&standby.url(), None).with_replicas(&[&leader.url()]);
    let f = common::Framework::subscribe_with(client, FrameworkInfo::new("root", "r", &["mpi"])).await;
    assert_eq!(f.client.endpoint().url(), format!("{}/api/v1/scheduler", leader.url()));
    f.client.call(&Call::suppress(f.id(), vec![])).await.unwrap();
}

#[tokio::test]
async fn a_standby_sends_agents_on_too_and_every_replica_names_the_leader() {
    let leader = Cluster::start().await;
    let standby = Cluster::start_with(|a| a.redirect_to = Some(leader.server.addr.to_string())).await;
    let no_redirects = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let agent_call = no_redirects
        .post(format!("{}{}", standby.url(), mpiswarm_mesos::agent_api::PATH))
        .header("Content-Type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(agent_call.status().as_u16(), 307, "the agent API redirects before it reads the body");
    let to_leader = format!("//{}", leader.server.addr);
    assert_eq!(agent_call.headers()["location"], format!("{to_leader}{}", mpiswarm_mesos::agent_api::PATH));
    for (replica, name) in [(&standby, "standby"), (&leader, "leader")] {
        for path in ["/master/redirect", "/redirect"] {
            let resp = no_redirects.get(format!("{}{path}", replica.url())).send().await.unwrap();
            assert_eq!(resp.status().as_u16(), 307, "{name} {path}");
            assert_eq!(resp.headers()["location"], to_leader.as_str(), "{name} {path}");
        }
        assert_eq!(replica.state().await["leader"], format!("master@{}", leader.server.addr), "{name}");
    }
    // An agent given both replicas reaches the leader through the standby.
    let client = mpiswarm_mesos::client::AgentClient::new(&standby.url(), None).with_replicas(&[&leader.url()]);
    let info = mpiswarm_mesos::agent_api::AgentInfo {
        hostname: "node1".into(),
        id: None,
        resources: vec![mpiswarm_mesos::Resource::scalar("cpus", 1.0)],
        attributes: Vec::new(),
        port: None,
    };
    let mut agent = mpiswarm_testkit::TestAgent::start_with_client(client, info);
    within("the agent's SUBSCRIBED from the leader", agent.subscribed(1)).await;
    assert_eq!(leader.state().await["slaves"].as_array().map(Vec::len), Some(1), "registered with the leader");
    assert_eq!(standby.state().await["slaves"], json!([]), "nothing registered with the standby");
}

#[tokio::test]
async fn a_client_given_every_replica_moves_on_from_one_that_refuses_connections_to_the_leader() {
    let leader = Cluster::start().await;
    let standby = Cluster::start_with(|a| a.redirect_to = Some(leader.server.addr.to_string())).await;
    // A replica that is gone: its port refuses connections.
    let gone = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let client = SchedulerClient::new(&gone, None).with_replicas(&[&standby.url(), &leader.url()]);
    let backoff = mpiswarm_mesos::client::Backoff {
        initial: std::time::Duration::from_millis(10),
        max: std::time::Duration::from_millis(100),
    };
    let subscribed = within(
        "a SUBSCRIBE through the replicas",
        client.subscribe_with_backoff(FrameworkInfo::new("root", "r", &["mpi"]), backoff, 3),
    )
    .await
    .expect("subscribed on the second attempt, through the standby");
    assert_eq!(client.endpoint().url(), format!("{}/api/v1/scheduler", leader.url()));
    client.call(&Call::suppress(&subscribed.subscribed.framework_id, vec![])).await.unwrap();
    assert_eq!(leader.state().await["frameworks"].as_array().map(Vec::len), Some(1));
    // A standby that knows no leader answers 503, and the client moves on.
    let lost = Cluster::start_with(|a| a.redirect_to = Some(gone.trim_start_matches("http://").to_owned())).await;
    lost.server.shared.leadership.set(mpiswarm_offers::leadership::Leadership::Following { leader: None });
    let resp = json_post(&lost.url(), SUBSCRIBE).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 503);
    assert!(resp.text().await.unwrap().contains("no leader is known"));
    let client = SchedulerClient::new(&lost.url(), None).with_replicas(&[&leader.url()]);
    within(
        "a SUBSCRIBE past the standby",
        client.subscribe_with_backoff(FrameworkInfo::new("root", "s", &["mpi"]), backoff, 2),
    )
    .await
    .expect("the next replica is the leader");
    assert_eq!(client.endpoint().url(), format!("{}/api/v1/scheduler", leader.url()));
}

#[tokio::test]
async fn a_redirect_to_a_master_the_client_was_not_given_is_refused_and_nothing_reaches_it() {
    let elsewhere = Cluster::start().await;
    let standby = Cluster::start_with(|a| a.redirect_to = Some(elsewhere.server.addr.to_string())).await;
    let client = SchedulerClient::new(&standby.url(), Some(("mpi".into(), "s3cret".into())));
    let refused = tokio::time::timeout(DEADLINE, client.subscribe(FrameworkInfo::new("root", "r", &["mpi"])))
        .await
        .expect("answered in time")
        .err()
        .expect("the redirect is not followed");
    let message = refused.to_string();
    assert!(
        matches!(refused, ClientError::RedirectRefused { reason: RedirectRefusal::NotAMaster { .. }, .. }),
        "{message}"
    );
    assert!(message.contains(&elsewhere.server.addr.to_string()) && message.contains(&standby.url()), "{message}");
    assert_eq!(client.endpoint().url(), format!("{}/api/v1/scheduler", standby.url()), "still the configured master");
    let state = elsewhere.state().await;
    assert_eq!(state["frameworks"], json!([]), "the credentials never reached the master the client was not given");
}

#[tokio::test]
async fn after_a_restart_frameworks_subscribe_while_registered_agents_are_still_awaited() {
    let dir = tempfile::tempdir().unwrap();
    let mut registry = mpiswarm_offers::registry::Registry::open(dir.path()).unwrap();
    registry
        .state
        .agents
        .insert("A-old".into(), mpiswarm_offers::registry::RegisteredAgent { hostname: "n".into(), principal: None });
    registry.save().unwrap();
    let server = mpiswarm_offers::start(common::args(dir.path())).await.unwrap();
    // As in Mesos: once the registry is read, frameworks are served; the
    // agent has until --agent-reregister-timeout (75 s here) to come back.
    let url = server.url();
    let subscribe = common::Framework::subscribe(&url, FrameworkInfo::new("root", "r", &["mpi"]));
    tokio::time::timeout(DEADLINE, subscribe).await.expect("SUBSCRIBED while A-old is still away");
    assert_eq!(reqwest::get(format!("{}/readyz", server.url())).await.unwrap().status().as_u16(), 200);
    let state: serde_json::Value =
        reqwest::get(format!("{}/master/state", server.url())).await.unwrap().json().await.unwrap();
    assert_eq!(state["recovering"], true, "A-old is still awaited");
}

#[tokio::test]
async fn with_credentials_unauthenticated_calls_get_401() {
    let dir = tempfile::tempdir().unwrap();
    let creds = dir.path().join("credentials.json");
    std::fs::write(&creds, r#"{"credentials":[{"principal":"mpi","secret":"s3cret"}]}"#).unwrap();
    let c = Cluster::start_with(|a| a.credentials = Some(creds)).await;
    let resp = json_post(&c.url(), SUBSCRIBE).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 401);
    assert!(resp.headers()["www-authenticate"].to_str().unwrap().starts_with("Basic"));
    assert_eq!(status_of(json_post(&c.url(), SUBSCRIBE).basic_auth("mpi", Some("wrong"))).await.0, 401);
    let client = mpiswarm_mesos::client::SchedulerClient::new(&c.url(), Some(("mpi".into(), "s3cret".into())));
    let mut info = FrameworkInfo::new("root", "auth", &["mpi"]);
    info.principal = Some("mpi".into());
    client.subscribe(info).await.unwrap();
    assert_eq!(reqwest::get(format!("{}/health", c.url())).await.unwrap().status().as_u16(), 200);
}

#[tokio::test]
async fn an_oversized_body_is_refused_with_413() {
    let c = Cluster::start_with(|a| a.max_body_bytes = 2048).await;
    let big = format!(r#"{{"type":"SUBSCRIBE","pad":"{}"}}"#, "x".repeat(4096));
    assert_eq!(status_of(json_post(&c.url(), big)).await.0, 413);
}

#[tokio::test]
async fn version_state_and_metrics_answer_like_mesos() {
    let c = Cluster::start().await;
    let _agent = c.agent("node1", 2.0, 1024.0);
    let mut f = c.framework("fw", &["mpi"]).await;
    f.offers().await;
    let version: serde_json::Value = reqwest::get(format!("{}/version", c.url())).await.unwrap().json().await.unwrap();
    assert_eq!(version["version"], "1.11.0");
    let state = c.state().await;
    assert_eq!(state["slaves"][0]["hostname"], "node1");
    assert_eq!(state["slaves"][0]["resources"]["cpus"], 2.0);
    assert_eq!(state["frameworks"][0]["offers"].as_array().unwrap().len(), 1);
    assert_eq!(state["roles"][0]["name"], "mpi");
    assert_eq!(state["roles"][0]["weight"], 1.0);
    let snapshot: serde_json::Value =
        reqwest::get(format!("{}/metrics/snapshot", c.url())).await.unwrap().json().await.unwrap();
    assert_eq!(snapshot["master/slaves_active"], 1.0);
    assert_eq!(snapshot["master/outstanding_offers"], 1.0);
    let prom = reqwest::get(format!("{}/metrics", c.url())).await.unwrap().text().await.unwrap();
    assert!(prom.contains("mpiswarm_offers_master_slaves_active 1"), "{prom}");
    assert!(prom.contains("# TYPE mpiswarm_offers_allocator_allocation_runs counter"), "{prom}");
}

#[tokio::test]
async fn the_agent_api_refuses_bad_calls_with_precise_codes() {
    let c = Cluster::start().await;
    let url = format!("{}/api/v1/agent", c.url());
    let post =
        |body: &str| reqwest::Client::new().post(&url).header("Content-Type", "application/json").body(body.to_owned());
    assert_eq!(status_of(reqwest::Client::new().post(&url).body("{}")).await.0, 400);
    assert_eq!(
        status_of(reqwest::Client::new().post(&url).header("Content-Type", "text/plain").body("{}")).await.0,
        415
    );
    let (code, body) = status_of(post(r#"{"type":"SUBSCRIBE","subscribe":{"agent_info":{"hostname":" "}}}"#)).await;
    assert_eq!((code, body.as_str()), (400, "agent_info.hostname must not be empty"));
    let negative = r#"{"type":"SUBSCRIBE","subscribe":{"agent_info":{"hostname":"n","resources":[{"name":"cpus","type":"SCALAR","scalar":{"value":-1}}]}}}"#;
    let (code, body) = status_of(post(negative)).await;
    assert_eq!(code, 400);
    assert!(body.contains("cpus") && body.contains("-1"), "{body}");
    let update = r#"{"type":"UPDATE","agent_id":{"value":"ghost"},"update":{"framework_id":{"value":"f"},"status":{"task_id":{"value":"t"},"state":"TASK_RUNNING"}}}"#;
    let (code, body) = status_of(post(update).header("Mesos-Stream-Id", "s")).await;
    assert_eq!((code, body.as_str()), (403, "Agent ghost is not subscribed"));
    // A subscribed agent must send its current stream id.
    let mut agent = c.agent("node1", 1.0, 256.0);
    let id = common::within("agent subscription", agent.subscribed(1)).await;
    let update = update.replace("ghost", &id.value);
    let (code, body) = status_of(post(&update)).await;
    assert_eq!((code, body.as_str()), (400, "UPDATE calls must include the 'Mesos-Stream-Id' header"));
    assert_eq!(status_of(post(&update).header("Mesos-Stream-Id", "stale")).await.0, 400);
}

#[tokio::test]
async fn offers_and_state_say_where_each_agent_serves_as_mesos_does() {
    let c = Cluster::start().await;
    // One agent that names its port, one that does not (Mesos' default 5051).
    let client = mpiswarm_mesos::client::AgentClient::new(&c.url(), None);
    let mut info: mpiswarm_mesos::agent_api::AgentInfo = serde_json::from_value(json!({
        "hostname": "node1",
        "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 1.0}}],
        "port": 5052
    }))
    .unwrap();
    let Ok(_stream) = client.subscribe(info.clone(), vec![]).await else { panic!("node1 subscribes") };
    info.hostname = "node2".into();
    info.port = None;
    let Ok(_stream2) = client.subscribe(info, vec![]).await else { panic!("node2 subscribes") };
    let mut f = c.framework("fw", &["mpi"]).await;
    let mut urls = std::collections::BTreeMap::new();
    common::within("an offer of each agent", async {
        while urls.len() < 2 {
            for o in f.offers().await {
                urls.insert(o.hostname.clone(), serde_json::to_value(o.url).unwrap());
            }
        }
    })
    .await;
    assert_eq!(
        urls["node1"],
        json!({"scheme": "http", "address": {"hostname": "node1", "ip": "127.0.0.1", "port": 5052}, "path": "/slave(1)"})
    );
    assert_eq!(urls["node2"]["address"]["port"], 5051);
    let state = c.state().await;
    let slaves: std::collections::BTreeMap<String, (serde_json::Value, serde_json::Value)> = state["slaves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["hostname"].as_str().unwrap().to_owned(), (s["port"].clone(), s["pid"].clone())))
        .collect();
    assert_eq!(slaves["node1"], (json!(5052), json!("slave(1)@127.0.0.1:5052")));
    assert_eq!(slaves["node2"], (json!(5051), json!("slave(1)@127.0.0.1:5051")));
}
