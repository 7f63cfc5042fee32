//! `mpiswarm logs` against an offer layer secured as it is off loopback:
//! the master serves TLS and requires credentials, the real node agent on
//! the Docker engine serves `/files/read` over TLS. The binary reads a
//! finished job's output through them with `--ca-file` and a credential,
//! and without either it fails saying what is missing. Needs the rank
//! image of `make images`; fails (never skips) without it.

#[path = "../../controller/tests/common/mod.rs"]
mod common;

use std::process::{Command, Output};

use common::{COMMAND_DEADLINE, Stack, job_yaml, program, require_image};
use mpiswarm_crds::Phase;
use mpiswarm_testkit::{TestPki, output_within};

fn logs(s: &Stack, job: &str, flags: &[&std::ffi::OsStr]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mpiswarm"));
    cmd.args(["logs", job]).arg("--kubeconfig").arg(&s.api.kubeconfig).args(flags);
    // The flags under test must come from the command line only.
    for var in
        ["MPISWARM_CA_FILE", "MPISWARM_CREDENTIAL", "MPISWARM_PRINCIPAL", "MPISWARM_SECRET_FILE", "MPISWARM_MASTER"]
    {
        cmd.env_remove(var);
    }
    output_within(cmd, None, COMMAND_DEADLINE)
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn logs_are_read_through_a_tls_offer_layer_and_agent_with_credentials_and_refused_without() {
    require_image("mpiswarm/openmpi:0.1.0");
    let pki = TestPki::new();
    let s = Stack::start_secure_docker(&pki).await;
    assert!(s.offers.url().starts_with("https://"), "{}", s.offers.url());
    s.kubectl_ok(&["apply", "-f", "-"], Some(&job_yaml("secured", 2, 0.5, &program("echo output-behind-tls"), "")));
    s.until_phase("secured", Phase::Succeeded).await;

    let credential = pki.secret_file("logs-credential", "mpiswarm s3cret");
    let (ca, cred) = (pki.ca_file.as_os_str(), credential.as_os_str());
    let read = logs(&s, "secured", &["--ca-file".as_ref(), ca, "--credential".as_ref(), cred]);
    let (out, err) = text(&read);
    assert!(read.status.success(), "mpiswarm logs failed: {err}");
    assert_eq!(out.matches("output-behind-tls").count(), 2, "one line per rank: {out:?}");

    // The same with a principal and a secret file.
    let secret = pki.secret_file("logs-secret", "s3cret");
    let read = logs(
        &s,
        "secured",
        &[
            "--ca-file".as_ref(),
            ca,
            "--principal".as_ref(),
            "mpiswarm".as_ref(),
            "--secret-file".as_ref(),
            secret.as_os_str(),
        ],
    );
    assert!(read.status.success() && text(&read).0.contains("output-behind-tls"), "{:?}", text(&read));

    let anonymous = logs(&s, "secured", &["--ca-file".as_ref(), ca]);
    let (_, err) = text(&anonymous);
    assert!(!anonymous.status.success(), "read without credentials");
    assert!(err.contains("401") && err.contains("--credential"), "the error says what to pass: {err}");

    let wrong = pki.secret_file("wrong-credential", "mpiswarm not-the-secret");
    let refused = logs(&s, "secured", &["--ca-file".as_ref(), ca, "--credential".as_ref(), wrong.as_os_str()]);
    let (_, err) = text(&refused);
    assert!(!refused.status.success() && err.contains("refused principal \"mpiswarm\""), "{err}");

    let untrusted =
        logs(&s, "secured", &["--ca-file".as_ref(), pki.other_ca_file.as_os_str(), "--credential".as_ref(), cred]);
    let (_, err) = text(&untrusted);
    assert!(!untrusted.status.success(), "a server signed by another CA was trusted");
    assert!(err.contains("/master/state"), "the error names what could not be reached: {err}");
}
