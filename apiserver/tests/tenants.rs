//! More than one user on the embedded API server, with the real kubectl:
//! users of a `--token-auth-file`, each with its own kubeconfig, get what
//! RBAC grants them and nothing else. team-a has a Role for MpiJobs (their
//! log and status too) and ConfigMaps in namespace team-a; team-b has no
//! binding at all. `kubectl auth can-i` answers from the same rules the
//! server enforces, a refusal is kube-apiserver's 403 naming user, verb,
//! resource and namespace, team-a may pass on its own rights but no more,
//! the admin kubeconfig still does everything, the
//! audit log names the user, and a token added to the file while the
//! server runs is accepted within seconds.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use common::{COMMAND_DEADLINE, Server, kubectl_cmd, output_within, repo_root, stderr, stdout};
use serde_json::{Value, json};

const TEAM_A_TOKEN: &str = "team-a-5f0c2f7e-6d7b-4c8e-9a51-0b1e1f3c1d11";
const TEAM_B_TOKEN: &str = "team-b-8d2e4a90-1b3c-4f5e-a6b7-c8d9e0f1a2b3";
const TEAM_C_TOKEN: &str = "team-c-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d";

/// How long a user added to the token file may take to be accepted.
const RELOAD_DEADLINE: Duration = Duration::from_secs(20);

const TEAM_A_RBAC: &str = r#"
apiVersion: v1
kind: Namespace
metadata:
  name: team-a
---
apiVersion: v1
kind: Namespace
metadata:
  name: team-b
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: mpijobs
  namespace: team-a
rules:
- apiGroups: ["mpiswarm.io"]
  resources: ["mpijobs"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: ["mpiswarm.io"]
  resources: ["mpijobs/log", "mpijobs/status"]
  verbs: ["get"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["roles", "rolebindings"]
  verbs: ["get", "list", "create", "update", "delete"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: team-a
  namespace: team-a
subjects:
- kind: User
  apiGroup: rbac.authorization.k8s.io
  name: team-a
roleRef:
  kind: Role
  apiGroup: rbac.authorization.k8s.io
  name: mpijobs
"#;

/// A user's own kubeconfig: the server, its CA, the user's token.
struct Tenant {
    kubeconfig: PathBuf,
    cache: PathBuf,
}

impl Tenant {
    fn new(s: &Server, name: &str, token: &str) -> Self {
        let ca = std::fs::read_to_string(s.dir.path().join("ca.crt")).expect("ca.crt");
        let kubeconfig = s.dir.path().join(format!("{name}.kubeconfig"));
        std::fs::write(&kubeconfig, mpiswarm_apiserver::tls::kubeconfig(&s.running.url, token, Some(&ca)))
            .expect("kubeconfig");
        Self { kubeconfig, cache: s.dir.path().join(format!("{name}-cache")) }
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        let mut cmd = kubectl_cmd(&self.kubeconfig, &self.cache);
        cmd.args(args);
        output_within(cmd, COMMAND_DEADLINE)
    }

    /// `kubectl apply -f -` of `yaml`.
    fn apply(&self, yaml: &str) -> Output {
        let mut cmd = kubectl_cmd(&self.kubeconfig, &self.cache);
        cmd.args(["apply", "-f", "-"]);
        mpiswarm_testkit::output_within(cmd, Some(yaml), COMMAND_DEADLINE)
    }

    /// `kubectl auth can-i ...`: true for yes (exit 0), false for no (exit 1).
    fn can_i(&self, args: &[&str]) -> bool {
        let out = self.kubectl(&[&["auth", "can-i"], args].concat());
        let answer = stdout(&out);
        match (out.status.code(), answer.trim()) {
            (Some(0), "yes") => true,
            (Some(1), a) if a.starts_with("no") => false,
            _ => panic!("kubectl auth can-i {args:?} answered neither yes nor no: {answer}{}", stderr(&out)),
        }
    }
}

/// Writes the token file as an operator should: a new file renamed over
/// the old one, so the server never reads half of it.
fn write_tokens(path: &Path, lines: &[String]) {
    let text = format!("# token,user,uid,\"groups\"\n{}\n", lines.join("\n"));
    let next = path.with_extension("next");
    std::fs::write(&next, text).expect("token file");
    std::fs::rename(&next, path).expect("token file in place");
}

fn token_lines() -> Vec<String> {
    vec![format!("{TEAM_A_TOKEN},team-a,team-a-uid"), format!("{TEAM_B_TOKEN},team-b,team-b-uid,\"tenants,team-b\"")]
}

/// A server with team-a and team-b in its token file (kept in the returned
/// directory, outside the data dir), the MpiJob CRD, and team-a's RBAC.
async fn with_tenants() -> (Server, tempfile::TempDir, PathBuf) {
    let outside = tempfile::tempdir().expect("tempdir");
    let tokens = outside.path().join("tokens.csv");
    write_tokens(&tokens, &token_lines());
    let file = tokens.clone();
    let s = Server::start_with(|a| {
        a.token_auth_file = Some(file);
        a.audit_log = Some(a.data_dir.join("audit.jsonl"));
    })
    .await;
    let crd = repo_root().join("crds/mpijob.yaml");
    s.kubectl_ok(&["apply", "-f", &crd.display().to_string()]);
    let rbac = s.dir.path().join("team-a-rbac.yaml");
    std::fs::write(&rbac, TEAM_A_RBAC).expect("rbac yaml");
    s.kubectl_ok(&["apply", "-f", &rbac.display().to_string()]);
    (s, outside, tokens)
}

/// An HTTPS client that trusts the server's CA and sends `token`.
fn https(s: &Server, token: &str) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = std::fs::read(s.dir.path().join("ca.crt")).expect("ca.crt");
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {token}").parse().expect("header"));
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).expect("ca"))
        .default_headers(headers)
        .build()
        .expect("client")
}

