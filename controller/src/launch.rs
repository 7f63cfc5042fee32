//! Turns a placed gang into Mesos LAUNCH_GROUP operations, one per agent:
//! a worker per node (sshd, `slots` ranks) and the launcher (`mpirun`) on the
//! first node. Everything a rank needs travels inside the TaskInfo, so any
//! image with Open MPI or MPICH and sshd runs, not only mpiswarm's:
//! - the per-job SSH key as a Mesos file secret (a Swarm secret);
//! - the hostfile and the rank bootstrap script as `data:` URIs (Swarm configs);
//! - the environment, and `mpirun` flags that keep MPI on the job's overlay.
//!
//! Pure: no I/O. The driver sends what this builds.

use std::collections::BTreeSet;

use base64::Engine as _;
use mpiswarm_crds::{Implementation, MpiJobSpec};
use mpiswarm_mesos::task::{
    CommandUri, DurationInfo, Environment, EnvironmentVariable, KillPolicy, Volume, VolumeMode,
};
use mpiswarm_mesos::{
    AgentId, CommandInfo, ContainerInfo, ExecutorInfo, Labels, NetworkInfo, Operation, Resource, TaskGroupInfo,
    TaskInfo,
};
use mpiswarm_policy::{Placement, Resources};

use crate::names::{self, BOOTSTRAP_PATH, HOSTFILE_PATH, SSH_KEY_PATH, TaskName, TaskRole};
use crate::volumes::SharedVolumes;

/// The rank bootstrap (SSH key set-up, sshd for workers, waiting for the
/// workers then `mpirun` for the launcher). Its one home is
/// `controller/mpiswarm-rank`; the rank image's build (`mpiswarm_stack::images`)
/// ships this constant as the image's `/usr/local/bin/mpiswarm-rank`.
pub const BOOTSTRAP: &str = include_str!("../mpiswarm-rank");

/// The interface Swarm gives the first network of a task: the job's overlay.
const OVERLAY_INTERFACE: &str = "eth0";
/// How long the launcher waits for every worker's sshd.
const WORKER_WAIT_SECONDS: u32 = 120;
/// The Open MPI parameter that makes a waiting rank yield its cpu.
const YIELD_WHEN_IDLE: &str = "mpi_yield_when_idle";

/// SIGTERM, then SIGKILL after this: mpirun forwards SIGTERM to its ranks.
const KILL_GRACE_SECONDS: i64 = 5;

/// Who the job is, for names and labels.
#[derive(Debug, Clone)]
pub struct JobIdentity {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// The MpiJob's own labels, copied onto every task (the agent prefixes
    /// keys outside `mpiswarm.io/`), so Swarm objects can be found by them.
    pub labels: std::collections::BTreeMap<String, String>,
}

/// One gang generation to launch.
pub struct Gang<'a> {
    pub job: &'a JobIdentity,
    pub spec: &'a MpiJobSpec,
    pub generation: u32,
    /// The Mesos role whose offers pay for it.
    pub role: &'a str,
    pub placement: &'a Placement,
    /// The job's OpenSSH private key (PEM text).
    pub ssh_private_key: &'a [u8],
    /// Agents whose offers account network bandwidth; only they get a `network` resource.
    pub network_accounted: &'a BTreeSet<String>,
    /// Which `dockerVolume` names are shared by every namespace; the others
    /// are the job's namespace's own.
    pub shared_volumes: &'a SharedVolumes,
}

/// What one agent is asked to run.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentLaunch {
    pub agent_id: String,
    pub operation: Operation,
    /// Task ids and roles in this launch, in order.
    pub tasks: Vec<(TaskName, TaskRole)>,
}

