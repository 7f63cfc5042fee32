//! Transport security: TLS with a CA carried in the kubeconfig, the token
//! kept across restarts, and plain HTTP refused off loopback.

mod common;

use common::{Server, http};
use mpiswarm_apiserver::{ApiserverArgs, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_kubeconfig_carries_the_ca_and_a_token_that_survives_restarts_and_one_server_owns_a_dir() {
    let s = Server::start().await;
    let kc = std::fs::read_to_string(s.kubeconfig()).expect("kubeconfig");
    assert!(kc.contains("server: https://127.0.0.1:"), "{kc}");
    assert!(kc.contains("certificate-authority-data: "), "{kc}");
    assert!(kc.contains(&format!("token: {}", s.running.token)), "{kc}");
    let first_token = s.running.token.clone();
    let second = start(ApiserverArgs::for_dir(s.dir.path())).await.err().expect("a second server on the same data dir");
    assert!(second.to_string().contains("is in use by another apiserver"), "{second}");
    let ca = std::fs::read(s.dir.path().join("ca.crt")).expect("ca");
    let dir = s.dir;
    drop(s.running);

    let again = start(ApiserverArgs::for_dir(dir.path())).await.expect("restart");
    assert_eq!(again.token, first_token, "the token must survive a restart");
    assert_eq!(std::fs::read(dir.path().join("ca.crt")).expect("ca"), ca, "the CA must survive a restart");
    let s = Server { running: again, dir };
    let resp = http(&s)
        .get(format!("{}/api/v1/namespaces", s.running.url))
        .send()
        .await
        .expect("TLS request verified by the CA");
    assert_eq!(resp.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn plain_http_is_refused_off_loopback_before_anything_listens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut args = ApiserverArgs::for_dir(dir.path());
    args.listen = "0.0.0.0:0".parse().expect("addr");
    args.insecure_http = true;
    let err = start(args).await.err().expect("plain HTTP on 0.0.0.0 must be refused");
    assert!(err.to_string().contains("--insecure-http is only allowed on loopback"), "{err}");
}
