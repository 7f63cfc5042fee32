//! Attacks from outside on `mpiswarm up --nodes 2 --split`, with two
//! tenants made by `mpiswarm tenant add` each running a job, tried with
//! real clients (curl, kubectl with each tenant's kubeconfig, `mpiswarm
//! logs`). Each is refused with a message naming the rule; afterwards both
//! jobs run to `Succeeded`, each tenant reads its own job's output and is
//! refused the other's, and nothing was lost. What is tried:
//!
//! - a local user: the data dir is 0700, its secrets 0600;
//! - the offer layer: no credential (401); a node agent's credential asking
//!   for the operator's state, tearing the controller's framework down,
//!   registering a framework, and re-registering as the other agent (403,
//!   naming the ACL or the agent id's owner);
//! - the agents' `/files` and `/state`: no credential, a tenant's token (401);
//! - tenants: another namespace's jobs (403 naming user, verb, resource,
//!   namespace), another team's role (`Invalid`, `RoleNotAllowed`), another
//!   team's logs (403 naming the rule);
//! - the API server: a JSON patch of self-copies that doubles the object
//!   (refused at the copy limit), a watch asking for a timeout that
//!   overflows (clamped: it is served, and so is everything after), and a
//!   TLS handshake that never starts (closed by the server, which serves
//!   others meanwhile).
//!
//! The named-volume and overlay rules are tried on the real engine by
//! agent/tests/existing.rs and controller/tests/docker.rs: on two nodes a
//! job's volume is node-local, so two tenants' jobs could miss each other's
//! volume by placement and prove nothing here.
//!
//!   cargo test -p mpiswarm-e2e --features mpiswarm-testkit/engine --test attacks

use std::io::Read;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use mpiswarm_e2e::cluster::COMMAND_DEADLINE;
use mpiswarm_e2e::{Cluster, Job, runner, wait};

const QUOTA: &str = "team-a=cpus:2;mem:4096,team-b=cpus:2;mem:4096";
/// A job's run, release to `Succeeded`.
const JOB_DEADLINE: Duration = Duration::from_secs(300);
/// The API server closes a handshake that has not finished by then
/// (`mpiswarm_guard::Limits::handshake_timeout`, 10 s), with slack for a
/// loaded machine.
const HANDSHAKE_CLOSED_WITHIN: Duration = Duration::from_secs(30);

