//! [`TaskPlan`] -> Swarm API objects (bollard models): the service, the
//! networks, secrets and configs it references. Pure rendering; the checks
//! were made in [`crate::plan`], and nothing here talks to Docker.

use std::collections::HashMap;

use base64::Engine as _;
use bollard::models::{
    ConfigSpec, EndpointSpec, EndpointSpecModeEnum, Limit, Mount, MountTmpfsOptions, MountType, MountVolumeOptions,
    MountVolumeOptionsDriverConfig, NetworkAttachmentConfig, NetworkCreateRequest, ResourceObject, SecretSpec,
    ServiceSpec, ServiceSpecMode, ServiceSpecModeReplicated, TaskSpec, TaskSpecContainerSpec,
    TaskSpecContainerSpecConfigs, TaskSpecContainerSpecFile, TaskSpecContainerSpecFile1, TaskSpecContainerSpecSecrets,
    TaskSpecPlacement, TaskSpecResources, TaskSpecRestartPolicy, TaskSpecRestartPolicyConditionEnum,
};

use crate::labels;
use crate::mounts::MountPlan;
use crate::plan::{FileKind, FilePlan, NetworkPlan, TaskPlan};

/// One mount as Swarm's `Mount`.
fn mount(m: &MountPlan) -> Mount {
    match m {
        MountPlan::Volume { name, driver, options, target, read_only } => Mount {
            typ: Some(MountType::VOLUME),
            source: Some(name.clone()),
            target: Some(target.clone()),
            read_only: Some(*read_only),
            volume_options: Some(MountVolumeOptions {
                driver_config: driver.as_ref().map(|d| MountVolumeOptionsDriverConfig {
                    name: Some(d.clone()),
                    options: Some(options.iter().cloned().collect()),
                }),
                ..Default::default()
            }),
            ..Default::default()
        },
        MountPlan::Bind { source, target, read_only } => Mount {
            typ: Some(MountType::BIND),
            source: Some(source.clone()),
            target: Some(target.clone()),
            read_only: Some(*read_only),
            ..Default::default()
        },
        MountPlan::Tmpfs { target, size_bytes, mode } => Mount {
            typ: Some(MountType::TMPFS),
            target: Some(target.clone()),
            tmpfs_options: Some(MountTmpfsOptions { size_bytes: *size_bytes, mode: *mode, options: None }),
            ..Default::default()
        },
    }
}

/// Swarm's object ids for the files of a plan, by object name.
pub type ObjectIds = HashMap<String, String>;

