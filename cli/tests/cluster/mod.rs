//! What the multi-node tests share: a data dir whose node cluster and child
//! processes go when the test ends (pass or panic), commands under one
//! overall deadline, and polling with a deadline. The cluster is removed by
//! its data dir's label only: the host engine is shared, so nothing of
//! anybody else's is touched.

#![allow(dead_code)] // each test binary uses its own part

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The longest any one command of these tests may take.
pub const COMMAND_DEADLINE: Duration = Duration::from_secs(600);

pub fn run(cmd: Command) -> Output {
    mpiswarm_testkit::output_within(cmd, None, COMMAND_DEADLINE)
}

/// Runs `cmd`, panicking with its output unless it succeeds; its stdout.
pub fn ok(cmd: Command) -> String {
    let what = format!("{cmd:?}");
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn mpiswarm() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mpiswarm"));
    cmd.current_dir(repo());
    cmd
}

pub fn docker(args: &[&str]) -> Command {
    let mut cmd = Command::new("docker");
    cmd.args(args);
    cmd
}

pub fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new("kubectl");
    cmd.arg("--kubeconfig").arg(kubeconfig).args(args);
    mpiswarm_testkit::output_within(cmd, stdin, Duration::from_secs(60))
}

/// An MpiJob as JSON.
pub fn job(kubeconfig: &Path, name: &str) -> serde_json::Value {
    let out = kubectl(kubeconfig, &["get", "mpij", name, "-o", "json"], None);
    assert!(out.status.success(), "kubectl get mpij {name}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("an MpiJob as JSON")
}

/// The nodes a job's current placement uses, sorted.
pub fn placed_on(job: &serde_json::Value) -> Vec<String> {
    let mut nodes: Vec<String> = job["status"]["placement"]["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n["node"].as_str().map(str::to_owned))
        .collect();
    nodes.sort();
    nodes
}

pub fn require_images(images: &[&str]) {
    for image in images {
        let out = ok(docker(&["image", "ls", "-q", image]));
        assert!(!out.trim().is_empty(), "{image} is missing: run `make images`");
    }
}

/// A data dir, the processes a test started in it (each logging to
/// DIR/<name>.log) and the node cluster `up --nodes` made for it.
pub struct Cluster {
    pub dir: PathBuf,
    _data: tempfile::TempDir,
    children: Vec<(String, Child)>,
}

impl Cluster {
    pub fn new() -> Self {
        let data = tempfile::tempdir().expect("tempdir");
        let dir = data.path().canonicalize().expect("canonical data dir");
        Self { dir, _data: data, children: Vec::new() }
    }

    pub fn spawn(&mut self, name: &str, mut cmd: Command) {
        let log = std::fs::File::create(self.dir.join(format!("{name}.log"))).expect("log file");
        let child = cmd.stdout(Stdio::null()).stderr(log).spawn().unwrap_or_else(|e| panic!("{name} starts: {e}"));
        self.children.push((name.to_owned(), child));
    }

    /// Stops the process `name` (SIGKILL: its work must survive it).
    pub fn kill(&mut self, name: &str) {
        if let Some(i) = self.children.iter().position(|(n, _)| n == name) {
            let (_, mut child) = self.children.remove(i);
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// `mpiswarm up --no-build --nodes 3 ARGS` in the data dir, until it is ready.
    pub fn up(&mut self, nodes: u32, within: Duration) {
        let mut up = mpiswarm();
        up.args(["up", "--no-build", "--nodes", &nodes.to_string(), "--data-dir"]).arg(&self.dir);
        self.spawn("up", up);
        let stack = self.dir.join("stack.json");
        self.wait_for(within, "mpiswarm up --nodes ready", || stack.exists().then_some(()));
    }

    /// The label filter of everything this data dir's cluster made.
    pub fn label(&self) -> String {
        format!("label=mpiswarm.io/data-dir={}", self.dir.display())
    }

    /// The container of node `hostname` (`node1`...).
    pub fn node(&self, hostname: &str) -> String {
        let id = ok(docker(&["ps", "-aq", "--filter", &self.label(), "--filter", &format!("name=-{hostname}$")]));
        let id = id.trim().to_owned();
        assert!(!id.is_empty(), "no container for {hostname}\n{}", self.logs());
        id
    }

    /// The last lines of every process's log, for a failing assertion.
    pub fn logs(&self) -> String {
        let mut all = String::new();
        for (name, _) in &self.children {
            let text = std::fs::read_to_string(self.dir.join(format!("{name}.log"))).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            all.push_str(&format!("--- {name} (last lines)\n"));
            for l in &lines[lines.len().saturating_sub(40)..] {
                all.push_str(l);
                all.push('\n');
            }
        }
        all
    }

    /// Panics if a process the test started has exited.
    pub fn alive(&mut self) {
        let mut dead = None;
        for (name, child) in &mut self.children {
            if let Ok(Some(status)) = child.try_wait() {
                dead = Some(format!("{name} exited ({status})"));
            }
        }
        if let Some(dead) = dead {
            panic!("{dead}\n{}", self.logs());
        }
    }

    /// Polls `probe` every 100 ms until it gives `Some`, or panics after `within`.
    pub fn wait_for<T>(&mut self, within: Duration, what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
        let started = Instant::now();
        loop {
            if let Some(v) = probe() {
                return v;
            }
            self.alive();
            assert!(started.elapsed() < within, "{what} did not happen within {within:?}\n{}", self.logs());
            std::thread::sleep(Duration::from_millis(100)); // polling other processes' state
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        // The node containers (and with them their engines' swarms), their
        // volumes and network: only those of this data dir.
        let label = self.label();
        for (ls, rm) in [
            (vec!["ps", "-aq"], vec!["rm", "-f", "-v"]),
            (vec!["volume", "ls", "-q"], vec!["volume", "rm", "-f"]),
            (vec!["network", "ls", "-q"], vec!["network", "rm"]),
        ] {
            let mut list = docker(&ls);
            list.args(["--filter", &label]);
            let ids: Vec<String> =
                String::from_utf8_lossy(&run(list).stdout).split_whitespace().map(str::to_owned).collect();
            if !ids.is_empty() {
                let mut remove = docker(&rm);
                remove.args(&ids);
                let _ = run(remove);
            }
        }
    }
}