fn main() {
    runner::run(
        "attacks",
        || Cluster::up(2, 2.0, &["--split", "--quota", QUOTA]),
        &[("attacks_from_outside_are_refused_naming_the_rule_and_lose_nothing", attacks)],
    )
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn run(cmd: Command) -> Output {
    mpiswarm_testkit::output_within(cmd, None, COMMAND_DEADLINE)
}

/// `curl ARGS`: (HTTP status, body).
fn curl(args: &[&str]) -> (u16, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--max-time", "20", "-w", "\n%{http_code}"]).args(args);
    let out = run(cmd);
    let all = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = all.rsplit_once('\n').unwrap_or(("", &all));
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

/// A Mesos v1 API call (`POST`, JSON both ways) as `credential` (`principal:secret`).
fn post_call(credential: &str, call: &serde_json::Value, url: &str) -> (u16, String) {
    let body = call.to_string();
    let json = ["-H", "Content-Type: application/json", "-H", "Accept: application/json"];
    curl(&[&["-u", credential], &json[..], &["-d", &body, url]].concat())
}

/// The principal and secret of a credential file of the stack.
fn credential(dir: &Path, principal: &str) -> String {
    let path = dir.join("credentials").join(format!("{principal}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: serde_json::Value = serde_json::from_str(&text).expect("a credential file is JSON");
    format!("{}:{}", v["principal"].as_str().unwrap_or_default(), v["secret"].as_str().unwrap_or_default())
}

/// A tenant: its kubeconfig (from `mpiswarm tenant add`) and its token.
struct Tenant {
    name: &'static str,
    kubeconfig: PathBuf,
    token: String,
}

impl Tenant {
    fn add(cluster: &Cluster, name: &'static str) -> Tenant {
        let out = cluster.mpiswarm(&["tenant", "add", name]);
        assert!(out.status.success(), "tenant add {name}: {}", text(&out));
        let kubeconfig = cluster.dir().join("tenants").join(format!("{name}.kubeconfig"));
        let mut t = Tenant { name, kubeconfig, token: String::new() };
        let token = t.kubectl(&["config", "view", "--raw", "-o", "jsonpath={.users[0].user.token}"]);
        t.token = String::from_utf8_lossy(&token.stdout).trim().to_owned();
        assert!(!t.token.is_empty(), "{name}'s kubeconfig has a token");
        // The API server reads its token file again within a second or so.
        wait::until(Duration::from_secs(30), &format!("{name}'s token is accepted"), || {
            let who = t.kubectl(&["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"]);
            if String::from_utf8_lossy(&who.stdout).trim() == name { Ok(()) } else { Err(text(&who)) }
        });
        t
    }

    fn kubectl_with(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig").arg(&self.kubeconfig).args(args);
        mpiswarm_testkit::output_within(cmd, stdin, COMMAND_DEADLINE)
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_with(args, None)
    }

    fn apply(&self, job: &Job) {
        let out = self.kubectl_with(&["apply", "-f", "-"], Some(&job.manifest()));
        assert!(out.status.success(), "{} applies {}: {}", self.name, job.name, text(&out));
    }

    fn logs(&self, cluster: &Cluster, job: &str, namespace: &str) -> Output {
        let kubeconfig = self.kubeconfig.display().to_string();
        cluster.mpiswarm(&["logs", job, "-n", namespace, "--kubeconfig", &kubeconfig])
    }

    /// A field of job `name` in the tenant's namespace (jsonpath).
    fn job_field(&self, name: &str, path: &str) -> String {
        let out = self.kubectl(&["get", "mpijob", name, "-o", &format!("jsonpath={path}")]);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

fn refused(what: &str, (code, body): (u16, String), status: u16, names: &str) {
    assert!(code == status && body.contains(names), "{what}: expected {status} naming {names:?}, got {code}: {body}");
}

fn attacks(cluster: &Cluster) {
    let started = Instant::now();
    let dir = cluster.dir().to_owned();
    let stack = cluster.stack();
    let offers = stack["offers"].as_str().expect("stack.json names the offer layer").trim_end_matches('/').to_owned();
    let apiserver = stack["apiserver"].as_str().expect("stack.json names the API server").to_owned();

    let a = Tenant::add(cluster, "team-a");
    let b = Tenant::add(cluster, "team-b");
    let job_a = Job::held("pi-a", 2, 0.25, 1_000_000).role("team-a");
    let job_b = Job::held("pi-b", 2, 0.25, 1_000_000).role("team-b");
    a.apply(&job_a);
    b.apply(&job_b);

    // A local user: nothing of the stack is readable by others.
    let mode = |p: &Path| std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(p).unwrap().permissions()) & 0o777;
    for (path, want) in [(dir.clone(), 0o700), (dir.join("credentials"), 0o700), (dir.join("tenants"), 0o700)] {
        assert_eq!(mode(&path), want, "{} is {:o}", path.display(), mode(&path));
    }
    for name in ["kubeconfig", "tokens.csv", "tenants/team-a.kubeconfig", "credentials/mpiswarm-agent-1.json"] {
        assert_eq!(mode(&dir.join(name)), 0o600, "{name} is {:o}", mode(&dir.join(name)));
    }

    // The offer layer, without a credential and with a node agent's.
    refused("/master/state without a credential", curl(&[&format!("{offers}/master/state")]), 401, "");
    let agent1 = credential(&dir, "mpiswarm-agent-1");
    let operator = credential(&dir, "mpiswarm-operator");
    refused(
        "/master/state as an agent",
        curl(&["-u", &agent1, &format!("{offers}/master/state")]),
        403,
        "no rule of the ACL list get_endpoints allows it",
    );
    let (code, state) = curl(&["-u", &operator, &format!("{offers}/master/state")]);
    assert_eq!(code, 200, "the operator reads the state: {state}");
    let state: serde_json::Value = serde_json::from_str(&state).expect("/master/state is JSON");
    let framework = state["frameworks"][0]["id"].as_str().expect("the controller's framework").to_owned();
    refused(
        "a teardown of the controller's framework by an agent",
        curl(&["-u", &agent1, "-d", &format!("frameworkId={framework}"), &format!("{offers}/master/teardown")]),
        403,
        "teardown_frameworks",
    );
    let subscribe = serde_json::json!({"type": "SUBSCRIBE", "framework_id": {"value": framework}, "subscribe": {"framework_info": {
        "user": "root", "name": "impostor", "principal": "mpiswarm-agent-1", "roles": ["team-a"],
        "id": {"value": framework}, "capabilities": [{"type": "MULTI_ROLE"}]}}});
    refused(
        "an agent subscribing as the controller's framework",
        post_call(&agent1, &subscribe, &format!("{offers}/api/v1/scheduler")),
        403,
        "register_frameworks",
    );
    // Agent 1 re-registering as agent 2 (whose node its command line names).
    let components = stack["components"].as_array().expect("--split lists its components");
    let agent2 = components
        .iter()
        .find(|c| {
            c["args"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|a| a.as_str().is_some_and(|a| a.ends_with("/mpiswarm-agent-2.json")))
        })
        .expect("agent 2's component");
    let args: Vec<&str> = agent2["args"].as_array().into_iter().flatten().filter_map(|a| a.as_str()).collect();
    let node2 = args.iter().position(|a| *a == "--node").map(|i| args[i + 1]).expect("agent 2 serves a --node");
    let slave2 = state["slaves"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["hostname"].as_str() == Some(node2))
        .and_then(|s| s["id"].as_str())
        .expect("agent 2 is registered")
        .to_owned();
    let takeover = serde_json::json!({"type": "SUBSCRIBE", "agent_id": {"value": slave2}, "subscribe": {"agent_info": {
        "hostname": node2, "id": {"value": slave2}, "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 2.0}}],
        "attributes": []}, "tasks": []}});
    refused(
        "agent 1 re-registering as agent 2",
        post_call(&agent1, &takeover, &format!("{offers}/api/v1/agent")),
        403,
        "belongs to principal 'mpiswarm-agent-2'; principal 'mpiswarm-agent-1' may not act as it",
    );

    // The agents' endpoints: no credential, a tenant's token.
    for agent in stack["agents"].as_array().expect("stack.json lists the agents") {
        let base = format!("http://{}", agent.as_str().expect("an address"));
        refused("an agent's /state without a credential", curl(&[&format!("{base}/state")]), 401, "");
        let files = format!("{base}/files/read?path=/tasks&offset=0");
        refused("an agent's /files without a credential", curl(&[&files]), 401, "");
        let bearer = format!("Authorization: Bearer {}", a.token);
        refused("an agent's /files with a tenant's token", curl(&["-H", &bearer, &files]), 401, "");
    }

    // Tenants: another namespace, another team's role.
    let other = b.kubectl(&["get", "mpijobs", "-n", "team-a"]);
    let said = text(&other);
    assert!(
        !other.status.success()
            && said.contains(
                r#"User "team-b" cannot list resource "mpijobs" in API group "mpiswarm.io" in the namespace "team-a""#
            ),
        "team-b listing team-a's jobs: {said}"
    );
    let foreign = Job::pi("foreign", 1, 0.1, 1000).role("team-a");
    b.apply(&foreign);
    wait::until(Duration::from_secs(60), "team-b's job in team-a's role is Invalid", || {
        let reason = b.job_field("foreign", r#"{.status.conditions[?(@.type=="Invalid")].reason}"#);
        if reason == "RoleNotAllowed" { Ok(()) } else { Err(reason) }
    });
    assert_eq!(b.job_field("foreign", "{.status.placement}"), "", "nothing of the foreign job was placed");

    // The API server: a patch bomb, an overflowing watch, a stalled handshake.
    let bomb: Vec<serde_json::Value> =
        (0..22).map(|i| serde_json::json!({"op": "copy", "from": "/spec", "path": format!("/spec/c{i}")})).collect();
    let patch =
        a.kubectl(&["patch", "mpijob", "pi-a", "--type", "json", "-p", &serde_json::Value::from(bomb).to_string()]);
    let said = text(&patch);
    assert!(
        !patch.status.success() && said.contains("the accumulated size increase of copy"),
        "the self-copying patch is refused at the copy limit: {said}"
    );
    let ca = dir.join("attacks-ca.pem");
    let data =
        a.kubectl(&["config", "view", "--raw", "-o", "jsonpath={.clusters[0].cluster.certificate-authority-data}"]);
    let mut decode = Command::new("base64");
    decode.arg("-d");
    let pem =
        mpiswarm_testkit::output_within(decode, Some(String::from_utf8_lossy(&data.stdout).trim()), COMMAND_DEADLINE);
    std::fs::write(&ca, &pem.stdout).expect("the CA file");
    let ca_arg = ca.display().to_string();
    let bearer = format!("Authorization: Bearer {}", a.token);
    let watch = format!(
        "{apiserver}/apis/mpiswarm.io/v1alpha1/namespaces/team-a/mpijobs?watch=1&timeoutSeconds=18446744073709551615"
    );
    let mut cmd = Command::new("curl");
    cmd.args([
        "-sS",
        "-N",
        "--max-time",
        "3",
        "--cacert",
        &ca_arg,
        "-H",
        &bearer,
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        &watch,
    ]);
    let watched = run(cmd);
    assert_eq!(String::from_utf8_lossy(&watched.stdout).trim(), "200", "the watch is served: {}", text(&watched));
    let addr = apiserver.trim_start_matches("https://").to_owned();
    let mut stalled = TcpStream::connect(&addr).expect("a connection to the API server");
    stalled.set_read_timeout(Some(HANDSHAKE_CLOSED_WITHIN)).expect("a read timeout");
    let waited = Instant::now();
    let meanwhile = a.kubectl(&["get", "mpijobs"]);
    assert!(meanwhile.status.success(), "the API server serves while a handshake stalls: {}", text(&meanwhile));
    let mut byte = [0u8; 1];
    match stalled.read(&mut byte) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("the stalled handshake was not closed within {HANDSHAKE_CLOSED_WITHIN:?}: {other:?}"),
    }
    println!("attacks: the stalled handshake was closed after {:.1} s", waited.elapsed().as_secs_f64());

    // Nothing was lost: both jobs run to the end, each tenant reads its own output only.
    for (tenant, job) in [(&a, &job_a), (&b, &job_b)] {
        let uid = tenant.job_field(&job.name, "{.metadata.uid}");
        wait::until(JOB_DEADLINE, &format!("{} runs", job.name), || {
            let phase = tenant.job_field(&job.name, "{.status.phase}");
            if phase == "Running" { Ok(()) } else { Err(phase) }
        });
        cluster.release(&uid);
        wait::until(JOB_DEADLINE, &format!("{} succeeds", job.name), || {
            let phase = tenant.job_field(&job.name, "{.status.phase}");
            if phase == "Succeeded" { Ok(()) } else { Err(phase) }
        });
    }
    let own = a.logs(cluster, "pi-a", "team-a");
    assert!(own.status.success() && text(&own).contains("pi: 3.1"), "team-a reads its job's output: {}", text(&own));
    let own = b.logs(cluster, "pi-b", "team-b");
    assert!(own.status.success() && text(&own).contains("pi: 3.1"), "team-b reads its job's output: {}", text(&own));
    for (tenant, job, namespace) in [(&b, "pi-a", "team-a"), (&a, "pi-b", "team-b")] {
        let theirs = tenant.logs(cluster, job, namespace);
        let said = text(&theirs);
        let rule = format!(
            r#"User "{}" cannot get resource "mpijobs/log" in API group "mpiswarm.io" in the namespace "{namespace}""#,
            tenant.name
        );
        assert!(!theirs.status.success() && said.contains(&rule), "{} reading {job}: {said}", tenant.name);
    }

    cluster.kubectl(&["delete", "mpijobs", "--all", "-A", "--wait=true"]);
    println!("attacks: wall time {:.1} s", started.elapsed().as_secs_f64());
}