/// The service for `plan`, pinned to `node_id`. `ids` maps each file's
/// object name to the id Swarm gave the secret or config.
pub fn service_spec(plan: &TaskPlan, node_id: &str, ids: &ObjectIds) -> ServiceSpec {
    let labels: HashMap<String, String> = plan.labels.clone().into_iter().collect();
    let nano_cpus = (plan.cpus > 0.0).then(|| (plan.cpus * 1e9).round() as i64);
    let memory_bytes = (plan.mem_mib > 0.0).then(|| (plan.mem_mib * 1024.0 * 1024.0).round() as i64);
    let mut secrets = Vec::new();
    let mut configs = Vec::new();
    for file in &plan.files {
        let id = ids.get(&file.object_name).cloned();
        match file.kind {
            FileKind::Secret => secrets.push(TaskSpecContainerSpecSecrets {
                file: Some(TaskSpecContainerSpecFile {
                    name: Some(file.target.clone()),
                    uid: Some("0".into()),
                    gid: Some("0".into()),
                    mode: Some(file.mode),
                }),
                secret_id: id,
                secret_name: Some(file.object_name.clone()),
            }),
            FileKind::Config => configs.push(TaskSpecContainerSpecConfigs {
                file: Some(TaskSpecContainerSpecFile1 {
                    name: Some(file.target.clone()),
                    uid: Some("0".into()),
                    gid: Some("0".into()),
                    mode: Some(file.mode),
                }),
                config_id: id,
                config_name: Some(file.object_name.clone()),
                runtime: None,
            }),
        }
    }
    let networks: Vec<NetworkAttachmentConfig> = plan
        .networks
        .iter()
        .map(|n| NetworkAttachmentConfig {
            target: Some(n.name.clone()),
            aliases: Some(plan.aliases.clone()),
            driver_opts: None,
        })
        .collect();
    ServiceSpec {
        name: Some(plan.service_name.clone()),
        labels: Some(labels.clone()),
        task_template: Some(TaskSpec {
            container_spec: Some(TaskSpecContainerSpec {
                image: Some(plan.image.clone()),
                labels: Some(labels),
                command: plan.command.clone(),
                args: plan.args.clone(),
                hostname: Some(plan.hostname.clone()),
                env: Some(plan.env.clone()),
                secrets: Some(secrets),
                configs: Some(configs),
                mounts: Some(plan.mounts.iter().map(mount).collect()),
                stop_grace_period: plan.stop_grace_nanos,
                // An init (Docker's docker-init, tini) as PID 1: a task's
                // command runs under `/bin/sh -c`, and a shell that is PID 1
                // ignores SIGTERM, so every removal waited out the whole stop
                // grace period (10 s) before SIGKILL, holding the job's
                // resources and network that long. The init passes SIGTERM
                // on, reaps the zombies mpirun's ssh children leave, and
                // exits with the command's code.
                init: Some(true),
                ..Default::default()
            }),
            resources: Some(TaskSpecResources {
                limits: Some(Limit { nano_cpus, memory_bytes, pids: None }),
                reservations: Some(ResourceObject { nano_cpus, memory_bytes, generic_resources: None }),
                ..Default::default()
            }),
            // A task runs once: its exit is the Mesos task's end, and the
            // framework (not Swarm) decides whether to run it again.
            restart_policy: Some(TaskSpecRestartPolicy {
                condition: Some(TaskSpecRestartPolicyConditionEnum::NONE),
                max_attempts: Some(0),
                ..Default::default()
            }),
            placement: Some(TaskSpecPlacement {
                constraints: Some(vec![format!("node.id=={node_id}")]),
                ..Default::default()
            }),
            networks: Some(networks),
            ..Default::default()
        }),
        mode: Some(ServiceSpecMode {
            replicated: Some(ServiceSpecModeReplicated { replicas: Some(1) }),
            ..Default::default()
        }),
        // DNS round robin: peers reach the container itself (MPI needs every
        // port of it), not a virtual IP load balancer.
        endpoint_spec: Some(EndpointSpec { mode: Some(EndpointSpecModeEnum::DNSRR), ports: None }),
        ..Default::default()
    }
}

/// The attachable overlay for a task's network, collected by this agent
/// and labelled with the job it is for ([`crate::existing::check_network`]).
pub fn network_request(network: &NetworkPlan, agent_id: &str) -> NetworkCreateRequest {
    let mut labels = owner_labels(agent_id);
    labels.extend(network.owner.labels());
    NetworkCreateRequest {
        name: network.name.clone(),
        driver: Some(network.driver.clone()),
        attachable: Some(true),
        labels: Some(labels),
        ..Default::default()
    }
}

pub fn secret_spec(file: &FilePlan, agent_id: &str) -> SecretSpec {
    let (name, labels, data) = file_object(file, agent_id);
    SecretSpec { name, labels, data, ..Default::default() }
}

pub fn config_spec(file: &FilePlan, agent_id: &str) -> ConfigSpec {
    let (name, labels, data) = file_object(file, agent_id);
    ConfigSpec { name, labels, data, ..Default::default() }
}

type FileObject = (Option<String>, Option<HashMap<String, String>>, Option<String>);

/// Name, labels and base64 data, the same for a secret and a config.
fn file_object(file: &FilePlan, agent_id: &str) -> FileObject {
    let mut labels = owner_labels(agent_id);
    labels.insert(format!("{}target", labels::PREFIX), file.target.clone());
    (Some(file.object_name.clone()), Some(labels), Some(base64::engine::general_purpose::STANDARD.encode(&file.data)))
}

