//! Off loopback nobody gets in without TLS and credentials: an agent that
//! sends no credentials is refused (401) and one that sends them registers
//! and runs tasks (`/metrics` asks for them too, the probes do not); a TLS offer layer is reached by a client that trusts its
//! CA and refused by one that does not; listening beyond loopback without
//! TLS or credentials does not start at all.

mod common;

use common::{Cluster, Framework, task, within};
use mpiswarm_mesos::agent_api::AgentInfo;
use mpiswarm_mesos::client::{AgentClient, SchedulerClient};
use mpiswarm_mesos::tls::CaFile;
use mpiswarm_mesos::{FrameworkInfo, Resource, TaskState};
use mpiswarm_testkit::{TestAgent, TestPki};

fn agent_info(hostname: &str) -> AgentInfo {
    AgentInfo {
        hostname: hostname.to_owned(),
        id: None,
        resources: vec![Resource::scalar("cpus", 2.0), Resource::scalar("mem", 1024.0)],
        attributes: Vec::new(),
        port: None,
    }
}

fn credential(principal: &str, secret: &str) -> Option<(String, String)> {
    Some((principal.to_owned(), secret.to_owned()))
}

#[tokio::test]
async fn an_agent_without_credentials_gets_401_and_with_them_it_registers_and_runs_a_task() {
    let pki = TestPki::new();
    let creds = pki.credentials_file("agent", "s3cret");
    let c = Cluster::start_with(|a| a.credentials = Some(creds)).await;

    let anonymous = AgentClient::new(&c.url(), None);
    let refused = anonymous.subscribe(agent_info("nobody"), Vec::new()).await.err().expect("no SUBSCRIBED");
    assert_eq!(refused.status(), Some(401), "{refused}");
    let wrong = AgentClient::new(&c.url(), credential("agent", "guess"));
    let refused = wrong.subscribe(agent_info("nobody"), Vec::new()).await.err().expect("no SUBSCRIBED");
    assert_eq!(refused.status(), Some(401), "{refused}");
    assert!(refused.to_string().contains("principal 'agent'"), "{refused}");
    let one_letter_off = AgentClient::new(&c.url(), credential("agent", "s3creT"));
    let refused = one_letter_off.subscribe(agent_info("nobody"), Vec::new()).await.err().expect("no SUBSCRIBED");
    assert_eq!(refused.status(), Some(401), "a secret of the right length but one byte off: {refused}");

    // The metrics need the credentials too; the probes are open to any supervisor.
    let http = reqwest::Client::new();
    assert_eq!(http.get(format!("{}/metrics", c.url())).send().await.unwrap().status(), 401);
    let no_redirects = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let leader = format!("{}/master/redirect", c.url());
    assert_eq!(
        no_redirects.get(&leader).send().await.unwrap().status(),
        401,
        "who leads: told to callers with credentials"
    );
    let told = no_redirects.get(&leader).basic_auth("agent", Some("s3cret")).send().await.unwrap();
    assert_eq!(told.status(), 307);
    let metrics = http.get(format!("{}/metrics", c.url())).basic_auth("agent", Some("s3cret")).send().await.unwrap();
    assert_eq!(metrics.status(), 200);
    assert_eq!(metrics.headers()["content-type"], mpiswarm_health::CONTENT_TYPE);
    for probe in ["/health", "/healthz", "/readyz"] {
        assert_eq!(http.get(format!("{}{probe}", c.url())).send().await.unwrap().status(), 200, "{probe}");
    }

    let mut agent =
        TestAgent::start_with_client(AgentClient::new(&c.url(), credential("agent", "s3cret")), agent_info("node1"));
    agent.subscribed(1).await;
    let client = SchedulerClient::new(&c.url(), credential("agent", "s3cret"));
    let mut info = FrameworkInfo::new("root", "fw", &["mpi"]);
    info.principal = Some("agent".into()); // an authenticated framework is its caller
    let mut f = Framework::subscribe_with(client, info).await;
    let offer = f.offers().await.remove(0);
    assert_eq!(offer.hostname, "node1", "the registered agent's resources are offered");
    f.launch(&offer, vec![task("t1", &offer, 1.0, 128.0, "sleep 1000")]).await;
    // The RUNNING update came through the agent's authenticated UPDATE.
    assert_eq!(f.update_of("t1").await.state, TaskState::Running);
    assert_eq!(agent.running_tasks().len(), 1);
}

