//! Data in and out on the real Docker engine: a named Docker volume written
//! by one task and read by a later one, host paths bound only under an
//! allowed prefix (and refused, naming the path, outside it), and a tmpfs.

mod support;

use mpiswarm_mesos::TaskState;
use mpiswarm_mesos::task::Volume;
use support::{RANK_IMAGE, harness, harness_with};

/// A named volume that is removed when the test ends, even by panic.
struct NamedVolume(String);

impl Drop for NamedVolume {
    /// Docker refuses to remove a volume while a container uses it, also a
    /// stopped one (`-f` does not change that), and Swarm removes a task's
    /// container only after its service went: try again until it is gone,
    /// and fail the test (unless it fails already) if it stays.
    fn drop(&mut self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let out = std::process::Command::new("docker").args(["volume", "rm", &self.0]).output();
            let refusal = match out {
                Ok(o) if o.status.success() => return,
                Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_owned(),
                Err(e) => format!("docker CLI: {e}"),
            };
            if refusal.to_lowercase().contains("no such volume") {
                return;
            }
            if std::time::Instant::now() > deadline {
                if !std::thread::panicking() {
                    panic!("volume {} is left behind: {refusal}", self.0);
                }
                eprintln!("volume {} is left behind: {refusal}", self.0);
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
    }
}

fn volume(json: serde_json::Value) -> Volume {
    serde_json::from_value(json).unwrap()
}

fn with_volume(h: &support::Harness, name: &str, script: &str, v: Volume) -> mpiswarm_mesos::TaskInfo {
    let mut t = h.task(name, RANK_IMAGE, script);
    t.container.as_mut().unwrap().volumes.push(v);
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_volume_written_by_one_task_is_read_by_a_later_one() {
    let mut h = harness("namedvol").await;
    let name = NamedVolume(format!("mpiswarm-{}", h.agent_id));
    let data = |mode: &str| {
        volume(serde_json::json!({"container_path": "/data", "mode": mode,
            "source": {"type": "DOCKER_VOLUME", "docker_volume": {"driver": "local", "name": name.0}}}))
    };
    let writer = with_volume(&h, "writer", "echo result-42 > /data/out.txt", data("RW"));
    let id = writer.task_id.clone();
    h.launch(vec![writer]).await;
    h.wait_for(&id, TaskState::Finished).await;
    let reader = with_volume(&h, "reader", "cat /data/out.txt; ! touch /data/nope 2>/dev/null", data("RO"));
    let id = reader.task_id.clone();
    h.launch(vec![reader]).await;
    let read = h.wait_for(&id, TaskState::Finished).await;
    assert!(read.message.as_deref().unwrap_or("").contains("result-42"), "{:?}", read.message);
    h.wait_until_clean().await;
    let inspect = std::process::Command::new("docker").args(["volume", "inspect", &name.0]).output().unwrap();
    assert!(inspect.status.success(), "the job's volume outlives its tasks");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_paths_bind_under_the_allowed_prefix_and_are_refused_outside_it_naming_the_path() {
    let allowed = tempfile::tempdir().unwrap();
    std::fs::write(allowed.path().join("input.txt"), "input-7\n").unwrap();
    std::fs::create_dir(allowed.path().join("out")).unwrap();
    let prefix = allowed.path().to_owned();
    let mut h = harness_with("hostpath", |c| {
        c.host_paths = mpiswarm_agent::mounts::HostPaths::allow(&[prefix]).unwrap();
    })
    .await;
    let bind = |path: String, target: &str, mode: &str| {
        volume(serde_json::json!({"container_path": target, "mode": mode,
            "source": {"type": "HOST_PATH", "host_path": {"path": path}}}))
    };
    let mut t = with_volume(
        &h,
        "binder",
        "cat /in/input.txt; echo output-9 > /out/result.txt",
        bind(format!("{}/input.txt", allowed.path().display()), "/in/input.txt", "RO"),
    );
    t.container.as_mut().unwrap().volumes.push(bind(format!("{}/out", allowed.path().display()), "/out", "RW"));
    let id = t.task_id.clone();
    h.launch(vec![t]).await;
    let done = h.wait_for(&id, TaskState::Finished).await;
    assert!(done.message.as_deref().unwrap_or("").contains("input-7"), "{:?}", done.message);
    assert_eq!(std::fs::read_to_string(allowed.path().join("out/result.txt")).unwrap(), "output-9\n");

    let outside = with_volume(&h, "outside", "true", bind("/etc".into(), "/host-etc", "RO"));
    let id = outside.task_id.clone();
    h.launch(vec![outside]).await;
    let refused = h.next_status(&id).await;
    assert_eq!((refused.state, refused.reason), (TaskState::Error, Some(mpiswarm_mesos::Reason::ReasonTaskInvalid)));
    let message = refused.message.unwrap();
    assert!(message.contains("host path '/etc'") && message.contains("not under an allowed prefix"), "{message}");
    let escape = format!("{}/out/../..", allowed.path().display());
    let sneaky = with_volume(&h, "escape", "true", bind(escape.clone(), "/up", "RO"));
    let id = sneaky.task_id.clone();
    h.launch(vec![sneaky]).await;
    let refused = h.next_status(&id).await;
    assert_eq!(refused.state, TaskState::Error);
    assert!(refused.message.unwrap().contains(&format!("host path '{escape}'")));
    h.wait_until_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tmpfs_is_mounted_with_its_size() {
    let mut h = harness("tmpfs").await;
    let scratch = volume(serde_json::json!({"container_path": "/scratch", "mode": "RW",
        "source": {"type": "DOCKER_VOLUME", "docker_volume": {"name": "scratch", "driver": "tmpfs",
            "driver_options": {"parameter": [{"key": "size", "value": "16m"}]}}}}));
    let t = with_volume(&h, "tmp", "grep ' /scratch ' /proc/mounts && echo x > /scratch/f", scratch);
    let id = t.task_id.clone();
    h.launch(vec![t]).await;
    let done = h.wait_for(&id, TaskState::Finished).await;
    let message = done.message.unwrap_or_default();
    assert!(message.contains("tmpfs /scratch tmpfs") && message.contains("size=16384k"), "{message}");
    let volumes = std::process::Command::new("docker").args(["volume", "ls", "-q"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&volumes.stdout).lines().any(|v| v == "scratch"), "a tmpfs is no named volume");
    h.wait_until_clean().await;
}
