//! [`Cluster`]: one `mpiswarm up --nodes N --node-cpus C` in a fresh temp
//! data dir, driven from outside the way a user would: kubectl with the data
//! dir's kubeconfig, `mpiswarm` subcommands, `docker exec` into the node
//! containers, and Swarm's truth from the manager's engine. [`Cluster::down`]
//! (or dropping it) stops `up` and runs `mpiswarm down`, which must leave no
//! node container, volume or network of its data dir on this machine's engine.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::swarm::Swarm;
use crate::wait;

/// `up --nodes 3` makes the node containers, forms the swarm and loads the
/// rank image into each node: about a minute here, more on a loaded machine.
pub const READY_DEADLINE: Duration = Duration::from_secs(300);
/// Any one kubectl, docker or mpiswarm command.
pub const COMMAND_DEADLINE: Duration = Duration::from_secs(120);
/// `up` stopping on SIGTERM (its components stop within 10 s each).
const STOP_DEADLINE: Duration = Duration::from_secs(40);
/// Copying an image of a few hundred MB into a node's engine.
const IMAGE_LOAD_DEADLINE: Duration = Duration::from_secs(300);

/// The label `up --nodes` puts on its node containers (stack/src/nodes.rs).
const DATA_DIR_LABEL: &str = "mpiswarm.io/data-dir";

/// One swarm node: its container on this machine's engine and its hostname in the swarm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub hostname: String,
    pub container: String,
}

pub struct Cluster {
    up: Child,
    /// Kept for its Drop (removes the directory after `down`).
    _data: tempfile::TempDir,
    dir: PathBuf,
    nodes: Vec<Node>,
    swarm: Swarm,
    /// `mpiswarm down` ran (by [`Cluster::down`]); the drop has nothing left to do.
    down: bool,
    /// `up` was stopped ([`Cluster::stop_up`]): its components serve no more.
    up_stopped: bool,
}

impl Cluster {
    /// `mpiswarm up --no-build --nodes N --node-cpus C EXTRA...` in a fresh
    /// data dir, waited on until `stack.json` says every component serves.
    /// The nodes get the rank image alone (`--node-images rank`: every job
    /// of the e2e tests runs it) unless EXTRA names `--node-images`.
    pub fn up(nodes: u32, node_cpus: f64, extra: &[&str]) -> Cluster {
        crate::images::require();
        let data = tempfile::tempdir().expect("a temp data dir");
        let dir = data.path().canonicalize().expect("canonical data dir");
        let (n, c) = (nodes.to_string(), node_cpus.to_string());
        let log = std::fs::File::create(dir.join("up.log")).expect("up.log");
        let child = Command::new(crate::binary::mpiswarm())
            .args(["up", "--no-build", "--nodes", &n, "--node-cpus", &c])
            .args(if extra.contains(&"--node-images") { &[][..] } else { &["--node-images", "rank"][..] })
            .args(extra)
            .arg("--data-dir")
            .arg(&dir)
            .current_dir(crate::repo())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("mpiswarm up starts");
        let mut cluster = Cluster {
            up: child,
            _data: data,
            swarm: Swarm::new(PathBuf::new()),
            dir: dir.clone(),
            nodes: Vec::new(),
            down: false,
            up_stopped: false,
        };
        eprintln!("e2e: mpiswarm up --nodes {n} --node-cpus {c} {} --data-dir {}", extra.join(" "), dir.display());
        wait::until(READY_DEADLINE, "mpiswarm up is ready (stack.json)", || {
            if let Ok(Some(status)) = cluster.up.try_wait() {
                panic!("mpiswarm up exited ({status}):\n{}", cluster.log());
            }
            if dir.join("stack.json").exists() { Ok(()) } else { Err(cluster.log_tail()) }
        });
        cluster.nodes = cluster.find_nodes();
        assert_eq!(cluster.nodes.len(), nodes as usize, "node containers of {}: {:?}", dir.display(), cluster.nodes);
        cluster.swarm = Swarm::new(cluster.engine_socket(cluster.manager()));
        cluster
    }

    /// The node containers of this data dir, by label, with their hostnames, sorted.
    fn find_nodes(&self) -> Vec<Node> {
        let names = self.docker(&["ps", "--filter", &self.label_filter(), "--format", "{{.Names}}"]);
        let mut nodes: Vec<Node> = names
            .split_whitespace()
            .map(|container| Node {
                hostname: self.docker(&["inspect", "-f", "{{.Config.Hostname}}", container]).trim().to_owned(),
                container: container.to_owned(),
            })
            .collect();
        nodes.sort_by(|a, b| a.hostname.cmp(&b.hostname));
        nodes
    }

    /// `docker ... --filter` of what `up --nodes` made for this data dir:
    /// the node containers, their volumes and their network.
    fn label_filter(&self) -> String {
        format!("label={DATA_DIR_LABEL}={}", self.dir.display())
    }