impl Gang<'_> {
    /// One LAUNCH_GROUP per agent, in placement order (the launcher's agent first).
    pub fn launches(&self) -> Vec<AgentLaunch> {
        let hostfile = self.hostfile();
        let files =
            [data_uri(HOSTFILE_PATH, hostfile.as_bytes(), false), data_uri(BOOTSTRAP_PATH, BOOTSTRAP.as_bytes(), true)];
        let mut launches: Vec<AgentLaunch> = Vec::new();
        for (i, node) in self.placement.nodes.iter().enumerate() {
            let role = TaskRole::Worker(i as u32);
            let task = self.task(role, &node.agent_id, &node.resources, &files, self.worker_command());
            self.push(&mut launches, &node.agent_id, task, role);
        }
        let l = &self.placement.launcher;
        let task = self.task(TaskRole::Launcher, &l.agent_id, &l.resources, &files, self.launcher_command());
        self.push(&mut launches, &l.agent_id, task, TaskRole::Launcher);
        launches
    }

    fn push(&self, launches: &mut Vec<AgentLaunch>, agent: &str, task: TaskInfo, role: TaskRole) {
        let name = TaskName::new(&self.job.uid, self.generation, role);
        let pos = match launches.iter().position(|l| l.agent_id == agent) {
            Some(p) => p,
            None => {
                let mut executor =
                    ExecutorInfo::default_executor(&names::executor_id(&self.job.uid, self.generation, agent));
                executor.name = Some(format!("{}/{}", self.job.namespace, self.job.name));
                launches.push(AgentLaunch {
                    agent_id: agent.to_owned(),
                    operation: Operation::launch_group(executor, TaskGroupInfo::default()),
                    tasks: Vec::new(),
                });
                launches.len() - 1
            }
        };
        let launch = &mut launches[pos];
        if let Some(group) = launch.operation.launch_group.as_mut() {
            group.task_group.tasks.push(task);
        }
        launch.tasks.push((name, role));
    }

    /// `host slots=N` (Open MPI) or `host:N` (MPICH), one line per worker.
    pub fn hostfile(&self) -> String {
        let hosts: Vec<(String, u32)> = self
            .placement
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (TaskRole::Worker(i as u32).hostname(), n.ranks))
            .collect();
        self.spec.mpi.implementation.hostfile(hosts.iter().map(|(h, s)| (h.as_str(), *s)))
    }

    /// Whether Open MPI's ranks give up the cpu while they wait for a
    /// message: they do when a rank holds less than one cpu, unless the
    /// job's own mpirun arguments say otherwise. Open MPI polls for
    /// messages in a busy loop, and a rank under a CPU quota of a fraction
    /// of a core spends its quota spinning while the peer it waits for is
    /// throttled: examples/network.yaml (4 ranks of 0.5 cpu, hpcc) took
    /// 184 s that way and 31 s with the flag, on the same 3-node cluster.
    /// Open MPI sets it by itself when it knows a node is oversubscribed;
    /// a fractional quota is that, unseen.
    fn yields_when_idle(&self) -> bool {
        self.spec.resources.cpus < 1.0 && !self.spec.mpi.mpirun_args.iter().any(|a| a.contains(YIELD_WHEN_IDLE))
    }

    fn worker_command(&self) -> String {
        format!("sh {BOOTSTRAP_PATH} worker")
    }

    /// `sh /etc/mpiswarm/rank launcher mpirun ... <command> <args>`: the job's
    /// own program is always the last words.
    pub fn launcher_command(&self) -> String {
        let ranks = self.placement.total_ranks().to_string();
        let env_names: Vec<&str> = self.spec.mpi.env.iter().map(|e| e.name.as_str()).collect();
        let mut words: Vec<String> = vec!["sh".into(), BOOTSTRAP_PATH.into(), "launcher".into()];
        let implementation = self.spec.mpi.implementation;
        let hostfile_flag = implementation.hostfile_flag();
        match implementation {
            Implementation::OpenMPI => {
                words.extend(
                    ["mpirun", "--allow-run-as-root", hostfile_flag, HOSTFILE_PATH, "-np", &ranks].map(String::from),
                );
                for (k, v) in [
                    ("btl_tcp_if_include", OVERLAY_INTERFACE),
                    ("oob_tcp_if_include", OVERLAY_INTERFACE),
                    // CMA needs ptrace, which containers lack.
                    ("btl_vader_single_copy_mechanism", "none"),
                ] {
                    words.extend(["--mca".to_owned(), k.to_owned(), v.to_owned()]);
                }
                if self.yields_when_idle() {
                    words.extend(["--mca", YIELD_WHEN_IDLE, "1"].map(String::from));
                }
                for name in &env_names {
                    words.extend(["-x".to_owned(), (*name).to_owned()]);
                }
            }
            Implementation::Mpich => {
                words.extend(
                    [
                        "mpiexec",
                        hostfile_flag,
                        HOSTFILE_PATH,
                        "-n",
                        &ranks,
                        "-launcher",
                        "ssh",
                        "-iface",
                        OVERLAY_INTERFACE,
                        // -iface binds Hydra only; Debian's MPICH moves data
                        // with UCX (ch4:ucx), which otherwise also offers
                        // docker_gwbridge (eth1), unreachable across nodes.
                        "-genv",
                        "UCX_NET_DEVICES",
                        OVERLAY_INTERFACE,
                    ]
                    .map(String::from),
                );
                if !env_names.is_empty() {
                    words.extend(["-envlist".to_owned(), env_names.join(",")]);
                }
            }
        }
        words.extend(self.spec.mpi.mpirun_args.iter().cloned());
        words.extend(self.spec.command.iter().cloned());
        words.extend(self.spec.args.iter().cloned());
        words.iter().map(|w| shell_quote(w)).collect::<Vec<_>>().join(" ")
    }

    fn task(&self, role: TaskRole, agent: &str, res: &Resources, files: &[CommandUri], command: String) -> TaskInfo {
        let id = TaskName::new(&self.job.uid, self.generation, role).to_string();
        let mut task = TaskInfo::new(&format!("{}-{}", self.job.name, role.hostname()), &id, &AgentId::new(agent));
        let mut resources = vec![
            Resource::scalar("cpus", res.cpus).allocated_to(self.role),
            Resource::scalar("mem", res.memory_mib).allocated_to(self.role),
        ];
        if res.network_mbps > 0.0 && self.network_accounted.contains(agent) {
            resources.push(Resource::scalar("network", res.network_mbps).allocated_to(self.role));
        }
        task.resources = resources;
        let mut cmd = CommandInfo::shell(&command);
        cmd.uris = files.to_vec();
        cmd.environment = Some(Environment { variables: self.environment(role) });
        task.command = Some(cmd);
        let mut container = ContainerInfo::docker(&self.spec.image);
        container.hostname = Some(role.hostname());
        container.network_infos =
            vec![NetworkInfo { name: Some(names::network(&self.job.uid, self.generation)), ..NetworkInfo::default() }];
        container.volumes = vec![secret_file(SSH_KEY_PATH, self.ssh_private_key)];
        container.volumes.extend(self.spec.volumes.iter().map(|v| self.mount(v)));
        task.container = Some(container);
        task.kill_policy =
            Some(KillPolicy { grace_period: Some(DurationInfo { nanoseconds: KILL_GRACE_SECONDS * 1_000_000_000 }) });
        let generation = self.generation.to_string();
        let own = [
            (names::LABEL_JOB_UID, self.job.uid.as_str()),
            (names::LABEL_JOB_NAME, self.job.name.as_str()),
            (names::LABEL_JOB_NAMESPACE, self.job.namespace.as_str()),
            (names::LABEL_ROLE, role.label()),
            (names::LABEL_GENERATION, generation.as_str()),
        ];
        let users = self.job.labels.iter().filter(|(k, _)| !own.iter().any(|(o, _)| o == k));
        task.labels = Some(Labels::from_pairs(users.map(|(k, v)| (k.as_str(), v.as_str())).chain(own)));
        task
    }

    fn mount(&self, v: &mpiswarm_crds::Volume) -> Volume {
        mount(v, &self.job.namespace, self.shared_volumes)
    }

    fn environment(&self, role: TaskRole) -> Vec<EnvironmentVariable> {
        let var = |n: &str, v: String| EnvironmentVariable { name: n.to_owned(), value: Some(v) };
        let mut vars = vec![
            var("MPISWARM_JOB", format!("{}/{}", self.job.namespace, self.job.name)),
            var("MPISWARM_ROLE", role.label().to_owned()),
            var("MPISWARM_RANKS", self.placement.total_ranks().to_string()),
            var("MPISWARM_SSH_KEY", SSH_KEY_PATH.to_owned()),
            var("MPISWARM_HOSTFILE", HOSTFILE_PATH.to_owned()),
            var("MPISWARM_WAIT_SECONDS", WORKER_WAIT_SECONDS.to_string()),
            // Containers run as root; Open MPI refuses that unless told.
            var("OMPI_ALLOW_RUN_AS_ROOT", "1".to_owned()),
            var("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1".to_owned()),
        ];
        vars.extend(self.spec.mpi.env.iter().map(|e| var(&e.name, e.value.clone())));
        vars
    }
}

