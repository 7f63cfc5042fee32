//! The agent against the machine's real Docker engine in swarm mode: tasks
//! become services pinned to this node, their states come back as Mesos
//! statuses, and nothing the agent created outlives its task. These tests
//! drive the agent directly; `e2e/tests/agent_process.rs` drives it as a process over the agent API.

mod support;

use mpiswarm_mesos::task::NetworkInfo;
use mpiswarm_mesos::{Labels, Reason, Resource, TaskState};
use support::{RANK_IMAGE, config_uri, harness, secret_volume, service_constraints, ssh_key, swarm_node_id};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_task_runs_as_a_pinned_service_then_finishes_and_the_service_is_gone() {
    let mut h = harness("sleep").await;
    let task = h.task("sleeper", RANK_IMAGE, "sleep 2");
    let id = task.task_id.clone();
    h.launch(vec![task]).await;
    assert_eq!(h.next_status(&id).await.state, TaskState::Starting);
    let service = mpiswarm_agent::plan::service_name(&h.framework_id, &id);
    // Pinned to the node Docker says this is, not the agent's own idea of it.
    assert_eq!(service_constraints(&service), vec![format!("node.id=={}", swarm_node_id())], "service not pinned");
    h.wait_for(&id, TaskState::Running).await;
    let done = h.wait_for(&id, TaskState::Finished).await;
    assert_eq!(done.labels.unwrap().get("mpiswarm.io/exit-code"), Some("0"));
    h.wait_until_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_zero_exit_is_failed_with_the_exit_code_and_the_last_log_lines() {
    let mut h = harness("exit3").await;
    let task = h.task("failing", RANK_IMAGE, "echo about to fail; exit 3");
    let id = task.task_id.clone();
    h.launch(vec![task]).await;
    let failed = h.wait_for(&id, TaskState::Failed).await;
    assert_eq!(failed.labels.as_ref().unwrap().get("mpiswarm.io/exit-code"), Some("3"));
    let message = failed.message.unwrap();
    assert!(message.contains("exited with code 3"), "{message}");
    assert!(message.contains("about to fail"), "the log tail is missing: {message}");
    h.wait_until_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_whose_image_does_not_exist_fails_naming_the_image() {
    let mut h = harness("noimage").await;
    let image = "mpiswarm/does-not-exist:0.0.0";
    let task = h.task("ghost", image, "true");
    let id = task.task_id.clone();
    h.launch(vec![task]).await;
    let failed = h.wait_for(&id, TaskState::Failed).await;
    support::assert_missing_image_failure(&failed, image);
    h.wait_until_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_task_infos_are_refused_with_task_error_and_the_agent_keeps_serving() {
    let mut h = harness("bad").await;
    let mut no_container = h.task("nocontainer", RANK_IMAGE, "true");
    no_container.container = None;
    let mut negative = h.task("negative", RANK_IMAGE, "true");
    negative.resources = vec![Resource::scalar("cpus", -1.0)];
    let mut driver = h.task("driver", RANK_IMAGE, "true");
    driver.container.as_mut().unwrap().network_infos = vec![NetworkInfo {
        name: Some(format!("{}-net", h.agent_id)),
        labels: Some(Labels::from_pairs([("mpiswarm.io/network-driver", "macvlan")])),
        ..NetworkInfo::default()
    }];
    for (task, expected) in [
        (no_container, "has no container"),
        (negative, "resource cpus has value -1"),
        (driver, "unknown network driver 'macvlan'"),
    ] {
        let id = task.task_id.clone();
        h.launch(vec![task]).await;
        let s = h.next_status(&id).await;
        assert_eq!(s.state, TaskState::Error, "{id}: {:?}", s.message);
        assert_eq!(s.reason, Some(Reason::ReasonTaskInvalid));
        let message = s.message.unwrap();
        assert!(message.contains(expected), "{message}");
    }
    assert!(h.objects().is_empty(), "a refused task left {:?}", h.objects());
    // Still serving: a good task after the bad ones runs.
    let good = h.task("good", RANK_IMAGE, "true");
    let id = good.task_id.clone();
    h.launch(vec![good]).await;
    h.wait_for(&id, TaskState::Finished).await;
    h.wait_until_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_on_one_overlay_resolves_each_other_and_kill_leaves_nothing_behind() {
    let mut h = harness("group").await;
    let network = format!("{}-net", h.agent_id);
    let mut tasks = Vec::new();
    for (me, peer) in [("alpha", "beta"), ("beta", "alpha")] {
        // Each side waits until the peer resolves, then keeps running.
        let script = format!(
            "until getent hosts {peer}; do sleep 0.2; done; cat /run/secrets/token /etc/mpiswarm/peers; sleep 300"
        );
        let mut t = h.task(me, RANK_IMAGE, &script);
        let container = t.container.as_mut().unwrap();
        container.network_infos = vec![NetworkInfo { name: Some(network.clone()), ..NetworkInfo::default() }];
        container.volumes = vec![secret_volume("/run/secrets/token", b"s3cret")];
        t.command.as_mut().unwrap().uris = vec![config_uri("/etc/mpiswarm/peers", b"alpha\nbeta\n")];
        tasks.push(t);
    }
    let ids: Vec<_> = tasks.iter().map(|t| t.task_id.clone()).collect();
    h.launch_group("group-exec", tasks).await;
    for id in &ids {
        h.wait_for(id, TaskState::Running).await;
    }
    let objects = h.objects();
    for kind in ["network", "secret", "config"] {
        assert!(objects.iter().any(|o| o.starts_with(kind)), "no {kind} while running: {objects:?}");
    }
    // Both resolved their peer by name and read their files.
    for id in &ids {
        let service = mpiswarm_agent::plan::service_name(&h.framework_id, id);
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let logs =
                std::process::Command::new("docker").args(["service", "logs", "--raw", &service]).output().unwrap();
            let text = String::from_utf8_lossy(&logs.stdout).into_owned();
            if text.contains("s3cret") && text.contains("beta") {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "{service} never resolved its peer: {text}");
            support::wait_for_docker_event(&h.docker, std::time::Duration::from_secs(1)).await;
        }
    }
    for id in &ids {
        let fw = h.framework_id.clone();
        h.agent.kill_task(&fw, id).await;
    }
    for id in &ids {
        h.wait_for(id, TaskState::Killed).await;
    }
    h.wait_until_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mpi_pi_runs_over_ssh_between_a_launcher_and_a_worker_service() {
    let mut h = harness("mpi").await;
    let network = format!("{}-net", h.agent_id);
    let key = ssh_key();
    let hostfile = b"worker-0 slots=2\nlauncher slots=2\n";
    let mut tasks = Vec::new();
    for (name, command) in [
        ("worker-0", "mpiswarm-rank worker"),
        ("launcher", "mpiswarm-rank launcher mpirun --hostfile /etc/mpi/hostfile -np 4 pi 2000000"),
    ] {
        let mut t = h.task(name, RANK_IMAGE, command);
        t.resources = vec![Resource::scalar("cpus", 0.5), Resource::scalar("mem", 256.0)];
        let container = t.container.as_mut().unwrap();
        container.network_infos = vec![NetworkInfo { name: Some(network.clone()), ..NetworkInfo::default() }];
        container.volumes = vec![secret_volume("/run/secrets/mpiswarm-ssh-key", &key)];
        t.command.as_mut().unwrap().uris = vec![config_uri("/etc/mpi/hostfile", hostfile)];
        tasks.push(t);
    }
    let worker = tasks[0].task_id.clone();
    let launcher = tasks[1].task_id.clone();
    h.launch_group("mpi-exec", tasks).await;
    let done = h.wait_for(&launcher, TaskState::Finished).await;
    // The launcher's output comes back in its final status.
    let output = done.message.unwrap();
    assert!(output.contains("ranks: 4"), "{output}");
    assert!(output.contains("on worker-0") && output.contains("on launcher"), "ranks did not span both: {output}");
    let pi: f64 = output
        .lines()
        .find_map(|l| l.trim().strip_prefix("pi: "))
        .unwrap_or_else(|| panic!("no pi line in {output}"))
        .trim()
        .parse()
        .unwrap();
    assert!((pi - std::f64::consts::PI).abs() < 0.01, "pi = {pi}");
    h.agent.kill_task(&h.framework_id.clone(), &worker).await;
    h.wait_for(&worker, TaskState::Killed).await;
    h.wait_until_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_agent_crash_the_new_agent_adopts_the_running_task_which_finishes_normally() {
    let mut h = harness("restart").await;
    let task = h.task("survivor", RANK_IMAGE, "sleep 8");
    let id = task.task_id.clone();
    h.launch(vec![task]).await;
    h.wait_for(&id, TaskState::Running).await;
    let before = support::running_containers(&id.value);
    assert_eq!(before.len(), 1, "{before:?}");

    let (agent_id, data_dir) = h.crash().await;
    // Nothing seeded: the id and the task must come back from the data directory.
    let mut h = support::restart(data_dir).await;
    assert_eq!(h.agent.agent_id().unwrap().value, agent_id, "the agent id comes back from --data-dir");
    // What is reported is what Swarm says now, not only the saved record.
    let resyncs = h.agent.counters.resyncs.get();
    h.agent.resync().await.expect("a resync against the engine");
    assert!(h.agent.counters.resyncs.get() > resyncs, "the resync did not run (no agent id?)");
    let reported = h.agent.reported_tasks();
    assert_eq!(reported.len(), 1, "{reported:?}");
    assert_eq!(reported[0].task_info.task_id, id);
    assert_eq!(reported[0].status.state, TaskState::Running, "re-reported as RUNNING");
    assert_eq!(support::running_containers(&id.value), before, "the running container was not touched");
    h.wait_for(&id, TaskState::Finished).await;
    h.wait_until_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_labelled_service_no_task_owns_is_removed_after_the_grace_period() {
    let h = harness("orphan").await;
    let name = format!("{}-orphan", h.agent_id);
    let status = std::process::Command::new("docker")
        .args(["service", "create", "-d", "--quiet", "--name", &name, "--restart-condition", "none"])
        .args(["--label", &format!("mpiswarm.io/agent-id={}", h.agent_id)])
        .args(["--label", "mpiswarm.io/managed-by=mpiswarm-agent", RANK_IMAGE, "sleep", "300"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(h.objects(), vec![format!("service {name}")]);
    // The harness' grace period is 3 s; the resync loop removes it after that.
    h.wait_until_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_whose_second_task_cannot_start_starts_neither() {
    let mut h = harness("allornothing").await;
    // A local bridge network of the name the second task asks for: Swarm
    // services cannot join it, so that task cannot be created.
    // Not labelled as the agent's (its garbage collection would remove it).
    let taken = format!("{}-bridge", h.agent_id);
    let created = std::process::Command::new("docker")
        .args(["network", "create", "--driver", "bridge", &taken])
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(created.success());
    struct RemoveNetwork(String);
    impl Drop for RemoveNetwork {
        fn drop(&mut self) {
            let _ = std::process::Command::new("docker").args(["network", "rm", &self.0]).output();
        }
    }
    let _bridge = RemoveNetwork(taken.clone());
    let mut first = h.task("first", RANK_IMAGE, "sleep 300");
    first.container.as_mut().unwrap().network_infos =
        vec![NetworkInfo { name: Some(format!("{}-net", h.agent_id)), ..NetworkInfo::default() }];
    let mut second = h.task("second", RANK_IMAGE, "sleep 300");
    second.container.as_mut().unwrap().network_infos =
        vec![NetworkInfo { name: Some(taken.clone()), ..NetworkInfo::default() }];
    let (a, b) = (first.task_id.clone(), second.task_id.clone());
    h.launch_group("aon-exec", vec![first, second]).await;
    let failed = h.next_status(&b).await;
    assert_eq!(failed.state, TaskState::Failed, "{:?}", failed.message);
    assert!(failed.message.as_deref().unwrap().contains(&taken), "{:?}", failed.message);
    let killed = h.next_status(&a).await;
    assert_eq!(killed.state, TaskState::Killed, "{:?}", killed.message);
    assert_eq!(killed.reason, Some(Reason::ReasonTaskKilledDuringLaunch));
    let services: Vec<String> = h.objects().into_iter().filter(|o| o.starts_with("service")).collect();
    assert!(services.is_empty(), "a service of the failed group survived: {services:?}");
    h.wait_until_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_task_is_reported_until_acknowledged_then_forgotten() {
    let mut h = harness("ack").await;
    let task = h.task("acked", RANK_IMAGE, "true");
    let id = task.task_id.clone();
    h.launch(vec![task]).await;
    let finished = h.wait_for(&id, TaskState::Finished).await;
    let reported = h.agent.reported_tasks();
    assert_eq!(reported.len(), 1, "unacknowledged terminal tasks are reported on SUBSCRIBE");
    assert_eq!(reported[0].status.state, TaskState::Finished);
    let records = || std::fs::read_dir(h.data_dir.path().join("tasks")).unwrap().count();
    // Records are written by the agent's writer thread: wait for it.
    h.agent.flush().await;
    assert_eq!(records(), 1);
    // An acknowledgement of an older update changes nothing.
    let stale = mpiswarm_mesos::Bytes::random_uuid();
    h.agent.handle(mpiswarm_mesos::agent_api::Event::acknowledged(mpiswarm_mesos::agent_api::Acknowledged {
        framework_id: h.framework_id.clone(),
        task_id: id.clone(),
        uuid: stale,
    }));
    assert_eq!(h.agent.reported_tasks().len(), 1);
    h.agent.handle(mpiswarm_mesos::agent_api::Event::acknowledged(mpiswarm_mesos::agent_api::Acknowledged {
        framework_id: h.framework_id.clone(),
        task_id: id.clone(),
        uuid: finished.uuid.unwrap(),
    }));
    assert!(h.agent.reported_tasks().is_empty());
    h.agent.flush().await;
    assert_eq!(records(), 0, "the record is gone from the data directory");
    h.wait_until_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_task_the_agent_does_not_know_answers_lost_task_unknown() {
    let mut h = harness("unknown").await;
    let id = mpiswarm_mesos::TaskId::new(format!("{}-never-launched", h.agent_id));
    let fw = h.framework_id.clone();
    h.agent.kill_task(&fw, &id).await;
    let s = h.next_status(&id).await;
    assert_eq!((s.state, s.reason), (TaskState::Lost, Some(Reason::ReasonTaskUnknown)));
    assert!(s.message.unwrap().contains("not known"));
}