    /// The address of this machine on the nodes' network (its bridge's
    /// gateway): where a component run on this machine listens for the nodes.
    pub fn gateway(&self) -> String {
        let network = self.docker(&["network", "ls", "-q", "--filter", &self.label_filter()]);
        let gateway = self.docker(&["network", "inspect", "-f", "{{(index .IPAM.Config 0).Gateway}}", network.trim()]);
        assert!(!gateway.trim().is_empty(), "the nodes' network {network:?} of {} has no gateway", self.dir.display());
        gateway.trim().to_owned()
    }

    /// The host path of a node engine's socket: the node image serves a
    /// second socket in its `/mpiswarm` mount, a directory of the data dir.
    fn engine_socket(&self, node: &Node) -> PathBuf {
        let format = r#"{{range .Mounts}}{{if eq .Destination "/mpiswarm"}}{{.Source}}{{end}}{{end}}"#;
        let dir = self.docker(&["inspect", "-f", format, &node.container]);
        assert!(!dir.trim().is_empty(), "{} has no /mpiswarm mount", node.container);
        PathBuf::from(dir.trim()).join("docker.sock")
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// The stack file `up` wrote: every component's address and `up`'s pid.
    pub fn stack(&self) -> serde_json::Value {
        let text = std::fs::read_to_string(self.dir.join("stack.json")).expect("stack.json");
        serde_json::from_str(&text).expect("stack.json is JSON")
    }

    /// Cpus each node's agent advertises, by hostname, as the offer layer
    /// has them (`/master/state`).
    pub fn advertised_cpus(&self) -> BTreeMap<String, f64> {
        self.master_state().unwrap_or_else(|e| panic!("{e}"))["slaves"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| Some((a["hostname"].as_str()?.to_owned(), a["resources"]["cpus"].as_f64()?)))
            .collect()
    }

    /// The cpus the offer layer's allocator holds for each role now (offered
    /// or used: what its weighted DRF compares), from `/master/state`.
    pub fn allocated_cpus_by_role(&self) -> BTreeMap<String, f64> {
        self.master_state().unwrap_or_else(|e| panic!("{e}"))["roles"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| Some((r["name"].as_str()?.to_owned(), r["allocated"]["cpus"].as_f64().unwrap_or(0.0))))
            .collect()
    }

    /// Whether `up`'s components (the offer layer among them) still serve:
    /// not after [`Cluster::stop_up`].
    pub fn up_serves(&self) -> bool {
        !self.up_stopped
    }

    /// Nodes sorted by hostname; node1 is the manager.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn manager(&self) -> &Node {
        &self.nodes[0]
    }

    pub fn node(&self, hostname: &str) -> &Node {
        self.nodes.iter().find(|n| n.hostname == hostname).unwrap_or_else(|| panic!("no node {hostname}"))
    }

    /// Swarm's truth, from the manager's engine.
    pub fn swarm(&self) -> &Swarm {
        &self.swarm
    }