fn data_uri(path: &str, data: &[u8], executable: bool) -> CommandUri {
    CommandUri {
        value: format!("data:text/plain;base64,{}", base64::engine::general_purpose::STANDARD.encode(data)),
        executable: executable.then_some(true),
        extract: None,
        cache: None,
        output_file: Some(path.to_owned()),
    }
}

fn secret_file(path: &str, data: &[u8]) -> Volume {
    Volume {
        mode: VolumeMode::Ro,
        container_path: path.to_owned(),
        host_path: None,
        source: Some(serde_json::json!({
            "type": "SECRET",
            "secret": {"type": "VALUE", "value": {"data": base64::engine::general_purpose::STANDARD.encode(data)}}
        })),
    }
}

/// A `spec.volumes` entry as the Mesos `Volume` the agent maps to a Swarm
/// mount (agent/README.md, "Data in and out"); a named volume is the job's
/// namespace's own unless shared ([`crate::volumes`]).
fn mount(v: &mpiswarm_crds::Volume, namespace: &str, shared: &SharedVolumes) -> Volume {
    let mode = if v.read_only { VolumeMode::Ro } else { VolumeMode::Rw };
    let source = if let Some(d) = &v.docker_volume {
        let mut docker = serde_json::json!({"name": shared.docker_name(namespace, &d.name)});
        if let Some(driver) = &d.driver {
            docker["driver"] = driver.clone().into();
        }
        serde_json::json!({"type": "DOCKER_VOLUME", "docker_volume": docker})
    } else if let Some(h) = &v.host_path {
        serde_json::json!({"type": "HOST_PATH", "host_path": {"path": h.path}})
    } else {
        // tmpfs: Mesos has no such source; the agent reads this pseudo-driver.
        let size =
            v.tmpfs.as_ref().and_then(|t| t.size.as_deref()).and_then(|q| mpiswarm_crds::quantity::parse_bytes(q).ok());
        let mut docker = serde_json::json!({"name": v.name, "driver": "tmpfs"});
        if let Some(bytes) = size {
            docker["driver_options"] = serde_json::json!({"parameter": [{"key": "size", "value": bytes.to_string()}]});
        }
        serde_json::json!({"type": "DOCKER_VOLUME", "docker_volume": docker})
    };
    Volume { mode, container_path: v.mount_path.clone(), host_path: None, source: Some(source) }
}

