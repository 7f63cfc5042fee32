//! Fifty MpiJobs applied at once with kubectl, over two Mesos roles, on four
//! test agents: every job ends, each as its program says; every offer round
//! the controller logged replays through `policy::queue_round` to the same
//! result, and the placement in each job's status is the one its round chose;
//! re-applying the whole set changes nothing.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{Stack, condition, phase_of, program};
use futures::StreamExt;
use kube::ResourceExt;
use mpiswarm_crds::{ConditionType as C, Phase};
use mpiswarm_policy::{TopologyScorer, queue_round};
use mpiswarm_testkit::AgentSpec;

const JOBS: usize = 50;

fn manifest(i: usize) -> String {
    let ranks = 1 + (i * 7) % 6;
    let (profile, role) = if i.is_multiple_of(2) { ("network", "mpi") } else { ("cpu", "batch") };
    let prog = if i % 7 == 3 { "exit 3" } else { "sleep 0.2" };
    format!(
        "apiVersion: mpiswarm.io/v1alpha1\nkind: MpiJob\nmetadata:\n  name: job-{i:02}\nspec:\n  image: mpiswarm/openmpi:0.1.0\n  command: [{}]\n  ranks: {ranks}\n  resources: {{cpus: 0.5, memory: 128Mi}}\n  profile: {profile}\n  role: {role}\n",
        program(prog)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_jobs_all_end_and_every_round_replays_to_the_placements_written() {
    let agents = (1..=4).map(|n| AgentSpec::new(&format!("node{n}")).cpus(4.0).mem(8192.0)).collect();
    let s = Stack::start(agents).await;
    let all: String = (0..JOBS).map(manifest).collect::<Vec<_>>().join("---\n");
    s.kubectl_ok(&["apply", "-f", "-"], Some(&all));
    let ended =
        futures::stream::iter(0..JOBS)
            .map(|i| {
                let s = &s;
                async move {
                    s.until(&format!("job-{i:02}"), "finished", |j| phase_of(j).is_some_and(Phase::is_finished)).await
                }
            })
            .buffer_unordered(8)
            .collect::<Vec<_>>()
            .await;
    let by_name: BTreeMap<String, _> = ended.into_iter().map(|j| (j.name_any(), j)).collect();
    for i in 0..JOBS {
        let job = &by_name[&format!("job-{i:02}")];
        let st = job.status.as_ref().unwrap();
        if i % 7 == 3 {
            assert_eq!(st.phase, Some(Phase::Failed), "job-{i:02}");
            let c = condition(job, C::Failed).unwrap();
            assert_eq!(c.reason, "LauncherFailed");
            assert_eq!(st.launcher.as_ref().and_then(|l| l.exit_code), Some(3));
        } else {
            assert_eq!(st.phase, Some(Phase::Succeeded), "job-{i:02}: {st:#?}");
        }
    }

    // Replay: each logged round's input gives exactly its logged outcome...
    let rounds = s.rounds();
    assert!(!rounds.is_empty(), "the controller logged no round");
    let mut last_start: BTreeMap<String, mpiswarm_policy::Placement> = BTreeMap::new();
    for r in &rounds {
        let replayed = queue_round(&r.jobs, &r.offers, &r.options, &TopologyScorer::default());
        assert_eq!(replayed, r.round, "round of role {} does not replay", r.role);
        for started in &r.round.started {
            last_start.insert(started.job_id.clone(), started.placement.clone());
        }
    }
    // ...and the placement in every status is the one its round chose.
    for job in by_name.values() {
        let placed = &last_start[&job.uid().unwrap()];
        let status = job.status.as_ref().and_then(|s| s.placement.clone()).expect("placement in status");
        let from_round: Vec<(String, i32)> =
            placed.nodes.iter().map(|n| (n.hostname.clone(), n.ranks as i32)).collect();
        let from_status: Vec<(String, i32)> = status.nodes.iter().map(|n| (n.node.clone(), n.ranks)).collect();
        assert_eq!(from_status, from_round, "{}", job.name_any());
        assert_eq!(status.reason, placed.reason);
    }
    let roles: std::collections::BTreeSet<&str> = rounds.iter().map(|r| r.role.as_str()).collect();
    assert_eq!(roles, ["batch", "mpi"].into(), "one round per role");

    // Re-applying everything starts nothing and rewrites no status.
    let before: Vec<_> =
        s.jobs().list(&Default::default()).await.unwrap().items.into_iter().map(|j| (j.name_any(), j.status)).collect();
    let out = s.kubectl_ok(&["apply", "-f", "-"], Some(&all));
    assert_eq!(out.matches("unchanged").count(), JOBS, "{out}");
    tokio::time::sleep(Duration::from_secs(2)).await; // nothing to await: we check that nothing happens
    let after: Vec<_> =
        s.jobs().list(&Default::default()).await.unwrap().items.into_iter().map(|j| (j.name_any(), j.status)).collect();
    assert_eq!(before, after);
    assert!(s.agents.running_tasks().is_empty());
}
