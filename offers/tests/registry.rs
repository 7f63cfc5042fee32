//! A registry that cannot be written is reported, not swallowed: the call
//! that needed the write fails with 503 and says why, `/health` and
//! `/readyz` answer 503 with the error, and the metrics count the failures.
//! Writes are made to fail by putting a directory where the registry file
//! goes: unlike a read-only mode bit, that stops root too.

mod common;

use common::{Cluster, SUBSCRIBE, json_post, status_of};

async fn get(url: &str) -> (u16, String) {
    let resp = reqwest::get(url).await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

#[tokio::test]
async fn a_failed_registry_write_fails_the_subscribe_and_shows_in_health_and_metrics() {
    let c = Cluster::start().await;
    let registry = c.dir.path().join("registry.json");
    assert!(!registry.exists(), "nothing was written yet");
    std::fs::create_dir(&registry).unwrap();

    let (code, body) = status_of(json_post(&c.url(), SUBSCRIBE)).await;
    assert_eq!(code, 503, "{body}");
    assert!(body.starts_with("Registry write failed, so the subscription of framework "), "{body}");
    assert!(body.contains("registry.json") && body.contains("Retry once /health answers 200"), "{body}");

    let (code, body) = get(&format!("{}/health", c.url())).await;
    assert_eq!(code, 503);
    assert!(
        body.starts_with("registry write failed: cannot write the registry") && body.contains("registry.json"),
        "{body}"
    );
    assert_eq!(get(&format!("{}/readyz", c.url())).await.0, 503);
    let snapshot: serde_json::Value =
        reqwest::get(format!("{}/metrics/snapshot", c.url())).await.unwrap().json().await.unwrap();
    assert_eq!(snapshot["registrar/registry_write_failures"], 1.0, "{snapshot}");
    assert_eq!(snapshot["registrar/registry_failing"], 1.0);
    let prom = get(&format!("{}/metrics", c.url())).await.1;
    assert!(prom.contains("mpiswarm_offers_registrar_registry_write_failures_total 1"), "{prom}");

    // Once the data directory is usable again, so is the offer layer.
    std::fs::remove_dir(&registry).unwrap();
    c.framework("after", &["mpi"]).await;
    assert_eq!(get(&format!("{}/health", c.url())).await.0, 200);
    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&registry).unwrap()).unwrap();
    assert_eq!(saved["frameworks"].as_object().map(|f| f.len()), Some(2), "both frameworks are on disk now: {saved}");
}

#[tokio::test]
async fn an_agent_whose_registration_cannot_be_saved_is_refused_with_503() {
    let c = Cluster::start().await;
    std::fs::create_dir(c.dir.path().join("registry.json")).unwrap();
    let client = mpiswarm_mesos::client::AgentClient::new(&c.url(), None);
    let info: mpiswarm_mesos::agent_api::AgentInfo =
        serde_json::from_value(serde_json::json!({"hostname": "node1"})).unwrap();
    let Err(err) = client.subscribe(info, vec![]).await else {
        panic!("the agent was registered without its registry write")
    };
    let err = err.to_string();
    assert!(err.contains("503") && err.contains("Registry write failed, so the registration of agent"), "{err}");
}