/// Quotes a word for `/bin/sh` only when it needs it, so commands stay readable
/// in `docker service inspect` and the job's program stays recognisable.
pub fn shell_quote(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_./:=,+-@%".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpiswarm_policy::{AgentCapacity, FreeResources, JobDemand, place};

    fn spec(yaml_spec: &str) -> MpiJobSpec {
        let job: mpiswarm_crds::MpiJob = serde_yaml::from_str(&format!(
            "apiVersion: mpiswarm.io/v1alpha1\nkind: MpiJob\nmetadata: {{name: j}}\nspec:\n{yaml_spec}"
        ))
        .unwrap();
        job.spec
    }

    fn two_node_placement(ranks: u32) -> Placement {
        let offers = vec![
            AgentCapacity::new("a1", "n1", FreeResources::new(2.0, 4096.0)),
            AgentCapacity::new("a2", "n2", FreeResources::new(2.0, 4096.0)),
        ];
        let demand =
            JobDemand::new(ranks, Resources::new(0.5, 128.0, 0.0)).with_policy(mpiswarm_policy::Policy::Spread);
        place(&demand, &offers).unwrap()
    }

    /// A two-node placement of `ranks` and a job identity to build gangs from.
    struct Fixture {
        placement: Placement,
        id: JobIdentity,
        none: BTreeSet<String>,
        shared: SharedVolumes,
    }

    impl Fixture {
        fn new(ranks: u32) -> Self {
            Self {
                placement: two_node_placement(ranks),
                id: identity(),
                none: BTreeSet::new(),
                shared: SharedVolumes::default(),
            }
        }

        fn gang<'a>(&'a self, spec: &'a MpiJobSpec) -> Gang<'a> {
            Gang {
                job: &self.id,
                spec,
                generation: 0,
                role: "*",
                placement: &self.placement,
                ssh_private_key: b"KEY",
                network_accounted: &self.none,
                shared_volumes: &self.shared,
            }
        }
    }

    fn identity() -> JobIdentity {
        JobIdentity {
            namespace: "default".into(),
            name: "pi".into(),
            uid: "0c5e7a1b-93f2-4d1e-8a77-2f0a9d1b3c4e".into(),
            labels: [("team".to_owned(), "cfd".to_owned())].into(),
        }
    }

    #[test]
    fn a_two_node_gang_is_two_launch_groups_with_the_launcher_on_the_first_node() {
        let spec = spec("  image: img:1\n  command: [/usr/local/bin/pi]\n  args: ['1000']\n  ranks: 4\n");
        let placement = two_node_placement(4);
        let id = identity();
        let none = BTreeSet::new();
        let gang = Gang {
            job: &id,
            spec: &spec,
            generation: 2,
            role: "mpi",
            placement: &placement,
            ssh_private_key: b"KEY",
            network_accounted: &none,
            shared_volumes: &SharedVolumes::default(),
        };
        let launches = gang.launches();
        assert_eq!(launches.len(), 2);
        assert_eq!(launches[0].agent_id, placement.launcher.agent_id);
        let roles: Vec<_> = launches[0].tasks.iter().map(|(_, r)| *r).collect();
        assert_eq!(roles, vec![TaskRole::Worker(0), TaskRole::Launcher]);
        assert_eq!(gang.hostfile(), "worker-0 slots=2\nworker-1 slots=2\n");
        let group = launches[0].operation.launch_group.as_ref().unwrap();
        let launcher = &group.task_group.tasks[1];
        assert_eq!(launcher.task_id.value, "mpijob-0c5e7a1b93f2-g2-launcher");
        let cmd = launcher.command.as_ref().unwrap();
        let line = cmd.value.as_deref().unwrap();
        assert!(
            line.starts_with(
                "sh /etc/mpiswarm/rank launcher mpirun --allow-run-as-root --hostfile /etc/mpi/hostfile -np 4"
            ),
            "{line}"
        );
        assert!(line.ends_with(" /usr/local/bin/pi 1000"), "{line}");
        assert_eq!(cmd.uris.len(), 2);
        let c = launcher.container.as_ref().unwrap();
        assert_eq!(c.network_infos[0].name.as_deref(), Some("mpiswarm-0c5e7a1b93f2-g2"));
        assert_eq!(c.volumes[0].container_path, SSH_KEY_PATH);
        let cpus: f64 = launcher.resources.iter().filter(|r| r.name == "cpus").filter_map(|r| r.scalar_value()).sum();
        assert!((cpus - 0.1).abs() < 1e-9);
        assert_eq!(launcher.resources[0].allocation_info.as_ref().and_then(|a| a.role.as_deref()), Some("mpi"));
        let worker = &group.task_group.tasks[0];
        assert_eq!(worker.command.as_ref().unwrap().value.as_deref(), Some("sh /etc/mpiswarm/rank worker"));
        assert_eq!(worker.labels.as_ref().unwrap().get("mpiswarm.io/role"), Some("worker"));
        assert_eq!(worker.labels.as_ref().unwrap().get("team"), Some("cfd"), "the job's own labels travel too");
    }

    #[test]
    fn volumes_become_mesos_volumes_in_every_task() {
        let spec = spec(
            "  image: img:1\n  command: [prog]\n  ranks: 2\n  volumes:\n    - {name: results, mountPath: /data, dockerVolume: {name: pi-results}}\n    - {name: input, mountPath: /in, readOnly: true, hostPath: {path: /srv/in}}\n    - {name: scratch, mountPath: /scratch, tmpfs: {size: 64Mi}}\n",
        );
        let fixture = Fixture::new(2);
        let gang = fixture.gang(&spec);
        for launch in gang.launches() {
            for task in &launch.operation.launch_group.as_ref().unwrap().task_group.tasks {
                let vols = &task.container.as_ref().unwrap().volumes;
                assert_eq!(vols.len(), 4, "the SSH key and the three volumes");
                let json = serde_json::to_value(&vols[1..]).unwrap();
                assert_eq!(json[0]["source"]["docker_volume"]["name"], "default.pi-results", "the namespace's own");
                assert_eq!(json[0]["mode"], "RW");
                assert_eq!(json[1]["source"]["host_path"]["path"], "/srv/in");
                assert_eq!(json[1]["mode"], "RO");
                assert_eq!(json[2]["source"]["docker_volume"]["driver"], "tmpfs");
                assert_eq!(json[2]["source"]["docker_volume"]["driver_options"]["parameter"][0]["value"], "67108864");
            }
        }
    }

    #[test]
    fn a_named_volume_is_the_namespaces_own_unless_the_operator_shares_it() {
        let spec = spec(
            "  image: img:1\n  command: [prog]\n  ranks: 2\n  volumes:\n    - {name: results, mountPath: /data, dockerVolume: {name: results}}\n    - {name: data, mountPath: /in, readOnly: true, dockerVolume: {name: datasets}}\n",
        );
        let names = |fixture: &Fixture| -> Vec<String> {
            let launches = fixture.gang(&spec).launches();
            let task = &launches[0].operation.launch_group.as_ref().unwrap().task_group.tasks[0];
            let json = serde_json::to_value(&task.container.as_ref().unwrap().volumes[1..]).unwrap();
            (0..2).map(|i| json[i]["source"]["docker_volume"]["name"].as_str().unwrap().to_owned()).collect()
        };
        let mut team_a = Fixture::new(2);
        team_a.id.namespace = "team-a".into();
        assert_eq!(names(&team_a), ["team-a.results", "team-a.datasets"]);
        let mut team_b = Fixture::new(2);
        team_b.id.namespace = "team-b".into();
        assert_eq!(names(&team_b), ["team-b.results", "team-b.datasets"], "never team-a's");
        let shared = SharedVolumes::new(["datasets".parse().unwrap()]);
        team_a.shared = shared.clone();
        team_b.shared = shared;
        assert_eq!(names(&team_a), ["team-a.results", "datasets"]);
        assert_eq!(names(&team_b), ["team-b.results", "datasets"], "one shared volume");
    }

    #[test]
    fn mpich_jobs_get_hydra_syntax_and_env_is_forwarded() {
        let spec = spec(
            "  image: img:1\n  command: [prog]\n  ranks: 2\n  mpi:\n    implementation: MPICH\n    env: [{name: A, value: '1'}, {name: B, value: x y}]\n",
        );
        let fixture = Fixture::new(2);
        let gang = fixture.gang(&spec);
        assert_eq!(gang.hostfile(), "worker-0:1\nworker-1:1\n");
        let line = gang.launcher_command();
        assert!(
            line.contains(
                "mpiexec -f /etc/mpi/hostfile -n 2 -launcher ssh -iface eth0 -genv UCX_NET_DEVICES eth0 -envlist A,B prog"
            ),
            "{line}"
        );
    }

    #[test]
    fn open_mpi_ranks_under_one_cpu_yield_when_idle_unless_the_job_says_otherwise() {
        let fixture = Fixture::new(4);
        let flag = "--mca mpi_yield_when_idle 1";
        let cases = [
            ("  resources: {cpus: 0.5}\n", 1),
            ("  resources: {cpus: 1}\n", 0),
            ("  resources: {cpus: 2}\n", 0),
            // The job's own setting wins, and is not given twice.
            ("  resources: {cpus: 0.25}\n  mpi: {mpirunArgs: [--mca, mpi_yield_when_idle, '0']}\n", 1),
            ("  resources: {cpus: 0.25}\n  mpi: {mpirunArgs: [--mca, mpi_yield_when_idle, '1']}\n", 1),
            ("  resources: {cpus: 0.5}\n  mpi: {implementation: MPICH}\n", 0),
        ];
        for (extra, times) in cases {
            let spec = spec(&format!("  image: img:1\n  command: [prog]\n  ranks: 4\n{extra}"));
            let line = fixture.gang(&spec).launcher_command();
            assert_eq!(line.matches("mpi_yield_when_idle").count(), times, "{extra}: {line}");
            if times == 1 && !extra.contains("mpirunArgs") {
                assert!(line.contains(flag), "{line}");
            }
            if extra.contains("'0'") {
                assert!(line.contains("mpi_yield_when_idle 0") && !line.contains(flag), "{line}");
            }
        }
    }

    #[test]
    fn words_are_quoted_only_when_the_shell_needs_it() {
        assert_eq!(shell_quote("sleep"), "sleep");
        assert_eq!(shell_quote("1.5"), "1.5");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("$(rm)"), "'$(rm)'");
    }
}
