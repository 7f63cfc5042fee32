//! What a task finds already there, on the real Docker engine: a named
//! volume made beforehand to bind a host path is refused (naming the rule)
//! unless the operator vouches for it, and a task joins no overlay but the
//! one the agents made for its own job. Every object a test makes is
//! removed when it ends, even by panic.

mod support;

use mpiswarm_mesos::task::{NetworkInfo, Volume};
use mpiswarm_mesos::{Labels, Reason, TaskInfo, TaskState};
use support::{Harness, RANK_IMAGE, harness, harness_with};

/// A Docker object of this test, removed when the test ends (a volume only
/// once Swarm removed the containers that used it: retried for 30 s).
struct Made {
    kind: &'static str,
    name: String,
}

impl Made {
    fn new(kind: &'static str, args: &[&str], name: String) -> Self {
        let mut cmd = std::process::Command::new("docker");
        cmd.args([kind, "create"]).args(args).arg(&name);
        let out = cmd.output().expect("docker CLI");
        assert!(out.status.success(), "docker {kind} create {name}: {}", String::from_utf8_lossy(&out.stderr));
        Self { kind, name }
    }
}

impl Drop for Made {
    fn drop(&mut self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let out = std::process::Command::new("docker").args([self.kind, "rm", &self.name]).output();
            match out {
                Ok(o) if o.status.success() => return,
                Ok(o) if String::from_utf8_lossy(&o.stderr).to_lowercase().contains("no such") => return,
                _ if std::time::Instant::now() > deadline => {
                    eprintln!("{} {} is left behind", self.kind, self.name);
                    return;
                }
                _ => std::thread::sleep(std::time::Duration::from_millis(250)),
            }
        }
    }
}

fn with_volume(h: &Harness, name: &str, script: &str, volume: &str) -> TaskInfo {
    let mut t = h.task(name, RANK_IMAGE, script);
    let v: Volume = serde_json::from_value(serde_json::json!({"container_path": "/data", "mode": "RO",
        "source": {"type": "DOCKER_VOLUME", "docker_volume": {"name": volume}}}))
    .unwrap();
    t.container.as_mut().unwrap().volumes.push(v);
    t
}

fn on_network(h: &Harness, name: &str, network: &str, job_uid: &str) -> TaskInfo {
    let mut t = h.task(name, RANK_IMAGE, "sleep 300");
    t.container.as_mut().unwrap().network_infos =
        vec![NetworkInfo { name: Some(network.to_owned()), ..NetworkInfo::default() }];
    t.labels = Some(Labels::from_pairs([("mpiswarm.io/job-uid", job_uid)]));
    t
}

fn assert_refused(status: &mpiswarm_mesos::TaskStatus, says: &[&str]) {
    assert_eq!(status.state, TaskState::Failed, "{:?}", status.message);
    assert_eq!(status.reason, Some(Reason::ReasonContainerLaunchFailed), "{:?}", status.message);
    let message = status.message.as_deref().unwrap_or_default();
    for s in says {
        assert!(message.contains(s), "'{s}' missing in: {message}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_made_beforehand_to_bind_a_host_path_is_refused_unless_the_operator_vouches_for_it() {
    let host = tempfile::tempdir().unwrap();
    std::fs::write(host.path().join("secret.txt"), "host-file-3\n").unwrap();
    let device = host.path().display().to_string();
    let mut h = harness("bindvol").await;
    let name = format!("mpiswarm-{}-bind", h.agent_id);
    let _volume =
        Made::new("volume", &["-o", "type=none", "-o", "o=bind", "-o", &format!("device={device}")], name.clone());
    let t = with_volume(&h, "blocked", "cat /data/secret.txt", &name);
    let id = t.task_id.clone();
    h.launch(vec![t]).await;
    let refused = h.next_status(&id).await;
    assert_refused(
        &refused,
        &[
            &format!("volume '{name}' already exists on node"),
            "with driver 'local' and options",
            "the local driver would bind a host directory (o=bind)",
            &format!("--allow-existing-volume {name}"),
        ],
    );
    assert!(h.objects().iter().all(|o| !o.starts_with("service")), "a refused task has no service: {:?}", h.objects());
    h.wait_until_clean().await;
    drop(h);

    // The operator vouches for it: the task mounts it as it is.
    let trusted = name.clone();
    let mut h = harness_with("bindvolok", |c| {
        c.trusted_volumes = mpiswarm_agent::existing::TrustedVolumes::new([trusted]);
    })
    .await;
    let t = with_volume(&h, "vouched", "cat /data/secret.txt", &name);
    let id = t.task_id.clone();
    h.launch(vec![t]).await;
    let done = h.wait_for(&id, TaskState::Finished).await;
    assert!(done.message.as_deref().unwrap_or_default().contains("host-file-3"), "{:?}", done.message);
    h.wait_until_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_joins_no_overlay_but_the_one_the_agents_made_for_its_own_job() {
    let mut h = harness("ownnet").await;
    // An attachable overlay someone else made, under the name a task asks for.
    let foreign = format!("{}-foreign", h.agent_id);
    let _foreign = Made::new("network", &["--driver", "overlay", "--attachable"], foreign.clone());
    let t = on_network(&h, "intruder", &foreign, "job-a");
    let id = t.task_id.clone();
    h.launch(vec![t]).await;
    assert_refused(
        &h.next_status(&id).await,
        &[&format!("network '{foreign}' exists but no mpiswarm agent made it"), "its own job"],
    );

    // Job a's task makes its overlay; job b's task cannot join it; job a's next task can.
    let network = format!("{}-net", h.agent_id);
    let first = on_network(&h, "a-first", &network, "job-a");
    let first_id = first.task_id.clone();
    h.launch(vec![first]).await;
    h.wait_for(&first_id, TaskState::Running).await;
    let labels = std::process::Command::new("docker")
        .args(["network", "inspect", &network, "--format", "{{json .Labels}}"])
        .output()
        .unwrap();
    let labels: std::collections::HashMap<String, String> = serde_json::from_slice(&labels.stdout).unwrap();
    assert_eq!(labels.get("mpiswarm.io/job-uid").map(String::as_str), Some("job-a"), "{labels:?}");
    assert_eq!(labels.get("mpiswarm.io/framework-id"), Some(&h.framework_id.value), "{labels:?}");
    let other = on_network(&h, "b-intruder", &network, "job-b");
    let other_id = other.task_id.clone();
    h.launch(vec![other]).await;
    assert_refused(
        &h.next_status(&other_id).await,
        &[&format!("network '{network}' belongs to another job"), "job uid 'job-a'", "job uid 'job-b'"],
    );
    let second = on_network(&h, "a-second", &network, "job-a");
    let second_id = second.task_id.clone();
    h.launch(vec![second]).await;
    h.wait_for(&second_id, TaskState::Running).await;
    for id in [&first_id, &second_id] {
        let fw = h.framework_id.clone();
        h.agent.kill_task(&fw, id).await;
        h.wait_for(id, TaskState::Killed).await;
    }
    h.wait_until_clean().await;
}
