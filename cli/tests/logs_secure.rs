//! `mpiswarm logs` against a control plane secured as it is off loopback:
//! the master serves TLS and requires credentials, the real node agent on
//! the Docker engine serves `/files/read` over TLS, and the controller
//! serves its log endpoint over TLS and reads the output from the agent
//! with its own credential. The binary, holding only a kubeconfig with a
//! bearer token and the endpoint's CA (`--ca-file`), prints a finished
//! job's output; without the CA, or with another, it fails naming the
//! endpoint; a kubeconfig without a bearer token is refused saying what it
//! has instead. Needs the rank image of `make images`; fails (never skips)
//! without it.

#[path = "../../controller/tests/common/mod.rs"]
mod common;

use std::process::{Command, Output};

use common::{COMMAND_DEADLINE, Stack, job_yaml, program, require_image};
use mpiswarm_crds::Phase;
use mpiswarm_testkit::{TestPki, output_within};

fn logs(kubeconfig: &std::path::Path, job: &str, flags: &[&std::ffi::OsStr]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mpiswarm"));
    cmd.args(["logs", job]).arg("--kubeconfig").arg(kubeconfig).args(flags);
    // The flags under test must come from the command line only.
    for var in ["MPISWARM_LOGS_CA_FILE", "MPISWARM_LOGS_URL"] {
        cmd.env_remove(var);
    }
    output_within(cmd, None, COMMAND_DEADLINE)
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn logs_are_read_through_the_controllers_tls_endpoint_with_a_bearer_token_and_refused_otherwise() {
    require_image("mpiswarm/openmpi:0.1.0");
    let pki = TestPki::new();
    let s = Stack::start_secure_docker(&pki).await;
    assert!(s.offers.url().starts_with("https://"), "{}", s.offers.url());
    let (_, url) = s.controller.as_ref().and_then(|c| c.logs.clone()).expect("the controller serves /logs");
    assert!(url.starts_with("https://"), "{url}");
    s.kubectl_ok(&["apply", "-f", "-"], Some(&job_yaml("secured", 2, 0.5, &program("echo output-behind-tls"), "")));
    s.until_phase("secured", Phase::Succeeded).await;

    let kubeconfig = s.api.kubeconfig.clone();
    let ca = pki.ca_file.as_os_str();
    let read = logs(&kubeconfig, "secured", &["--ca-file".as_ref(), ca]);
    let (out, err) = text(&read);
    assert!(read.status.success(), "mpiswarm logs failed: {err}");
    assert_eq!(out.matches("output-behind-tls").count(), 2, "one line per rank: {out:?}");

    let untrusted = logs(&kubeconfig, "secured", &["--ca-file".as_ref(), pki.other_ca_file.as_os_str()]);
    let (_, err) = text(&untrusted);
    assert!(!untrusted.status.success(), "an endpoint signed by another CA was trusted");
    assert!(err.contains(&url), "the error names the endpoint: {err}");
    let public_roots = logs(&kubeconfig, "secured", &[]);
    assert!(!public_roots.status.success(), "a private CA's endpoint was trusted without --ca-file");

    // A kubeconfig whose user proves itself otherwise than by a bearer token.
    let admin = std::fs::read_to_string(&kubeconfig).expect("the admin kubeconfig");
    let token = s.api.token.clone();
    let certificate = admin.replace(&format!("token: {token}"), "client-certificate-data: Y2VydA==");
    assert_ne!(certificate, admin, "the admin kubeconfig holds its token as `token: ...`");
    let other = s.dir.path().join("certificate.kubeconfig");
    std::fs::write(&other, certificate).expect("kubeconfig");
    let refused = logs(&other, "secured", &["--ca-file".as_ref(), ca]);
    let (_, err) = text(&refused);
    assert!(!refused.status.success(), "read without a bearer token");
    assert!(err.contains("a client certificate, not a bearer token"), "{err}");
    s.delete_leaving_nothing("default", "secured").await;
}