#[tokio::test]
async fn a_tls_offer_layer_is_reached_with_its_ca_and_refused_without_it() {
    let pki = TestPki::new();
    let c = Cluster::start_with(|a| {
        a.tls_cert = Some(pki.cert_file.clone());
        a.tls_key = Some(pki.key_file.clone());
    })
    .await;
    let url = c.url();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let ca = CaFile::read(&pki.ca_file).unwrap();

    // Without the CA (public roots only) and with another CA: no handshake.
    for untrusted in [None, Some(CaFile::read(&pki.other_ca_file).unwrap())] {
        let client = AgentClient::new(&url, None).trusting(untrusted.as_ref());
        let err = client.subscribe(agent_info("node0"), Vec::new()).await.err().expect("refused");
        assert_eq!(err.status(), None, "refused before any HTTP answer: {err}");
        let framework = SchedulerClient::new(&url, None).trusting(untrusted.as_ref());
        let err = framework.subscribe(FrameworkInfo::new("root", "fw", &["mpi"])).await.err().expect("refused");
        assert_eq!(err.status(), None, "refused before any HTTP answer: {err}");
    }

    let mut agent = TestAgent::start_with_client(AgentClient::new(&url, None).trusting(Some(&ca)), agent_info("node1"));
    agent.subscribed(1).await;
    let client = SchedulerClient::new(&url, None).trusting(Some(&ca));
    let mut f = Framework::subscribe_with(client, FrameworkInfo::new("root", "fw", &["mpi"])).await;
    let offer = f.offers().await.remove(0);
    f.launch(&offer, vec![task("t1", &offer, 1.0, 128.0, "sleep 1000")]).await;
    assert_eq!(f.update_of("t1").await.state, TaskState::Running);
    // Plain HTTP to the TLS port gets no API.
    let plain = reqwest::get(url.replacen("https://", "http://", 1) + "/health").await;
    assert!(plain.map(|r| !r.status().is_success()).unwrap_or(true), "plain HTTP was served");
    within("the offer layer to stop", c.server.stop()).await.unwrap();
}

#[tokio::test]
async fn listening_beyond_loopback_without_tls_or_credentials_is_refused_naming_the_flags() {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let mut args = common::args(dir.path());
    args.listen = "0.0.0.0:0".parse().unwrap();
    let err = mpiswarm_offers::start(args.clone()).await.err().expect("refused").to_string();
    assert!(err.contains("refusing to listen on 0.0.0.0:0 without TLS and without credentials"), "{err}");
    assert!(err.contains("--tls-cert") && err.contains("--credentials"), "{err}");

    args.credentials = Some(pki.credentials_file("p", "s"));
    let err = mpiswarm_offers::start(args.clone()).await.err().expect("refused").to_string();
    assert!(err.contains("without TLS:"), "{err}");

    args.tls_cert = Some(pki.cert_file.clone());
    args.tls_key = Some(pki.key_file.clone());
    let running = mpiswarm_offers::start(args).await.expect("TLS and credentials: it starts");
    assert!(running.url().starts_with("https://0.0.0.0:"));
    within("the offer layer to stop", running.stop()).await.unwrap();
}

#[tokio::test]
async fn a_credentials_file_with_an_empty_secret_is_refused_at_start_up_naming_the_file() {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let mut args = common::args(dir.path());
    let creds = pki.credentials_file("agent", "");
    args.credentials = Some(creds.clone());
    let err = mpiswarm_offers::start(args).await.err().expect("refused").to_string();
    assert!(err.contains(&creds.display().to_string()) && err.contains("'agent' an empty secret"), "{err}");
}
