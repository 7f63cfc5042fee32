//! What a launch costs: the pure TaskInfo -> ServiceSpec mapping (per task,
//! and a 64-task group), and on the real engine the time from LAUNCH to the
//! TASK_RUNNING status and on to TASK_FINISHED (service removed) for a task
//! running `true` in the rank image.
//!
//! `cargo bench -p mpiswarm-agent --bench launch`

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use mpiswarm_agent::plan::{LaunchContext, TaskPlan};
use mpiswarm_agent::spec::{ObjectIds, service_spec};
use mpiswarm_mesos::task::{ContainerInfo, NetworkInfo};
use mpiswarm_mesos::{AgentId, CommandInfo, FrameworkId, Resource, TaskInfo, TaskState};

fn task(i: usize) -> TaskInfo {
    let mut t = TaskInfo::new(&format!("worker-{i}"), &format!("job-1-worker-{i}"), &AgentId::new("A"));
    t.resources = vec![Resource::scalar("cpus", 1.0), Resource::scalar("mem", 512.0)];
    let mut cmd = CommandInfo::shell("mpiswarm-rank worker");
    cmd.uris = vec![support::config_uri("/etc/mpi/hostfile", b"worker-0 slots=4\n")];
    t.command = Some(cmd);
    let mut c = ContainerInfo::docker(support::RANK_IMAGE);
    c.network_infos = vec![NetworkInfo { name: Some("mpiswarm-job-1".into()), ..NetworkInfo::default() }];
    c.volumes = vec![support::secret_volume("/run/secrets/mpiswarm-ssh-key", &[7u8; 400])];
    t.container = Some(c);
    t
}

fn mapping(c: &mut Criterion) {
    let fw = FrameworkId::new("F");
    let host_paths = mpiswarm_agent::mounts::HostPaths::none();
    let volume_options = mpiswarm_agent::mounts::VolumeOptions::none();
    let ctx = LaunchContext {
        agent_id: "A",
        framework_id: &fw,
        framework_role: Some("mpi"),
        executor_id: None,
        host_paths: &host_paths,
        volume_options: &volume_options,
    };
    let one = task(0);
    let group: Vec<TaskInfo> = (0..64).map(task).collect();
    let ids = ObjectIds::new();
    c.bench_function("plan+spec/1 task", |b| {
        b.iter(|| service_spec(&TaskPlan::from_task_info(&one, &ctx).unwrap(), "node", &ids))
    });
    c.bench_function("plan+spec/64-task group", |b| {
        b.iter(|| {
            group
                .iter()
                .map(|t| service_spec(&TaskPlan::from_task_info(t, &ctx).unwrap(), "node", &ids))
                .collect::<Vec<_>>()
        })
    });
}

fn real_engine(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut h = rt.block_on(support::harness("bench"));
    let mut group = c.benchmark_group("real engine");
    group.sample_size(10).measurement_time(Duration::from_secs(60));
    let mut n = 0;
    group.bench_function("LAUNCH -> TASK_RUNNING", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    n += 1;
                    let t = h.task(&format!("run{n}"), support::RANK_IMAGE, "sleep 1");
                    let id = t.task_id.clone();
                    let start = Instant::now();
                    h.launch(vec![t]).await;
                    h.wait_for(&id, TaskState::Running).await;
                    total += start.elapsed();
                    h.wait_for(&id, TaskState::Finished).await;
                }
                total
            })
        })
    });
    group.bench_function("LAUNCH -> TASK_FINISHED (true)", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    n += 1;
                    let t = h.task(&format!("fin{n}"), support::RANK_IMAGE, "true");
                    let id = t.task_id.clone();
                    let start = Instant::now();
                    h.launch(vec![t]).await;
                    h.wait_for(&id, TaskState::Finished).await;
                    total += start.elapsed();
                }
                total
            })
        })
    });
    group.finish();
    rt.block_on(h.wait_until_clean());
}

criterion_group!(benches, mapping, real_engine);
criterion_main!(benches);
