//! The newcomer's path through the real binary on the real Docker engine:
//! `mpiswarm up` in the background, `mpiswarm run examples/pi.yaml` prints pi
//! and exits 0 (twice in a row: a finished job is replaced), a failing job
//! exits 1 with the launcher's last lines and the reason, an invalid file
//! exits 2 naming the field, `mpiswarm logs` reads the launcher's output
//! through the controller's log endpoint (with the admin kubeconfig, and
//! with a tenant's from `mpiswarm tenant add`, which reads its own job's
//! output while another tenant is refused it, naming the rule), `kubectl
//! delete` of the jobs returns once the engine holds nothing of them, and
//! `mpiswarm down` stops the stack (ending a running job) and returns once
//! no Swarm object or container of it is left.
//! Needs the images of `make images`.

mod up;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use up::Up;

const DEADLINE: Duration = Duration::from_secs(180);

/// Runs a command under the test's overall deadline.
fn run(cmd: Command) -> Output {
    up::run(cmd, DEADLINE)
}

fn mpiswarm(args: &[&str], data: &Path) -> Output {
    up::mpiswarm(args, data, DEADLINE)
}

fn docker(args: &[&str]) -> Output {
    let mut cmd = Command::new("docker");
    cmd.args(args);
    run(cmd)
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn job_file(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &p,
        format!("apiVersion: mpiswarm.io/v1alpha1\nkind: MpiJob\nmetadata:\n  name: {name}\nspec:\n{body}"),
    )
    .expect("write job");
    p
}

#[test]
fn up_run_logs_and_down_through_the_binary() {
    let image = "mpiswarm/openmpi:0.1.0";
    let ok = docker(&["image", "inspect", image]).status.success();
    assert!(ok, "image {image} is missing: run `make images` first");
    let stack = Up::start(&[], DEADLINE);
    let data = stack.dir.as_path();
    // The admin token, every Secret and the jobs' SSH keys are in there: no
    // other local user may read them (what `stat -c %a` showed as 755 and
    // 644 before).
    let mode = |p: &Path| std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(p).unwrap().permissions()) & 0o777;
    let private = [(data.to_owned(), 0o700), (data.join("offers"), 0o700)]
        .into_iter()
        .chain(["kubeconfig", "token", "state.sqlite"].map(|f| (data.join(f), 0o600)));
    for (path, expected) in private {
        assert_eq!(mode(&path), expected, "{} is {:o}, not {expected:o}", path.display(), mode(&path));
    }

    for round in 1..=2 {
        let out = mpiswarm(&["run", "examples/pi.yaml"], data);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(0), "run {round}: {stdout}\n{stderr}");
        assert!(stdout.contains("pi: 3.1"), "run {round} prints pi: {stdout}");
        assert!(stderr.contains("Running [pack on"), "run {round} shows the placement: {stderr}");
    }
    let logs = mpiswarm(&["logs", "pi"], data);
    assert!(logs.status.success() && text(&logs).0.contains("ranks: 4"), "{:?}", text(&logs));
    tenants_read_their_own_logs_only(&stack);

    let failing = job_file(
        data,
        "fails",
        "  image: mpiswarm/openmpi:0.1.0\n  command: [sh, -c, 'echo about to fail; exit 3']\n  ranks: 1\n  resources: {cpus: 0.25, memory: 64Mi}\n",
    );
    let out = mpiswarm(&["run", failing.to_str().unwrap()], data);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stdout.contains("about to fail"), "the launcher's last lines: {stdout}");
    assert!(stderr.contains("LauncherFailed") && stderr.contains("code 3"), "the reason: {stderr}");

    let invalid = job_file(data, "invalid", "  image: mpiswarm/openmpi:0.1.0\n  command: [x]\n  ranks: 0\n");
    let out = mpiswarm(&["run", invalid.to_str().unwrap()], data);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("spec.ranks"), "the field is named: {stderr}");

    let uid_of = |name: &str| {
        let kubeconfig = data.join("kubeconfig");
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig").arg(&kubeconfig).args(["get", "mpij", name, "-o", "jsonpath={.metadata.uid}"]);
        let out = run(cmd);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let uids = [uid_of("pi"), uid_of("fails")];
    let agent_id = mpiswarm_stack::down::agent_id(data).expect("the stack's agent registered");
    let left = |what: &str| {
        let mut left = mpiswarm_stack::down::left_on_engine(&agent_id).expect("docker lists the agent's objects");
        for uid in &uids {
            let label = format!("label=mpiswarm.io/job-uid={uid}");
            for args in [vec!["service", "ls", "-q", "--filter", &label], vec!["ps", "-aq", "--filter", &label]] {
                let out = docker(&args);
                left.extend(String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned));
            }
        }
        if !left.is_empty() {
            let described: Vec<String> = left
                .iter()
                .filter_map(|l| l.strip_prefix("container "))
                .map(|id| {
                    let format = "{{.Name}} {{.State.Status}} task {{index .Config.Labels \"mpiswarm.io/task-id\"}}";
                    text(&docker(&["inspect", "--format", format, id])).0.trim().to_owned()
                })
                .collect();
            let log = stack.log();
            let tail: Vec<&str> = log.lines().rev().take(60).collect::<Vec<_>>().into_iter().rev().collect();
            panic!(
                "left behind right after {what}: {left:?}\ncontainers: {described:?}\nstack log:\n{}",
                tail.join("\n")
            );
        }
    };

    // A running job is gone from the engine when its deletion returns:
    // services, containers, and the network, secret and config of its last
    // task; so are finished ones.
    let kubectl = |args: &[&str]| {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig").arg(data.join("kubeconfig")).args(args);
        let out = run(cmd);
        assert!(out.status.success(), "kubectl {args:?}: {:?}", text(&out));
    };
    let start_sleeper = || {
        let running = job_file(
            data,
            "sleeps",
            "  image: mpiswarm/openmpi:0.1.0\n  command: [sleep, '600']\n  ranks: 2\n  resources: {cpus: 0.25, memory: 64Mi}\n",
        );
        kubectl(&["apply", "-f", running.to_str().unwrap()]);
        let started = std::time::Instant::now();
        loop {
            let listed = mpiswarm_stack::down::left_on_engine(&agent_id).expect("docker lists the agent's objects");
            if listed.iter().any(|l| l.starts_with("container ")) {
                break;
            }
            assert!(started.elapsed() < DEADLINE, "the job 'sleeps' never started a container: {listed:?}");
            std::thread::sleep(Duration::from_millis(250));
        }
    };
    start_sleeper();
    kubectl(&["delete", "mpij", "pi", "fails", "sleeps"]);
    left("kubectl delete");

    // `down` ends a running job too.
    start_sleeper();
    let down = mpiswarm(&["down"], data);
    assert!(down.status.success(), "{:?}", text(&down));
    assert!(!data.join("stack.json").exists(), "down removes the stack file");
    eprintln!("mpiswarm down said: {}", text(&down).1);
    left("mpiswarm down");
}

