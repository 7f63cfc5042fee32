//! GitOps as a pipeline drives the server, with the real kubectl 1.32:
//! `apply --prune` with kubectl's default prune list (every built-in kind it
//! names must be served), server-side dry runs of a controller's manifests
//! (Deployment, ServiceAccount, RBAC, Service) that name a wrong field,
//! `kubectl diff` that shows only what changed, and the built-in kinds that
//! are stored but never acted on.

mod common;

use std::path::Path;

use common::{Server, fixture, repo_root, stderr, stdout};

fn crd() -> String {
    repo_root().join("crds/mpijob.yaml").display().to_string()
}

/// An MpiJob whose `runPolicy.backoffLimit` is `backoff` (runPolicy is the
/// part of the spec that may change; the rest is immutable).
fn mpijob(name: &str, app: &str, backoff: u32) -> String {
    format!(
        "apiVersion: mpiswarm.io/v1alpha1\nkind: MpiJob\nmetadata:\n  name: {name}\n  labels:\n    app: {app}\nspec:\n  image: mpiswarm/openmpi:0.1.0\n  command: [\"/usr/local/bin/pi\"]\n  ranks: 2\n  runPolicy:\n    backoffLimit: {backoff}\n"
    )
}

fn write(dir: &Path, file: &str, text: &str) {
    std::fs::write(dir.join(file), text).expect("write manifest");
}

fn utf8(p: &Path) -> &str {
    p.to_str().expect("utf8 path")
}

/// Every object of `kinds/names` was created by the dry run, none stored.
fn assert_dry_run_created(out: &str, objects: &[&str]) {
    for object in objects {
        let made = format!("{object} created (server dry run)");
        assert!(out.contains(&made), "{made}: {out}");
    }
}

