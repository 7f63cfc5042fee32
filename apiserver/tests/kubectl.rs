//! Real kubectl (1.32) against a freshly started server, with the project's
//! own MpiJob CRD and example: the things a user does every day.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use common::{COMMAND_DEADLINE, Server, output_within, repo_root, stderr, stdout};

fn crd() -> String {
    repo_root().join("crds/mpijob.yaml").display().to_string()
}

fn pi() -> String {
    repo_root().join("examples/pi.yaml").display().to_string()
}

async fn with_pi() -> Server {
    let s = Server::start().await;
    assert!(
        s.kubectl_ok(&["apply", "-f", &crd()])
            .contains("customresourcedefinition.apiextensions.k8s.io/mpijobs.mpiswarm.io created")
    );
    assert!(s.kubectl_ok(&["apply", "-f", &pi()]).contains("mpijob.mpiswarm.io/pi created"));
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn apply_client_side_then_server_side_then_get_describe_explain() {
    let s = with_pi().await;
    assert!(s.kubectl_ok(&["apply", "-f", &pi()]).contains("mpijob.mpiswarm.io/pi unchanged"));

    let table = s.kubectl_ok(&["get", "mpij"]);
    let header: Vec<&str> = table.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["NAME", "PHASE", "RANKS", "POLICY", "NODES", "AGE"], "{table}");
    assert!(table.lines().nth(1).is_some_and(|l| l.starts_with("pi ") && l.contains(" 4 ")), "{table}");

    let yaml = s.kubectl_ok(&["get", "mpijob", "pi", "-o", "yaml"]);
    assert!(yaml.contains("ranks: 4") && yaml.contains("generation: 1") && yaml.contains("uid: "), "{yaml}");

    let out = s.kubectl_ok(&["apply", "--server-side", "-f", &pi()]);
    assert!(out.contains("mpijob.mpiswarm.io/pi serverside-applied"), "{out}");
    let managers = s.kubectl_ok(&["get", "mpij", "pi", "-o", "jsonpath={.metadata.managedFields[*].manager}"]);
    assert!(managers.contains("kubectl-client-side-apply") && managers.contains("kubectl"), "{managers}");

    let described = s.kubectl_ok(&["describe", "mpij", "pi"]);
    assert!(described.contains("Name:") && described.contains("pi") && described.contains("Events:"), "{described}");

    let explained = s.kubectl_ok(&["explain", "mpijob.spec.placement"]);
    assert!(explained.contains("KIND:       MpiJob") && explained.contains("FIELD: placement"), "{explained}");
    for field in ["maxRanksPerNode", "nodeSelector", "policy"] {
        assert!(explained.contains(field), "explain lists {field}: {explained}");
    }
    let unknown = s.kubectl(&["explain", "mpijob.spec.nosuchfield"]);
    assert!(!unknown.status.success(), "explaining a field the schema lacks must fail");

    let all = s.kubectl_ok(&["get", "mpij", "-A"]);
    assert!(all.contains("NAMESPACE") && all.contains("default"), "{all}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn status_patch_is_seen_by_get_watch_and_satisfies_wait() {
    let s = with_pi().await;
    let mut watch = s
        .kubectl_cmd()
        .args(["get", "mpij", "-w", "--no-headers"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl get -w");
    // Read the watch on its own thread so that a silent kubectl fails the
    // test after a bound instead of hanging it.
    let stdout = watch.stdout.take().expect("stdout");
    let (tx, rows) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let next_row = |what: &str| {
        rows.recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("kubectl get -w printed no {what} within 60 s"))
            .expect("utf8")
    };
    let first = next_row("initial row");
    assert!(first.starts_with("pi "), "{first}");

    let status = r#"{"status":{"phase":"Succeeded","conditions":[{"type":"Succeeded","status":"True","reason":"Done","message":"pi finished","lastTransitionTime":"2025-01-01T00:00:00Z"}]}}"#;
    let out = s.kubectl_ok(&["patch", "mpij", "pi", "--subresource=status", "--type=merge", "-p", status]);
    assert!(out.contains("mpijob.mpiswarm.io/pi patched"), "{out}");
    let next = next_row("row after the status patch");
    assert!(next.contains("Succeeded"), "watch printed {next:?}");
    let _ = watch.kill();
    let _ = watch.wait();

    let waited = s.kubectl_ok(&["wait", "--for=condition=Succeeded", "mpij/pi", "--timeout=60s"]);
    assert!(waited.contains("condition met"), "{waited}");

    // Spec changes through /status are ignored; status did not bump generation.
    let out =
        s.kubectl_ok(&["patch", "mpij", "pi", "--subresource=status", "--type=merge", "-p", r#"{"spec":{"ranks":9}}"#]);
    assert!(out.contains("patched (no change)"), "{out}");
    let gen_ranks = s.kubectl_ok(&["get", "mpij", "pi", "-o", "jsonpath={.metadata.generation} {.spec.ranks}"]);
    assert_eq!(gen_ranks, "1 4");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delete_waits_for_the_finalizer_to_be_removed() {
    let s = with_pi().await;
    s.kubectl_ok(&[
        "patch",
        "mpij",
        "pi",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":["test.mpiswarm.io/hold"]}}"#,
    ]);
    let mut delete = s
        .kubectl_cmd()
        .args(["delete", "mpij", "pi", "--timeout=60s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl delete");
    s.until("deletionTimestamp set", |s| {
        s.stored("mpiswarm.io/mpijobs/default/pi").is_some_and(|o| o["metadata"]["deletionTimestamp"].is_string())
    })
    .await;
    assert!(delete.try_wait().expect("poll").is_none(), "kubectl delete returned while a finalizer was pending");

    let rejected = s.kubectl(&[
        "patch",
        "mpij",
        "pi",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":["test.mpiswarm.io/hold","other/new"]}}"#,
    ]);
    assert!(!rejected.status.success());
    assert!(stderr(&rejected).contains("no new finalizers can be added"), "{}", stderr(&rejected));

    s.kubectl_ok(&["patch", "mpij", "pi", "--type=json", "-p", r#"[{"op":"remove","path":"/metadata/finalizers/0"}]"#]);
    let out = delete.wait_with_output().expect("delete finishes");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("mpijob.mpiswarm.io \"pi\" deleted"), "{}", stdout(&out));
    let gone = s.kubectl(&["get", "mpij", "pi"]);
    assert!(stderr(&gone).contains("(NotFound)"), "{}", stderr(&gone));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn invalid_and_unknown_fields_are_rejected_with_the_field_named() {
    let s = with_pi().await;
    let bad = s.dir.path().join("bad.yaml");
    std::fs::write(&bad, "apiVersion: mpiswarm.io/v1alpha1\nkind: MpiJob\nmetadata:\n  name: bad\nspec:\n  image: mpiswarm/openmpi:0.1.0\n  command: [\"/bin/true\"]\n  ranks: 0\n").expect("write");
    for extra in [&[][..], &["--server-side"][..]] {
        let mut args = vec!["apply", "-f", bad.to_str().expect("utf8")];
        args.extend_from_slice(extra);
        let out = s.kubectl(&args);
        assert!(!out.status.success());
        let err = stderr(&out);
        assert!(err.contains("is invalid") && err.contains("spec.ranks: Invalid value: 0"), "{err}");
    }

    let unknown = s.dir.path().join("unknown.yaml");
    std::fs::write(&unknown, "apiVersion: mpiswarm.io/v1alpha1\nkind: MpiJob\nmetadata:\n  name: odd\nspec:\n  image: i\n  command: [\"/bin/true\"]\n  ranks: 1\n  bogus: 1\n").expect("write");
    let out = s.kubectl(&["apply", "-f", unknown.to_str().expect("utf8")]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("unknown field \"spec.bogus\""), "{}", stderr(&out));

    let out = s.kubectl(&["patch", "mpij", "pi", "-p", r#"{"spec":{"ranks":2}}"#]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("UnsupportedMediaType") || stderr(&out).contains("unknown format"),
        "{}",
        stderr(&out)
    );
    assert!(s.kubectl_ok(&["get", "mpij", "pi", "-o", "jsonpath={.spec.ranks}"]) == "4");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn requests_without_the_token_get_401() {
    let s = Server::start().await;
    let out = s.kubectl(&["--token", "wrong", "get", "ns"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("Unauthorized") || stderr(&out).contains("credentials"), "{}", stderr(&out));
    let ns = s.kubectl_ok(&["get", "ns", "default", "-o", "jsonpath={.status.phase}"]);
    assert_eq!(ns, "Active");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_create_sends_protobuf_for_built_ins_and_it_works() {
    let s = Server::start().await;
    assert!(s.kubectl_ok(&["create", "namespace", "team"]).contains("namespace/team created"));
    assert!(
        s.kubectl_ok(&["create", "configmap", "c1", "-n", "team", "--from-literal=a=b"])
            .contains("configmap/c1 created")
    );
    assert!(
        s.kubectl_ok(&["create", "secret", "generic", "s1", "-n", "team", "--from-literal=pw=x"])
            .contains("secret/s1 created")
    );
    assert_eq!(s.kubectl_ok(&["get", "configmap", "c1", "-n", "team", "-o", "jsonpath={.data.a}"]), "b");
    assert_eq!(
        s.kubectl_ok(&["get", "secret", "s1", "-n", "team", "-o", "jsonpath={.type} {.data.pw}"]),
        "Opaque eA=="
    );
    s.kubectl_ok(&["delete", "namespace", "team"]);
    assert!(s.stored("core/configmaps/team/c1").is_none(), "deleting a namespace deletes its contents");
    let protected = s.kubectl(&["delete", "namespace", "default"]);
    assert!(stderr(&protected).contains("Forbidden"), "{}", stderr(&protected));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn diff_server_dry_run_replace_and_edit() {
    // runPolicy is the one part of an MpiJob's spec that may change (the rest
    // is immutable by CEL transition rules), so the edits go there.
    let s = with_pi().await;
    let six = s.dir.path().join("pi6.yaml");
    let text = std::fs::read_to_string(pi()).expect("pi");
    std::fs::write(&six, text.replace("backoffLimit: 1", "backoffLimit: 6")).expect("write");
    let six = six.to_str().expect("utf8");
    let backoff = "jsonpath={.spec.runPolicy.backoffLimit}";

    let diff = s.kubectl(&["diff", "-f", six]);
    assert_eq!(diff.status.code(), Some(1), "kubectl diff exits 1 when there are differences: {}", stderr(&diff));
    let d = stdout(&diff);
    assert!(d.contains("-    backoffLimit: 1") && d.contains("+    backoffLimit: 6"), "{d}");
    assert!(!d.contains("-  resourceVersion"), "a server dry run must keep the resourceVersion: {d}");

    assert!(s.kubectl_ok(&["apply", "--dry-run=server", "-f", six]).contains("(server dry run)"));
    assert_eq!(s.kubectl_ok(&["get", "mpij", "pi", "-o", backoff]), "1");

    assert!(s.kubectl_ok(&["replace", "-f", six]).contains("mpijob.mpiswarm.io/pi replaced"));
    let mut edit = s.kubectl_cmd();
    edit.env("EDITOR", "sed -i s/backoffLimit:\\ 6/backoffLimit:\\ 8/").args(["edit", "mpij", "pi"]);
    let edited = output_within(edit, COMMAND_DEADLINE);
    assert!(edited.status.success(), "{}", stderr(&edited));
    assert_eq!(
        s.kubectl_ok(&["get", "mpij", "pi", "-o", "jsonpath={.spec.runPolicy.backoffLimit} {.metadata.generation}"]),
        "8 3"
    );

    // An immutable field is refused with the field named, and nothing changes.
    let ranks = s.dir.path().join("pi-ranks.yaml");
    std::fs::write(&ranks, text.replace("ranks: 4", "ranks: 6")).expect("write");
    let out = s.kubectl(&["replace", "-f", ranks.to_str().expect("utf8")]);
    assert!(!out.status.success() && stderr(&out).contains("spec.ranks is immutable"), "{}", stderr(&out));
    assert_eq!(s.kubectl_ok(&["get", "mpij", "pi", "-o", "jsonpath={.spec.ranks}"]), "4");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unknown_fields_are_a_warning_when_validation_is_warn() {
    let s = with_pi().await;
    let odd = s.dir.path().join("odd.yaml");
    std::fs::write(&odd, "apiVersion: mpiswarm.io/v1alpha1\nkind: MpiJob\nmetadata:\n  name: odd\nspec:\n  image: i\n  command: [\"/bin/true\"]\n  ranks: 1\n  bogus: 1\n").expect("write");
    let out = s.kubectl(&["apply", "--validate=warn", "-f", odd.to_str().expect("utf8")]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("Warning: unknown field \"spec.bogus\""), "{}", stderr(&out));
    assert_eq!(s.kubectl_ok(&["get", "mpij", "odd", "-o", "jsonpath={.spec.bogus}"]), "", "unknown fields are pruned");
}