fn owner_labels(agent_id: &str) -> HashMap<String, String> {
    HashMap::from([
        (labels::MANAGED_BY.to_owned(), labels::MANAGED_BY_VALUE.to_owned()),
        (labels::AGENT_ID.to_owned(), agent_id.to_owned()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{LaunchContext, TaskPlan};
    use mpiswarm_mesos::task::{
        CommandInfo, CommandUri, ContainerInfo, Environment, EnvironmentVariable, NetworkInfo, Volume, VolumeMode,
    };
    use mpiswarm_mesos::{AgentId, ExecutorId, FrameworkId, Labels, Resource, TaskInfo};

    fn task() -> TaskInfo {
        let mut t = TaskInfo::new("Rank 0", "job-1-worker-0", &AgentId::new("A1"));
        t.resources = vec![Resource::scalar("cpus", 1.5), Resource::scalar("mem", 256.0)];
        let mut cmd = CommandInfo::shell("mpiswarm-rank worker");
        cmd.environment = Some(Environment {
            variables: vec![EnvironmentVariable { name: "SLOTS".into(), value: Some("2".into()) }],
        });
        cmd.uris = vec![CommandUri {
            value: "data:,worker-0%20slots=2%0A".into(),
            executable: None,
            extract: None,
            cache: None,
            output_file: Some("/etc/mpi/hostfile".into()),
        }];
        t.command = Some(cmd);
        let mut c = ContainerInfo::docker("mpiswarm/openmpi:0.1.0");
        c.network_infos = vec![NetworkInfo { name: Some("mpiswarm-job-1".into()), ..NetworkInfo::default() }];
        c.volumes = vec![Volume {
            mode: VolumeMode::Ro,
            container_path: "/run/secrets/mpiswarm-ssh-key".into(),
            host_path: None,
            source: Some(serde_json::json!({"type":"SECRET","secret":{"type":"VALUE","value":{"data":
                base64::engine::general_purpose::STANDARD.encode("KEY")}}})),
        }];
        t.container = Some(c);
        t.labels =
            Some(Labels::from_pairs([("mpiswarm.io/job-uid", "u-1"), ("mpiswarm.io/role", "worker"), ("team", "hpc")]));
        t
    }

    fn plan_of(t: &TaskInfo) -> Result<TaskPlan, crate::plan::InvalidTask> {
        let fw = FrameworkId::new("F1");
        let ex = ExecutorId::new("E1");
        TaskPlan::from_task_info(
            t,
            &LaunchContext {
                agent_id: "A1",
                framework_id: &fw,
                framework_role: Some("mpi"),
                executor_id: Some(&ex),
                host_paths: &crate::mounts::HostPaths::none(),
                // The option the volume test passes, allowed as an operator would.
                volume_options: &crate::mounts::VolumeOptions::allow(&["local:o".to_owned()]).unwrap(),
            },
        )
    }

    #[test]
    fn a_task_info_maps_to_a_pinned_one_shot_service_with_limits_labels_network_and_files() {
        let plan = plan_of(&task()).unwrap();
        let ids = ObjectIds::from([(plan.files[0].object_name.clone(), "sec-id".to_owned())]);
        let spec = service_spec(&plan, "node-7", &ids);
        let template = spec.task_template.unwrap();
        let c = template.container_spec.unwrap();
        assert_eq!(c.image.as_deref(), Some("mpiswarm/openmpi:0.1.0"));
        assert_eq!(c.command, Some(vec!["/bin/sh".into(), "-c".into(), "mpiswarm-rank worker".into()]));
        assert_eq!(c.env, Some(vec!["SLOTS=2".into()]));
        assert_eq!(c.hostname.as_deref(), Some("rank-0"));
        assert_eq!(c.init, Some(true), "PID 1 passes SIGTERM on (a shell as PID 1 ignores it)");
        let r = template.resources.unwrap();
        assert_eq!(r.limits.unwrap().nano_cpus, Some(1_500_000_000));
        assert_eq!(r.reservations.unwrap().memory_bytes, Some(256 * 1024 * 1024));
        assert_eq!(template.restart_policy.unwrap().condition, Some(TaskSpecRestartPolicyConditionEnum::NONE));
        assert_eq!(template.placement.unwrap().constraints, Some(vec!["node.id==node-7".into()]));
        let net = &template.networks.unwrap()[0];
        assert_eq!(net.target.as_deref(), Some("mpiswarm-job-1"));
        assert_eq!(net.aliases, Some(vec!["rank-0".into()]));
        let labels = spec.labels.unwrap();
        for (k, v) in [
            ("mpiswarm.io/job-uid", "u-1"),
            ("mpiswarm.io/role", "worker"),
            ("mpiswarm.io/label.team", "hpc"),
            ("mpiswarm.io/task-id", "job-1-worker-0"),
            ("mpiswarm.io/framework-id", "F1"),
            ("mpiswarm.io/framework-role", "mpi"),
            ("mpiswarm.io/executor-id", "E1"),
            ("mpiswarm.io/agent-id", "A1"),
        ] {
            assert_eq!(labels.get(k).map(String::as_str), Some(v), "{k}");
        }
        let network = network_request(&plan.networks[0], "A1");
        let owned: HashMap<String, String> = [
            ("mpiswarm.io/managed-by", "mpiswarm-agent"),
            ("mpiswarm.io/agent-id", "A1"),
            ("mpiswarm.io/framework-id", "F1"),
            ("mpiswarm.io/job-uid", "u-1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(network.labels, Some(owned), "the network says whose job it is for");
        let secret = &c.secrets.unwrap()[0];
        assert_eq!(secret.secret_id.as_deref(), Some("sec-id"));
        let file = secret.file.as_ref().unwrap();
        assert_eq!((file.name.as_deref(), file.mode), (Some("/run/secrets/mpiswarm-ssh-key"), Some(0o400)));
        let config = &c.configs.unwrap()[0];
        assert_eq!(config.file.as_ref().unwrap().name.as_deref(), Some("/etc/mpi/hostfile"));
        let hostfile = plan.files.iter().find(|f| f.target == "/etc/mpi/hostfile").unwrap();
        assert_eq!(hostfile.data, b"worker-0 slots=2\n");
        assert_eq!(spec.endpoint_spec.unwrap().mode, Some(EndpointSpecModeEnum::DNSRR));
        assert_eq!(c.stop_grace_period, None, "Swarm's default unless the task says");
    }

    #[test]
    fn the_kill_policy_grace_period_becomes_the_stop_grace_period() {
        let mut t = task();
        t.kill_policy = Some(mpiswarm_mesos::task::KillPolicy {
            grace_period: Some(mpiswarm_mesos::task::DurationInfo { nanoseconds: 2_000_000_000 }),
        });
        let spec = service_spec(&plan_of(&t).unwrap(), "n", &ObjectIds::new());
        assert_eq!(spec.task_template.unwrap().container_spec.unwrap().stop_grace_period, Some(2_000_000_000));
        t.kill_policy.as_mut().unwrap().grace_period.as_mut().unwrap().nanoseconds = -1;
        assert!(plan_of(&t).unwrap_err().to_string().contains("grace_period -1 ns is negative"));
    }

    #[test]
    fn a_non_shell_command_keeps_the_entrypoint_and_replaces_cmd() {
        let mut t = task();
        t.command = Some(CommandInfo {
            shell: Some(false),
            value: Some("sleep".into()),
            arguments: vec!["5".into()],
            ..CommandInfo::default()
        });
        let plan = plan_of(&t).unwrap();
        assert_eq!((plan.command, plan.args), (None, Some(vec!["sleep".into(), "5".into()])));
    }

    #[test]
    fn a_framework_cannot_overwrite_the_agents_own_labels() {
        let mut t = task();
        t.labels = Some(Labels::from_pairs([("mpiswarm.io/agent-id", "someone-else")]));
        assert_eq!(plan_of(&t).unwrap().labels["mpiswarm.io/agent-id"], "A1");
    }

    #[test]
    fn invalid_task_infos_are_refused_naming_the_offending_value() {
        type Mutation = Box<dyn Fn(&mut TaskInfo)>;
        let cases: Vec<(Mutation, &str)> = vec![
            (Box::new(|t| t.container = None), "has no container"),
            (Box::new(|t| t.resources = vec![Resource::scalar("mem", -5.0)]), "resource mem has value -5"),
            (Box::new(|t| t.resources = vec![Resource::scalar("cpus", f64::NAN)]), "resource cpus has value NaN"),
            (
                Box::new(|t| {
                    t.container.as_mut().unwrap().network_infos[0].labels =
                        Some(Labels::from_pairs([("mpiswarm.io/network-driver", "bridge")]))
                }),
                "unknown network driver 'bridge'",
            ),
            (
                Box::new(|t| t.container.as_mut().unwrap().network_infos[0].name = Some("bad name".into())),
                "'bad name' is not a valid network name",
            ),
            (
                Box::new(|t| t.container.as_mut().unwrap().docker.as_mut().unwrap().image = " ".into()),
                "is not an image reference",
            ),
            (
                Box::new(|t| t.command.as_mut().unwrap().uris[0].value = "http://example.invalid/x".into()),
                "only inline data: URIs",
            ),
            (
                Box::new(|t| t.command.as_mut().unwrap().uris[0].output_file = Some("relative/path".into())),
                "'relative/path' must be an absolute file path",
            ),
            (
                Box::new(|t| t.container.as_mut().unwrap().hostname = Some("Not_A_Label".into())),
                "'Not_A_Label' is not a DNS label",
            ),
        ];
        for (mutate, expected) in cases {
            let mut t = task();
            mutate(&mut t);
            let err = plan_of(&t).unwrap_err().to_string();
            assert!(err.contains(expected), "expected '{expected}' in: {err}");
            assert!(err.contains("job-1-worker-0"), "the task is not named: {err}");
        }
    }

    #[test]
    fn shared_files_get_one_object_and_names_stay_valid() {
        let a = plan_of(&task()).unwrap();
        let mut other = task();
        other.task_id = mpiswarm_mesos::TaskId::new("job-1-launcher");
        let b = plan_of(&other).unwrap();
        assert_eq!(a.files[0].object_name, b.files[0].object_name, "same key, same secret");
        assert_ne!(a.service_name, b.service_name);
        for name in [&a.service_name, &b.service_name, &a.files[0].object_name] {
            assert!(name.len() <= 63 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'), "{name}");
        }
    }

    #[test]
    fn volumes_become_volume_and_tmpfs_mounts_beside_the_secret_files() {
        let mut t = task();
        let volumes: Vec<mpiswarm_mesos::task::Volume> = serde_json::from_value(serde_json::json!([
            {"container_path": "/data", "mode": "RO", "source": {"type": "DOCKER_VOLUME",
                "docker_volume": {"name": "inputs", "driver": "local", "driver_options": {"parameter": [{"key": "o", "value": "uid=1000"}]}}}},
            {"container_path": "/scratch", "mode": "RW", "source": {"type": "DOCKER_VOLUME",
                "docker_volume": {"name": "-", "driver": "tmpfs", "driver_options": {"parameter": [{"key": "size", "value": "16m"}]}}}}
        ]))
        .unwrap();
        t.container.as_mut().unwrap().volumes.extend(volumes);
        let plan = plan_of(&t).unwrap();
        assert_eq!(plan.files.iter().filter(|f| f.kind == FileKind::Secret).count(), 1, "the secret stays a file");
        let spec = service_spec(&plan, "n", &ObjectIds::new());
        let mounts = spec.task_template.unwrap().container_spec.unwrap().mounts.unwrap();
        assert_eq!(mounts.len(), 2);
        assert_eq!(
            (mounts[0].typ, mounts[0].source.as_deref(), mounts[0].read_only),
            (Some(MountType::VOLUME), Some("inputs"), Some(true))
        );
        let driver = mounts[0].volume_options.as_ref().unwrap().driver_config.as_ref().unwrap();
        assert_eq!(
            (driver.name.as_deref(), driver.options.as_ref().unwrap()["o"].as_str()),
            (Some("local"), "uid=1000")
        );
        assert_eq!((mounts[1].typ, mounts[1].target.as_deref()), (Some(MountType::TMPFS), Some("/scratch")));
        assert_eq!(mounts[1].tmpfs_options.as_ref().unwrap().size_bytes, Some(16 << 20));
    }
}