    /// What `up` logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("up.log")).unwrap_or_default()
    }

    fn log_tail(&self) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(5)..].join("\n")
    }

    /// `kubectl --kubeconfig DATA/kubeconfig ARGS`, with `stdin` if given.
    pub fn kubectl_with(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig").arg(self.kubeconfig()).args(args);
        mpiswarm_testkit::output_within(cmd, stdin, COMMAND_DEADLINE)
    }

    /// kubectl that must succeed; its stdout.
    pub fn kubectl(&self, args: &[&str]) -> String {
        let out = self.kubectl_with(args, None);
        assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `kubectl apply -f -` of `yaml`, which must be accepted.
    pub fn apply(&self, yaml: &str) {
        let out = self.kubectl_with(&["apply", "-f", "-"], Some(yaml));
        let head: String = yaml.chars().take(400).collect();
        assert!(out.status.success(), "kubectl apply refused:\n{head}...\n{}", String::from_utf8_lossy(&out.stderr));
    }

    /// `mpiswarm ARGS --data-dir DATA`.
    pub fn mpiswarm(&self, args: &[&str]) -> Output {
        self.mpiswarm_within(args, COMMAND_DEADLINE)
    }

    /// [`Cluster::mpiswarm`] for a command that may take longer than
    /// [`COMMAND_DEADLINE`], e.g. `mpiswarm run` of a long job.
    pub fn mpiswarm_within(&self, args: &[&str], deadline: Duration) -> Output {
        let mut cmd = Command::new(crate::binary::mpiswarm());
        cmd.args(args).arg("--data-dir").arg(&self.dir).current_dir(crate::repo());
        mpiswarm_testkit::output_within(cmd, None, deadline)
    }

    /// `docker ARGS` on this machine's engine; its stdout, whatever the exit.
    fn docker(&self, args: &[&str]) -> String {
        let mut cmd = Command::new("docker");
        cmd.args(args);
        String::from_utf8_lossy(&mpiswarm_testkit::output_within(cmd, None, COMMAND_DEADLINE).stdout).into_owned()
    }

    /// `docker exec CONTAINER ARGS` in a node container (its own engine is `docker` there).
    pub fn exec(&self, node: &Node, args: &[&str]) -> Output {
        self.exec_with(node, &[], args, None)
    }

    /// `docker exec -i [ENV as -e] CONTAINER ARGS` with `stdin` if given.
    pub fn exec_with(&self, node: &Node, env: &[&str], args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = Command::new("docker");
        cmd.args(["exec", "-i"]);
        for e in env {
            cmd.args(["-e", e]);
        }
        cmd.arg(&node.container).args(args);
        mpiswarm_testkit::output_within(cmd, stdin, COMMAND_DEADLINE)
    }

    /// Loads `image` from this machine's engine into every node's engine
    /// (`docker save | docker exec -i NODE docker load`, the nodes side by
    /// side), for a case whose image `up --node-images rank` left out.
    pub fn load_image(&self, image: &str) {
        std::thread::scope(|scope| {
            let loads: Vec<_> = self
                .nodes
                .iter()
                .map(|node| {
                    scope.spawn(move || {
                        let mut cmd = Command::new("sh");
                        cmd.args(["-c", "docker save \"$1\" | docker exec -i \"$2\" docker load -q", "load"])
                            .args([image, node.container.as_str()]);
                        (node, mpiswarm_testkit::output_within(cmd, None, IMAGE_LOAD_DEADLINE))
                    })
                })
                .collect();
            for load in loads {
                let (node, out) = load.join().expect("an image load thread");
                assert!(
                    out.status.success(),
                    "loading {image} into {}: {}",
                    node.hostname,
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        });
    }

    /// Whether the node's container runs (a test may have killed it).
    pub fn node_runs(&self, node: &Node) -> bool {
        self.docker(&["inspect", "-f", "{{.State.Running}}", &node.container]).trim() == "true"
    }

    /// `docker ARGS` against a node's engine (inside its container), which must succeed; its stdout.
    pub fn node_docker(&self, node: &Node, args: &[&str]) -> String {
        let mut full = vec!["docker"];
        full.extend_from_slice(args);
        let out = self.exec(node, &full);
        assert!(
            out.status.success(),
            "docker {args:?} on {} ({}): {}{}",
            node.hostname,
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// SIGTERM to `up` (it stops its components), then reaped; SIGKILL if it
    /// lingers. The node containers stay, with their swarm, until `down`:
    /// a test may run components of its own for them.
    pub fn stop_up(&mut self) {
        self.up_stopped = true;
        if self.up.try_wait().ok().flatten().is_some() {
            return;
        }
        let mut kill = Command::new("kill");
        kill.args(["-TERM", &self.up.id().to_string()]);
        let _sent = mpiswarm_testkit::output_within(kill, None, COMMAND_DEADLINE);
        let start = std::time::Instant::now();
        while start.elapsed() < STOP_DEADLINE {
            if self.up.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(wait::POLL);
        }
        eprintln!("e2e: mpiswarm up did not stop within {STOP_DEADLINE:?} of SIGTERM; killing it");
        let _killed = self.up.kill();
        let _reaped = self.up.wait();
    }

    /// Stops `up` and runs `mpiswarm down`, which must succeed and leave
    /// nothing of this data dir on this machine's engine: no node container,
    /// volume or network (each carries the data-dir label) and no cluster
    /// file. What is left, if anything, in the error.
    pub fn down(mut self) -> Result<(), String> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<(), String> {
        if std::mem::replace(&mut self.down, true) {
            return Ok(());
        }
        self.stop_up();
        let down = self.mpiswarm(&["down"]);
        if !down.status.success() {
            return Err(format!("mpiswarm down failed ({}): {}", down.status, String::from_utf8_lossy(&down.stderr)));
        }
        let label = self.label_filter();
        let mut left = Vec::new();
        for (kind, ls) in [
            ("container", &["ps", "-aq"][..]),
            ("volume", &["volume", "ls", "-q"]),
            ("network", &["network", "ls", "-q"]),
        ] {
            let mut args = ls.to_vec();
            args.extend(["--filter", &label]);
            left.extend(self.docker(&args).split_whitespace().map(|id| format!("{kind} {id}")));
        }
        if self.dir.join("cluster.json").exists() {
            left.push("the cluster file".to_owned());
        }
        if left.is_empty() { Ok(()) } else { Err(format!("left behind after mpiswarm down: {}", left.join(", "))) }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("e2e: {e}");
        }
    }
}
