//! The Python `kubernetes` client from PyPI (installed by .ci/run from
//! .ci/requirements.txt) drives the server: create, list, a watch that sees
//! ADDED/MODIFIED/DELETED, typed core kinds, and 410 on a compacted RV.
//! Fails, never skips, when Python or the package is missing.

mod common;

use common::{COMMAND_DEADLINE, Server, fixture, output_within, stderr, stdout};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_python_kubernetes_client_works_against_the_server() {
    let s = Server::start_with(|a| a.watch_history = 20).await;
    s.kubectl_ok(&["apply", "-f", fixture("widget-crd.yaml").to_str().expect("utf8")]);
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/client_check.py");
    let kubeconfig = s.kubeconfig().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        let mut python = std::process::Command::new("python3");
        python.arg(script).arg(kubeconfig);
        output_within(python, COMMAND_DEADLINE)
    })
    .await
    .expect("python3 runs (install it and `pip install -r .ci/requirements.txt`)");
    assert!(out.status.success(), "python client check failed:\n{}\n{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("python client: ok"));
}
