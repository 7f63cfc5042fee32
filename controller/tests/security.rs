//! The control plane as it runs off loopback: the offer layer serves TLS
//! and requires credentials, the agents and the controller send theirs and
//! trust its CA (the controller from its `--master-credentials` and
//! `--ca-file` flags), and a job runs to the end through it.

mod common;

use common::{Stack, job_yaml, program};
use mpiswarm_crds::Phase;
use mpiswarm_testkit::{AgentSpec, TestPki};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_runs_through_a_tls_offer_layer_that_requires_credentials() {
    let pki = TestPki::new();
    let s = Stack::start_secure(vec![AgentSpec::new("node1").cpus(2.0).mem(4096.0)], &pki).await;
    assert!(s.offers.url().starts_with("https://"), "{}", s.offers.url());
    s.kubectl_ok(&["apply", "-f", "-"], Some(&job_yaml("secure", 2, 0.5, &program("sleep 1"), "")));
    let job = s.until_phase("secure", Phase::Succeeded).await;
    assert_eq!(job.status.and_then(|st| st.launcher).and_then(|l| l.exit_code), Some(0));
}

#[test]
fn a_ca_file_that_is_not_pem_is_refused_with_its_path() {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: mpiswarm_controller::ControllerArgs,
    }
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk-ca.pem");
    std::fs::write(&junk, "not a certificate").unwrap();
    let cli = Cli::parse_from(["controller".as_ref(), "--ca-file".as_ref(), junk.as_os_str()]);
    let err = cli.args.options().unwrap_err().to_string();
    assert!(err.contains("--ca-file") && err.contains("junk-ca.pem"), "{err}");
}
