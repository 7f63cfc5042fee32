//! One job at a time through the whole control plane (API server, offer
//! layer, test agents, controller), driven with kubectl: its story in
//! Events, GitOps re-applies, invalid and impossible jobs, suspend and
//! resume, deadlines, TTL, deletion, and a gang whose launch fails in part.

mod common;

use mpiswarm_controller::names::{TaskName, TaskRole};

use std::time::Duration;

use common::{Stack, condition, job_yaml, phase_of, program};
use mpiswarm_crds::{ConditionType as C, Phase};
use mpiswarm_testkit::AgentSpec;

fn two_nodes() -> Vec<AgentSpec> {
    vec![AgentSpec::new("node1").cpus(2.0).mem(4096.0), AgentSpec::new("node2").cpus(2.0).mem(4096.0)]
}

fn event_reasons(s: &Stack, name: &str) -> Vec<String> {
    let out = s.kubectl_ok(
        &[
            "get",
            "events",
            "--field-selector",
            &format!("involvedObject.name={name}"),
            "--sort-by",
            ".metadata.creationTimestamp",
            "-o",
            "jsonpath={range .items[*]}{.reason}{\"\\n\"}{end}",
        ],
        None,
    );
    out.lines().map(str::to_owned).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_tells_its_story_in_events_and_a_reapply_changes_nothing() {
    let s = Stack::start(two_nodes()).await;
    let yaml = job_yaml("story", 4, 0.5, &program("sleep 1"), "");
    s.kubectl_ok(&["apply", "-f", "-"], Some(&yaml));
    let job = s.until_phase("story", Phase::Succeeded).await;
    let st = job.status.clone().unwrap();
    assert!(st.is_true(C::Succeeded) && st.is_true(C::Created) && st.is_true(C::Scheduled));
    assert_eq!(st.launcher.as_ref().and_then(|l| l.exit_code), Some(0));
    assert_eq!(st.placement.as_ref().map(|p| p.policy.as_str()), Some("pack"));
    let described = s.kubectl_ok(&["describe", "mpijob", "story"], None);
    let reasons = event_reasons(&s, "story");
    assert_eq!(reasons, ["Created", "Scheduled", "Launching", "Running", "Succeeded"], "{described}");
    let row = s.kubectl_ok(&["get", "mpij", "story", "--no-headers"], None);
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cols[..5], ["story", "Succeeded", "4", "pack", "2"], "{row}");

    // GitOps: the same YAML again, client-side and server-side, starts nothing.
    let before = s.jobs().get("story").await.unwrap();
    assert!(s.kubectl_ok(&["apply", "-f", "-"], Some(&yaml)).contains("unchanged"));
    s.kubectl_ok(&["apply", "--server-side", "--force-conflicts", "-f", "-"], Some(&yaml));
    tokio::time::sleep(Duration::from_secs(2)).await; // nothing to await: we check that nothing happens
    let after = s.jobs().get("story").await.unwrap();
    // (A server-side apply may move field ownership, which Kubernetes records too.)
    assert_eq!(after.metadata.generation, before.metadata.generation, "a re-apply changed the spec");
    assert_eq!(after.status, before.status, "a re-apply churned the status");
    assert_eq!(event_reasons(&s, "story").len(), 5, "a re-apply added events");
    assert!(s.agents.running_tasks().is_empty(), "nothing was launched again");

    // Only runPolicy may change.
    let changed = yaml.replace("ranks: 4", "ranks: 3");
    let out = s.kubectl(&["apply", "-f", "-"], Some(&changed));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("spec.ranks") && err.contains("immutable"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn invalid_and_impossible_jobs_say_why_and_disturb_no_other_job() {
    let s = Stack::start(two_nodes()).await;
    // The schema accepts it; only the controller's validation can refuse it.
    let invalid = job_yaml("bad-flags", 2, 0.5, &program("true"), "  mpi: {mpirunArgs: [\"-np\", \"8\"]}\n");
    let impossible = job_yaml("too-big", 16, 1.0, &program("true"), "");
    let fine = job_yaml("fine", 2, 0.5, &program("sleep 0.5"), "");
    s.kubectl_ok(&["apply", "-f", "-"], Some(&format!("{invalid}---\n{impossible}---\n{fine}")));

    let bad = s.until_phase("bad-flags", Phase::Failed).await;
    let c = condition(&bad, C::Invalid).expect("Invalid condition");
    assert_eq!(c.status, "True");
    assert!(c.message.contains("-np"), "{}", c.message);

    let big = s
        .until("too-big", "Unschedulable", |j| condition(j, C::Unschedulable).is_some_and(|c| c.status == "True"))
        .await;
    let c = condition(&big, C::Unschedulable).unwrap();
    assert_eq!(c.reason, "ExceedsCluster");
    assert!(c.message.contains("needs 16.1 cpus"), "the shortfall is named: {}", c.message);
    assert_eq!(phase_of(&big), Some(Phase::Pending), "it keeps waiting");

    s.until_phase("fine", Phase::Succeeded).await;
    assert!(event_reasons(&s, "bad-flags").contains(&"Invalid".to_owned()));
    assert!(event_reasons(&s, "too-big").contains(&"Unschedulable".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_over_its_roles_quota_limit_is_unschedulable_naming_the_limit_and_holds_up_no_other() {
    let s = Stack::start_with_offers(two_nodes(), |offers| {
        offers.quota = mpiswarm_offers::server::parse_quotas("team-q=cpus:1").expect("a quota");
    })
    .await;
    // 2 ranks of 0.5 cpu and the 0.1-cpu launcher: 1.1 cpus, over the limit of 1.
    let over = job_yaml(
        "over-quota",
        2,
        0.5,
        &program("true"),
        "  role: team-q
",
    );
    let under = job_yaml(
        "under-quota",
        1,
        0.5,
        &program("sleep 0.5"),
        "  role: team-q
",
    );
    s.kubectl_ok(
        &["apply", "-f", "-"],
        Some(&format!(
            "{over}---
{under}"
        )),
    );
    let over = s
        .until("over-quota", "Unschedulable", |j| condition(j, C::Unschedulable).is_some_and(|c| c.status == "True"))
        .await;
    let c = condition(&over, C::Unschedulable).unwrap();
    assert_eq!(c.reason, "ExceedsQuota", "{}", c.message);
    assert!(
        c.message.contains("needs 1.1 cpus in all") && c.message.contains("quota limit of role team-q (1 cpu)"),
        "{}",
        c.message
    );
    assert_eq!(phase_of(&over), Some(Phase::Pending), "it keeps waiting: the limit may be raised");
    s.until_phase("under-quota", Phase::Succeeded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_whose_namespace_does_not_allow_its_role_is_invalid_and_nothing_of_it_runs() {
    let s = Stack::start(two_nodes()).await;
    let namespace = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n  annotations: {mpiswarm.io/allowed-roles: team-a}\n";
    let foreign = job_yaml("foreign", 2, 0.5, &program("sleep 600"), "  role: team-b\n");
    let own = job_yaml("own", 2, 0.5, &program("sleep 0.5"), "  role: team-a\n");
    // The namespace and its jobs in one apply: a job the controller sees
    // before its namespace waits for it, it is never admitted unread.
    s.kubectl_ok(&["apply", "-n", "team-a", "-f", "-"], Some(&format!("{namespace}---\n{foreign}---\n{own}")));
    let jobs: kube::Api<mpiswarm_crds::MpiJob> = kube::Api::namespaced(s.client.clone(), "team-a");
    let until = |name: &'static str, phase: Phase| {
        let jobs = jobs.clone();
        async move {
            let wait = kube::runtime::wait::await_condition(jobs, name, move |j: Option<&mpiswarm_crds::MpiJob>| {
                j.and_then(phase_of) == Some(phase)
            });
            let job = tokio::time::timeout(common::DEADLINE, wait).await;
            job.unwrap_or_else(|_| panic!("{name} not {phase:?} within {:?}", common::DEADLINE)).unwrap().unwrap()
        }
    };
    let refused = until("foreign", Phase::Failed).await;
    let c = condition(&refused, C::Invalid).expect("the Invalid condition");
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", "RoleNotAllowed"));
    assert_eq!(
        c.message,
        "spec.role 'team-b' is not allowed in namespace 'team-a': its annotation mpiswarm.io/allowed-roles allows team-a"
    );
    let uid = refused.metadata.uid.clone().expect("a uid");
    assert!(refused.status.unwrap().placement.is_none(), "never placed");
    until("own", Phase::Succeeded).await;
    let launcher = TaskName::new(&uid, 0, TaskRole::Launcher).to_string();
    let prefix = launcher.rsplit_once("-g").expect("a task name with its generation").0;
    let held: Vec<String> = s
        .agents
        .agents()
        .iter()
        .flat_map(|a| a.tasks())
        .map(|t| t.info.task_id.value)
        .filter(|id| id.starts_with(prefix))
        .collect();
    assert!(held.is_empty(), "no agent holds a task of the refused job: {held:?}");
}

async fn until_nothing_runs(s: &mut Stack) {
    s.agents.wait_for_running(|running| running.is_empty()).await;
}

fn patch(s: &Stack, name: &str, json: &str) {
    s.kubectl_ok(&["patch", "mpijob", name, "--type", "merge", "-p", json], None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn suspend_releases_everything_and_resume_runs_a_fresh_gang() {
    let mut s = Stack::start(two_nodes()).await;
    s.kubectl_ok(&["apply", "-f", "-"], Some(&job_yaml("pausable", 2, 0.5, &program("sleep 600"), "")));
    s.until_phase("pausable", Phase::Running).await;
    assert_eq!(s.agents.running_tasks().values().map(Vec::len).sum::<usize>(), 2, "a worker and the launcher");

    patch(&s, "pausable", r#"{"spec":{"runPolicy":{"suspend":true}}}"#);
    let job = s.until_phase("pausable", Phase::Suspended).await;
    assert!(condition(&job, C::Suspended).is_some_and(|c| c.status == "True"));
    until_nothing_runs(&mut s).await;

    patch(&s, "pausable", r#"{"spec":{"runPolicy":{"suspend":false}}}"#);
    let job = s.until_phase("pausable", Phase::Running).await;
    let st = job.status.unwrap();
    assert_eq!(st.gang_generation, Some(1), "a resumed job runs fresh task ids");
    assert_eq!(st.condition(C::Suspended).map(|c| c.reason.as_str()), Some("Resumed"));
    assert_eq!(st.restarts, 0, "a suspension is not a failure");
    let reasons = event_reasons(&s, "pausable");
    assert!(reasons.contains(&"Suspended".to_owned()) && reasons.contains(&"Resumed".to_owned()), "{reasons:?}");

    // Deleting a running job kills its gang before the job goes.
    s.kubectl_ok(&["delete", "mpijob", "pausable", "--wait=false"], None);
    s.until_gone("pausable").await;
    until_nothing_runs(&mut s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_deadline_fails_a_job_that_runs_too_long_and_the_ttl_deletes_a_finished_one() {
    let mut s = Stack::start(two_nodes()).await;
    let slow = job_yaml("slow", 2, 0.5, &program("sleep 600"), "  runPolicy: {activeDeadlineSeconds: 2}\n");
    let quick = job_yaml("quick", 1, 0.5, &program("true"), "  runPolicy: {ttlSecondsAfterFinished: 1}\n");
    s.kubectl_ok(&["apply", "-f", "-"], Some(&format!("{slow}---\n{quick}")));

    let job = s.until_phase("slow", Phase::Failed).await;
    let c = condition(&job, C::Failed).unwrap();
    assert_eq!(c.reason, "DeadlineExceeded");
    assert!(c.message.contains("activeDeadlineSeconds (2s)"), "{}", c.message);

    s.until_gone("quick").await;
    until_nothing_runs(&mut s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gang_whose_launch_fails_on_one_node_leaves_nothing_running_anywhere() {
    let mut s = Stack::start(two_nodes()).await;
    // Spread puts one worker on each node; only node2's part fails to launch.
    let yaml = job_yaml("half", 2, 0.5, &program("sleep 600"), "")
        .replace(
            "metadata:\n  name: half\n",
            "metadata:\n  name: half\n  labels: {mpiswarm.io/test-fail-launch: node2}\n",
        )
        .replace("policy: pack", "policy: spread");
    s.kubectl_ok(&["apply", "-f", "-"], Some(&yaml));
    let job = s.until_phase("half", Phase::Failed).await;
    let c = condition(&job, C::Failed).unwrap();
    assert_eq!(c.reason, "LaunchFailed", "{}", c.message);
    assert!(c.message.contains("node2"), "the failing node is named: {}", c.message);
    assert_eq!(job.status.unwrap().placement.unwrap().node_count, 2);
    until_nothing_runs(&mut s).await;
}
