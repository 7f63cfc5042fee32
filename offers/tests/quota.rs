//! Quota limits (`--quota`, Mesos quota `limit`) through the HTTP API: a
//! role is never offered past its limit over the whole cluster, what it
//! gives back is offered again, and `/quota`, `/master/state`,
//! `/metrics/snapshot` and `/metrics` show each role's limit beside what it
//! holds.

mod common;

use common::{Cluster, DEADLINE};
use mpiswarm_mesos::scheduler::Call;

async fn json(url: &str) -> serde_json::Value {
    let got = tokio::time::timeout(DEADLINE, reqwest::get(url)).await.expect("an answer in time").unwrap();
    got.json().await.unwrap()
}

#[tokio::test]
async fn a_role_is_offered_no_more_than_its_limit_and_every_view_shows_it() {
    let c = Cluster::from_flags(&["--quota", "team-a=cpus:3"]).await;
    let _agents = [c.agent("node1", 2.0, 1024.0), c.agent("node2", 2.0, 1024.0)];
    let mut capped = c.framework("capped", &["team-a"]).await;
    let mut offers = capped.offers().await;
    // Both agents' offers arrive in one cycle once both registered; wait for a second if they came apart.
    if offers.len() == 1 {
        offers.extend(capped.offers().await);
    }
    let cpus = |o: &mpiswarm_mesos::Offer| {
        o.resources.iter().filter(|r| r.name == "cpus").filter_map(|r| r.scalar_value()).sum::<f64>()
    };
    let offered: f64 = offers.iter().map(cpus).sum();
    assert_eq!(offered, 3.0, "4 cpus free, 3 offered: {offers:?}");

    let quota = json(&format!("{}/quota", c.url())).await;
    assert_eq!(quota["configs"][0]["role"], "team-a");
    assert_eq!(quota["configs"][0]["limits"]["cpus"], 3.0);
    assert_eq!(quota["configs"][0]["consumed"]["cpus"], 3.0, "offered counts: {quota}");
    let state = c.state().await;
    let role = state["roles"].as_array().unwrap().iter().find(|r| r["name"] == "team-a").cloned().unwrap();
    assert_eq!(role["quota"]["limit"]["cpus"], 3.0, "{role}");
    let snapshot = json(&format!("{}/metrics/snapshot", c.url())).await;
    assert_eq!(snapshot["allocator/quota/roles/team-a/resources/cpus/limit"], 3.0);
    assert_eq!(snapshot["allocator/quota/roles/team-a/resources/cpus/consumed"], 3.0);
    let prometheus = reqwest::get(format!("{}/metrics", c.url())).await.unwrap().text().await.unwrap();
    assert!(
        prometheus.contains("mpiswarm_offers_allocator_quota_roles_team_a_resources_cpus_limit 3"),
        "a role's '-' is no metric name character: {prometheus}"
    );

    // Declining the offer with the most cpus gives them back: offered again, up to the limit.
    let biggest = offers.iter().max_by(|a, b| cpus(a).total_cmp(&cpus(b))).unwrap().clone();
    let no_filter = Some(mpiswarm_mesos::framework::Filters { refuse_seconds: Some(0.0) });
    capped.client.call(&Call::decline(capped.id(), vec![biggest.id.clone()], no_filter)).await.unwrap();
    let again = capped.offers().await;
    assert_eq!(again.iter().map(cpus).sum::<f64>(), cpus(&biggest), "the declined cpus come back: {again:?}");
}
