//! `kill -9` of the leading `mpiswarm controller` process while jobs run: the
//! second controller process takes the Lease, re-subscribes to the offer
//! layer as the same framework, reconciles, and every job finishes, with no
//! gang launched twice (the round logs of both processes together start
//! each job exactly once, and no job needed a second gang generation).
//! The API server, the offer layer and test agents run in this process.

#[path = "../../controller/tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::{Stack, job_yaml, phase_of, program};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::wait::await_condition;
use mpiswarm_crds::Phase;
use mpiswarm_testkit::AgentSpec;

const JOBS: usize = 6;

struct Controller {
    child: Child,
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn_controller(s: &Stack, identity: &str) -> Controller {
    let dir = s.dir.path();
    let log = std::fs::File::create(dir.join(format!("controller-{identity}.log"))).expect("log file");
    let child = Command::new(env!("CARGO_BIN_EXE_mpiswarm"))
        .args(["controller", "--master", &s.offers.url(), "--identity", identity, "--lease-seconds", "3"])
        .args(["--listen", "127.0.0.1:0", "--launch-timeout-seconds", "60"])
        .arg("--kubeconfig")
        .arg(&s.api.kubeconfig)
        .arg("--round-log")
        .arg(dir.join(format!("rounds-{identity}.jsonl")))
        .env("MPISWARM_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("mpiswarm controller starts");
    Controller { child }
}

async fn until_leader(s: &Stack, identity: &str) {
    let leases: Api<Lease> = Api::namespaced(s.client.clone(), "default");
    let who = identity.to_owned();
    let led = tokio::time::timeout(
        common::DEADLINE,
        await_condition(leases, "mpiswarm-controller", move |l: Option<&Lease>| {
            l.and_then(|l| l.spec.as_ref()).and_then(|s| s.holder_identity.as_deref()) == Some(who.as_str())
        }),
    )
    .await;
    assert!(matches!(led, Ok(Ok(_))), "{identity} never took the Lease: {}", logs(s.dir.path(), identity));
}

fn logs(dir: &Path, identity: &str) -> String {
    std::fs::read_to_string(dir.join(format!("controller-{identity}.log"))).unwrap_or_default()
}

/// Jobs started per job uid, over the round logs of both processes.
fn starts(dir: &Path) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for identity in ["a", "b"] {
        let text = std::fs::read_to_string(dir.join(format!("rounds-{identity}.jsonl"))).unwrap_or_default();
        for line in text.lines() {
            let rounds: Vec<mpiswarm_controller::round::RoleRound> = serde_json::from_str(line).expect("a round");
            for r in rounds {
                for s in r.round.started {
                    *out.entry(s.job_id).or_default() += 1;
                }
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn after_kill_9_of_the_leader_the_other_controller_finishes_every_job_without_relaunching_any() {
    let agents = (1..=3).map(|n| AgentSpec::new(&format!("node{n}")).cpus(4.0).mem(8192.0)).collect();
    let s = Stack::without_controller(agents).await;
    let mut a = spawn_controller(&s, "a");
    until_leader(&s, "a").await;
    let _b = spawn_controller(&s, "b");

    let all: String = (0..JOBS)
        .map(|i| job_yaml(&format!("long-{i}"), 2, 0.5, &program("sleep 8"), ""))
        .collect::<Vec<_>>()
        .join("---\n");
    s.kubectl_ok(&["apply", "-f", "-"], Some(&all));
    for i in 0..JOBS {
        s.until_phase(&format!("long-{i}"), Phase::Running).await;
    }

    a.child.kill().expect("kill -9 of controller a");
    a.child.wait().expect("controller a reaped");
    until_leader(&s, "b").await;

    let ended =
        futures::stream::iter(0..JOBS)
            .map(|i| {
                let s = &s;
                async move {
                    s.until(&format!("long-{i}"), "finished", |j| phase_of(j).is_some_and(Phase::is_finished)).await
                }
            })
            .buffer_unordered(JOBS)
            .collect::<Vec<_>>()
            .await;
    let started = starts(s.dir.path());
    for job in &ended {
        let st = job.status.as_ref().unwrap();
        assert_eq!(st.phase, Some(Phase::Succeeded), "{}: {st:#?}\n{}", job.name_any(), logs(s.dir.path(), "b"));
        assert_eq!((st.gang_generation.unwrap_or(0), st.restarts), (0, 0), "{} needed another gang", job.name_any());
        assert_eq!(started.get(&job.uid().unwrap()), Some(&1), "{} was started {:?} times", job.name_any(), started);
    }
    assert!(
        logs(s.dir.path(), "b").contains("gang rebuilt from status"),
        "b took the running gangs over from their status: {}",
        logs(s.dir.path(), "b")
    );
}
