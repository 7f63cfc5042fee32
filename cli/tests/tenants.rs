//! The README's "Several teams on one stack" lines, run as they are on the
//! real binary, the real Docker engine and the real kubectl: `mpiswarm up
//! --quota ...`, `mpiswarm tenant add` for two teams, then kubectl with
//! team-a's kubeconfig. A line whose comment starts with `yes` or `no` must
//! print that (`kubectl auth can-i`); every other line must exit 0. So pi
//! runs in team-a's namespace under its role, a job asking for team-b's role
//! ends `Invalid` with `RoleNotAllowed` and a job over the role's quota is
//! `Unschedulable` with `ExceedsQuota`. Then, beyond the README: a refusal
//! names user, verb, resource and namespace; the foreign job was never
//! placed; `mpiswarm status` shows the role's use against its quota and
//! `mpiswarm logs` the tenant's own output; the admin kubeconfig still
//! reaches every namespace. Needs the
//! images of `make images`.

mod up;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use up::Up;

/// The whole test, `up` to the last check.
const DEADLINE: Duration = Duration::from_secs(600);

/// The block of README.md that the test runs.
fn readme_lines() -> Vec<String> {
    let readme = std::fs::read_to_string(up::repo().join("README.md")).expect("README.md");
    let start = readme.find("```sh tenants\n").expect("README.md has the tenants block") + "```sh tenants\n".len();
    let end = start + readme[start..].find("```").expect("the block ends");
    readme[start..end].lines().map(str::to_owned).filter(|l| !l.trim().is_empty()).collect()
}

/// A README line split into the command and what its comment expects.
fn command_and_expectation(line: &str) -> (&str, Option<&str>) {
    match line.find("  #") {
        None => (line.trim(), None),
        Some(i) => {
            let comment = line[i + 3..].trim();
            let expected = ["yes", "no"].into_iter().find(|w| comment.split_whitespace().next() == Some(*w));
            (line[..i].trim(), expected)
        }
    }
}

/// The words bash makes of `args` (quotes and all).
fn shell_words(args: &str, left: Duration) -> Vec<String> {
    let mut cmd = Command::new("bash");
    cmd.args(["-c", &format!("printf '%s\\0' {args}")]);
    let out = up::run(cmd, left);
    assert!(out.status.success(), "bash could not split {args:?}");
    out.stdout.split(|b| *b == 0).filter(|w| !w.is_empty()).map(|w| String::from_utf8_lossy(w).into_owned()).collect()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// `bash -c` in `cwd` with the binary first on PATH, after the exports
/// the README made so far.
fn sh(cwd: &Path, exports: &[String], line: &str, left: Duration) -> Output {
    let bin = Path::new(env!("CARGO_BIN_EXE_mpiswarm")).parent().expect("the binary's dir").to_owned();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut script = String::from("set -euo pipefail\n");
    for e in exports {
        script.push_str(e);
        script.push('\n');
    }
    script.push_str(line);
    let mut cmd = Command::new("bash");
    cmd.args(["-c", &script]).current_dir(cwd).env("PATH", path).env_remove("KUBECONFIG");
    up::run(cmd, left)
}

#[test]
fn the_readme_makes_two_tenants_that_each_keep_to_their_namespace_role_and_quota() {
    let image = "mpiswarm/openmpi:0.1.0";
    let mut inspect = Command::new("docker");
    inspect.args(["image", "inspect", image]);
    assert!(up::run(inspect, DEADLINE).status.success(), "image {image} is missing: run `make images` first");
    let started = Instant::now();
    let left = || DEADLINE.checked_sub(started.elapsed()).unwrap_or_else(|| panic!("over the deadline {DEADLINE:?}"));

    // A directory of the user's own, with the repository's examples in it.
    let home = tempfile::tempdir().expect("tempdir");
    let cwd = home.path().canonicalize().expect("canonical");
    std::os::unix::fs::symlink(up::repo().join("examples"), cwd.join("examples")).expect("examples link");

    let lines = readme_lines();
    assert!(lines.len() >= 8, "the tenants block is shorter than expected: {lines:?}");
    let mut stack: Option<Up> = None;
    let mut exports = Vec::new();
    for line in &lines {
        let (command, expected) = command_and_expectation(line);
        if let Some(args) = command.strip_prefix("mpiswarm up").and_then(|a| a.strip_suffix('&')) {
            let args = shell_words(args, left());
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            stack = Some(Up::start_at(&cwd.join(".mpiswarm"), &args, left()));
            continue;
        }
        if command.starts_with("export ") {
            exports.push(command.to_owned());
            continue;
        }
        let log = || stack.as_ref().map(Up::log).unwrap_or_default();
        let out = sh(&cwd, &exports, command, left());
        match expected {
            Some(answer) => {
                assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), answer, "{command}: {}\n{}", text(&out), log())
            }
            None => assert!(out.status.success(), "{command} failed: {}\nup's log:\n{}", text(&out), log()),
        }
    }
    let stack = stack.expect("the block starts the stack");

    let tenant = [format!("export KUBECONFIG={}", stack.dir.join("tenants/team-a.kubeconfig").display())];
    let refused = sh(&cwd, &tenant, "kubectl get mpijobs -n team-b", left());
    let said = text(&refused);
    assert!(
        !refused.status.success()
            && said.contains(
                r#"User "team-a" cannot list resource "mpijobs" in API group "mpiswarm.io" in the namespace "team-b""#
            ),
        "a refusal names user, verb, resource and namespace: {said}"
    );
    let placed = sh(&cwd, &tenant, "kubectl get mpijob foreign -o jsonpath='{.status.placement}'", left());
    assert!(placed.status.success() && placed.stdout.is_empty(), "the foreign job was placed: {}", text(&placed));
    let quota = sh(
        &cwd,
        &tenant,
        r#"kubectl get mpijob too-big -o jsonpath='{.status.conditions[?(@.type=="Unschedulable")].message}'"#,
        left(),
    );
    let message = text(&quota);
    assert!(message.contains("quota limit of role team-a (1 cpu"), "the limit is named: {message}");

    let status = sh(&cwd, &tenant, r#"mpiswarm status --kubeconfig "$KUBECONFIG""#, left());
    let said = text(&status);
    assert!(
        status.status.success() && said.contains("quota role team-a: ") && said.contains(" of 1 cpus, "),
        "status shows the role's use against its limit: {said}"
    );
    let logs = sh(&cwd, &tenant, r#"mpiswarm logs pi-team-a --kubeconfig "$KUBECONFIG""#, left());
    assert!(logs.status.success() && text(&logs).contains("pi: 3.1"), "the tenant reads its output: {}", text(&logs));

    let admin = [format!("export KUBECONFIG={}", stack.dir.join("kubeconfig").display())];
    let all = sh(&cwd, &admin, "kubectl get mpijobs -A -o name", left());
    let names = text(&all);
    assert!(all.status.success() && names.matches("mpijob").count() == 3, "the admin sees every job: {names}");
}
