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

/// The data directory holds the admin token, the CA key, the kubeconfig and
/// the store with every Secret: another local user may open none of them,
/// from the first start on, and a directory an earlier version left open is
/// closed at the next start with nothing in it lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_data_dir_and_every_secret_in_it_are_the_owners_alone_and_an_open_one_is_closed_at_start() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    let root = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let dir = root.path().join("data");
    let secrets = ["kubeconfig", "token", "ca.key", "server.key", "state.sqlite"];
    let check = |when: &str| {
        assert_eq!(mode(&dir), 0o700, "{when}: the data dir");
        for name in secrets {
            assert_eq!(mode(&dir.join(name)), 0o600, "{when}: {name}");
        }
        for name in ["state.sqlite-wal", "state.sqlite-shm"] {
            let p = dir.join(name);
            if p.exists() {
                assert_eq!(mode(&p), 0o600, "{when}: {name}");
            }
        }
    };
    let first = start(ApiserverArgs::for_dir(&dir)).await.expect("first start");
    check("after the first start");
    let token = first.token.clone();
    drop(first);

    // What an earlier version left: everything readable by all.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    for name in secrets {
        std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    let again = start(ApiserverArgs::for_dir(&dir)).await.expect("restart");
    check("after a restart on an open dir");
    assert_eq!(again.token, token, "the token survives the narrowing");
    assert_eq!(mode(root.path()), 0o755, "the parent, which mpiswarm did not create, is left alone");
}