fn configmap(name: &str, app: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  labels:\n    app: {app}\ndata:\n  k: v\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn apply_prune_with_the_default_prune_list_creates_updates_and_prunes() {
    let s = Server::start().await;
    s.kubectl_ok(&["apply", "-f", &crd()]);
    let dir = s.dir.path().join("repo");
    std::fs::create_dir(&dir).expect("mkdir");
    write(&dir, "a.yaml", &mpijob("a", "x", 2));
    write(&dir, "b.yaml", &mpijob("b", "x", 2));
    write(&dir, "other.yaml", &mpijob("other", "other-app", 2));
    write(&dir, "settings.yaml", &configmap("settings", "x"));
    // Not from the directory (no last-applied annotation): never pruned.
    write(s.dir.path(), "by-hand.yaml", &configmap("by-hand", "x"));
    s.kubectl_ok(&["create", "-f", utf8(&s.dir.path().join("by-hand.yaml"))]);

    // Without an allowlist kubectl lists every kind of its default prune
    // list (Endpoints, Pods, Deployments, Ingresses, PVs...): all served.
    let out = s.kubectl_ok(&["apply", "-f", utf8(&dir), "-l", "app=x", "--prune"]);
    assert!(out.contains("mpijob.mpiswarm.io/a created") && out.contains("mpijob.mpiswarm.io/b created"), "{out}");
    assert!(out.contains("configmap/settings created"), "{out}");
    assert!(!out.contains("other"), "the label selector filters the files: {out}");

    std::fs::remove_file(dir.join("b.yaml")).expect("rm");
    std::fs::remove_file(dir.join("settings.yaml")).expect("rm");
    write(&dir, "a.yaml", &mpijob("a", "x", 3));
    let out = s.kubectl_ok(&["apply", "-f", utf8(&dir), "-l", "app=x", "--prune"]);
    assert!(out.contains("mpijob.mpiswarm.io/a configured"), "{out}");
    assert!(out.contains("configmap/settings pruned"), "{out}");
    assert!(!out.contains("by-hand"), "objects not applied from the set stay: {out}");
    assert_eq!(s.kubectl_ok(&["get", "mpij", "a", "-o", "jsonpath={.spec.runPolicy.backoffLimit}"]), "3");
    // As on a real cluster: kubectl's default prune list names no custom
    // kind, so an MpiJob is pruned only when the allowlist names it.
    assert!(!out.contains("mpijob.mpiswarm.io/b pruned"), "{out}");
    assert!(s.stored("mpiswarm.io/mpijobs/default/b").is_some());
    let out = s.kubectl_ok(&[
        "apply",
        "-f",
        utf8(&dir),
        "-l",
        "app=x",
        "--prune",
        "--prune-allowlist=mpiswarm.io/v1alpha1/MpiJob",
    ]);
    assert!(out.contains("mpijob.mpiswarm.io/a unchanged") && out.contains("mpijob.mpiswarm.io/b pruned"), "{out}");
    assert!(s.stored("mpiswarm.io/mpijobs/default/b").is_none(), "b was pruned");
    assert!(s.stored("core/configmaps/default/by-hand").is_some(), "objects not applied from the set stay");
    assert!(s.stored("mpiswarm.io/mpijobs/default/other").is_none(), "never applied: other-app was filtered out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_shipped_manifests_pass_a_server_dry_run() {
    let s = Server::start().await;
    // A dry run creates nothing, so the namespace the others live in must exist.
    s.kubectl_ok(&["apply", "-f", utf8(&repo_root().join("manifests/00-namespace.yaml"))]);
    let out = s.kubectl_ok(&["apply", "--dry-run=server", "-f", utf8(&repo_root().join("manifests"))]);
    assert_dry_run_created(
        &out,
        &[
            "customresourcedefinition.apiextensions.k8s.io/mpijobs.mpiswarm.io",
            "customresourcedefinition.apiextensions.k8s.io/offerregistries.offers.mpiswarm.io",
            "serviceaccount/mpiswarm-controller",
            "clusterrole.rbac.authorization.k8s.io/mpiswarm-controller",
            "clusterrolebinding.rbac.authorization.k8s.io/mpiswarm-controller",
            "serviceaccount/mpiswarm-offers",
            "role.rbac.authorization.k8s.io/mpiswarm-offers",
            "rolebinding.rbac.authorization.k8s.io/mpiswarm-offers",
            "deployment.apps/mpiswarm-controller",
            "statefulset.apps/mpiswarm-offers",
            "service/mpiswarm-offers",
            "service/mpiswarm-logs",
        ],
    );
    assert!(s.stored("apps/deployments/mpiswarm/mpiswarm-controller").is_none(), "a dry run stores nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn server_dry_run_of_controller_manifests_passes_and_a_wrong_field_is_named() {
    let s = Server::start().await;
    let manifests = fixture("gitops/controller.yaml");
    let out = s.kubectl_ok(&["apply", "--dry-run=server", "-f", utf8(&manifests)]);
    assert_dry_run_created(
        &out,
        &[
            "serviceaccount/mpiswarm-controller",
            "clusterrole.rbac.authorization.k8s.io/mpiswarm-controller",
            "clusterrolebinding.rbac.authorization.k8s.io/mpiswarm-controller",
            "deployment.apps/mpiswarm-controller",
            "service/mpiswarm-controller-metrics",
        ],
    );
    assert!(s.stored("apps/deployments/default/mpiswarm-controller").is_none(), "a dry run stores nothing");

    let text = std::fs::read_to_string(&manifests).expect("fixture");
    let wrong = s.dir.path().join("wrong.yaml");
    std::fs::write(&wrong, text.replace("          image: mpiswarm", "          imagee: mpiswarm")).expect("write");
    let out = s.kubectl(&["apply", "--dry-run=server", "-f", utf8(&wrong)]);
    assert!(!out.status.success(), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: unknown field \"spec.template.spec.containers[0].imagee\""),
        "{err}"
    );

    let bad_type = s.dir.path().join("bad-type.yaml");
    std::fs::write(&bad_type, text.replace("replicas: 1", "replicas: one")).expect("write");
    let out = s.kubectl(&["apply", "--dry-run=server", "-f", utf8(&bad_type)]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("spec.replicas"), "{}", stderr(&out));

    let out = s.kubectl_ok(&["apply", "-f", utf8(&manifests)]);
    assert!(out.contains("deployment.apps/mpiswarm-controller created"), "{out}");
    let out = s.kubectl_ok(&["apply", "-f", utf8(&manifests)]);
    assert!(out.contains("deployment.apps/mpiswarm-controller unchanged"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deployment_is_stored_defaulted_patched_by_key_and_shown_as_not_running() {
    let s = Server::start().await;
    s.kubectl_ok(&["apply", "-f", utf8(&fixture("gitops/controller.yaml"))]);
    let table = s.kubectl_ok(&["get", "deploy", "mpiswarm-controller"]);
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["NAME", "STATUS", "AGE"], "{table}");
    assert!(lines.next().is_some_and(|l| l.contains("Stored (no controller)")), "{table}");
    let svc = s.kubectl_ok(&[
        "get",
        "svc",
        "mpiswarm-controller-metrics",
        "-o",
        "jsonpath={.spec.type} {.spec.ports[0].protocol}",
    ]);
    assert_eq!(svc, "ClusterIP TCP", "schema defaults are applied");
    let everything = s.kubectl_ok(&["get", "stored-only", "-A", "-o", "name"]);
    for name in [
        "deployment.apps/mpiswarm-controller",
        "service/mpiswarm-controller-metrics",
        "serviceaccount/mpiswarm-controller",
    ] {
        assert!(everything.contains(name), "the stored-only category lists {name}: {everything}");
    }

    // Client-side apply of a changed image sends a strategic merge patch that
    // names the container only by key; the container's other fields stay.
    let text = std::fs::read_to_string(fixture("gitops/controller.yaml")).expect("fixture");
    let changed = s.dir.path().join("changed.yaml");
    std::fs::write(&changed, text.replace("controller:0.1.0", "controller:0.2.0")).expect("write");
    let out = s.kubectl_ok(&["apply", "-f", utf8(&changed)]);
    assert!(out.contains("deployment.apps/mpiswarm-controller configured"), "{out}");
    let c = s.kubectl_ok(&[
        "get",
        "deploy",
        "mpiswarm-controller",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].ports[0].containerPort} {.metadata.generation}",
    ]);
    assert_eq!(c, "mpiswarm/controller:0.2.0 8080 2");
    let out = s.kubectl_ok(&[
        "patch",
        "deploy",
        "mpiswarm-controller",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox"}]}}}}"#,
    ]);
    assert!(out.contains("patched"), "{out}");
    let names = s.kubectl_ok(&[
        "get",
        "deploy",
        "mpiswarm-controller",
        "-o",
        "jsonpath={.spec.template.spec.containers[*].name}",
    ]);
    assert_eq!(names, "controller sidecar", "a strategic merge patch adds a container by name");

    // Server-side apply merges the containers list by name too.
    let out = s.kubectl_ok(&["apply", "--server-side", "--force-conflicts", "-f", utf8(&changed)]);
    assert!(out.contains("deployment.apps/mpiswarm-controller serverside-applied"), "{out}");
    let names = s.kubectl_ok(&[
        "get",
        "deploy",
        "mpiswarm-controller",
        "-o",
        "jsonpath={.spec.template.spec.containers[*].name}",
    ]);
    assert_eq!(names, "controller sidecar", "the sidecar, owned by kubectl-patch, stays");
    // kubectl's generators send protobuf, which only three kinds decode: the
    // refusal says how to send the same object as YAML, and that works.
    let refused = s.kubectl(&["create", "serviceaccount", "builder"]);
    assert!(!refused.status.success());
    assert!(stderr(&refused).contains("--dry-run=client -o yaml | kubectl apply -f -"), "{}", stderr(&refused));
    let generated = s.kubectl_ok(&["create", "serviceaccount", "builder", "--dry-run=client", "-o", "yaml"]);
    let piped = s.dir.path().join("builder.yaml");
    std::fs::write(&piped, generated).expect("write");
    assert!(s.kubectl_ok(&["apply", "-f", utf8(&piped)]).contains("serviceaccount/builder created"));
    let all = s.kubectl_ok(&["get", "all"]);
    assert!(
        all.contains("deployment.apps/mpiswarm-controller") && all.contains("service/mpiswarm-controller-metrics"),
        "{all}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_diff_of_a_changed_mpijob_shows_only_the_changed_fields() {
    let s = Server::start().await;
    s.kubectl_ok(&["apply", "-f", &crd()]);
    let file = s.dir.path().join("job.yaml");
    write(s.dir.path(), "job.yaml", &mpijob("d", "x", 2));
    s.kubectl_ok(&["apply", "-f", utf8(&file)]);
    let same = s.kubectl(&["diff", "-f", utf8(&file)]);
    assert_eq!(same.status.code(), Some(0), "no change, no diff: {}{}", stdout(&same), stderr(&same));
    write(s.dir.path(), "job.yaml", &mpijob("d", "x", 5));
    let diff = s.kubectl(&["diff", "-f", utf8(&file)]);
    assert_eq!(diff.status.code(), Some(1), "{}", stderr(&diff));
    let changed: Vec<String> = stdout(&diff)
        .lines()
        .filter(|l| (l.starts_with('-') || l.starts_with('+')) && !l.starts_with("---") && !l.starts_with("+++"))
        .map(|l| l.to_string())
        .collect();
    // The spec field, the generation the server bumps for it, and the
    // last-applied annotation that carries it: nothing else.
    assert!(
        changed.iter().any(|l| l == "-    backoffLimit: 2") && changed.iter().any(|l| l == "+    backoffLimit: 5"),
        "{changed:?}"
    );
    for l in &changed {
        assert!(
            l.contains("backoffLimit") || l.contains("generation:") || l.contains("last-applied-configuration"),
            "kubectl diff showed an unchanged field: {l:?} in {changed:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn api_resources_lists_the_built_in_kinds_with_their_short_names() {
    let s = Server::start().await;
    let out = s.kubectl_ok(&["api-resources", "-o", "wide"]);
    let row = |name: &str| -> Vec<String> {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("api-resources lists {name}: {out}"))
            .split_whitespace()
            .map(String::from)
            .collect()
    };
    for (name, short) in [
        ("pods", "po"),
        ("services", "svc"),
        ("endpoints", "ep"),
        ("serviceaccounts", "sa"),
        ("persistentvolumeclaims", "pvc"),
        ("persistentvolumes", "pv"),
        ("replicationcontrollers", "rc"),
        ("deployments", "deploy"),
        ("daemonsets", "ds"),
        ("statefulsets", "sts"),
        ("replicasets", "rs"),
        ("cronjobs", "cj"),
        ("ingresses", "ing"),
        ("configmaps", "cm"),
        ("namespaces", "ns"),
    ] {
        let r = row(name);
        assert_eq!(r.get(1).map(String::as_str), Some(short), "{name}: {r:?}");
        if !matches!(name, "configmaps" | "namespaces") {
            assert!(r.iter().any(|c| c.contains("stored-only")), "{name} says it is stored only: {r:?}");
        }
    }
    for name in ["jobs", "roles", "rolebindings", "clusterroles", "clusterrolebindings", "secrets", "leases"] {
        row(name);
    }
    let explained = s.kubectl_ok(&["explain", "deployment"]);
    assert!(explained.contains("no controller acts on it"), "{explained}");
    assert!(s.kubectl_ok(&["explain", "deployment.spec.replicas"]).contains("integer"));
}