/// Asks for `/api` with `token` until the answer is `want` (the token file
/// is looked at once a second), failing after `RELOAD_DEADLINE`; returns
/// how long it took.
async fn until_answered(s: &Server, token: &str, want: u16, what: &str) -> Duration {
    let http = https(s, token);
    let since = Instant::now();
    loop {
        let code = http.get(format!("{}/api", s.running.url)).send().await.expect("request").status().as_u16();
        if code == want {
            return since.elapsed();
        }
        assert!(since.elapsed() < RELOAD_DEADLINE, "{what}: still {code} after {RELOAD_DEADLINE:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tenant_may_do_what_its_role_binding_grants_in_its_namespace_and_nothing_else() {
    let (s, _outside, _tokens) = with_tenants().await;
    let a = Tenant::new(&s, "team-a", TEAM_A_TOKEN);
    let b = Tenant::new(&s, "team-b", TEAM_B_TOKEN);

    assert!(a.can_i(&["create", "mpijobs", "-n", "team-a"]));
    assert!(!a.can_i(&["create", "mpijobs", "-n", "team-b"]));
    assert!(a.can_i(&["get", "mpijobs", "--subresource=log", "-n", "team-a"]));
    assert!(a.can_i(&["get", "mpijobs", "--subresource=status", "-n", "team-a"]));
    assert!(!a.can_i(&["patch", "mpijobs", "--subresource=status", "-n", "team-a"]));
    assert!(!a.can_i(&["list", "secrets", "-n", "team-a"]));
    assert!(!a.can_i(&["list", "mpijobs", "--all-namespaces"]));
    assert!(!b.can_i(&["list", "mpijobs", "-n", "team-a"]));
    let listed = a.kubectl(&["auth", "can-i", "--list", "-n", "team-a"]);
    let rules = stdout(&listed);
    for (resource, verbs) in [
        ("mpijobs.mpiswarm.io", "[get list watch create update patch delete]"),
        ("mpijobs.mpiswarm.io/log", "[get]"),
        ("configmaps", "[get list watch create update patch delete]"),
        ("selfsubjectaccessreviews.authorization.k8s.io", "[create]"),
        ("[/api/*]", "[get]"),
    ] {
        assert!(
            rules.lines().any(|l| l.split_whitespace().next() == Some(resource) && l.trim_end().ends_with(verbs)),
            "can-i --list shows {resource} {verbs}: {rules}{}",
            stderr(&listed)
        );
    }
    let elsewhere = stdout(&a.kubectl(&["auth", "can-i", "--list", "-n", "team-b"]));
    assert!(!elsewhere.contains("mpijobs"), "{elsewhere}");

    // What can-i said is what the server does.
    let pi = repo_root().join("examples/pi.yaml").display().to_string();
    let created = a.kubectl(&["apply", "-n", "team-a", "-f", &pi]);
    assert!(created.status.success(), "team-a creates its MpiJob: {}{}", stdout(&created), stderr(&created));
    let listed = a.kubectl(&["get", "mpij", "-n", "team-a", "-o", "name"]);
    assert_eq!(stdout(&listed).trim(), "mpijob.mpiswarm.io/pi", "{}", stderr(&listed));
    let cm = a.kubectl(&["create", "configmap", "settings", "-n", "team-a", "--from-literal=k=v"]);
    assert!(cm.status.success(), "team-a creates a ConfigMap: {}", stderr(&cm));

    let refused = a.kubectl(&["get", "configmaps", "-n", "team-b"]);
    assert!(!refused.status.success());
    let said = stderr(&refused);
    assert!(
        said.contains("Error from server (Forbidden): configmaps is forbidden: User \"team-a\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"team-b\""),
        "the 403 names user, verb, resource and namespace: {said}"
    );
    let refused = b.kubectl(&["get", "mpij", "pi", "-n", "team-a"]);
    let said = stderr(&refused);
    assert!(
        !refused.status.success()
            && said.contains("mpijobs.mpiswarm.io \"pi\" is forbidden: User \"team-b\" cannot get resource \"mpijobs\" in API group \"mpiswarm.io\" in the namespace \"team-a\""),
        "{said}"
    );
    // A namespace's own path is in that namespace, as kube-apiserver sees it.
    let refused = a.kubectl(&["delete", "namespace", "team-b"]);
    assert!(
        stderr(&refused).contains("namespaces \"team-b\" is forbidden: User \"team-a\" cannot delete resource \"namespaces\" in API group \"\" in the namespace \"team-b\""),
        "{}",
        stderr(&refused)
    );
    assert!(s.stored("core/namespaces/team-b").is_some(), "a refused request changes nothing");

    let who = a.kubectl(&["auth", "whoami", "-o", "json"]);
    let me: Value =
        serde_json::from_slice(&who.stdout).unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&who), stderr(&who)));
    assert_eq!(me["status"]["userInfo"]["username"], "team-a");
    assert_eq!(me["status"]["userInfo"]["groups"], json!(["system:authenticated"]));

    // team-a may pass on what it holds in its namespace, and nothing more.
    let binding = |role_kind: &str, role: &str| {
        format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: {role}-for-team-b\n  namespace: team-a\nsubjects:\n- kind: User\n  apiGroup: rbac.authorization.k8s.io\n  name: team-b\nroleRef:\n  kind: {role_kind}\n  apiGroup: rbac.authorization.k8s.io\n  name: {role}\n"
        )
    };
    let escalated = a.apply(&binding("ClusterRole", "cluster-admin"));
    assert!(
        !escalated.status.success()
            && stderr(&escalated).contains("rolebindings.rbac.authorization.k8s.io \"cluster-admin-for-team-b\" is forbidden: User \"team-a\" is attempting to grant RBAC permissions not currently held in the namespace \"team-a\""),
        "{}{}",
        stdout(&escalated),
        stderr(&escalated)
    );
    let shared = a.apply(&binding("Role", "mpijobs"));
    assert!(shared.status.success(), "team-a binds its own role to team-b: {}", stderr(&shared));
    assert!(b.can_i(&["list", "mpijobs", "-n", "team-a"]), "team-b now may, in team-a only");
    assert!(!b.can_i(&["list", "mpijobs", "-n", "team-b"]));

    // The admin kubeconfig still does everything.
    s.kubectl_ok(&["get", "configmaps", "-n", "team-b"]);
    s.kubectl_ok(&["create", "configmap", "admin-made", "-n", "team-b", "--from-literal=k=v"]);
    assert_eq!(s.kubectl_ok(&["get", "mpij", "-A", "-o", "name"]).trim(), "mpijob.mpiswarm.io/pi");
    assert_eq!(s.kubectl_ok(&["auth", "can-i", "*", "*", "--all-namespaces"]).trim(), "yes");

    // The audit log names who did what.
    let log = s.running.audit.as_ref().expect("audit log");
    log.flush().await;
    let text = std::fs::read_to_string(log.path()).expect("audit log");
    let events: Vec<mpiswarm_apiserver::audit::Event> =
        text.lines().map(|l| serde_json::from_str(l).expect("an audit event")).collect();
    let refusals: Vec<_> =
        events.iter().filter(|e| e.response_status.code == 403 && e.user.username == "team-a").collect();
    let forbidden = refusals
        .iter()
        .find(|e| {
            e.verb == "list"
                && e.object_ref.as_ref().is_some_and(|o| o.resource == "configmaps" && o.namespace == "team-b")
        })
        .unwrap_or_else(|| panic!("team-a's refusal is audited: {refusals:#?}"));
    assert_eq!(forbidden.user.uid, "team-a-uid");
    assert!(events.iter().any(|e| e.user.username == "team-a" && e.verb == "create" && e.response_status.code == 201));
    assert!(events.iter().any(|e| e.user.username == "mpiswarm-admin" && e.response_status.code == 201));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn subject_access_reviews_are_for_those_allowed_to_ask_about_others() {
    let (s, _outside, _tokens) = with_tenants().await;
    let url = format!("{}/apis/authorization.k8s.io/v1/subjectaccessreviews", s.running.url);
    let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "team-a", "resourceAttributes": {"namespace": "team-a", "verb": "get", "group": "mpiswarm.io", "resource": "mpijobs", "subresource": "log", "name": "pi"}}});

    let by_admin = https(&s, &s.running.token).post(&url).json(&review).send().await.expect("request");
    assert_eq!(by_admin.status(), 201);
    let answer: Value = by_admin.json().await.expect("json");
    assert_eq!(answer["status"]["allowed"], true, "{answer}");

    let by_tenant = https(&s, TEAM_B_TOKEN).post(&url).json(&review).send().await.expect("request");
    assert_eq!(by_tenant.status(), 403);
    let status: Value = by_tenant.json().await.expect("json");
    assert_eq!(
        status["message"],
        "subjectaccessreviews.authorization.k8s.io is forbidden: User \"team-b\" cannot create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at the cluster scope"
    );
    let nobody = reqwest::Client::builder().danger_accept_invalid_certs(true).build().expect("client");
    assert_eq!(nobody.post(&url).json(&review).send().await.expect("request").status(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_user_added_to_the_token_file_of_a_running_server_is_accepted_within_seconds() {
    let (s, _outside, tokens) = with_tenants().await;
    let c = Tenant::new(&s, "team-c", TEAM_C_TOKEN);
    let before = c.kubectl(&["auth", "can-i", "create", "mpijobs", "-n", "team-a"]);
    assert!(stderr(&before).contains("Unauthorized"), "not yet a user: {}{}", stdout(&before), stderr(&before));

    let mut lines = token_lines();
    lines.push(format!("{TEAM_C_TOKEN},team-c,team-c-uid"));
    write_tokens(&tokens, &lines);
    let took = until_answered(&s, TEAM_C_TOKEN, 200, "team-c, added to the file").await;
    eprintln!("team-c accepted {took:?} after the file changed");
    assert!(!c.can_i(&["create", "mpijobs", "-n", "team-a"]), "a user, but with no binding");
    assert!(c.can_i(&["create", "selfsubjectaccessreviews"]), "every user may ask about itself");

    // Taken out of the file, it is refused again.
    write_tokens(&tokens, &token_lines());
    until_answered(&s, TEAM_C_TOKEN, 401, "team-c, removed from the file").await;
    let a = Tenant::new(&s, "team-a", TEAM_A_TOKEN);
    assert!(a.can_i(&["create", "mpijobs", "-n", "team-a"]), "the others are untouched");
}

/// The commands `README.md` ("Rights") shows an operator for a new tenant.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_readme_commands_make_a_tenant_that_may_create_mpijobs_in_its_namespace_only() {
    let (s, _outside, tokens) = with_tenants().await;
    let token = "0b6c2f4e9a1d4c3b8e7f6a5d4c3b2a19";
    let mut lines = token_lines();
    lines.push(format!("{token},team-d,team-d"));
    write_tokens(&tokens, &lines);
    s.kubectl_ok(&["create", "namespace", "team-d"]);
    let pipe = |generate: &[&str]| {
        let yaml = s.kubectl_ok(generate);
        let mut apply = s.kubectl_cmd();
        apply.args(["apply", "-f", "-"]);
        let out = mpiswarm_testkit::output_within(apply, Some(&yaml), COMMAND_DEADLINE);
        assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    };
    pipe(&[
        "create",
        "role",
        "mpijobs",
        "-n",
        "team-d",
        "--verb=*",
        "--resource=mpijobs.mpiswarm.io",
        "--dry-run=client",
        "-o",
        "yaml",
    ]);
    pipe(&[
        "create",
        "rolebinding",
        "team-d",
        "-n",
        "team-d",
        "--role=mpijobs",
        "--user=team-d",
        "--dry-run=client",
        "-o",
        "yaml",
    ]);
    until_answered(&s, token, 200, "team-d, added to the file").await;
    let d = Tenant::new(&s, "team-d", token);
    assert!(d.can_i(&["create", "mpijobs", "-n", "team-d"]));
    assert!(!d.can_i(&["create", "mpijobs", "-n", "team-b"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_malformed_token_file_stops_the_server_from_starting_and_names_the_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "good,team-a,a\n,team-b,b\n").expect("write");
    let mut args = mpiswarm_apiserver::ApiserverArgs::for_dir(dir.path().join("data"));
    args.token_auth_file = Some(tokens);
    let e = mpiswarm_apiserver::start(args).await.err().expect("refused");
    let text = e.to_string();
    assert!(
        text.contains("tokens.csv") && text.contains("line 2") && text.contains("token (column 1) is empty"),
        "{text}"
    );
}