/// Two tenants made by `mpiswarm tenant add`: team-a runs a job in its
/// namespace under its role and reads its output with `mpiswarm logs` and
/// its own kubeconfig; team-b, asking for the same job, is refused by the
/// log endpoint with the rule that refused it.
fn tenants_read_their_own_logs_only(stack: &Up) {
    let data = stack.dir.as_path();
    for team in ["team-a", "team-b"] {
        let added = mpiswarm(&["tenant", "add", team], data);
        assert!(added.status.success(), "tenant add {team}: {:?}", text(&added));
    }
    let kubeconfig = |team: &str| data.join("tenants").join(format!("{team}.kubeconfig"));
    let job = job_file(
        data,
        "team-a-job",
        "  image: mpiswarm/openmpi:0.1.0\n  command: [sh, -c, 'echo output-of-team-a']\n  ranks: 1\n  role: team-a\n  resources: {cpus: 0.25, memory: 64Mi}\n",
    );
    let kubectl = |team: &str, args: &[&str]| {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig").arg(kubeconfig(team)).args(args);
        run(cmd)
    };
    // The API server reads the token file again when it changes, within seconds.
    let added = Instant::now();
    for team in ["team-a", "team-b"] {
        loop {
            let whoami = kubectl(team, &["auth", "whoami"]);
            if whoami.status.success() {
                break;
            }
            assert!(added.elapsed() < Duration::from_secs(30), "{team}'s token is not taken: {:?}", text(&whoami));
            std::thread::sleep(Duration::from_millis(500)); // the server's file watcher gives no event to await
        }
    }
    let applied = kubectl("team-a", &["apply", "-f", job.to_str().expect("utf-8 path")]);
    assert!(applied.status.success(), "{:?}", text(&applied));
    let done = kubectl("team-a", &["wait", "--for=condition=Succeeded", "mpijob/team-a-job", "--timeout=150s"]);
    if !done.status.success() {
        // What the job's status and the stack's logs say, as the admin.
        let mut get = Command::new("kubectl");
        get.arg("--kubeconfig").arg(data.join("kubeconfig")).args(["get", "mpijob", "-A", "-o", "yaml"]);
        let jobs = text(&run(get)).0;
        panic!("team-a's job did not succeed: {:?}\n--- the MpiJobs\n{jobs}\n{}", text(&done), stack.report());
    }

    let a = kubeconfig("team-a");
    let own = mpiswarm(&["logs", "team-a-job", "--kubeconfig", a.to_str().expect("utf-8 path")], data);
    let (out, err) = text(&own);
    assert!(own.status.success() && out.contains("output-of-team-a"), "team-a reads its own job: {out}\n{err}");

    let b = kubeconfig("team-b");
    let other =
        mpiswarm(&["logs", "team-a-job", "-n", "team-a", "--kubeconfig", b.to_str().expect("utf-8 path")], data);
    let (out, err) = text(&other);
    assert!(!other.status.success(), "team-b read team-a's output: {out}");
    assert!(!out.contains("output-of-team-a"), "{out}");
    for part in ["403", "User \"team-b\"", "cannot get", "mpijobs/log", "namespace \"team-a\""] {
        assert!(err.contains(part), "the refusal names {part}: {err}");
    }
}
